/**
 * The audit log in PostgreSQL: the same records, hashes and verification as the SQLite log, for
 * several processes appending to one chain. Appends are serialised by a transaction-level advisory
 * lock taken before the head is read, so two writers can never link to the same previous record;
 * the lock is released by COMMIT or ROLLBACK, including when the writer's connection dies.
 */
import type pg from "pg";
import type { DatabaseConfig } from "../config/env.js";
import {
  appended,
  nextLink,
  summariseThreads,
  summaryRowsNamingDamage,
  toRecord,
  type AuditRow,
  verifyInPages,
  type AppendResult,
  type AuditEntry,
  type AuditLog,
  type AuditRecord,
  type ChainVerification,
  type VerifyOptions,
  type RecordFilter,
  type SummaryRow,
  type ThreadPage,
  type ThreadPageOptions,
  FIRST_RECORDS_SQL,
} from "./audit.js";
import { inTransaction, lockKey, openPools, query, quoteIdent, type PoolLease } from "./postgres.js";
import { prepareDatabase } from "./pg-migrations.js";

/** The record fields a thread's summary takes (SummaryRow), as json_to_record reads them from the text. */
const PG_SUMMARY_FIELDS = `json_to_record(record_json::json) AS summary("requestedBy" text, "requesterVerifiedBy" text, at text, outcome json, override json)`;
const PG_SUMMARY_COLUMNS = `seq, thread_id, event, summary."requestedBy" AS requested_by,
  summary."requesterVerifiedBy" AS requester_verified_by, summary.at,
  coalesce(json_typeof(summary.outcome) = 'object', false) AS has_outcome,
  summary.outcome->>'outcome' AS outcome, summary.outcome->>'reasonCode' AS reason_code,
  coalesce(json_typeof(summary.override) = 'object', false) AS has_override`;

/** BIGINT arrives as a string from the driver; the chain checks compare numbers. */
const normalise = <R extends { seq: number }>(r: R): R => ({ ...r, seq: Number(r.seq) });

/**
 * Appends one record inside the caller's transaction: the chain-head lock is taken first (released by
 * its COMMIT or ROLLBACK), at most once per (threadId, revision, event, discriminator).
 */
export async function appendWithin(
  c: pg.PoolClient,
  db: DatabaseConfig,
  entry: AuditEntry,
  now: Date,
): Promise<AppendResult> {
  const s = quoteIdent(db.schema);
  const key = lockKey(db, "audit-append");
  await c.query(`SELECT pg_advisory_xact_lock(${key.sql})`, key.values);
  // After the lock, in a statement of its own (its snapshot then sees every append committed before
  // the lock was granted): this entry's record if it was appended before, and the chain's head.
  const found = await c.query<AuditRow & { existing: boolean }>(
    `(SELECT *, true AS existing FROM ${s}.audit_records WHERE thread_id = $1 AND revision = $2 AND event = $3 AND discriminator = $4)
     UNION ALL (SELECT *, false AS existing FROM ${s}.audit_records ORDER BY seq DESC LIMIT 1)`,
    [entry.threadId, entry.revision, entry.event, entry.discriminator],
  );
  const existing = found.rows.find((r) => r.existing);
  if (existing) {
    const { existing: _existing, ...row } = existing;
    return { appended: false, record: toRecord(normalise(row)) };
  }
  const link = nextLink(entry, found.rows[0], now);
  await c.query(
    `INSERT INTO ${s}.audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    link.values,
  );
  return appended(link);
}

export class PostgresAuditLog implements AuditLog {
  private readonly s: string;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly db: DatabaseConfig,
    private readonly clock: () => Date,
    /** Set when the log holds its own share of the process's connections; unset on the journal's pool, which the journal gives back. */
    private readonly lease?: PoolLease,
  ) {
    this.s = quoteIdent(db.schema);
  }

  /** On its own share of the process's connections (openPools), or (`pool`) on the journal's, so the journal's transitions append to the same chain. */
  static async open(
    db: DatabaseConfig,
    opts: { clock?: () => Date } = {},
    pool?: pg.Pool,
  ): Promise<PostgresAuditLog> {
    if (pool) return new PostgresAuditLog(pool, db, opts.clock ?? (() => new Date()));
    const own = openPools(db);
    await prepareDatabase(own, db).catch(async (e: unknown) => {
      await own.close();
      throw e;
    });
    return new PostgresAuditLog(own.pool, db, opts.clock ?? (() => new Date()), own);
  }

  async append(entry: AuditEntry): Promise<AppendResult> {
    return inTransaction(
      this.pool,
      this.db,
      `appending the audit record ${entry.event} for thread ${entry.threadId}`,
      (c) => appendWithin(c, this.db, entry, this.clock()),
    );
  }

  async records({ threadId, events }: RecordFilter = {}): Promise<AuditRecord[]> {
    const where =
      threadId === undefined
        ? ""
        : events
          ? "WHERE thread_id = $1 AND event = ANY($2) "
          : "WHERE thread_id = $1 ";
    const values = threadId === undefined ? [] : events ? [threadId, [...events]] : [threadId];
    return (await this.rows("reading audit records", `${where}ORDER BY seq`, values)).map(toRecord);
  }

  /** The records `where` (a WHERE clause with its ORDER BY and LIMIT, or none) selects, whole. */
  private async rows(doing: string, where: string, values: unknown[]): Promise<AuditRow[]> {
    const text = `SELECT * FROM ${this.s}.audit_records ${where}`;
    return (await query<AuditRow>(this.pool, this.db, doing, text, values)).map(normalise);
  }

  async threadPage({ after = 0, limit, readSize }: ThreadPageOptions): Promise<ThreadPage> {
    const firsts = await query<{ seq: string; thread_id: string }>(
      this.pool,
      this.db,
      "listing audited threads",
      FIRST_RECORDS_SQL(`${this.s}.audit_records`, (n) => `$${n}`),
      [after, limit + 1],
    );
    const page = firsts.slice(0, limit);
    const read = (from: string, values: unknown[]) => this.summaryRows(from, values);
    const threads = await summariseThreads(
      page.map((f) => f.thread_id),
      {
        many: (ids, n) => read("WHERE thread_id = ANY($1) ORDER BY thread_id, seq LIMIT $2", [ids, n]),
        one: (id, seq, n) => read("WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3", [id, seq, n]),
      },
      readSize,
    );
    return { threads, next: firsts.length > limit ? Number(page.at(-1)!.seq) : null };
  }

  /**
   * The SummaryRows of the records `where` selects (a WHERE clause with its ORDER BY, by thread then
   * seq, and LIMIT). Their fields come from each record's text in one pass of PostgreSQL's json parser
   * (json_to_record over the text as json; the jsonb form would build the whole record first), so
   * neither the records' evidence nor its parsing reaches this process. A record PostgreSQL cannot read
   * as JSON fails the statement (22P02), and is then named by its seq.
   */
  private summaryRows(where: string, values: unknown[]): Promise<SummaryRow[]> {
    const doing = "reading audit records";
    // The rows are chosen (and limited) first: only they are parsed, not every row of the threads.
    const text = `SELECT ${PG_SUMMARY_COLUMNS} FROM (SELECT * FROM ${this.s}.audit_records ${where}) AS a, ${PG_SUMMARY_FIELDS} ORDER BY thread_id, seq`;
    return summaryRowsNamingDamage(
      async () => (await query<SummaryRow>(this.pool, this.db, doing, text, values)).map(normalise),
      () => this.rows(doing, where, values),
      (e) => (e as { code?: string }).code === "22P02",
    );
  }

  async verify(opts: VerifyOptions = {}): Promise<ChainVerification> {
    const doing = "verifying the audit chain";
    const page = (after: number | undefined, limit: number) =>
      after === undefined
        ? this.rows(doing, "ORDER BY seq LIMIT $1", [limit])
        : this.rows(doing, "WHERE seq > $2 ORDER BY seq LIMIT $1", [limit, after]);
    const before = async (seq: number) =>
      (await this.rows(doing, "WHERE seq < $1 ORDER BY seq DESC LIMIT 1", [seq]))[0];
    return verifyInPages(Object.assign(page, { before }), opts);
  }

  async close(): Promise<void> {
    await this.lease?.close();
  }
}
