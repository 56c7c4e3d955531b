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
import {
  AuditLogError,
  type AppendResult,
  type AuditEntry,
  type AuditLog,
  type AuditRecord,
  type AuditRow,
  type ChainVerification,
  type VerifyOptions,
  type RecordFilter,
  type ThreadPage,
  type ThreadPageOptions,
  FIRST_RECORDS_SQL,
} from "./audit-entry.js";
import {
  appended,
  ChainVerifier,
  nextLink,
  summariseThreads,
  summaryRowsNamingDamage,
  toRecord,
  verifyInPages,
  type SummaryRow,
} from "./audit-chain.js";

export * from "./audit-entry.js";
export * from "./audit-chain.js";

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

/**
 * Appends one record inside the caller's transaction (which must hold the write lock: IMMEDIATE in
 * SQLite), at most once per (threadId, revision, event, discriminator).
 */
export function appendIn(
  sql: (text: string) => Database.Statement,
  entry: AuditEntry,
  now: Date,
): AppendResult {
  const r = insertRecord(sql, entry, now);
  return "existing" in r ? { appended: false, record: toRecord(r.existing) } : appended(r);
}

/**
 * appendIn for a caller that does not read the record back (the journal's transitions): the same row,
 * without parsing the stored text again. Whether the record was appended (false: it was already there).
 */
export function appendOnlyIn(
  sql: (text: string) => Database.Statement,
  entry: AuditEntry,
  now: Date,
): boolean {
  return !("existing" in insertRecord(sql, entry, now));
}

function insertRecord(
  sql: (text: string) => Database.Statement,
  entry: AuditEntry,
  now: Date,
): { existing: AuditRow } | ReturnType<typeof nextLink> {
  const existing = sql(
    "SELECT * FROM audit_records WHERE thread_id = ? AND revision = ? AND event = ? AND discriminator = ?",
  ).get(entry.threadId, entry.revision, entry.event, entry.discriminator) as AuditRow | undefined;
  if (existing) return { existing };
  const last = sql("SELECT seq, record_hash FROM audit_records ORDER BY seq DESC LIMIT 1").get() as
    { seq: number; record_hash: string } | undefined;
  const link = nextLink(entry, last, now);
  sql(
    `INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(...link.values);
  return link;
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
    // Zero: the journal holds no copy yet. As many: a copy committed before the rename (a crash between).
    if (present === 0) {
      const insert = sql(
        `INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash)
         VALUES (@seq, @thread_id, @revision, @event, @discriminator, @recorded_at, @record_json, @prev_hash, @record_hash)`,
      );
      for (const r of source) insert.run(r);
    }
    const copied = sql("SELECT * FROM audit_records ORDER BY seq LIMIT ?").all(source.length) as AuditRow[];
    const mismatch = source.findIndex(
      (r, i) =>
        copied[i]?.record_hash !== r.record_hash ||
        copied[i]?.record_json !== r.record_json ||
        copied[i]?.prev_hash !== r.prev_hash ||
        copied[i]?.seq !== r.seq,
    );
    if (mismatch >= 0 || copied.length !== source.length) {
      const at = mismatch >= 0 ? mismatch : copied.length;
      const want = source[at];
      const got = copied[at];
      throw new AuditLogError(
        `adopting the audit file ${oldFile} into the journal: expected record seq ${want?.seq ?? "(none)"} with hash ${want?.record_hash ?? "(none)"}, found ${got ? `seq ${got.seq} with hash ${got.record_hash}` : "no record"}; nothing was changed, and the journal is not used until the two agree`,
      );
    }
    const before = new ChainVerifier().add(source).finish();
    const after = new ChainVerifier().add(copied).finish();
    if (before.intact !== after.intact) {
      throw new AuditLogError(
        `adopting the audit file ${oldFile} into the journal: expected the copied chain ${before.intact ? "intact" : "broken like the source"}, found it ${after.intact ? "intact" : "broken"}`,
      );
    }
  }).immediate();
  fs.renameSync(oldFile, `${oldFile}.adopted`);
  for (const side of ["-wal", "-shm"]) if (fs.existsSync(oldFile + side)) fs.rmSync(oldFile + side);
}

/** The SELECT list of a SummaryRow in SQLite: `json_extract` and `json_type` over the stored text. */
const SQLITE_SUMMARY_COLUMNS = `seq, thread_id, event,
  json_extract(record_json, '$.requestedBy') AS requested_by,
  json_extract(record_json, '$.requesterVerifiedBy') AS requester_verified_by,
  json_extract(record_json, '$.at') AS at,
  json_type(record_json, '$.outcome') = 'object' AS has_outcome,
  json_extract(record_json, '$.outcome.outcome') AS outcome,
  json_extract(record_json, '$.outcome.reasonCode') AS reason_code,
  json_type(record_json, '$.override') = 'object' AS has_override`;

/**
 * The SummaryRows of the records `from` (a FROM clause with its WHERE, ORDER BY and LIMIT) selects. A
 * record SQLite cannot read as JSON fails the statement ("malformed JSON"), and is then named by its seq.
 */
function summaryRows(
  sql: (text: string) => Database.Statement,
  from: string,
  values: unknown[],
): Promise<SummaryRow[]> {
  return summaryRowsNamingDamage(
    async () => sql(`SELECT ${SQLITE_SUMMARY_COLUMNS} ${from}`).all(...values) as SummaryRow[],
    async () => sql(`SELECT * ${from}`).all(...values) as AuditRow[],
    (e) => e instanceof Error && /malformed JSON/i.test(e.message),
  );
}

export class SqliteAuditLog implements AuditLog {
  readonly conn: SqliteConnection;
  private readonly owned: boolean;
  private readonly sql: (text: string) => Database.Statement;
  private readonly clock: () => Date;

  /** On a file of its own (tests, tools), or on the journal's connection, which the journal closes. */
  constructor(file: string | SqliteConnection, opts: { clock?: () => Date } = {}) {
    this.owned = typeof file === "string";
    if (typeof file === "string" && file !== ":memory:")
      fs.mkdirSync(path.dirname(file), { recursive: true });
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
          ? this.sql(
              `SELECT * FROM audit_records WHERE thread_id = ? AND event IN (${filter.events.map(() => "?").join(", ")}) ORDER BY seq`,
            ).all(filter.threadId, ...filter.events)
          : this.sql("SELECT * FROM audit_records WHERE thread_id = ? ORDER BY seq").all(filter.threadId)
    ) as AuditRow[];
    return rows.map(toRecord);
  }

  async threadPage({ after = 0, limit, readSize }: ThreadPageOptions): Promise<ThreadPage> {
    const firsts = this.sql(FIRST_RECORDS_SQL("audit_records", () => "?")).all(after, limit + 1) as Array<{
      seq: number;
      thread_id: string;
    }>;
    const page = firsts.slice(0, limit);
    const read = async (from: string, values: unknown[]) => summaryRows(this.sql, from, values);
    const threads = await summariseThreads(
      page.map((f) => f.thread_id),
      {
        many: (ids, n) =>
          read(
            `FROM audit_records WHERE thread_id IN (${ids.map(() => "?").join(", ")}) ORDER BY thread_id, seq LIMIT ?`,
            [...ids, n],
          ),
        one: (id, seq, n) =>
          read("FROM audit_records WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?", [id, seq, n]),
      },
      readSize,
    );
    return { threads, next: firsts.length > limit ? page.at(-1)!.seq : null };
  }

  async verify(opts: VerifyOptions = {}): Promise<ChainVerification> {
    const page = async (after: number | undefined, limit: number) => {
      // The event loop (a server's other requests) gets its turn between pages.
      await new Promise((resolve) => setImmediate(resolve));
      return (
        after === undefined
          ? this.sql("SELECT * FROM audit_records ORDER BY seq LIMIT ?").all(limit)
          : this.sql("SELECT * FROM audit_records WHERE seq > ? ORDER BY seq LIMIT ?").all(after, limit)
      ) as AuditRow[];
    };
    const before = async (seq: number) =>
      this.sql("SELECT * FROM audit_records WHERE seq < ? ORDER BY seq DESC LIMIT 1").get(seq) as
        AuditRow | undefined;
    return verifyInPages(Object.assign(page, { before }), opts);
  }

  async close(): Promise<void> {
    if (this.owned) this.conn.close();
  }
}
