/** Row shapes, mappers and seals the SQLite and PostgreSQL journals share (same columns in both). */
import type { ObjectLease } from "../action-machine.js";
import { sealHolds, sealOf } from "../journal-key.js";
import type {
  DecisionClaim,
  ExecutionEntry,
  ExecutionIntent,
  LegacyApproval,
  QuestionEntry,
  RecordedToolCall,
  ThreadTurns,
} from "./api.js";

/** Phases of an action that still needs a run to end it. */
export const OPEN_PHASES_SQL = "'registered', 'decided', 'pre_read', 'intent', 'acknowledged', 'verified'";

export interface ClaimRow {
  envelope_hash: string;
  nonce: string;
  thread_id: string;
  revision: number;
  decision_type: DecisionClaim["decisionType"];
  approver_id: string;
  decided_at: string;
}

export interface ExecutionRow {
  envelope_hash: string;
  thread_id: string;
  idempotency_key: string;
  args_json: string;
  sent_at: string;
  ack_json: string | null;
  ack_at: string | null;
  mac?: string | null;
}

export interface LeaseRow {
  object_key: string;
  owner: string;
  thread_id: string;
  acquired_at: number | string;
  expires_at: number | string;
}

/** PostgreSQL returns BIGINT as a string; both backends store milliseconds since the epoch. */
export function toLease(r: LeaseRow): ObjectLease {
  return {
    objectKey: r.object_key,
    owner: r.owner,
    threadId: r.thread_id,
    acquiredAt: Number(r.acquired_at),
    expiresAt: Number(r.expires_at),
  };
}

/** A claim's values in the order decision_claims' INSERT names its columns (the claim's fields, in order). */
export function claimValues(c: DecisionClaim): unknown[] {
  return [c.envelopeHash, c.nonce, c.threadId, c.revision, c.decisionType, c.approverId, c.decidedAt];
}

export function toClaim(r: ClaimRow): DecisionClaim {
  return {
    threadId: r.thread_id,
    envelopeHash: r.envelope_hash,
    nonce: r.nonce,
    revision: r.revision,
    decisionType: r.decision_type,
    approverId: r.approver_id,
    decidedAt: r.decided_at,
  };
}

/** What a write-ahead entry's seal covers: everything recorded before the request left (the answer has a seal of its own). */
function executionSealContent(intent: ExecutionIntent, sentAt: string): unknown {
  return {
    kind: "write-ahead",
    envelopeHash: intent.envelopeHash,
    threadId: intent.threadId,
    idempotencyKey: intent.idempotencyKey,
    args: intent.args,
    sentAt,
  };
}

/** A write-ahead entry's values in its INSERT's order: envelope, thread, key, arguments, send time and seal (MAC). */
export function executionValues(key: Buffer, intent: ExecutionIntent, sentAt: string): unknown[] {
  const { envelopeHash, threadId, idempotencyKey, args } = intent;
  const mac = sealOf(key, executionSealContent(intent, sentAt));
  return [envelopeHash, threadId, idempotencyKey, JSON.stringify(args), sentAt, mac];
}

export function toExecution(r: ExecutionRow, key: Buffer): ExecutionEntry {
  let args: unknown;
  let parsed = true;
  try {
    args = JSON.parse(r.args_json) as unknown;
  } catch {
    parsed = false;
  }
  const entry = {
    envelopeHash: r.envelope_hash,
    threadId: r.thread_id,
    idempotencyKey: r.idempotency_key,
    args,
    sentAt: r.sent_at,
  };
  const answer = answerOf(key, r);
  return {
    ...entry,
    ...answer,
    ...(r.ack_at !== null ? { acknowledgedAt: r.ack_at } : {}),
    sealValid: parsed && sealHolds(key, executionSealContent(entry, r.sent_at), r.mac ?? null),
    sealPresent: r.mac !== null && r.mac !== undefined,
  };
}

/**
 * The ack_json an answer is recorded with: the acknowledgement and its seal under the journal key,
 * bound to the entry's envelope, so an answer written onto the entry by hand (or copied from another)
 * is not taken for the target's.
 */
export function sealedEntryAnswer(key: Buffer, envelopeHash: string, acknowledgement: unknown): string {
  const text = JSON.stringify(acknowledgement);
  const record = JSON.parse(text) as Record<string, unknown>;
  return JSON.stringify({ ...record, seal: sealOf(key, entryAnswerSealContent(envelopeHash, text)) });
}

function entryAnswerSealContent(envelopeHash: string, acknowledgementText: string): unknown {
  return { kind: "write-ahead-answer", envelopeHash, acknowledgement: acknowledgementText };
}

/** The entry's recorded answer when its seal holds; otherwise why it is not taken (none recorded: neither). */
function answerOf(
  key: Buffer,
  r: ExecutionRow,
): Pick<ExecutionEntry, "acknowledgement" | "unconfirmedAnswer"> {
  if (r.ack_json === null) return {};
  let stored: unknown;
  try {
    stored = JSON.parse(r.ack_json) as unknown;
  } catch {
    return { unconfirmedAnswer: "invalid" };
  }
  if (typeof stored !== "object" || stored === null || Array.isArray(stored))
    return { unconfirmedAnswer: "invalid" };
  const { seal, ...acknowledgement } = stored as Record<string, unknown>;
  if (typeof seal !== "string" || seal === "") return { unconfirmedAnswer: "unsealed" };
  const holds = sealHolds(
    key,
    entryAnswerSealContent(r.envelope_hash, JSON.stringify(acknowledgement)),
    seal,
  );
  return holds ? { acknowledgement } : { unconfirmedAnswer: "invalid" };
}

/** Pending rows of an older version's `approvals` table without an action row; `s` prefixes the tables (a PostgreSQL schema). */
export const LEGACY_APPROVALS_SQL = (s: string) =>
  `SELECT a.envelope_hash, a.thread_id FROM ${s}approvals a LEFT JOIN ${s}actions x ON x.envelope_hash = a.envelope_hash
   WHERE a.status = 'pending' AND x.envelope_hash IS NULL ORDER BY a.created_at, a.envelope_hash`;

export interface LegacyApprovalRow {
  envelope_hash: string;
  thread_id: string;
}

export const toLegacyApproval = (r: LegacyApprovalRow): LegacyApproval => ({
  envelopeHash: r.envelope_hash,
  threadId: r.thread_id,
});

export interface QuestionRow {
  thread_id: string;
  tool_call_id: string;
  question: string;
  fields_json: string;
  asked_at: string;
  status: QuestionEntry["status"];
  closed_at: string | null;
  invalid_answers: number | null;
  last_refusal?: string | null;
}

export function toQuestion(r: QuestionRow): QuestionEntry {
  return {
    threadId: r.thread_id,
    toolCallId: r.tool_call_id,
    question: r.question,
    fields: JSON.parse(r.fields_json) as QuestionEntry["fields"],
    askedAt: r.asked_at,
    status: r.status,
    closedAt: r.closed_at,
    invalidAnswers: Number(r.invalid_answers ?? 0),
    lastRefusal: r.last_refusal ?? null,
  };
}

export interface ThreadTurnsRow {
  agent_steps: number | string | null;
  invalid_proposals: number | string | null;
  last_reply: string | null;
  last_tool_calls: string | null;
}

export function toThreadTurns(r: ThreadTurnsRow, key: Buffer, threadId: string): ThreadTurns {
  const lastReply = r.last_reply ?? null;
  const recorded = toolCallsOf(r.last_tool_calls);
  const lastReplySealValid =
    recorded === null ||
    (recorded.calls !== null &&
      sealHolds(key, replySealContent(threadId, lastReply ?? "", recorded.calls), recorded.mac));
  return {
    agentSteps: Number(r.agent_steps ?? 0),
    invalidProposals: Number(r.invalid_proposals ?? 0),
    lastReply,
    lastToolCalls: recorded === null ? null : lastReplySealValid ? recorded.calls : [],
    lastReplySealValid,
  };
}

/** What a model reply's seal covers: the thread, the reply's text as kept, and its tool calls. */
function replySealContent(threadId: string, reply: string, calls: unknown[]): Record<string, unknown> {
  return { kind: "model-reply", threadId, reply, toolCalls: calls };
}

/** The `last_tool_calls` column's value: the calls with their seal (HMAC under the journal key, bound to the thread and reply text). */
export function sealedToolCalls(
  key: Buffer,
  threadId: string,
  reply: string,
  calls: RecordedToolCall[],
): string {
  const plain = JSON.parse(JSON.stringify(calls)) as unknown[];
  return JSON.stringify({ calls: plain, mac: sealOf(key, replySealContent(threadId, reply, plain)) });
}

/** The recorded calls and their seal; null when no reply was recorded; calls null when the value is not sealed calls. */
function toolCallsOf(text: string | null): { calls: RecordedToolCall[] | null; mac: string | null } | null {
  if (text === null || text === undefined) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { calls: null, mac: null };
  }
  const { calls, mac } = (
    typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  ) as { calls?: unknown; mac?: unknown };
  if (!Array.isArray(calls) || typeof mac !== "string") return { calls: null, mac: null };
  const wellFormed = calls.every(
    (c) => typeof c === "object" && c !== null && typeof c.id === "string" && typeof c.name === "string",
  );
  return { calls: wellFormed ? (calls as RecordedToolCall[]) : null, mac };
}
