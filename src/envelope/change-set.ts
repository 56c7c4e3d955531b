/**
 * Change sets: several actions approved as one, run in order under the chain rule. Pure: no I/O.
 *
 * Each action is a full Action Envelope with its own hash (its own baseline, pre-read, write-ahead
 * entry, acknowledgement and verification). The set binds them: it lists every action's id and
 * envelope hash in order, carries the chain's risk (the riskiest action's, class and level each),
 * the shortest expiry and its own nonce, and is hashed over canonical JSON like an envelope. An
 * approval names the set hash and nonce, so it covers exactly these actions in exactly this order;
 * any edit of any action makes a new revision of the set with a new hash, which voids every approval
 * of the earlier one.
 *
 * Chain rule (chainOutcome): execution stops at the first action that is not VERIFIED; every later
 * action ends NOT_EXECUTED (CHAIN_STOPPED) naming that action. An irreversible action therefore runs
 * only after every action before it was verified.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { z } from "zod";
import { HASH_PATTERN, sha256Json } from "./canonical.js";
import { EnvelopeError } from "./errors.js";
import { formatIssues } from "./zod-issues.js";
import {
  hashEnvelope,
  REQUESTER_VERIFICATIONS,
  requesterVerificationOf,
  requesterVerificationText,
  type Envelope,
  type RequesterVerification,
} from "./envelope.js";
import { LEVELS, REVERSIBILITY, reversibilityRank, type RiskLevel } from "./policy.js";
import { OPERATION_NAMES, OPERATIONS, objectNamed, operationSpec, type OperationName } from "./operations.js";
import { chainRisk } from "./scope.js";
import { escapeForTerminal } from "../text/escape.js";

export const CHANGE_SET_SCHEMA_ID = "action-envelope-set/1";
/** Most actions one set may hold: a person reads every one of them on one card. */
export const MAX_SET_ACTIONS = 5;
/** a1, a2, …: an action keeps its id across revisions, so a decision can name it. */
export const ACTION_ID = /^a[1-9][0-9]?$/;

const IsoWithOffset = z.iso.datetime({ offset: true });

export const ChangeSetSchema = z
  .strictObject({
    schema: z.literal(CHANGE_SET_SCHEMA_ID),
    setId: z.string().min(1),
    revision: z.int().min(1),
    previousSetHash: z.string().regex(HASH_PATTERN).optional(),
    threadId: z.string().min(1),
    requestedBy: z.string().min(1),
    /** How requestedBy was established, as in each action's envelope. */
    requesterVerifiedBy: z.enum(REQUESTER_VERIFICATIONS).optional(),
    editedBy: z.string().min(1).optional(),
    /** In execution order. */
    actions: z
      .array(
        z.strictObject({
          actionId: z.string().regex(ACTION_ID),
          envelopeHash: z.string().regex(HASH_PATTERN),
          operation: z.enum(OPERATION_NAMES),
          /** For a create (add_task) the id is 0: the object does not exist yet (as in its envelope). */
          object: z.strictObject({ type: z.literal("task"), id: z.int().min(0) }),
          reversibility: z.enum(REVERSIBILITY),
        }),
      )
      .min(2)
      .max(MAX_SET_ACTIONS),
    /** The chain's risk: the riskiest action's class and level (each the highest of all actions). */
    risk: z.strictObject({ reversibility: z.enum(REVERSIBILITY), level: z.enum(LEVELS) }),
    policy: z.strictObject({ id: z.string().min(1), version: z.string().min(1) }),
    createdAt: IsoWithOffset,
    /** The earliest expiry of its actions: an approval of the set is valid only while every action's is. */
    expiresAt: IsoWithOffset,
    nonce: z.string().regex(/^[0-9a-f]{32}$/),
  })
  .superRefine((s, ctx) => {
    const issue = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: "custom", path, message });
    if (s.revision > 1 !== (s.previousSetHash !== undefined))
      issue(["previousSetHash"], "previousSetHash is required for revision > 1 and absent for revision 1");
    const ids = s.actions.map((a) => a.actionId);
    if (new Set(ids).size !== ids.length) issue(["actions"], `action ids must be unique: ${ids.join(", ")}`);
    const hashes = s.actions.map((a) => a.envelopeHash);
    if (new Set(hashes).size !== hashes.length) issue(["actions"], "the same envelope appears twice");
    if (Date.parse(s.expiresAt) <= Date.parse(s.createdAt))
      issue(["expiresAt"], "expiresAt must be after createdAt");
    // The envelope's rule (envelope.ts): id 0 exactly when the operation creates its object.
    s.actions.forEach((a, i) => {
      const creates = OPERATIONS[a.operation].effect === "create";
      if (creates !== (a.object.id === 0))
        issue(
          ["actions", i, "object", "id"],
          creates
            ? `${a.operation} creates its object, so its id is 0`
            : "the object id is a positive integer",
        );
    });
    const chain = chainRisk(
      s.actions.map((a) => ({ reversibility: a.reversibility, level: "low" as RiskLevel })),
    );
    if (reversibilityRank(s.risk.reversibility) < reversibilityRank(chain.reversibility)) {
      issue(
        ["risk", "reversibility"],
        `the set is classed ${s.risk.reversibility}, below its riskiest action (${chain.reversibility})`,
      );
    }
  });

export type ChangeSet = z.output<typeof ChangeSetSchema>;

export function hashChangeSet(s: ChangeSet): string {
  return sha256Json(s);
}

export function parseChangeSet(value: unknown): ChangeSet {
  const parsed = ChangeSetSchema.safeParse(value);
  if (!parsed.success)
    throw new EnvelopeError(
      "INVALID_ENVELOPE",
      "a change set matching ChangeSetSchema",
      formatIssues(parsed.error),
    );
  return parsed.data;
}

export interface CreateChangeSetInput {
  /** The action envelopes in execution order, each with its action id. */
  actions: Array<{ actionId: string; envelope: Envelope }>;
  threadId: string;
  requestedBy: string;
  /** How requestedBy was established; every action's envelope must say the same. Default: self_declared. */
  requesterVerifiedBy?: RequesterVerification;
  editedBy?: string;
  policy: { id: string; version: string };
  now: Date;
  revision?: number;
  setId?: string;
  previousSetHash?: string;
  nonce?: string;
}

/** Seals a set over already-built action envelopes. Throws EnvelopeError when they do not belong together. */
export function createChangeSet(input: CreateChangeSetInput): ChangeSet {
  const problems: string[] = [];
  const requesterVerifiedBy = input.requesterVerifiedBy ?? "self_declared";
  for (const { actionId, envelope } of input.actions) {
    if (envelope.runContext.threadId !== input.threadId)
      problems.push(`${actionId} belongs to thread ${envelope.runContext.threadId}, not ${input.threadId}`);
    if (envelope.requestedBy !== input.requestedBy)
      problems.push(`${actionId} was requested by ${envelope.requestedBy}, not ${input.requestedBy}`);
    if (requesterVerificationOf(envelope) !== requesterVerifiedBy)
      problems.push(
        `${actionId}'s requester is ${requesterVerificationText(requesterVerificationOf(envelope))}, not ${requesterVerificationText(requesterVerifiedBy)}`,
      );
  }
  if (problems.length)
    throw new EnvelopeError(
      "INVALID_ENVELOPE",
      "actions of one thread and one requester",
      problems.join("; "),
    );
  const expiresAt = input.actions
    .map((a) => a.envelope.expiresAt)
    .reduce((a, b) => (Date.parse(a) <= Date.parse(b) ? a : b));
  const revision = input.revision ?? 1;
  return parseChangeSet({
    schema: CHANGE_SET_SCHEMA_ID,
    setId: input.setId ?? randomUUID(),
    revision,
    ...(input.previousSetHash !== undefined ? { previousSetHash: input.previousSetHash } : {}),
    threadId: input.threadId,
    requestedBy: input.requestedBy,
    requesterVerifiedBy,
    ...(input.editedBy !== undefined ? { editedBy: input.editedBy } : {}),
    actions: input.actions.map(({ actionId, envelope }) => ({
      actionId,
      envelopeHash: hashEnvelope(envelope),
      operation: envelope.operation,
      object: { type: envelope.object.type, id: envelope.object.id },
      reversibility: envelope.risk.reversibility,
    })),
    risk: chainRisk(input.actions.map((a) => a.envelope.risk)),
    policy: input.policy,
    createdAt: input.now.toISOString(),
    expiresAt,
    nonce: input.nonce ?? randomBytes(16).toString("hex"),
  });
}

/** Problems with a set's members as read back (each must hash to what the set lists, in order). */
export function memberProblems(
  set: ChangeSet,
  members: Array<{ envelopeHash: string; envelope: Envelope }>,
): string[] {
  const out: string[] = [];
  if (members.length !== set.actions.length)
    out.push(`the set lists ${set.actions.length} actions, ${members.length} were found`);
  set.actions.forEach((a, i) => {
    const m = members[i];
    if (!m) return;
    if (m.envelopeHash !== a.envelopeHash)
      out.push(`${a.actionId}: expected ${a.envelopeHash} in position ${i + 1}, found ${m.envelopeHash}`);
    else if (hashEnvelope(m.envelope) !== a.envelopeHash)
      out.push(`${a.actionId}: its envelope does not hash to ${a.envelopeHash}`);
    else if (requesterVerificationOf(m.envelope) !== requesterVerificationOf(set))
      out.push(
        `${a.actionId}: its requester is ${requesterVerificationText(requesterVerificationOf(m.envelope))}, the set's ${requesterVerificationText(requesterVerificationOf(set))}`,
      );
  });
  return out;
}

/** How one action of a set ended. */
export interface ActionOutcome {
  actionId: string;
  envelopeHash: string;
  operation: string;
  /** The envelope's object id: 0 for a create (the object did not exist yet). */
  taskId: number;
  /** For a create, the id of the object it made, where known (named in the table instead of "a new task"). */
  createdId?: number;
  outcome: string;
  reasonCode: string;
  reason: string;
  /** Whether a write was sent for it (an entry in the write-ahead log). */
  sent: boolean;
}

/** The set's outcome, derived from its actions' (chain rule): the first action that is not VERIFIED decides. */
export function chainOutcome(outcomes: ActionOutcome[]): {
  outcome: string;
  reasonCode: string;
  reason: string;
} {
  const table = outcomes.map((o) => `${o.actionId} ${o.outcome} (${o.reasonCode})`).join("; ");
  const stop = outcomes.find((o) => o.outcome !== "VERIFIED");
  if (!stop)
    return {
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
      reason: `all ${outcomes.length} actions verified: ${table}`,
    };
  const written = outcomes.filter((o) => o.sent);
  if (written.length === 0)
    return {
      outcome: stop.outcome,
      reasonCode: stop.reasonCode,
      reason: `${stop.actionId}: ${stop.reason}; nothing of the set was written: ${table}`,
    };
  // Something was written and the chain did not complete: neither "nothing happened" nor "verified".
  const verified = outcomes.filter((o) => o.outcome === "VERIFIED").map((o) => o.actionId);
  return {
    outcome: "PARTIALLY_EXECUTED",
    reasonCode: stop.reasonCode,
    reason: `the set stopped at ${stop.actionId} (${stop.outcome}: ${stop.reason}); ${verified.length ? `${verified.join(", ")} verified and stay written` : "no action verified"}: ${table}`,
  };
}

/** The set outcome as a table: one line per action, for the CLI, the chat report and the evidence. */
export function outcomeTable(outcomes: ActionOutcome[]): string {
  const rows = outcomes.map((o) => [
    o.actionId,
    o.operation,
    outcomeObject(o),
    o.outcome,
    o.reasonCode,
    o.sent ? "sent" : "not sent",
  ]);
  const head = ["action", "operation", "object", "outcome", "reason", "write"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)].join("\n");
}

/**
 * The object column of an outcome row: "task 4" (src/api/cli-api.ts parses /^task (\d+)$/ back), and for
 * a create "new task 17" when the created id is known, else "a new task" (never "task 0").
 */
function outcomeObject(o: ActionOutcome): string {
  if (operationSpec(o.operation)?.effect === "create" && o.createdId !== undefined && o.createdId > 0)
    return `new ${OPERATIONS[o.operation as OperationName].target} ${o.createdId}`;
  return objectNamed(o.operation, o.taskId);
}

/** The set's header for its card; each action's own card follows it. */
export function setCardHeader(set: ChangeSet, setHash: string): string {
  const order = set.actions
    .map(
      (a, i) =>
        `  ${i + 1}. ${a.actionId}: ${a.operation} (${OPERATIONS[a.operation].method}) on ${objectNamed(a.operation, a.object.id)} [${a.reversibility}] envelope ${a.envelopeHash}`,
    )
    .join("\n");
  // Ids are data (a self-declared requester's is free text): one line each, as the action cards show them,
  // so none can add a line to the card or a section marker that moves the actions' sections.
  const one = escapeForTerminal;
  return [
    `CHANGE SET — approval requested for ${set.actions.length} actions, as one`,
    `Set:          ${one(set.setId)}, revision ${set.revision}${set.previousSetHash ? ` (replaces ${set.previousSetHash})` : ""}`,
    `Requested by: ${one(set.requestedBy)} (${requesterVerificationText(requesterVerificationOf(set))}) (thread ${one(set.threadId)})`,
    ...(set.editedBy ? [`Edited by:    ${one(set.editedBy)} (this revision's content)`] : []),
    `Risk:         ${set.risk.level}; ${set.risk.reversibility} (the riskiest action's: a chain is as risky as its riskiest step)`,
    `Expires:      ${set.expiresAt} (the earliest of its actions)`,
    `Set hash:     ${setHash}`,
    `Set nonce:    ${set.nonce}`,
    `Order (run one after another; the set stops at the first action that is not VERIFIED, and the rest are not run):`,
    order,
    `An action on a task an earlier action of the set wrote expects what that action wrote (and the change marker its verification read); its other "before" and "must stay unchanged" values are as read before the set.`,
    `Approve the whole set with the set hash and nonce, or decide each action by its id (approve / reject / edit).`,
  ].join("\n");
}

/** What a per-action decision of a change set would do, said before it is sent (CLI, inbox) and applied by check_decision. */
export interface PartialForecast {
  /** The approved actions run at once on this decision (no edit, nothing depends on a rejected action, the policy lets them run). */
  runsAtOnce: boolean;
  kept: string[];
  rejected: string[];
  /** Why the kept actions come back for a fresh approval instead (empty when they run at once). */
  why: string[];
  /** One line for a person: what happens next and who must approve. */
  summary: string;
}

/**
 * Removing rejected actions is not an edit: the approvals of the kept actions stand and they run at
 * once, unless an action was edited, a kept action depends on a rejected one (chain rule: a later
 * action on the same object expects what the rejected one would have written), or the policy's
 * partialExecution does not list a kept action's class. Then the kept actions come back as the next
 * revision: after an edit for another approver, otherwise for any approver of them, the decider included.
 */
export function partialApprovalForecast(
  actions: ReadonlyArray<{ actionId: string; envelope: Pick<Envelope, "operation" | "object" | "risk"> }>,
  choices: Readonly<Record<string, string>>,
  partialExecution: readonly string[],
): PartialForecast {
  const kept = actions
    .filter((a) => choices[a.actionId] === "approve" || choices[a.actionId] === "edit")
    .map((a) => a.actionId);
  const rejected = actions.filter((a) => choices[a.actionId] === "reject").map((a) => a.actionId);
  const edited = actions.filter((a) => choices[a.actionId] === "edit").map((a) => a.actionId);
  const why: string[] = [];
  if (edited.length) why.push(`${edited.join(", ")} edited: an edit is a new revision for another approver`);
  actions.forEach((a, i) => {
    if (!kept.includes(a.actionId)) return;
    const before = actions
      .slice(0, i)
      .find(
        (b) =>
          rejected.includes(b.actionId) &&
          b.envelope.object.type === a.envelope.object.type &&
          b.envelope.object.id === a.envelope.object.id,
      );
    if (before)
      why.push(
        `${a.actionId} depends on rejected ${before.actionId} (both change ${a.envelope.object.type} ${a.envelope.object.id}; ${a.actionId} was shown expecting what ${before.actionId} writes)`,
      );
    else if (!partialExecution.includes(a.envelope.risk.reversibility))
      why.push(
        `${a.actionId} is ${a.envelope.risk.reversibility}, which the policy's partialExecution does not let run after a partial approval`,
      );
  });
  const runsAtOnce = kept.length > 0 && rejected.length > 0 && why.length === 0;
  const who = edited.length
    ? "another approver (not the editor)"
    : "any approver of these actions, you included";
  const summary =
    kept.length === 0 || rejected.length === 0
      ? ""
      : runsAtOnce
        ? `${kept.join(", ")} run${kept.length === 1 ? "s" : ""} at once on this approval; ${rejected.join(", ")} ${rejected.length === 1 ? "is" : "are"} not run (REJECTED)`
        : `${kept.join(", ")} will NOT run on this decision: ${why.join("; ")}. ${kept.join(", ")} come${kept.length === 1 ? "s" : ""} back as a new revision to be approved by ${who}; ${rejected.join(", ")} ${rejected.length === 1 ? "is" : "are"} not run (REJECTED)`;
  return { runsAtOnce, kept, rejected, why, summary };
}
