/**
 * Validation of a human decision (the resume value item) against the envelope it claims to answer.
 * Checks run in a fixed order and the first failure is returned with its code; the order puts the
 * binding (hash, revision, nonce, single use) before identity, so a decision for the wrong thing is
 * refused as that, whoever sent it.
 */
import type { KeyObject } from "node:crypto";
import { deletedLabelOf } from "./delete-subjects.js";
import { codesForNames } from "./fields.js";
import { signedPayloadOf } from "./decision-identity.js";
import { DecisionSchema, type Decision } from "./decision-schema.js";
import { subjectOfEnvelope, type DecisionSubject } from "./decision-subject.js";
import type { Envelope } from "./envelope.js";
import {
  approverNotAllowed,
  hasRole,
  levelRank,
  OVERRIDABLE_GATES,
  type Gate,
  type Policy,
} from "./policy.js";
import { checkProposal, type Proposal, type ProposalRefusalCode, type Scope } from "./scope.js";
import { verifyDecisionSignature } from "./signature.js";
import { OPERATIONS, objectNamed } from "./operations.js";
import { idsForNames, type NameResolution } from "./people.js";

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
  /** A pending decision a run found in its checkpoint instead of receiving it (src/nodes/check-decision.ts). */
  | "NOT_SENT_WITH_THIS_RUN"
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
      `the decision names ${d.envelopeHash}, an earlier revision; the current revision is ${subject.revision} with hash ${current}`,
    );
  }
  if (d.envelopeHash !== current)
    return refuse(
      "HASH_MISMATCH",
      `expected envelopeHash ${current} (revision ${subject.revision}); the decision names ${d.envelopeHash}`,
    );
  if (d.nonce !== subject.nonce)
    return refuse(
      "NONCE_MISMATCH",
      `expected nonce ${subject.nonce}; the decision carries ${JSON.stringify(d.nonce)}`,
    );
  if (ctx.nonceConsumed)
    return refuse(
      "ALREADY_CONSUMED",
      `nonce ${subject.nonce} was already used by an accepted decision; an approval counts once`,
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
  const expiresAt = Date.parse(subject.expiresAt);
  if (ctx.now.getTime() >= expiresAt)
    return refuse(
      "EXPIRED",
      `the approval window closed at ${subject.expiresAt}; it is now ${ctx.now.toISOString()}`,
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
        `the signature does not verify with ${approverId}'s key over {envelopeHash, nonce, threadId ${ctx.threadId}, decision ${d.type}, approverId, decidedAt ${d.decidedAt}${d.type === "edit" ? ", editedAction" : ""}${d.type === "reject" && d.message !== undefined ? ", message" : ""}${override ? ", override" : ""}}`,
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
    approverId === subject.requestedBy
      ? "requested"
      : approverId === subject.editedBy
        ? "wrote (by an edit)"
        : undefined;
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
        `${e.operation} deletes exactly what our run created (${deletedLabelOf(e)}); it cannot be edited, only approved or rejected`,
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
