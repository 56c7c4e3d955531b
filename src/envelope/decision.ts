/**
 * Validation of a human decision (the resume value item) against the envelope it claims to answer.
 * Checks run in a fixed order and the first failure is returned with its code; the order puts the
 * binding (hash, revision, nonce, single use) before identity, so a decision for the wrong thing is
 * refused as that, whoever sent it.
 */
import type { KeyObject } from "node:crypto";
import { z } from "zod";
import { HASH_PATTERN } from "./canonical.js";
import {
  hashEnvelope,
  requesterVerificationOf,
  type Envelope,
  type RequesterVerification,
} from "./envelope.js";
import { hashChangeSet, type ChangeSet } from "./change-set.js";
import {
  approverNotAllowed,
  hasRole,
  levelRank,
  OVERRIDABLE_GATES,
  type Gate,
  type Policy,
  type RiskLevel,
} from "./policy.js";
import { checkProposal, type Proposal, type ProposalRefusalCode, type Scope } from "./scope.js";
import { verifyDecisionSignature, type SignedDecisionPayload } from "./signature.js";
import { codesForNames } from "./fields.js";
import { OPERATIONS, objectNamed, operationSpec } from "./operations.js";
import { idsForNames, type NameResolution } from "./people.js";

/** Ids are short; a longer one is refused (MALFORMED) rather than carried into records. */
export const MAX_ID_CHARS = 128;
const Approver = z.strictObject({
  id: z
    .string()
    .min(1)
    .max(MAX_ID_CHARS, `approver id is at most ${MAX_ID_CHARS} characters`)
    .regex(/^\S+$/, "approver id has no whitespace"),
});
const Base = {
  envelopeHash: z.string().regex(HASH_PATTERN, 'envelopeHash is "sha256:" + 64 lowercase hex digits'),
  nonce: z.string().min(1).max(MAX_ID_CHARS),
  approver: Approver,
  decidedAt: z.iso.datetime({ offset: true }).optional(),
  /** Base64 Ed25519 signature over the canonical SignedDecisionPayload. */
  signature: z.string().min(1).optional(),
  /** For a change set decided action by action: the action (a1, a2, …) this decision is about. */
  actionId: z
    .string()
    .regex(/^a[1-9][0-9]?$/, "actionId is a1, a2, … as the change set lists them")
    .optional(),
};

export const DecisionSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("approve"),
    ...Base,
    /** Ask to pass a gate that policy lets an authorised role override (only separation_of_duties today). */
    override: z
      .strictObject({
        gate: z.string().min(1).max(MAX_ID_CHARS),
        reason: z
          .string()
          .trim()
          .min(1, "an override needs a reason")
          .max(4000, "an override reason is at most 4,000 characters"),
      })
      .optional(),
  }),
  z.strictObject({
    type: z.literal("reject"),
    ...Base,
    message: z.string().max(4000, "a rejection message is at most 4,000 characters").optional(),
  }),
  z.strictObject({
    type: z.literal("edit"),
    ...Base,
    editedAction: z
      .strictObject({
        name: z.string().min(1),
        // The object's id under the operation's own name: taskId for a task's, dealId for update_deal. A
        // create (add_task) names no object: its args are {fields} as shown (taskId 0 is read the same).
        args: z.strictObject({
          taskId: z.int().nonnegative().optional(),
          dealId: z.int().nonnegative().optional(),
          fields: z.record(z.string(), z.json()),
        }),
      })
      .superRefine((a, ctx) => {
        if (operationSpec(a.name)?.effect === "create") return; // which id, if any, is judged against the envelope (OUT_OF_SCOPE)
        if ((a.args.taskId === undefined) === (a.args.dealId === undefined)) {
          ctx.addIssue({
            code: "custom",
            path: ["args"],
            message: "name the edited object by exactly one of taskId (a task) or dealId (a deal)",
          });
        }
        for (const k of ["taskId", "dealId"] as const) {
          if (a.args[k] === 0)
            ctx.addIssue({
              code: "custom",
              path: ["args", k],
              message: "Too small: expected number to be >0",
            });
        }
      }),
  }),
]);
export type Decision = z.output<typeof DecisionSchema>;

export type RefusalCode =
  | "MALFORMED"
  | "HASH_MISMATCH"
  | "NONCE_MISMATCH"
  | "STALE_REVISION"
  | "EXPIRED"
  | "ALREADY_CONSUMED"
  | "APPROVER_NOT_ALLOWED"
  | "SELF_APPROVAL"
  | "SIGNATURE_REQUIRED"
  | "SIGNATURE_INVALID"
  | "OVERRIDE_NOT_ALLOWED"
  /** An edit is checked like a proposal and refused with the proposal's code. */
  | ProposalRefusalCode;

export interface DecisionContext {
  now: Date;
  policy: Policy;
  threadId: string;
  /** Hash of the current envelope as the caller recorded it when showing it. */
  envelopeHash: string;
  /** Whether this envelope's nonce was already spent by an accepted decision (the caller's journal knows). */
  nonceConsumed: boolean;
  /** Hashes of earlier revisions of this envelope. */
  supersededHashes: string[];
  publicKeys: Map<string, KeyObject>;
  /** The user the LangGraph API authenticated for this request, when auth is configured. */
  authenticatedUser?: string;
  scope: Scope;
  /** Lookups (user.get, made by the caller) of the names an edit typed for user fields. */
  people?: readonly NameResolution[];
}

export type VerifiedBy = "signature" | "authentication" | "self_declared";

/**
 * What a decision is bound to: one envelope, or a change set (every action of it). The hash is
 * recomputed by the caller from the object itself; `edits` are the envelopes an edit may change.
 */
export interface DecisionSubject {
  hash: string;
  kind: "envelope" | "change set";
  nonce: string;
  revision: number;
  /** When the approval was created: a signed decision cannot have been made before it. */
  createdAt: string;
  expiresAt: string;
  threadId: string;
  /** Every operation the approval covers: an approver must be allowed each. */
  operations: string[];
  requestedBy: string;
  /** How requestedBy was established: separation of duties compares against it and says so when it is only self-declared. */
  requesterVerifiedBy: RequesterVerification;
  editedBy?: string | undefined;
  level: RiskLevel;
  /** For a single envelope: the envelope an edit changes. For a change set: the actions by id. */
  edits: { single: Envelope } | { byActionId: ReadonlyMap<string, Envelope> };
}

export function subjectOfEnvelope(e: Envelope): DecisionSubject {
  return {
    hash: hashEnvelope(e),
    kind: "envelope",
    nonce: e.nonce,
    revision: e.revision,
    createdAt: e.createdAt,
    expiresAt: e.expiresAt,
    threadId: e.runContext.threadId,
    operations: [e.operation],
    requestedBy: e.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(e),
    editedBy: e.editedBy,
    level: e.risk.level,
    edits: { single: e },
  };
}

/** A change set with its actions' envelopes (in the set's order). */
export function subjectOfSet(set: ChangeSet, envelopes: Envelope[]): DecisionSubject {
  const byActionId = new Map(set.actions.map((a, i) => [a.actionId, envelopes[i]!] as const));
  return {
    hash: hashChangeSet(set),
    kind: "change set",
    nonce: set.nonce,
    revision: set.revision,
    createdAt: set.createdAt,
    expiresAt: set.expiresAt,
    threadId: set.threadId,
    operations: [...new Set(set.actions.map((a) => a.operation))],
    requestedBy: set.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(set),
    editedBy: set.editedBy,
    level: set.risk.level,
    edits: { byActionId },
  };
}

export type DecisionValidation =
  | {
      ok: true;
      decision: Decision;
      identity: { approverId: string; verifiedBy: VerifiedBy };
      /**
       * When the decision was made, as it may be recorded: the decision's own decidedAt only when a
       * signature verified over it; otherwise this server's time of validation (ctx.now).
       */
      decidedAt: string;
      /** What an unsigned decision said its decidedAt was: a claim, never the recorded decision time. */
      claimedDecidedAt?: string;
      override?: { gate: string; by: string; reason: string };
      edit?: { proposal: Proposal };
    }
  | { ok: false; code: RefusalCode; reason: string };

/** How far in the future a decidedAt may be, for approvers whose clocks run ahead. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;

export function validateDecision(e: Envelope, decision: unknown, ctx: DecisionContext): DecisionValidation {
  let subject: DecisionSubject;
  try {
    subject = subjectOfEnvelope(e);
  } catch (err) {
    return {
      ok: false,
      code: "HASH_MISMATCH",
      reason: `the envelope cannot be hashed: ${(err as Error).message}`,
    };
  }
  return validateDecisionFor(subject, decision, ctx);
}

/** validateDecision against any subject: an envelope, or a change set as a whole or action by action. */
export function validateDecisionFor(
  subject: DecisionSubject,
  decision: unknown,
  ctx: DecisionContext,
): DecisionValidation {
  const refuse = (code: RefusalCode, reason: string): DecisionValidation => ({ ok: false, code, reason });

  const parsed = DecisionSchema.safeParse(decision);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.join(".") || "(decision)"}: ${i.message}`)
      .join("; ");
    return refuse(
      "MALFORMED",
      `expected {type: "approve"|"reject"|"edit", envelopeHash, nonce, approver: {id}, ...}; ${detail}`,
    );
  }
  const d = parsed.data;

  // Binding.
  const current = subject.hash;
  const e = {
    revision: subject.revision,
    nonce: subject.nonce,
    expiresAt: subject.expiresAt,
    requestedBy: subject.requestedBy,
    editedBy: subject.editedBy,
  };
  // A self-declared requester is a name anyone could have typed: the comparison below is against that name.
  const requesterNote =
    subject.requesterVerifiedBy === "self_declared"
      ? ` (requester ${subject.requestedBy} is self-declared: the comparison is with the name given, which nothing checked)`
      : "";
  if (ctx.envelopeHash !== current) {
    return refuse(
      "HASH_MISMATCH",
      `the ${subject.kind} now hashes to ${current}, but ${ctx.envelopeHash} was recorded when it was shown; it changed after display`,
    );
  }
  if (subject.threadId !== ctx.threadId) {
    return refuse(
      "HASH_MISMATCH",
      `the ${subject.kind} belongs to thread ${subject.threadId}, not to thread ${ctx.threadId}`,
    );
  }
  if (d.envelopeHash !== current && ctx.supersededHashes.includes(d.envelopeHash)) {
    return refuse(
      "STALE_REVISION",
      `the decision names ${d.envelopeHash}, an earlier revision; the current revision is ${e.revision} with hash ${current}`,
    );
  }
  if (d.envelopeHash !== current)
    return refuse(
      "HASH_MISMATCH",
      `expected envelopeHash ${current} (revision ${e.revision}); the decision names ${d.envelopeHash}`,
    );
  if (d.nonce !== e.nonce)
    return refuse(
      "NONCE_MISMATCH",
      `expected nonce ${e.nonce}; the decision carries ${JSON.stringify(d.nonce)}`,
    );
  if (ctx.nonceConsumed)
    return refuse(
      "ALREADY_CONSUMED",
      `nonce ${e.nonce} was already used by an accepted decision; an approval counts once`,
    );
  // Which action a decision is about: a change set's actions are named by id, never by list position.
  let target: Envelope | undefined;
  if ("single" in subject.edits) {
    if (d.actionId !== undefined)
      return refuse(
        "MALFORMED",
        `actionId ${d.actionId} names an action of a change set, but this approval is for a single envelope`,
      );
    target = subject.edits.single;
  } else if (d.actionId !== undefined) {
    target = subject.edits.byActionId.get(d.actionId);
    if (!target)
      return refuse(
        "MALFORMED",
        `the change set has no action ${d.actionId} (its actions: ${[...subject.edits.byActionId.keys()].join(", ")})`,
      );
  }

  const override = d.type === "approve" ? d.override : undefined;
  if (override) {
    if (!OVERRIDABLE_GATES.includes(override.gate as Gate)) {
      return refuse(
        "OVERRIDE_NOT_ALLOWED",
        `gate ${override.gate} can never be overridden; overridable gates: ${OVERRIDABLE_GATES.join(", ")}`,
      );
    }
    if (!ctx.policy.overrides[override.gate]) {
      return refuse(
        "OVERRIDE_NOT_ALLOWED",
        `policy ${ctx.policy.id}@${ctx.policy.version} does not let anyone override ${override.gate}`,
      );
    }
  }

  // Time: only the validating side's clock decides expiry. A decision's own decidedAt is recorded only
  // when signed (below), never trusted to open or close the window; one dated implausibly far ahead is malformed.
  const expiresAt = Date.parse(e.expiresAt);
  if (ctx.now.getTime() >= expiresAt)
    return refuse(
      "EXPIRED",
      `the approval window closed at ${e.expiresAt}; it is now ${ctx.now.toISOString()}`,
    );
  if (d.decidedAt !== undefined) {
    const decidedAt = Date.parse(d.decidedAt);
    if (decidedAt > ctx.now.getTime() + CLOCK_SKEW_MS) {
      return refuse(
        "MALFORMED",
        `decidedAt ${d.decidedAt} is more than ${CLOCK_SKEW_MS / 60000} minutes after now (${ctx.now.toISOString()})`,
      );
    }
  }

  // Identity.
  const approverId = d.approver.id;
  let verifiedBy: VerifiedBy;
  if (d.signature !== undefined) {
    if (d.decidedAt === undefined)
      return refuse("MALFORMED", "a signed decision must carry the decidedAt it signed");
    // A signed decidedAt is recorded as the decision time, so it must lie in [the approval's creation, now + skew].
    if (Date.parse(d.decidedAt) < Date.parse(subject.createdAt)) {
      return refuse(
        "MALFORMED",
        `decidedAt ${d.decidedAt} is before this approval was created (${subject.createdAt}); a signed decision is dated when it was made, after the approval was shown`,
      );
    }
    const key = ctx.publicKeys.get(approverId);
    if (!key)
      return refuse(
        "SIGNATURE_INVALID",
        `no public key is registered for approver ${approverId} (registered: ${[...ctx.publicKeys.keys()].join(", ") || "none"})`,
      );
    if (!verifyDecisionSignature(signedPayloadOf(d, ctx.threadId), d.signature, key)) {
      return refuse(
        "SIGNATURE_INVALID",
        `the signature does not verify with ${approverId}'s key over {envelopeHash, nonce, threadId ${ctx.threadId}, decision ${d.type}, approverId, decidedAt ${d.decidedAt}${d.type === "edit" ? ", editedAction" : ""}${override ? ", override" : ""}}`,
      );
    }
    verifiedBy = "signature";
  } else if (ctx.policy.requireSignature) {
    return refuse(
      "SIGNATURE_REQUIRED",
      `policy ${ctx.policy.id}@${ctx.policy.version} requires a signed decision; none was given`,
    );
  } else if (ctx.authenticatedUser !== undefined) {
    if (ctx.authenticatedUser !== approverId) {
      return refuse(
        "APPROVER_NOT_ALLOWED",
        `the request is authenticated as ${ctx.authenticatedUser}, but the decision names approver ${approverId}`,
      );
    }
    verifiedBy = "authentication";
  } else if (ctx.policy.approvers.allowUnauthenticated) {
    verifiedBy = "self_declared";
  } else {
    return refuse(
      "SIGNATURE_REQUIRED",
      `policy ${ctx.policy.id}@${ctx.policy.version} does not accept self-declared approvers; sign the decision or use an authenticated connection`,
    );
  }

  // Authority: over every operation the approval covers.
  const notAllowed = approverNotAllowed(ctx.policy, approverId, subject.operations);
  if (notAllowed) return refuse("APPROVER_NOT_ALLOWED", notAllowed);
  let appliedOverride: { gate: string; by: string; reason: string } | undefined;
  if (override) {
    const rule = ctx.policy.overrides[override.gate]!;
    if (!hasRole(ctx.policy, approverId, rule.role)) {
      return refuse(
        "OVERRIDE_NOT_ALLOWED",
        `overriding ${override.gate} needs role ${rule.role}, which ${approverId} does not hold`,
      );
    }
    if (rule.requireVerifiedIdentity && verifiedBy === "self_declared") {
      return refuse(
        "OVERRIDE_NOT_ALLOWED",
        `overriding ${override.gate} needs a verified identity (signature or authentication); ${approverId} is self-declared`,
      );
    }
  }
  const sod = ctx.policy.separationOfDuties;
  // Only an approval can be self-serving: a rejection stops the action, and an edit becomes a new revision that needs its own approval.
  const author =
    approverId === e.requestedBy ? "requested" : approverId === e.editedBy ? "wrote (by an edit)" : undefined;
  if (
    d.type === "approve" &&
    sod &&
    author &&
    levelRank(subject.level) >= levelRank(sod.requesterMayNotApproveAtOrAbove)
  ) {
    if (override?.gate === "separation_of_duties") {
      appliedOverride = { gate: override.gate, by: approverId, reason: override.reason };
    } else {
      return refuse(
        "SELF_APPROVAL",
        `${approverId} ${author} this ${subject.level}-risk change and may not approve it (policy: requester may not approve at or above ${sod.requesterMayNotApproveAtOrAbove})${author === "requested" ? requesterNote : ""}`,
      );
    }
  }

  // Content of an edit: a new proposal, checked like one.
  let edit: { proposal: Proposal } | undefined;
  if (d.type === "edit") {
    // An enum value named in the edit (PRIORITY "high") becomes its exact code; the envelope holds codes only.
    // A person named in the edit (RESPONSIBLE_ID "Bob Smith") becomes the id it resolved to, exactly one
    // active user; zero or several matches refuse the edit. The envelope holds ids only.
    if (!target)
      return refuse(
        "MALFORMED",
        `an edit of a change set names the action it changes ("actionId": one of ${"byActionId" in subject.edits ? [...subject.edits.byActionId.keys()].join(", ") : ""})`,
      );
    const e = target;
    if (OPERATIONS[e.operation].effect === "delete") {
      // A delete is built by code as the undo of something our run created, and names exactly that: an
      // edit could only point it at something else. It is approved or rejected as it is.
      return refuse(
        "OUT_OF_SCOPE",
        `${e.operation} deletes exactly what our run created (${e.operation === "delete_task_comment" ? `comment ${String(e.params["COMMENT_ID"])} of task ${e.object.id}` : `task ${e.object.id}`}); it cannot be edited, only approved or rejected`,
      );
    }
    if (d.editedAction.name !== e.operation) {
      return refuse(
        "OUT_OF_SCOPE",
        `the edit names operation ${JSON.stringify(d.editedAction.name)}, but this envelope is for ${e.operation}; an edit changes values, not the operation: propose a new change instead`,
      );
    }
    const idArg = OPERATIONS[e.operation].idArg;
    const creates = OPERATIONS[e.operation].effect === "create";
    if (creates) {
      // A create makes a new object: its edit names none (no id, or 0, both the new object). An id of an
      // existing object would point the edit at something this envelope is not about.
      const { taskId, dealId } = d.editedAction.args;
      const other =
        taskId !== undefined && taskId !== 0
          ? `task ${taskId}`
          : dealId !== undefined && dealId !== 0
            ? `deal ${dealId}`
            : dealId !== undefined && idArg !== "dealId"
              ? "dealId 0"
              : undefined;
      if (other) {
        return refuse(
          "OUT_OF_SCOPE",
          `${e.operation} creates ${objectNamed(e.operation, e.object.id)}; an edit of it names no existing object (send args {fields}, without ${idArg}), but it names ${other}; propose a new change instead`,
        );
      }
    }
    const editedId = creates ? e.object.id : d.editedAction.args[idArg];
    if (editedId !== e.object.id) {
      const named =
        d.editedAction.args.taskId !== undefined
          ? `task ${d.editedAction.args.taskId}`
          : `deal ${d.editedAction.args.dealId}`;
      return refuse(
        "OUT_OF_SCOPE",
        `the edit targets ${named}, but this envelope is about ${e.object.type} ${e.object.id} (named by ${idArg}); propose a new change instead`,
      );
    }
    const named = idsForNames(codesForNames(d.editedAction.args.fields), ctx.people ?? []);
    if (!named.ok) return refuse("INVALID_VALUE", `the edited action is refused: ${named.reason}`);
    const proposal: Proposal = { operation: d.editedAction.name, taskId: editedId, fields: named.fields };
    const check = checkProposal(ctx.policy, ctx.scope, proposal);
    if (!check.allowed)
      return refuse(check.code, `the edited action is refused: ${check.reasons.join("; ")}`);
    edit = { proposal };
  }

  // An unsigned decidedAt is whatever the caller typed (it could backdate the evidence): the decision
  // is recorded at this server's time; only a signature makes the approver's own time recordable.
  const signedAt = verifiedBy === "signature" ? d.decidedAt : undefined;
  return {
    ok: true,
    decision: d,
    identity: { approverId, verifiedBy },
    decidedAt: signedAt ?? ctx.now.toISOString(),
    ...(signedAt === undefined && d.decidedAt !== undefined ? { claimedDecidedAt: d.decidedAt } : {}),
    ...(appliedOverride ? { override: appliedOverride } : {}),
    ...(edit ? { edit } : {}),
  };
}

/**
 * Whether the identity a decision claims is established as far as the policy asks, whatever else is
 * wrong with the decision: the caller is authenticated as that approver, or the decision carries a
 * signature that verifies with that approver's key over this thread, or the policy accepts
 * self-declared approvers (allowUnauthenticated, no signature required). Only such a decision may
 * count toward the refused-decision budget: otherwise anyone could end an approval by sending bad
 * decisions that merely name an entitled approver.
 */
export function identityEstablished(
  decision: unknown,
  ctx: {
    policy: Policy;
    publicKeys: ReadonlyMap<string, KeyObject>;
    threadId: string;
    authenticatedUser?: string | undefined;
  },
): boolean {
  const claimed = (decision as { approver?: { id?: unknown } } | null)?.approver?.id;
  if (typeof claimed !== "string" || claimed === "") return false;
  if (ctx.authenticatedUser !== undefined) return ctx.authenticatedUser === claimed;
  if (signatureVerifies(decision, claimed, ctx)) return true;
  return ctx.policy.approvers.allowUnauthenticated && !ctx.policy.requireSignature;
}

function signatureVerifies(
  decision: unknown,
  approverId: string,
  ctx: { publicKeys: ReadonlyMap<string, KeyObject>; threadId: string },
): boolean {
  const parsed = DecisionSchema.safeParse(decision);
  if (!parsed.success || parsed.data.signature === undefined || parsed.data.decidedAt === undefined)
    return false;
  const key = ctx.publicKeys.get(approverId);
  if (!key) return false;
  try {
    return verifyDecisionSignature(signedPayloadOf(parsed.data, ctx.threadId), parsed.data.signature, key);
  } catch {
    return false;
  }
}

/** The payload a decision's signature covers; the approver's tool builds the same object to sign. */
export function signedPayloadOf(d: Decision, threadId: string): SignedDecisionPayload {
  if (d.decidedAt === undefined) throw new TypeError("a decision without decidedAt cannot be signed");
  return {
    envelopeHash: d.envelopeHash,
    nonce: d.nonce,
    threadId,
    decision: d.type,
    approverId: d.approver.id,
    decidedAt: d.decidedAt,
    ...(d.type === "edit" ? { editedAction: d.editedAction } : {}),
    ...(d.type === "approve" && d.override ? { override: d.override } : {}),
    ...(d.actionId !== undefined ? { actionId: d.actionId } : {}),
  };
}
