/**
 * Builds the audit entry for each decision point from graph state, so nodes stay one line away from
 * the log. Pure: no I/O, no clock (callers pass the time of the event).
 */
import {
  checkProposal,
  requesterVerificationOf,
  sha256Json,
  type Envelope,
  type JsonValue,
  type NameResolution,
  type Policy,
  type RequesterVerification,
} from "../envelope/index.js";
import type { ThreadMirror } from "./thread-mirror.js";
import type { AuditEntry } from "../store/audit.js";
import { outcomeFlags } from "../envelope/outcome-flags.js";
import type { DecisionRecord, ProposalRecord, Refusal } from "../envelope/records.js";
import type { ActionRow } from "../store/action-machine.js";
import type { ExecutionEntry } from "../store/journal.js";
import { viewOf, type EvidenceView, type ThreadJournalView, type WithheldParts } from "./thread-view.js";

const policyOf = (p: { id: string; version: string }) => ({ id: p.id, version: p.version });

function whatOf(envelope: Envelope, envelopeHash: string): AuditEntry["what"] {
  return {
    operation: envelope.operation,
    taskId: envelope.object.id,
    params: envelope.params,
    envelopeHash,
    envelope,
  };
}

function envelopeFields(envelope: Envelope, envelopeHash: string) {
  return {
    threadId: envelope.runContext.threadId,
    revision: envelope.revision,
    requestedBy: envelope.requestedBy,
    risk: { level: envelope.risk.level, reversibility: envelope.risk.reversibility },
    what: whatOf(envelope, envelopeHash),
    policy: policyOf(envelope.policy),
  };
}

const none = { approver: null, override: null, refusal: null, outcome: null };

/** `what` of a record about no envelope: the operation (or tool) it concerns, and the object when known. */
function noEnvelope(
  operation: string,
  taskId: number | null = null,
  params: Record<string, unknown> | null = null,
): AuditEntry["what"] {
  return { operation, taskId, params, envelopeHash: null, envelope: null };
}

/** The class the policy gives the proposal, or the operation's own class when the proposal is denied outright. */
function riskOfProposal(policy: Policy, proposal: ProposalRecord): AuditEntry["risk"] {
  const operation = proposal.operation ?? "update_task";
  const check = checkProposal(policy, {}, { operation, taskId: proposal.taskId, fields: proposal.fields });
  if (check.allowed) return { ...check.risk };
  const op = policy.operations[operation];
  return op ? { level: op.level, reversibility: op.reversibility } : null;
}

export function proposalDeniedEntry(
  state: ThreadMirror,
  ctx: { threadId: string; revision: number; policy: Policy; at: string; code: string; reasons: string[] },
): AuditEntry {
  const proposal = state.proposal!;
  return hashable({
    threadId: ctx.threadId,
    revision: ctx.revision,
    event: "proposal_denied",
    discriminator: "",
    at: ctx.at,
    requestedBy: state.requestedBy,
    risk: riskOfProposal(ctx.policy, proposal),
    what: noEnvelope(proposal.operation ?? "update_task", proposal.taskId, proposal.fields),
    ...none,
    refusal: { code: ctx.code, reason: ctx.reasons.join("; ") },
    policy: policyOf(ctx.policy),
  });
}

/**
 * Keyed by the envelope hash as well as the revision: if a crash makes build_envelope run again it
 * freezes a new envelope (new nonce), and the log then says truthfully that two were built, rather
 * than naming one the approver never saw.
 */
export function approvalRequestedEntry(
  envelope: Envelope,
  envelopeHash: string,
  card: string,
  request: string,
): AuditEntry {
  return hashable({
    ...envelopeFields(envelope, envelopeHash),
    event: "approval_requested",
    discriminator: envelopeHash,
    at: envelope.createdAt,
    ...none,
    shown: { card, expiresAt: envelope.expiresAt },
    request,
    requesterVerifiedBy: requesterVerificationOf(envelope),
  });
}

/**
 * One accepted decision per revision: its nonce is single use. A cancel or an expiry consumes the
 * nonce too; it is recorded under its own event kind, since nobody approved or rejected anything.
 */
export function decisionAcceptedEntry(
  envelope: Envelope,
  envelopeHash: string,
  d: DecisionRecord,
  resolvedNames: readonly NameResolution[] = [],
): AuditEntry {
  const type: string = d.type;
  return hashable({
    ...envelopeFields(envelope, envelopeHash),
    event:
      type === "cancel" ? "approval_cancelled" : type === "expire" ? "approval_expired" : "decision_accepted",
    discriminator: "",
    at: d.acceptedAt,
    ...none,
    approver: { id: d.approverId, verifiedBy: d.verifiedBy, decision: d.type, decidedAt: d.decidedAt },
    override: d.override ? { ...d.override } : null,
    received: d.raw,
    ...(resolvedNames.length ? { resolvedNames: [...resolvedNames] } : {}),
    ...(d.message ? { message: d.message } : {}),
  });
}

/**
 * `ordinal` counts refusals in the thread (1 for the first); with the revision it tells apart
 * repeated refusals and is the same when check_decision re-runs on the same state.
 */
export function decisionRefusedEntry(
  envelope: Envelope,
  envelopeHash: string,
  refusal: Refusal,
  ordinal: number,
  resolvedNames: readonly NameResolution[] = [],
): AuditEntry {
  const claimed = claimedDecision(refusal.raw);
  return hashable({
    ...envelopeFields(envelope, envelopeHash),
    event: "decision_refused",
    discriminator: String(ordinal),
    at: refusal.at,
    ...none,
    approver: {
      id: claimed.approverId,
      verifiedBy: "unverified",
      decision: claimed.type,
      decidedAt: claimed.decidedAt,
    },
    override: null,
    refusal: { code: refusal.code, reason: refusal.reason },
    received: refusal.raw,
    ...(resolvedNames.length ? { resolvedNames: [...resolvedNames] } : {}),
  });
}

/**
 * One action's evidence as the journal holds it, kept in the audit record that ends it, and (absent
 * when none) the parts the projection withheld from it and why.
 */
export type ActionEvidence = Omit<EvidenceView, "decision"> & { withheld?: WithheldParts };

/** The action's evidence of a view as a closing record keeps it (the decision has a record of its own). */
export function actionEvidenceOf(view: Pick<ThreadJournalView, "evidence" | "withheld">): ActionEvidence {
  const { decision: _d, ...evidence } = view.evidence;
  return view.withheld ? { ...evidence, withheld: view.withheld } : evidence;
}

/**
 * The record that ends a run: execution_outcome when it sent a write, else run_ended; `state` is the
 * final state (the finish node's update applied). For a single action, `evidence` (from the journal)
 * goes into `received`, hash-chained like the rest, so the case record never needs graph state's
 * mirrors for it (state keeps no raw answers). A change set's actions each have their own action_ended
 * record instead.
 */
export function runEndedEntry(
  state: ThreadMirror,
  ctx: {
    threadId: string;
    policy: Policy;
    at: string;
    request: string;
    requesterVerifiedBy?: RequesterVerification;
    evidence?: ActionEvidence;
    denied?: AuditEntry;
  },
): AuditEntry {
  const e = state.envelope;
  const d = state.decision;
  const explained = outcomeFlags(state);
  // A run without an envelope: what was proposed is the denied proposal's record (a proposal in
  // state is anyone's to write), else nothing.
  const base =
    e && state.envelopeHash
      ? envelopeFields(e, state.envelopeHash)
      : {
          threadId: ctx.threadId,
          revision: 0,
          requestedBy: state.requestedBy,
          risk: ctx.denied?.risk ?? null,
          what: ctx.denied ? { ...ctx.denied.what } : noEnvelope("update_task"),
          policy: policyOf(ctx.policy),
        };
  return hashable({
    ...base,
    event: state.invocation ? "execution_outcome" : "run_ended",
    discriminator: "",
    at: state.finishedAt ?? ctx.at,
    ...none,
    approver: d
      ? { id: d.approverId, verifiedBy: d.verifiedBy, decision: d.type, decidedAt: d.decidedAt }
      : null,
    override: d?.override ? { ...d.override } : null,
    outcome: {
      outcome: state.outcome ?? "NOT_EXECUTED",
      reasonCode: state.reasonCode ?? "NO_PROPOSAL",
      reason: state.reason ?? "",
      finishedAt: state.finishedAt,
      flags: explained.flags,
    },
    ...(ctx.evidence ? { received: ctx.evidence } : {}),
    request: ctx.request,
    ...(ctx.requesterVerifiedBy ? { requesterVerifiedBy: ctx.requesterVerifiedBy } : {}),
  });
}

/**
 * transition_refused (a node the journal did not let act) and tamper_detected (state or a journal row
 * that disagreed with the journal): about the registered action when there is one, else about the
 * thread alone. `discriminator` keys the record, so a re-run of the same refusal adds nothing.
 */
export function journalGuardEntry(
  event: "transition_refused" | "tamper_detected",
  ctx: {
    threadId: string;
    action: { envelope: Envelope; envelopeHash: string } | undefined;
    requestedBy: string;
    discriminator: string;
    at: string;
    code: string;
    reason: string;
  },
): AuditEntry {
  const base = ctx.action
    ? { ...envelopeFields(ctx.action.envelope, ctx.action.envelopeHash), threadId: ctx.threadId }
    : {
        threadId: ctx.threadId,
        revision: 0,
        requestedBy: ctx.requestedBy,
        risk: null,
        what: noEnvelope("update_task"),
        policy: { id: "", version: "" },
      };
  return hashable({
    ...base,
    event,
    discriminator: ctx.discriminator,
    at: ctx.at,
    ...none,
    refusal: { code: ctx.code, reason: ctx.reason },
  });
}

/** Who a refused decision says it is from; nothing in it was verified. */
function claimedDecision(raw: unknown): {
  approverId: string | null;
  type: string | null;
  decidedAt: string | null;
} {
  const item = (raw as { decisions?: unknown[] } | null)?.decisions?.[0] as
    { approver?: { id?: unknown }; type?: unknown; decidedAt?: unknown } | undefined;
  const str = (v: unknown) => (typeof v === "string" ? v : null);
  return { approverId: str(item?.approver?.id), type: str(item?.type), decidedAt: str(item?.decidedAt) };
}

/**
 * Parts of an entry come from outside (a resume value, an approver id quoted in a refusal reason,
 * a model's proposal); none of them may stop the log from hashing the record.
 */
function hashable(entry: AuditEntry): AuditEntry {
  // An entry that is JSON data already (the usual case: records of tens of kilobytes built from journal
  // rows) is what the round trip would give back; only anything else takes it.
  return isJsonData(entry, 0) ? entry : (jsonSafe(entry) as AuditEntry);
}

/**
 * Whether a value is JSON data that JSON.stringify and JSON.parse give back unchanged and that holds no
 * surrogate at all (a valid pair included, which the round trip keeps; this only sends it the long way).
 * Nesting past 256 levels (or a cycle) is left to jsonSafe too.
 */
function isJsonData(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
      return !ANY_SURROGATE.test(value);
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0);
    case "object": {
      if (value === null) return true;
      if (depth > 256) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++)
          if (!(i in value) || !isJsonData(value[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return false;
      for (const key of Object.keys(value)) {
        if (ANY_SURROGATE.test(key)) return false;
        if (!isJsonData((value as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

const ANY_SURROGATE = /[\uD800-\uDFFF]/;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Round-trips through JSON and replaces unpaired surrogates (which RFC 8785 refuses) with U+FFFD.
 */
export function jsonSafe(value: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return `[unserialisable ${typeof value}]`;
  }
  if (text === undefined) return null;
  // JSON.stringify writes a lone surrogate as a \uD800–\uDFFF escape and a valid pair as itself, so text
  // without such an escape has nothing to replace.
  const parsed = JSON.parse(text) as unknown;
  return ESCAPED_SURROGATE.test(text) ? scrub(parsed) : parsed;
}

const ESCAPED_SURROGATE = /\\u[dD][89a-fA-F]/;

function scrub(v: unknown): unknown {
  if (typeof v === "string") return v.replace(LONE_SURROGATE, "\uFFFD");
  if (Array.isArray(v)) return v.map(scrub);
  if (v && typeof v === "object")
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrub(k) as string, scrub(x)]));
  return v;
}

/**
 * A tool call the model made to a tool it was not offered (a write tool, an unknown or remapped name),
 * refused at the boundary without any call to Bitrix24. The arguments are kept as their sha256 only:
 * they are the model's, and the log must not become a store for whatever it chose to send.
 * `discriminator` tells apart calls in one thread (the agent step and the call's position).
 */
export function boundaryRefusedEntry(
  state: ThreadMirror,
  ctx: {
    threadId: string;
    policy: Policy;
    at: string;
    discriminator: string;
    tool: string;
    args: unknown;
    offered: string[];
    reason: string;
    requestedBy?: string;
  },
): AuditEntry {
  // The object's id under the name the tool takes it: taskId for a task tool, dealId for update_deal.
  const args = ctx.args as { taskId?: unknown; dealId?: unknown } | null;
  const taskId = args?.taskId ?? args?.dealId;
  return hashable({
    threadId: ctx.threadId,
    revision: 0,
    event: "boundary_refused",
    discriminator: ctx.discriminator,
    at: ctx.at,
    // The journal's requester when the thread is registered; state's only before it is.
    requestedBy: ctx.requestedBy ?? state.requestedBy,
    risk: null,
    what: noEnvelope(
      ctx.tool,
      typeof taskId === "number" && Number.isSafeInteger(taskId)
        ? taskId
        : typeof taskId === "string" && /^[1-9][0-9]{0,15}$/.test(taskId)
          ? Number(taskId)
          : null,
    ),
    ...none,
    refusal: { code: "TOOL_NOT_OFFERED", reason: ctx.reason },
    policy: policyOf(ctx.policy),
    received: { tool: ctx.tool, argumentsSha256: argumentsSha256(ctx.args), offered: ctx.offered },
  });
}

/**
 * An answer to the model's question refused as invalid. Keyed by the question's tool call and the
 * journal's count of invalid answers to it, so a re-run of check_input on the same answer adds nothing.
 */
export function answerRefusedEntry(ctx: {
  threadId: string;
  revision: number;
  requestedBy: string;
  policy: Policy;
  at: string;
  toolCallId: string;
  count: number;
  reason: string;
  raw: unknown;
  /** For an answer found in the checkpoint, not sent with the run judging it (refused, not counted): that run's nonce. */
  notSentIn?: string;
}): AuditEntry {
  return hashable({
    threadId: ctx.threadId,
    revision: ctx.revision,
    event: "answer_refused",
    discriminator:
      ctx.notSentIn !== undefined
        ? `${ctx.toolCallId}:not-sent:${ctx.notSentIn}`
        : `${ctx.toolCallId}:${ctx.count}`,
    at: ctx.at,
    requestedBy: ctx.requestedBy,
    risk: null,
    what: noEnvelope("request_input"),
    ...none,
    refusal: {
      code: ctx.notSentIn !== undefined ? "NOT_SENT_WITH_THIS_RUN" : "INVALID_ANSWER",
      reason: ctx.reason,
    },
    policy: policyOf(ctx.policy),
    received: ctx.raw,
  });
}

/** "sha256:<hex>" of the arguments' canonical JSON (after making them JSON-safe). */
export function argumentsSha256(args: unknown): string {
  return sha256Json(jsonSafe(args ?? null) as JsonValue);
}

/**
 * One action of a change set as it ended, from its journal row: the set's run_ended record says how the
 * set ended; these say what happened to each action (its own pre-read, write, answer and fresh read).
 */
export function actionEndedEntry(row: ActionRow, execution: ExecutionEntry | undefined): AuditEntry {
  const view = viewOf({ action: row, execution });
  const { ending } = view;
  const evidence = actionEvidenceOf(view);
  const closed = {
    outcome: ending.outcome!,
    reasonCode: ending.reasonCode!,
    reason: ending.reason!,
    finishedAt: ending.finishedAt!,
  };
  return hashable({
    ...envelopeFields(row.envelope, row.envelopeHash),
    event: "action_ended",
    discriminator: `${row.set?.actionId ?? ""}:${row.envelopeHash}`,
    at: closed.finishedAt,
    ...none,
    outcome: { ...closed, flags: outcomeFlags({ ...evidence, ...closed, envelope: row.envelope }).flags },
    received: { actionId: row.set?.actionId ?? null, setHash: row.set?.setHash ?? null, ...evidence },
  });
}
