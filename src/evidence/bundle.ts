/**
 * The evidence of one run: separate, timestamped objects (what was shown, what was decided, what was
 * read, sent, answered and read again, and how it ended) plus a case record whose first page answers
 * the incident questions at a glance, overrides first. Derived from the thread's graph state and its
 * audit records; the audit records supply what state no longer holds (earlier revisions' cards,
 * decisions made on them).
 */
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type {
  AuditEvent,
  AuditRecord,
  ChainVerification,
  IdentityCheck,
  OutcomeFlags,
} from "../store/audit.js";
import { outcomeFlags, type FlagInputs } from "../envelope/outcome-flags.js";
import {
  NORMALISATION_RULES,
  type NormalisationRule,
  type RequesterVerification,
} from "../envelope/index.js";
import { operationSpec } from "../envelope/operations.js";
import type {
  AcknowledgementRecord,
  InvocationRecord,
  Outcome,
  PreReadRecord,
  ReasonCode,
  Refusal,
} from "../envelope/records.js";
import type { ActionEvidence } from "../hitl/audit-records.js";

export const CASE_RECORD_SCHEMA = "action-envelope/case-record/1";

/** Records of a decision as received: approvals, rejections, edits, refusals, and the cancels and expiries that close an approval. */
const DECISION_EVENTS = new Set<AuditEvent>([
  "decision_accepted",
  "decision_refused",
  "approval_expired",
  "approval_cancelled",
]);

export type EvidenceKind =
  | "approval_request"
  | "decision"
  | "boundary_event"
  | "pre_read"
  | "invocation"
  | "acknowledgement"
  | "post_write_read"
  | "outcome";

/** The rule table every comparison in a bundle was judged by (each field record names its rule by id). */
export function normalisationRules(): NormalisationRule[] {
  return NORMALISATION_RULES.map((r) => ({ id: r.id, text: r.text }));
}

/**
 * What the verification cannot see: Bitrix24's update methods (tasks.task.update, crm.deal.update)
 * have no conditional form (no version, no If-Match), so a change someone else makes between our pre-read and our write, to a field our
 * write then overwrites, leaves no trace in the post-write read. Changes to other fields are seen.
 */
export interface WriterWindow {
  preReadAt: string | null;
  writeSentAt: string;
  acknowledgedAt: string | null;
  /** Milliseconds between the pre-read and the write being sent, when both are known. */
  uncoveredMs: number | null;
  fieldsOverwritten: string[];
  statement: string;
}

export function writerWindow(
  preRead: PreReadRecord | null,
  invocation: InvocationRecord | null,
  ack: AcknowledgementRecord | null,
): WriterWindow | null {
  if (!invocation) return null;
  const spec = operationSpec(invocation.tool);
  const effect = spec?.effect;
  // Only an update overwrites fields: a delete sends none, and a create (a new task, or a comment under
  // a task) writes no existing object.
  const creates = effect === "create" || effect === "create_child";
  const fields = creates ? [] : Object.keys(invocation.args.fields ?? {});
  const from = preRead?.at ?? null;
  // The method the write called, from the operation table (a write tool is named as its operation).
  const method = spec?.method ?? invocation.tool;
  const ms = from !== null ? Date.parse(invocation.sentAt) - Date.parse(from) : NaN;
  const between = `between the pre-read${from ? ` at ${from}` : ""} and the write sent at ${invocation.sentAt}`;
  return {
    preReadAt: from,
    writeSentAt: invocation.sentAt,
    acknowledgedAt: ack?.at ?? null,
    uncoveredMs: Number.isFinite(ms) ? ms : null,
    fieldsOverwritten: fields,
    statement:
      effect === "create"
        ? `A create writes no existing object, so nothing anyone else changed can be overwritten. A task with the same title made by someone else ${between} ` +
          `cannot be told from this one when the answer is lost: the verification then reports INCONCLUSIVE, or more than was approved (INVARIANT_VIOLATION) if this write also landed.`
        : effect === "create_child"
          ? `A comment is added under the task; no existing field is written, so nothing anyone else changed can be overwritten. A comment with the same text posted by someone else ${between} ` +
            `cannot be told from this one when the answer is lost: the verification then reports INCONCLUSIVE, or more than was approved (INVARIANT_VIOLATION) if this write also landed.`
          : invocation.tool.startsWith("delete_")
            ? `Bitrix24 offers no conditional delete, so a change made by someone else to the deleted object between the pre-read${from ? ` at ${from}` : ""} ` +
              `and the delete sent at ${invocation.sentAt} would have been deleted with it and cannot be seen by the verification. ` +
              `Other approved actions of this system on the same object cannot land in the window: they wait for this action's object lease.`
            : `Bitrix24 offers no conditional write (${method} takes no version or If-Match), so a change made by someone else ` +
              `between the pre-read${from ? ` at ${from}` : ""} and the write sent at ${invocation.sentAt} to ${fields.join(", ")} would have been overwritten ` +
              `by this write and cannot be seen by the verification; a change to any other field in that window would be. ` +
              `Other approved actions of this system on the same object cannot land in the window: they wait for this action's object lease.`,
  };
}

export interface EvidenceObject {
  /** File stem in an exported bundle, numbered in the order things happened: "01-approval-request-r1". */
  name: string;
  kind: EvidenceKind;
  threadId: string;
  at: string;
  /** One line for people; the data is the evidence. */
  summary: string;
  data: Record<string, unknown>;
}

export interface OverrideNotice {
  gate: string;
  by: string;
  reason: string;
  verifiedBy: IdentityCheck;
  revision: number;
  envelopeHash: string | null;
  at: string;
}

export type RunStatus = "awaiting_approval" | "finished" | "interrupted_run" | "not_found";

/** The top section of the case record. Overrides come first because they answer the hardest question. */
export interface FirstPage {
  overrides: OverrideNotice[];
  threadId: string;
  status: RunStatus;
  request: string | null;
  requestedBy: string | null;
  /** How the requester was established, from the closing or approval record; null when no record says it. */
  requesterVerifiedBy: RequesterVerification | null;
  risk: { level: string; reversibility: string } | null;
  policy: { id: string; version: string } | null;
  what: {
    operation: string;
    taskId: number | null;
    params: Record<string, unknown> | null;
    envelopeHash: string | null;
    revision: number;
  } | null;
  /** The decision that settled the run (the last one accepted), with how the identity was established. */
  decidedBy: {
    id: string | null;
    decision: string | null;
    verifiedBy: IdentityCheck;
    decidedAt: string | null;
    acceptedAt: string;
  } | null;
  refusedDecisions: number;
  outcome: { outcome: string; reasonCode: string; reason: string; finishedAt: string | null } | null;
  flags: OutcomeFlags | null;
  flagReasons: Record<keyof OutcomeFlags, string> | null;
}

export interface CaseRecord {
  schema: typeof CASE_RECORD_SCHEMA;
  firstPage: FirstPage;
  /** The state of the whole audit chain when this record was made, and this thread's share of it. */
  auditChain: {
    intact: boolean;
    problem: string | null;
    recordsInLog: number;
    head: { seq: number; hash: string } | null;
    threadRecords: Array<{ seq: number; event: string; revision: number; at: string; hash: string }>;
  };
  evidence: Array<{ name: string; kind: EvidenceKind; at: string; summary: string }>;
  /** The normalisation rules the pre-read and the verification were judged by; field records name them by id. */
  normalisationRules: NormalisationRule[];
  auditRecords: AuditRecord[];
}

export interface CaseInput {
  threadId: string;
  status: RunStatus;
  state: ThreadMirror | undefined;
  records: AuditRecord[];
  chain: ChainVerification;
}

export function buildCase(input: CaseInput): { caseRecord: CaseRecord; evidence: EvidenceObject[] } {
  const evidence = buildEvidence(input);
  const chain = input.chain;
  const caseRecord: CaseRecord = {
    schema: CASE_RECORD_SCHEMA,
    firstPage: firstPage(input),
    auditChain: {
      intact: chain.intact,
      problem: chain.intact
        ? null
        : `${chain.problem.kind} at seq ${chain.problem.seq}: ${chain.problem.detail}`,
      recordsInLog: chain.records,
      head: chain.intact ? chain.head : null,
      threadRecords: input.records.map((r) => ({
        seq: r.seq,
        event: r.event,
        revision: r.revision,
        at: r.at,
        hash: r.hash,
      })),
    },
    evidence: evidence.map(({ name, kind, at, summary }) => ({ name, kind, at, summary })),
    normalisationRules: normalisationRules(),
    auditRecords: input.records,
  };
  return { caseRecord, evidence };
}

/**
 * Graph state, only for a thread the audit log knows nothing of (a run still going before its first
 * record). Once a thread has records they are what the case record reports: state is writable by any
 * API client (updateState, run input) and by anyone who can edit the checkpoints, so a waiting
 * thread's state rewritten to an outcome, a decision or a write must not show as one.
 */
function stateWithoutRecords(
  state: ThreadMirror | undefined,
  records: readonly AuditRecord[],
): ThreadMirror | undefined {
  return records.length === 0 ? state : undefined;
}

/**
 * The first page prefers the hash-chained audit records to graph state wherever a record says the
 * same thing: state is writable by any API client and by anyone who can edit the checkpoints, so a
 * checkpoint rewritten after the run (an outcome of VERIFIED on a rejected thread, another approver)
 * must not be what the case record reports. State fills in only for a thread without any record
 * (a run still going before its first record); the request's text comes from the records that carry
 * the journal's (approval_requested, the closing record), and a thread recorded before they carried
 * it shows none rather than state's.
 */
function firstPage({ threadId, status, state, records }: CaseInput): FirstPage {
  const s = stateWithoutRecords(state, records);
  const accepted = records.filter((r) => r.event === "decision_accepted");
  const closing = records.find(isClosingRecord);
  const lastRecord = records.at(-1);
  const lastDecision = settlingDecisionOf(records);
  const lastWhat = [...records].reverse().find((r) => r.what.envelopeHash !== null) ?? lastRecord;
  const overrides: OverrideNotice[] = accepted
    .filter((r) => r.override)
    .map((r) => ({
      ...r.override!,
      verifiedBy: r.approver?.verifiedBy ?? "unverified",
      revision: r.revision,
      envelopeHash: r.what.envelopeHash,
      at: r.at,
    }));
  // State holds the last accepted decision even if its audit record is missing; it must still show.
  if (s?.decision?.override && !overrides.some((o) => o.envelopeHash === s.decision!.envelopeHash)) {
    const d = s.decision;
    overrides.push({
      ...d.override!,
      verifiedBy: d.verifiedBy,
      revision: d.revision,
      envelopeHash: d.envelopeHash,
      at: d.acceptedAt,
    });
  }

  const decidedBy: FirstPage["decidedBy"] = lastDecision?.approver
    ? {
        id: lastDecision.approver.id,
        decision: lastDecision.approver.decision,
        verifiedBy: lastDecision.approver.verifiedBy,
        decidedAt: lastDecision.approver.decidedAt,
        acceptedAt: lastDecision.at,
      }
    : s?.decision
      ? {
          id: s.decision.approverId,
          decision: s.decision.type,
          verifiedBy: s.decision.verifiedBy,
          decidedAt: s.decision.decidedAt,
          acceptedAt: s.decision.acceptedAt,
        }
      : null;

  const e = s?.envelope;
  const what: FirstPage["what"] = lastWhat
    ? {
        operation: lastWhat.what.operation,
        taskId: lastWhat.what.taskId,
        params: lastWhat.what.params,
        envelopeHash: lastWhat.what.envelopeHash,
        revision: lastWhat.revision,
      }
    : e
      ? {
          operation: e.operation,
          taskId: e.object.id,
          params: e.params,
          envelopeHash: s?.envelopeHash ?? null,
          revision: e.revision,
        }
      : s?.proposal
        ? {
            operation: s.proposal.operation ?? "update_task",
            taskId: s.proposal.taskId,
            params: s.proposal.fields,
            envelopeHash: null,
            revision: 0,
          }
        : null;

  // The outcome is the closing record's; state's only while no run has closed the thread.
  const outcome = closing?.outcome
    ? {
        outcome: closing.outcome.outcome,
        reasonCode: closing.outcome.reasonCode,
        reason: closing.outcome.reason,
        finishedAt: closing.outcome.finishedAt,
      }
    : s?.outcome
      ? {
          outcome: s.outcome,
          reasonCode: s.reasonCode ?? "",
          reason: s.reason ?? "",
          finishedAt: s.finishedAt,
        }
      : null;
  const explained = explainedOutcome(closing, records, s);
  // The journal's text of the request, as the closing or an approval record carries it.
  const recordedRequest = closing?.request ?? records.find((r) => r.request !== undefined)?.request ?? null;

  return {
    overrides,
    threadId,
    status,
    request: recordedRequest ?? (records.length === 0 ? (s?.request ?? null) : null),
    requestedBy: lastRecord?.requestedBy ?? s?.requestedBy ?? null,
    requesterVerifiedBy:
      closing?.requesterVerifiedBy ??
      [...records].reverse().find((r) => r.requesterVerifiedBy !== undefined)?.requesterVerifiedBy ??
      null,
    risk: lastWhat?.risk ?? (e ? { ...e.risk } : null),
    policy: lastWhat ? lastWhat.policy : e ? { ...e.policy } : null,
    what,
    decidedBy,
    // Every refused decision has its record (check_decision appends it before state hears of it).
    refusedDecisions:
      records.length > 0
        ? records.filter((r) => r.event === "decision_refused").length
        : (s?.refusals.length ?? 0),
    outcome,
    flags: outcome ? (closing?.outcome?.flags ?? explained?.flags ?? null) : null,
    flagReasons: outcome ? (explained?.because ?? null) : null,
  };
}

/**
 * Why the outcome's flags hold: from the closing record's own evidence when it carries it (a single
 * action), else from the evidence of the last action of a change set that ran (its state, which the
 * closing flags were computed from, mirrored that action), kept only when it gives the very flags the
 * closing record holds; from state alone while the thread has no record.
 */
function explainedOutcome(
  closing: AuditRecord | undefined,
  records: readonly AuditRecord[],
  s: ThreadMirror | undefined,
): ReturnType<typeof outcomeFlags> | null {
  const o = closing?.outcome;
  if (!o) return s?.outcome ? outcomeFlags(s) : null;
  const from = evidenceRecordOf(closing, records);
  if (!from) return null;
  const ev = from.received as Partial<ActionEvidence>;
  const envelope = from.what.envelope as FlagInputs["envelope"] | null | undefined;
  const explained = outcomeFlags({
    preRead: ev.preRead ?? null,
    invocation: ev.invocation ?? null,
    acknowledgement: ev.acknowledgement ?? null,
    verification: ev.verification ?? null,
    outcome: o.outcome as Outcome,
    reasonCode: o.reasonCode as ReasonCode,
    envelope: envelope ?? null,
  });
  const same = (Object.keys(explained.flags) as Array<keyof OutcomeFlags>).every(
    (k) => explained.flags[k] === o.flags[k],
  );
  return from === closing || same ? explained : null;
}

/** A run's closing record (src/hitl/audit-records.ts runEndedEntry): execution_outcome or run_ended. */
export const isClosingRecord = (r: AuditRecord): boolean =>
  r.event === "execution_outcome" || r.event === "run_ended";

/** The decision that settled the approval, as recorded: the last accepted one, an expiry or a cancel. */
export function settlingDecisionOf(records: readonly AuditRecord[]): AuditRecord | undefined {
  return records
    .filter(
      (r) =>
        (r.event === "decision_accepted" ||
          r.event === "approval_expired" ||
          r.event === "approval_cancelled") &&
        r.approver,
    )
    .at(-1);
}

/** Every refused decision and refused answer, in the order recorded. */
export function refusalsRecorded(records: readonly AuditRecord[]): Refusal[] {
  return records
    .filter((r) => (r.event === "decision_refused" || r.event === "answer_refused") && r.refusal)
    .map((r) => ({
      code: r.refusal!.code,
      reason: r.refusal!.reason,
      at: r.at,
      envelopeHash: r.what.envelopeHash,
      raw: r.received ?? null,
    }));
}

/**
 * The record holding the evidence of how a closed run's action ended: the closing record when it
 * carries it (a single action), else a change set's last action_ended record that does; none before
 * the run closed.
 */
export function evidenceRecordOf(
  closing: AuditRecord | undefined,
  records: readonly AuditRecord[],
): AuditRecord | undefined {
  if (!closing) return undefined;
  const carries = (r: AuditRecord) => {
    const ev = r.received as Partial<ActionEvidence> | undefined;
    return (
      ev !== undefined &&
      ev !== null &&
      (ev.preRead !== undefined || ev.invocation !== undefined || ev.verification !== undefined)
    );
  };
  return carries(closing) ? closing : records.filter((r) => r.event === "action_ended" && carries(r)).at(-1);
}

export function buildEvidence({ threadId, state, records }: CaseInput): EvidenceObject[] {
  const s = stateWithoutRecords(state, records);
  const out: Array<Omit<EvidenceObject, "name"> & { stem: string }> = [];
  const add = (
    kind: EvidenceKind,
    stem: string,
    at: string,
    summary: string,
    data: Record<string, unknown>,
  ) => out.push({ kind, stem, threadId, at, summary, data });

  const requested = records.filter((r) => r.event === "approval_requested");
  const decided = records.filter((r) => DECISION_EVENTS.has(r.event));
  // Both kinds interleave in the order they happened, which is the chain's order.
  for (const r of records) {
    if (r.event === "approval_requested" && r.shown) {
      add(
        "approval_request",
        `approval-request-r${r.revision}`,
        r.at,
        `revision ${r.revision} shown for approval, ${r.what.envelopeHash}, expires ${r.shown.expiresAt}`,
        {
          revision: r.revision,
          envelopeHash: r.what.envelopeHash,
          card: r.shown.card,
          envelope: r.what.envelope,
          expiresAt: r.shown.expiresAt,
          auditSeq: r.seq,
        },
      );
    }
    if (r.event === "boundary_refused") {
      const b = (r.received ?? {}) as { tool?: unknown; argumentsSha256?: unknown };
      add(
        "boundary_event",
        `boundary-refused-${String(b.tool ?? "tool")}`,
        r.at,
        `REFUSED at the tool boundary: ${r.refusal?.reason ?? "a tool the model was not offered"}`,
        {
          event: r.event,
          tool: b.tool ?? null,
          argumentsSha256: b.argumentsSha256 ?? null,
          refusal: r.refusal,
          received: r.received ?? null,
          auditSeq: r.seq,
        },
      );
    }
    if (DECISION_EVENTS.has(r.event)) {
      const accepted = r.event !== "decision_refused";
      const who = `${r.approver?.id ?? "(no approver id)"} (${r.approver?.verifiedBy ?? "unverified"})`;
      add(
        "decision",
        `decision-r${r.revision}-${accepted ? `accepted-${r.approver?.decision}` : `refused-${r.refusal?.code}`}`,
        r.at,
        accepted
          ? `${decisionLabel(r.approver?.decision ?? undefined, r.message)} accepted from ${who}${r.override ? `, OVERRIDING ${r.override.gate}: ${r.override.reason}` : ""}${namesResolved(r.resolvedNames)}`
          : `${r.approver?.decision ?? "decision"} from ${who} refused ${r.refusal?.code}: ${r.refusal?.reason}`,
        {
          verdict: accepted ? "accepted" : "refused",
          revision: r.revision,
          envelopeHash: r.what.envelopeHash,
          decision: r.approver?.decision ?? null,
          approverId: r.approver?.id ?? null,
          verifiedBy: r.approver?.verifiedBy ?? "unverified",
          decidedAt: r.approver?.decidedAt ?? null,
          override: r.override,
          refusal: r.refusal,
          received: r.received ?? null,
          // An edit that named people: what was typed for each user field and the id it resolved to (user.get).
          ...(r.resolvedNames?.length ? { resolvedNames: r.resolvedNames } : {}),
          auditSeq: r.seq,
        },
      );
    }
  }
  // A run whose audit records are missing still shows what its state holds.
  if (requested.length === 0 && s?.envelope && s.envelopeHash && s.card) {
    add(
      "approval_request",
      `approval-request-r${s.envelope.revision}`,
      s.envelope.createdAt,
      `revision ${s.envelope.revision} shown for approval (from thread state)`,
      {
        revision: s.envelope.revision,
        envelopeHash: s.envelopeHash,
        card: s.card,
        envelope: s.envelope,
        expiresAt: s.envelope.expiresAt,
      },
    );
  }
  if (decided.length === 0 && s) {
    for (const r of s.refusals) {
      add(
        "decision",
        `decision-refused-${r.code}`,
        r.at,
        `refused ${r.code}: ${r.reason} (from thread state)`,
        {
          verdict: "refused",
          envelopeHash: r.envelopeHash,
          refusal: { code: r.code, reason: r.reason },
          received: r.raw,
        },
      );
    }
    if (s.decision) {
      const d = s.decision;
      add(
        "decision",
        `decision-accepted-${d.type}`,
        d.acceptedAt,
        `${d.type} accepted from ${d.approverId} (${d.verifiedBy}) (from thread state)`,
        {
          verdict: "accepted",
          revision: d.revision,
          envelopeHash: d.envelopeHash,
          decision: d.type,
          approverId: d.approverId,
          verifiedBy: d.verifiedBy,
          decidedAt: d.decidedAt,
          override: d.override ?? null,
          received: d.raw,
        },
      );
    }
  }

  // A change set: each action's pre-read, write, answer and fresh read, from its action_ended record
  // (hash-chained); the thread's state mirrors only the action the set ended at.
  const actions = records.filter((r) => r.event === "action_ended");
  for (const r of actions) {
    const e = (r.received ?? {}) as Partial<ActionEvidence> & { actionId?: string; setHash?: string };
    const id = e.actionId ?? "action";
    const head = `${id} ${r.what.operation} on task ${r.what.taskId}`;
    if (e.preRead)
      add("pre_read", `${id}-pre-read`, e.preRead.at, `${head}: ${e.preRead.verdict}: ${e.preRead.reason}`, {
        actionId: id,
        envelopeHash: r.what.envelopeHash,
        ...e.preRead,
        normalisationRules: normalisationRules(),
      });
    if (e.invocation)
      add(
        "invocation",
        `${id}-invocation`,
        e.invocation.sentAt,
        `${head}: ${e.invocation.tool} ${JSON.stringify(e.invocation.args)}, idempotency key ${e.invocation.idempotencyKey}`,
        { actionId: id, ...e.invocation },
      );
    if (e.acknowledgement)
      add(
        "acknowledgement",
        `${id}-acknowledgement`,
        e.acknowledgement.at,
        `${head}: ${e.acknowledgement.status}${e.acknowledgement.reason ? `: ${e.acknowledgement.reason}` : ""}`,
        { actionId: id, ...e.acknowledgement },
      );
    if (e.verification)
      add(
        "post_write_read",
        `${id}-post-write-read`,
        e.verification.at,
        `${head}: ${e.verification.verdict}: ${e.verification.reason}`,
        {
          actionId: id,
          envelopeHash: r.what.envelopeHash,
          ...e.verification,
          normalisationRules: normalisationRules(),
        },
      );
    if (r.outcome)
      add(
        "outcome",
        `${id}-outcome`,
        r.at,
        `${head}: ${r.outcome.outcome} (${r.outcome.reasonCode}): ${r.outcome.reason}`,
        {
          actionId: id,
          envelopeHash: r.what.envelopeHash,
          ...r.outcome,
          ...r.outcome.flags,
          auditSeq: r.seq,
        },
      );
  }
  // A single action: its evidence from the hash-chained record that ended it (the journal's copy, with
  // the target's raw answers); a run recorded before that record carried it, from thread state.
  const ending = records.find((r) => isClosingRecord(r) && r.received);
  const ev: Partial<ActionEvidence> | undefined =
    (ending?.received as Partial<ActionEvidence> | undefined) ?? s;
  if (ev?.preRead && actions.length === 0) {
    const p = ev.preRead;
    add("pre_read", "pre-read", p.at, `${p.verdict}: ${p.reason}`, {
      verdict: p.verdict,
      reason: p.reason,
      identity: p.identity ?? null,
      canEdit: p.canEdit,
      fields: p.fields,
      moved: p.moved ?? null,
      lease: p.lease ?? null,
      normalisationRules: normalisationRules(),
      raw: p.raw,
    });
  }
  if (ev?.invocation && actions.length === 0) {
    const i = ev.invocation;
    add(
      "invocation",
      "invocation",
      i.sentAt,
      `${i.tool} ${JSON.stringify(i.args)}, idempotency key ${i.idempotencyKey}`,
      { ...i },
    );
  }
  if (ev?.acknowledgement && actions.length === 0) {
    const a = ev.acknowledgement;
    add(
      "acknowledgement",
      "acknowledgement",
      a.at,
      `${a.status}${a.error ? `: ${a.error.code ?? a.error.kind} ${a.error.description}` : ""}${a.reason ? `: ${a.reason}` : ""}`,
      { ...a },
    );
  }
  if (ev?.verification && actions.length === 0) {
    const v = ev.verification;
    const window = writerWindow(ev.preRead ?? null, ev.invocation ?? null, ev.acknowledgement ?? null);
    add(
      "post_write_read",
      "post-write-read",
      v.at,
      `${v.verdict}: ${v.reason}${window ? `; not covered: ${window.statement}` : ""}`,
      {
        verdict: v.verdict,
        reason: v.reason,
        identity: v.identity ?? null,
        fields: v.fields,
        moved: v.moved ?? null,
        concurrentWriterWindow: window,
        normalisationRules: normalisationRules(),
        raw: v.raw,
      },
    );
  }
  const closing = records.find(isClosingRecord);
  // The closing record's outcome when there is one (state's could have been rewritten after the run).
  if (closing?.outcome) {
    const o = closing.outcome;
    const explained = explainedOutcome(closing, records, s);
    add("outcome", "outcome", o.finishedAt ?? closing.at, `${o.outcome} (${o.reasonCode}): ${o.reason}`, {
      ...o,
      ...o.flags,
      ...(explained ? { because: explained.because } : {}),
      concurrentWriterWindow: writerWindow(
        ev?.preRead ?? null,
        ev?.invocation ?? null,
        ev?.acknowledgement ?? null,
      ),
    });
  } else if (s?.outcome) {
    const explained = outcomeFlags(s);
    add(
      "outcome",
      "outcome",
      s.finishedAt ?? closing?.at ?? "",
      `${s.outcome} (${s.reasonCode}): ${s.reason}`,
      {
        outcome: s.outcome,
        reasonCode: s.reasonCode,
        reason: s.reason,
        finishedAt: s.finishedAt,
        ...explained.flags,
        because: explained.because,
        concurrentWriterWindow: writerWindow(
          ev?.preRead ?? null,
          ev?.invocation ?? null,
          ev?.acknowledgement ?? null,
        ),
      },
    );
  }

  const width = String(out.length).length < 2 ? 2 : String(out.length).length;
  const seen = new Map<string, number>();
  return out.map(({ stem, ...rest }, i) => {
    // The same stem twice (two envelopes for one revision after a crash) gets a suffix.
    const n = (seen.get(stem) ?? 0) + 1;
    seen.set(stem, n);
    const safe = `${stem}${n > 1 ? `-${n}` : ""}`.replace(/[^A-Za-z0-9._-]/g, "_");
    return { name: `${String(i + 1).padStart(width, "0")}-${safe}`, ...rest };
  });
}

/** "; RESPONSIBLE_ID \"Bob Smith\" → user 7" for an edit that named people, else "". */
function namesResolved(resolved: unknown[] | undefined): string {
  const done = (resolved ?? []).filter(
    (n): n is { field: string; typed: string; id: string } =>
      (n as { status?: unknown } | null)?.status === "resolved",
  );
  return done.length
    ? `; ${done.map((n) => `${n.field} ${JSON.stringify(n.typed)} → user ${n.id}`).join(", ")}`
    : "";
}

/**
 * How an accepted decision is named in the evidence: a change set decided action by action without an
 * edit (approve a1, reject a2) is a per-action decision, not an edit, though the journal routes it like one.
 */
function decisionLabel(type: string | undefined, message: unknown): string {
  const m = typeof message === "string" ? /^decided action by action: ([^;]*)/.exec(message) : null;
  if (type === "edit" && m && !/\bedit\b/.test(m[1]!)) return `per-action decision (${m[1]})`;
  return type ?? "decision";
}
