/**
 * The audit log: one append-only, hash-chained record per decision point, kept in the journal's store
 * (`<dataDir>/journal.sqlite`, or the journal's PostgreSQL schema) so that a journal transition and its
 * records commit in one transaction: no transition exists without its record. The table only grows,
 * and `audit verify` needs nothing but the table to check it. A data directory made when the log had
 * a file of its own (`audit.sqlite`) has that chain copied in once, checked, and the old file renamed
 * (adoptAuditFile).
 *
 * Chain: record hash = sha256 over the RFC 8785 JSON of `{prevHash, record}`, where `record` carries
 * its own sequence number. The sequence number is both a column (the order in the table) and part of
 * the hashed record (the order it was written in), so a verifier can tell an edited record from a
 * removed, reordered or inserted one. A hash chain without a secret proves consistency, not
 * authorship: whoever can rewrite the file can rewrite the whole tail from some record on. Keep the
 * head hash `audit verify` prints somewhere else and pass it back with `--head` to catch that.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { preparedOnce, SqliteConnection } from "./statements.js";
import { createHash } from "node:crypto";
import { canonicalJson, sha256Json, type RequesterVerification, type VerifiedBy } from "../envelope/index.js";
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
 * - answer_refused: an answer to the model's question failed the question's schema (INVALID_ANSWER); the
 *   answer as received in `received`, the question's tool call and the count so far in `discriminator`.
 * - request_refused: the API server refused a request before any handler ran (a route it does not
 *   serve, src/auth/routes.ts): method, path and caller in `received`; the thread when the path names one.
 * - inbox_signed_in: an approver signed in to the web inbox (src/inbox/server.ts): the approver's id in
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
  approver: { id: string | null; verifiedBy: IdentityCheck; decision: string | null; decidedAt: string | null } | null;
  /** A policy gate passed by override, or null when none was. */
  override: { gate: string; by: string; reason: string } | null;
  policy: { id: string; version: string };
  refusal: { code: string; reason: string } | null;
  outcome: { outcome: string; reasonCode: string; reason: string; finishedAt: string | null; flags: OutcomeFlags } | null;
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
  lastAt: string;
  lastEvent: AuditEvent;
  outcome: string | null;
  reasonCode: string | null;
  overrides: number;
}

export type ChainProblemKind = "edited" | "removed" | "reordered" | "inserted";

export interface ChainProblem {
  kind: ChainProblemKind;
  /** The sequence number of the first bad record (for "removed", the first missing one). */
  seq: number;
  threadId?: string;
  event?: string;
  detail: string;
}

export type ChainVerification =
  | { intact: true; records: number; head: { seq: number; hash: string } | null }
  | { intact: false; records: number; problem: ChainProblem };

export interface AuditLog {
  /**
   * Appends at most once per (threadId, revision, event, discriminator): a node re-run after a crash
   * gets the record already written back, with `appended: false`.
   */
  append(entry: AuditEntry): Promise<AppendResult>;
  /** Records in chain order, all or one thread's. */
  /** The records in chain order: all, or a thread's, or (with `events`) a thread's of those kinds only. */
  records(filter?: RecordFilter): Promise<AuditRecord[]>;
  threads(): Promise<AuditThreadSummary[]>;
  verify(opts?: { head?: string }): Promise<ChainVerification>;
  close(): Promise<void>;
}

/** The previous hash of the first record. */
export const GENESIS_HASH = `sha256:${"0".repeat(64)}`;

/** A stored record cannot be read back; the message says which and why. */
export class AuditLogError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuditLogError";
  }
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_records (
  seq INTEGER PRIMARY KEY,
  thread_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  event TEXT NOT NULL,
  discriminator TEXT NOT NULL,
  recorded_at TEXT NOT NULL,
  record_json TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  record_hash TEXT NOT NULL,
  UNIQUE (thread_id, revision, event, discriminator)
);
CREATE INDEX IF NOT EXISTS audit_records_thread ON audit_records (thread_id, seq);
-- Stops accidents and careless tools; a deliberate edit (dropping these) is what the chain is for.
CREATE TRIGGER IF NOT EXISTS audit_records_no_update BEFORE UPDATE ON audit_records
  BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_records_no_delete BEFORE DELETE ON audit_records
  BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;
`;

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

/** The hashed form: the record (with its own seq and recordedAt) and the hash it links to. */
export function recordHash(record: Omit<AuditRecord, "prevHash" | "hash">, prevHash: string): string {
  return sha256Json({ prevHash, record });
}

/**
 * recordHash over a record whose canonical text is already at hand: RFC 8785 orders "prevHash" before
 * "record" and writes a nested object as its own canonical text, so this is byte-for-byte the text
 * recordHash hashes, without canonicalising the record a second time (the property test in
 * test/audit-log.test.ts holds the two equal).
 */
export function recordHashOfText(recordText: string, prevHash: string): string {
  return `sha256:${createHash("sha256").update(`{"prevHash":${canonicalJson(prevHash)},"record":${recordText}}`, "utf8").digest("hex")}`;
}

/**
 * Appends one record inside the caller's transaction (which must hold the write lock: IMMEDIATE in
 * SQLite), at most once per (threadId, revision, event, discriminator).
 */
export function appendIn(sql: (text: string) => Database.Statement, entry: AuditEntry, now: Date): AppendResult {
  const existing = sql("SELECT * FROM audit_records WHERE thread_id = ? AND revision = ? AND event = ? AND discriminator = ?")
    .get(entry.threadId, entry.revision, entry.event, entry.discriminator) as AuditRow | undefined;
  if (existing) return { appended: false, record: toRecord(existing) };
  const last = sql("SELECT seq, record_hash FROM audit_records ORDER BY seq DESC LIMIT 1").get() as { seq: number; record_hash: string } | undefined;
  const seq = (last?.seq ?? 0) + 1;
  const prevHash = last?.record_hash ?? GENESIS_HASH;
  const body = { ...entry, seq, recordedAt: now.toISOString() };
  const text = canonicalJson(body);
  const hash = recordHashOfText(text, prevHash);
  sql(
    `INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(seq, entry.threadId, entry.revision, entry.event, entry.discriminator, body.recordedAt, text, prevHash, hash);
  return { appended: true, record: { ...(JSON.parse(text) as AuditEntry & { seq: number; recordedAt: string }), prevHash, hash } };
}

/** Creates the audit table on a connection (the journal's, or a file of its own). */
export function prepareAuditTable(db: Database.Database): void {
  db.exec(SCHEMA);
}

/**
 * Copies the chain of a data directory's old audit file (`audit.sqlite`, from when the log had a file
 * of its own) into the journal's connection, once: in one transaction, checked record for record
 * against the old file, which is then renamed `audit.sqlite.adopted` and no longer read. A copy that
 * differs from its source (or a journal whose chain is not the old file's) refuses to continue.
 */
export function adoptAuditFile(db: Database.Database, oldFile: string): void {
  if (!fs.existsSync(oldFile)) return;
  const old = new Database(oldFile, { readonly: true, fileMustExist: true });
  let source: AuditRow[];
  try {
    source = old.prepare("SELECT * FROM audit_records ORDER BY seq").all() as AuditRow[];
  } finally {
    old.close();
  }
  const sql = preparedOnce(db);
  db.transaction(() => {
    const present = (sql("SELECT COUNT(*) AS n FROM audit_records").get() as { n: number }).n;
    // Zero: the first open since the layout changed. As many: a copy committed before the rename.
    if (present === 0) {
      const insert = sql(`INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
      for (const r of source) insert.run(r.seq, r.thread_id, r.revision, r.event, r.discriminator, r.recorded_at, r.record_json, r.prev_hash, r.record_hash);
    }
    const copied = sql("SELECT * FROM audit_records ORDER BY seq LIMIT ?").all(source.length) as AuditRow[];
    const mismatch = source.findIndex((r, i) => copied[i]?.record_hash !== r.record_hash || copied[i]?.record_json !== r.record_json || copied[i]?.prev_hash !== r.prev_hash || copied[i]?.seq !== r.seq);
    if (mismatch >= 0 || copied.length !== source.length) {
      const at = mismatch >= 0 ? mismatch : copied.length;
      const want = source[at];
      const got = copied[at];
      throw new AuditLogError(
        `adopting the audit file ${oldFile} into the journal: expected record seq ${want?.seq ?? "(none)"} with hash ${want?.record_hash ?? "(none)"}, found ${got ? `seq ${got.seq} with hash ${got.record_hash}` : "no record"}; nothing was changed, and the journal is not used until the two agree`,
      );
    }
    const before = verifyRows(source);
    const after = verifyRows(copied);
    if (before.intact !== after.intact) {
      throw new AuditLogError(`adopting the audit file ${oldFile} into the journal: expected the copied chain ${before.intact ? "intact" : "broken like the source"}, found it ${after.intact ? "intact" : "broken"}`);
    }
  }).immediate();
  fs.renameSync(oldFile, `${oldFile}.adopted`);
  for (const side of ["-wal", "-shm"]) if (fs.existsSync(oldFile + side)) fs.rmSync(oldFile + side);
}

export class SqliteAuditLog implements AuditLog {
  readonly conn: SqliteConnection;
  private readonly owned: boolean;
  private readonly sql: (text: string) => Database.Statement;
  private readonly clock: () => Date;

  /** On a file of its own (tests, tools), or on the journal's connection, which the journal closes. */
  constructor(file: string | SqliteConnection, opts: { clock?: () => Date } = {}) {
    this.owned = typeof file === "string";
    if (typeof file === "string" && file !== ":memory:") fs.mkdirSync(path.dirname(file), { recursive: true });
    this.conn = typeof file === "string" ? new SqliteConnection(file) : file;
    prepareAuditTable(this.conn.db);
    this.sql = this.conn.sql;
    this.clock = opts.clock ?? (() => new Date());
  }

  async append(entry: AuditEntry): Promise<AppendResult> {
    // IMMEDIATE takes the write lock before reading the chain's head, so two processes cannot both
    // link to the same previous record.
    return this.conn.write(() => appendIn(this.sql, entry, this.clock()));
  }

  async records(filter: RecordFilter = {}): Promise<AuditRecord[]> {
    const rows = (
      filter.threadId === undefined
        ? this.sql("SELECT * FROM audit_records ORDER BY seq").all()
        : filter.events
          ? this.sql(`SELECT * FROM audit_records WHERE thread_id = ? AND event IN (${filter.events.map(() => "?").join(", ")}) ORDER BY seq`).all(filter.threadId, ...filter.events)
          : this.sql("SELECT * FROM audit_records WHERE thread_id = ? ORDER BY seq").all(filter.threadId)
    ) as AuditRow[];
    return rows.map(toRecord);
  }

  async threads(): Promise<AuditThreadSummary[]> {
    return summariseThreads(await this.records());
  }

  async verify(opts: { head?: string } = {}): Promise<ChainVerification> {
    const rows = this.sql("SELECT * FROM audit_records ORDER BY seq").all() as AuditRow[];
    return verifyRows(rows, opts.head);
  }

  async close(): Promise<void> {
    if (this.owned) this.conn.close();
  }
}

export function toRecord(row: AuditRow): AuditRecord {
  let body: AuditEntry & { seq: number; recordedAt: string };
  try {
    body = JSON.parse(row.record_json) as typeof body;
  } catch {
    throw new AuditLogError(`audit record seq ${row.seq} is not valid JSON; run "audit verify"`);
  }
  return { ...body, prevHash: row.prev_hash, hash: row.record_hash };
}

interface Checked {
  row: AuditRow;
  /** The sequence number the record was written with (from the hashed content), when readable. */
  writtenSeq: number | undefined;
  /** The stored hash recomputes from the stored content and previous hash. */
  contentOk: boolean;
}

function check(row: AuditRow): Checked {
  let parsed: (Omit<AuditRecord, "prevHash" | "hash"> & Record<string, unknown>) | undefined;
  try {
    parsed = JSON.parse(row.record_json) as typeof parsed;
  } catch {
    return { row, writtenSeq: undefined, contentOk: false };
  }
  const writtenSeq = typeof parsed?.seq === "number" ? parsed.seq : undefined;
  let contentOk = false;
  try {
    contentOk = recordHash(parsed!, row.prev_hash) === row.record_hash;
  } catch {
    contentOk = false;
  }
  // The indexed columns must say what the hashed content says, or queries by thread would mislead.
  if (
    contentOk &&
    (parsed!.threadId !== row.thread_id || parsed!.revision !== row.revision || parsed!.event !== row.event || parsed!.discriminator !== row.discriminator)
  ) {
    contentOk = false;
  }
  return { row, writtenSeq, contentOk };
}

/**
 * Walks the chain in table order and explains the first break. The questions, in order: does the
 * record's hash still match its content; does it sit where it was written (its hashed seq); does it
 * link to the record before it. A record whose successor links past it was inserted; a record out of
 * place whose expected predecessor appears later was reordered; a gap nobody fills was removed.
 */
export function findFirstProblem(rows: AuditRow[]): ChainProblem | undefined {
  const checked = rows.map(check);
  const about = (c: Checked) => ({ threadId: c.row.thread_id, event: c.row.event });
  const hashAt = (i: number) => (i < 0 ? GENESIS_HASH : checked[i]!.row.record_hash);

  for (let i = 0; i < checked.length; i++) {
    const c = checked[i]!;
    // Every record before this one passed, so the next is the (i + 1)-th written.
    const expectedSeq = i + 1;
    const expectedPrev = hashAt(i - 1);
    const next = checked[i + 1];

    if (!c.contentOk) {
      if (next && next.contentOk && next.row.prev_hash === expectedPrev) {
        return { kind: "inserted", seq: c.row.seq, ...about(c), detail: `record at seq ${c.row.seq} does not match its hash and the next record links past it to seq ${c.row.seq - 1}; it was not written by the log` };
      }
      return { kind: "edited", seq: c.row.seq, ...about(c), detail: `record seq ${c.row.seq} (${c.row.event}, thread ${c.row.thread_id}) no longer matches its hash: its content, previous hash or stored hash was changed` };
    }

    const writtenSeq = c.writtenSeq!;
    if (writtenSeq === expectedSeq && c.row.prev_hash === expectedPrev) {
      if (c.row.seq !== writtenSeq) {
        return { kind: "reordered", seq: c.row.seq, ...about(c), detail: `record written as seq ${writtenSeq} is stored at seq ${c.row.seq}` };
      }
      continue;
    }

    // The previous record was slipped in: this one links to the record before it.
    if (i >= 1 && c.row.prev_hash === hashAt(i - 2) && writtenSeq === expectedSeq - 1) {
      const prev = checked[i - 1]!;
      return { kind: "inserted", seq: prev.row.seq, ...about(prev), detail: `record at seq ${prev.row.seq} was not written by the log: the record after it (written as seq ${writtenSeq}) links directly to the one before it` };
    }
    if (writtenSeq === expectedSeq) {
      // In place, but the predecessor's hash changed: the predecessor was edited and re-hashed.
      const prev = checked[i - 1];
      return prev
        ? { kind: "edited", seq: prev.row.seq, ...about(prev), detail: `record seq ${prev.row.seq} was changed and re-hashed: record seq ${c.row.seq} links to ${c.row.prev_hash}, but seq ${prev.row.seq} now hashes to ${prev.row.record_hash}` }
        : { kind: "edited", seq: c.row.seq, ...about(c), detail: `the first record links to ${c.row.prev_hash} instead of the genesis hash` };
    }
    const missingLater = checked.slice(i + 1).find((o) => o.writtenSeq === expectedSeq);
    if (missingLater) {
      return { kind: "reordered", seq: c.row.seq, ...about(c), detail: `record written as seq ${writtenSeq} stands where seq ${expectedSeq} belongs; seq ${expectedSeq} appears later, at position seq ${missingLater.row.seq}` };
    }
    if (writtenSeq > expectedSeq) {
      const range = writtenSeq - 1 === expectedSeq ? `seq ${expectedSeq} is` : `seq ${expectedSeq}..${writtenSeq - 1} are`;
      return { kind: "removed", seq: expectedSeq, ...about(c), detail: `record ${range} missing: record seq ${writtenSeq} links to ${c.row.prev_hash}, which no remaining record has` };
    }
    return { kind: "inserted", seq: c.row.seq, ...about(c), detail: `record at seq ${c.row.seq} is a copy of record seq ${writtenSeq}, which the chain already passed` };
  }
  return undefined;
}

/** Per-thread summary of records in chain order; shared by every AuditLog implementation. */
export function summariseThreads(records: AuditRecord[]): AuditThreadSummary[] {
  const byThread = new Map<string, AuditThreadSummary>();
  for (const r of records) {
    const s = byThread.get(r.threadId) ?? {
      threadId: r.threadId,
      requestedBy: r.requestedBy,
      requesterVerifiedBy: null,
      records: 0,
      firstAt: r.at,
      lastAt: r.at,
      lastEvent: r.event,
      outcome: null,
      reasonCode: null,
      overrides: 0,
    };
    s.records += 1;
    s.lastAt = r.at;
    if (r.requesterVerifiedBy) s.requesterVerifiedBy = r.requesterVerifiedBy;
    s.lastEvent = r.event;
    if (r.outcome) {
      s.outcome = r.outcome.outcome;
      s.reasonCode = r.outcome.reasonCode;
    }
    // The closing record repeats the settling decision's override; count each override once.
    if (r.override && r.event === "decision_accepted") s.overrides += 1;
    byThread.set(r.threadId, s);
  }
  return [...byThread.values()];
}

/** Chain verification over rows in seq order, optionally against a head hash kept elsewhere. */
export function verifyRows(rows: AuditRow[], head?: string): ChainVerification {
  const problem = findFirstProblem(rows);
  if (problem) return { intact: false, records: rows.length, problem };
  const last = rows.at(-1);
  if (head !== undefined && !rows.some((r) => r.record_hash === head)) {
    return {
      intact: false,
      records: rows.length,
      problem: {
        kind: "removed",
        seq: (last?.seq ?? 0) + 1,
        detail: `no record has the anchored head hash ${head}; the chain was truncated or rewritten after it (current head: ${last ? `seq ${last.seq} ${last.record_hash}` : "empty"})`,
      },
    };
  }
  return { intact: true, records: rows.length, head: last ? { seq: last.seq, hash: last.record_hash } : null };
}
