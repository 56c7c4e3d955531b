/**
 * What an audit record holds, how records are filtered and summarised, and the AuditLog interface both
 * backends (SQLite in audit.ts, PostgreSQL in pg-audit.ts) implement.
 */
import type { RequesterVerification, VerifiedBy } from "../envelope/index.js";
import type { OutcomeFlags } from "../envelope/outcome-flags.js";

export const AUDIT_EVENTS = [
  "proposal_denied",
  "approval_requested",
  "decision_accepted",
  "decision_refused",
  "execution_outcome",
  "run_ended",
  "approval_expired",
  "approval_cancelled",
  "transition_refused",
  "tamper_detected",
  "boundary_refused",
  "action_ended",
  "answer_refused",
  "request_refused",
  "inbox_signed_in",
  "inbox_sign_in_refused",
] as const;
/**
 * - proposal_denied: policy or scope refused the proposal; nothing was shown for approval.
 * - approval_requested: an envelope was frozen and is the one the approver is asked about.
 * - decision_accepted / decision_refused: a resume value passed validation, or was refused with a code.
 * - execution_outcome: the run ended after a write was sent; run_ended: it ended without one.
 * - approval_expired / approval_cancelled: a waiting approval lapsed or was withdrawn; the expire or
 *   cancel decision that closed it consumed its nonce like any other decision.
 * - transition_refused: a node was driven (goto, new input, replay, fork) to a step the journal's
 *   state machine does not allow from where the action is; nothing was done.
 * - tamper_detected: graph state disagreed with the journal, or a journal row failed its MAC; the
 *   journal's record was used (or, for a bad MAC, the action was closed).
 * - boundary_refused: the model called a tool it was not offered (a write tool, an unknown or remapped
 *   name); refused without any call to Bitrix24 (tool name and the sha256 of its arguments in `received`).
 * - action_ended: one action of a change set ended (one per action, when the set finished): its outcome,
 *   and in `received` its pre-read, invocation, acknowledgement and verification as the journal holds them.
 * - answer_refused: an answer to the model's question failed the question's schema (INVALID_ANSWER), or
 *   was found in the checkpoint, not sent with the run judging it (NOT_SENT_WITH_THIS_RUN, not counted);
 *   the answer as received in `received`, the question's tool call and the count so far (or that run's
 *   nonce) in `discriminator`.
 * - request_refused: the API server refused a request before any handler ran (a route it does not
 *   serve, src/auth/routes.ts): method, path and caller in `received`; the thread when the path names one.
 *   Its requestedBy is empty: it is no record of that thread's run, and no view takes a requester from it.
 * - inbox_signed_in: an approver signed in to the web inbox (src/inbox/sign-in-routes.ts): the approver's id in
 *   `approver`, the method ("password" or "one-time link") and remote address in `received`; no thread.
 * - inbox_sign_in_refused: a wrong password or unknown approver id at the inbox's sign-in form, with the
 *   id as typed and the address in `received`; only failures the rate limit still counts are written (a
 *   sign-in refused with 429 is not), so at most 20 per address in 15 minutes.
 */
export type AuditEvent = (typeof AUDIT_EVENTS)[number];

/** How the approver's identity was established; "unverified" for a decision refused before that was known. */
export type IdentityCheck = VerifiedBy | "unverified";

export type { OutcomeFlags };

/** What a caller appends. The six fields the approval path demands are requestedBy, risk, what, approver, at and override. */
export interface AuditEntry {
  /** Correlation id: the LangGraph thread. */
  threadId: string;
  /** Envelope revision the event is about; 0 when the run ended before any envelope existed. */
  revision: number;
  event: AuditEvent;
  /** Tells apart events of one kind for one revision ("" when there can be only one). */
  discriminator: string;
  /** When the decision point happened. */
  at: string;
  requestedBy: string;
  risk: { level: string; reversibility: string } | null;
  /** What was (to be) done; envelope and hash are null when none was built. */
  what: {
    operation: string;
    taskId: number | null;
    params: Record<string, unknown> | null;
    envelopeHash: string | null;
    envelope: unknown;
  };
  /** Who decided, and whether that identity was verified. Null for events that are not decisions. */
  approver: {
    id: string | null;
    verifiedBy: IdentityCheck;
    decision: string | null;
    decidedAt: string | null;
  } | null;
  /** A policy gate passed by override, or null when none was. */
  override: { gate: string; by: string; reason: string } | null;
  policy: { id: string; version: string };
  refusal: { code: string; reason: string } | null;
  outcome: {
    outcome: string;
    reasonCode: string;
    reason: string;
    finishedAt: string | null;
    flags: OutcomeFlags;
  } | null;
  /** approval_requested: the card exactly as shown and when the approval lapses. */
  shown?: { card: string; expiresAt: string };
  /** decision_accepted / decision_refused: the resume value exactly as received. */
  received?: unknown;
  /** decision_accepted / decision_refused of an edit naming people: what was typed for each user field, what was searched, what it resolved to. */
  resolvedNames?: unknown[];
  /**
   * approval_requested and the closing record: the request's text as the journal recorded it when the
   * thread started, so a case record never takes it from graph state (which new run input rewrites).
   */
  request?: string;
  /** approval_requested and the closing record: how the requester was established, as the journal's thread record says. */
  requesterVerifiedBy?: RequesterVerification;
  /** decision_accepted: the decision's message as recorded (a rejection's feedback, a partial approval's note). */
  message?: string;
}

/** Which records to read: a thread's (all when absent), and of those only the given events. */
export interface RecordFilter {
  threadId?: string;
  /** Only with threadId: the thread's rows are found by its index, and only these are parsed. */
  events?: readonly AuditEvent[];
}

export interface AuditRecord extends AuditEntry {
  seq: number;
  recordedAt: string;
  prevHash: string;
  hash: string;
}

export type AppendResult = { appended: true; record: AuditRecord } | { appended: false; record: AuditRecord };

export interface AuditThreadSummary {
  threadId: string;
  requestedBy: string;
  /** From the thread's approval or closing record; null when no record says it. */
  requesterVerifiedBy: RequesterVerification | null;
  records: number;
  firstAt: string;
  /** The thread's last record of its run; a refused request is last only of a thread with nothing else. */
  lastAt: string;
  lastEvent: AuditEvent;
  outcome: string | null;
  reasonCode: string | null;
  overrides: number;
  /** Requests the API server refused under the thread's path (request_refused): counted, not the run's. */
  refusedRequests: number;
}

export interface ChainProblem {
  /**
   * How the chain is broken; "contradicted": the chain links, but a record of the thread viewed says
   * otherwise than the journal's sealed rows (src/evidence/journal-check.ts), found by a thread's view only.
   */
  kind: "edited" | "removed" | "reordered" | "inserted" | "contradicted";
  /** The sequence number of the first bad record (for "removed", the first missing one). */
  seq: number;
  threadId?: string;
  event?: string;
  detail: string;
}

/**
 * A chain's check: `records` is how many were checked; `from`, present when the check started after
 * the chain's first record, is the first seq checked (the record before it taken as it stands).
 */
export type ChainVerification =
  | { intact: true; records: number; from?: number; head: { seq: number; hash: string } | null }
  | { intact: false; records: number; from?: number; problem: ChainProblem };

/**
 * How `verify` reads: `head`, a hash kept elsewhere the chain must still hold; `pageSize` records per
 * statement (VERIFY_PAGE_SIZE unless given); `from`, the first seq to check (the whole chain unless
 * given), for a view whose records start there.
 */
export interface VerifyOptions {
  head?: string;
  pageSize?: number;
  from?: number;
}

export interface AuditLog {
  /**
   * Appends at most once per (threadId, revision, event, discriminator): a node re-run after a crash
   * gets the record already written back, with `appended: false`.
   */
  append(entry: AuditEntry): Promise<AppendResult>;
  /** The records in chain order: all, or a thread's, or (with `events`) a thread's of those kinds only. */
  records(filter?: RecordFilter): Promise<AuditRecord[]>;
  /**
   * Threads in the order of their first record, a page at a time: those whose first record comes after
   * seq `after`, at most `limit`. `next` is the first seq of the page's last thread when more follow.
   * Reads the records after the cursor until the page is full, then the page's threads' records only,
   * `readSize` at a time (SUMMARY_READ_SIZE unless given).
   */
  threadPage(opts: ThreadPageOptions): Promise<ThreadPage>;
  /**
   * Checks the whole chain (against `head`, a hash kept elsewhere, when given), or with `from` the
   * records from that seq on, reading `pageSize` records at a time (VERIFY_PAGE_SIZE unless given).
   */
  verify(opts?: VerifyOptions): Promise<ChainVerification>;
  close(): Promise<void>;
}

/** Which page threadPage reads: the threads whose first record comes after seq `after`, at most `limit`. */
export interface ThreadPageOptions {
  after?: number;
  limit: number;
  /** Records read per statement to sum the page's threads up (SUMMARY_READ_SIZE unless given). */
  readSize?: number;
}

export interface ThreadPage {
  threads: AuditThreadSummary[];
  next: number | null;
}

/**
 * The first records of threads, in seq order after a cursor: walks the primary key from the cursor and
 * keeps a record only when its thread has none before it (the (thread_id, seq) index answers that).
 */
export const FIRST_RECORDS_SQL = (table: string, p: (n: number) => string) =>
  `SELECT seq, thread_id FROM ${table} a WHERE seq > ${p(1)}
     AND NOT EXISTS (SELECT 1 FROM ${table} b WHERE b.thread_id = a.thread_id AND b.seq < a.seq)
   ORDER BY seq LIMIT ${p(2)}`;

/** The previous hash of the first record. */
export const GENESIS_HASH = `sha256:${"0".repeat(64)}`;

/** A stored record cannot be read back; the message says which and why. */
export class AuditLogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuditLogError";
  }
}

/** A stored audit row; the same columns in the SQLite and PostgreSQL logs. */
export interface AuditRow {
  seq: number;
  thread_id: string;
  revision: number;
  event: string;
  discriminator: string;
  recorded_at: string;
  record_json: string;
  prev_hash: string;
  record_hash: string;
}
