/** What every part of the PostgreSQL journal shares: its pools, schema, key, clock, keeper and commit count, and the steps several parts take inside one transaction. */
import type pg from "pg";
import type { DatabaseConfig } from "../../config/env.js";
import { toLease, type LeaseRow } from "../journal/rows.js";
import { moveWrite, type ActionDbRow, type PlannedMove } from "../action-rows.js";
import type { ActionRow, ObjectLease } from "../action-machine.js";
import type { Keeper } from "../keeper.js";
import { inTransaction, query, quoteIdent, type PoolLease } from "../postgres.js";
import { appendWithin } from "../pg-audit.js";
import type { AuditEntry } from "../audit.js";
import type { CommitCount } from "../statements.js";
import type { JournalOptions } from "../journal/api.js";

/** The PostgreSQL journal's connections, database settings, MAC key (src/store/journal-key.ts), commit count and options. */
export interface PgCore extends Required<JournalOptions> {
  /** The process's connections (openPools): queries on `pool`, thread locks on lock connections beside it. */
  pools: PoolLease;
  db: DatabaseConfig;
  key: Buffer;
  commits: CommitCount;
}

export class PgBase {
  protected readonly s: string;
  protected readonly pools: PoolLease;
  protected readonly db: DatabaseConfig;
  protected readonly key: Buffer;
  protected readonly clock: () => Date;
  protected readonly commits: CommitCount;
  protected readonly resumeGraceMs: number;
  protected readonly keeper: Keeper;

  constructor(core: PgCore) {
    this.pools = core.pools;
    this.db = core.db;
    this.key = core.key;
    this.clock = core.clock;
    this.commits = core.commits;
    this.resumeGraceMs = core.resumeGraceMs;
    this.keeper = core.keeper;
    this.s = quoteIdent(core.db.schema);
  }

  /** One counted transaction; `durable` ones commit with synchronous_commit = on. */
  protected async tx<T>(doing: string, fn: (c: pg.PoolClient) => Promise<T>, durable = false): Promise<T> {
    const result = await inTransaction(this.pools.pool, this.db, doing, fn, durable);
    this.commits.total += 1;
    if (durable) this.commits.durable += 1;
    return result;
  }

  /** One statement outside a transaction, for reads (not counted as a commit). */
  protected read<R extends pg.QueryResultRow>(
    doing: string,
    text: string,
    values: unknown[] = [],
  ): Promise<R[]> {
    return query<R>(this.pools.pool, this.db, doing, text, values);
  }

  /** One counted statement in a transaction of its own. */
  protected async run<R extends pg.QueryResultRow>(
    doing: string,
    text: string,
    values: unknown[] = [],
  ): Promise<R[]> {
    const rows = await this.read<R>(doing, text, values);
    this.commits.total += 1;
    return rows;
  }

  /** The action's row, locked for the rest of the caller's transaction. */
  protected async lockAction(c: pg.PoolClient, envelopeHash: string): Promise<ActionDbRow | undefined> {
    const r = await c.query<ActionDbRow>(
      `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
      [envelopeHash],
    );
    return r.rows[0];
  }

  protected async append(c: pg.PoolClient, records: AuditEntry[]): Promise<void> {
    for (const r of records) await appendWithin(c, this.db, r, this.clock());
  }

  /** Writes a planned move (moveWrite); returns the moved row. */
  protected async writeMove(c: pg.PoolClient, plan: PlannedMove): Promise<ActionRow> {
    const move = moveWrite(plan, this.clock().getTime(), this.resumeGraceMs);
    await c.query(
      `UPDATE ${this.s}.actions SET phase = $1, progress_json = $2, due_at = $3, due_reason = $4, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = $5`,
      move.values,
    );
    if (move.releases)
      await c.query(`DELETE FROM ${this.s}.object_leases WHERE owner = $1`, [plan.row.envelopeHash]);
    return move.row;
  }

  /** The lease row on an object, locked for the rest of the caller's transaction. */
  protected async lockLease(c: pg.PoolClient, objectKey: string): Promise<ObjectLease | undefined> {
    const r = await c.query<LeaseRow>(
      `SELECT * FROM ${this.s}.object_leases WHERE object_key = $1 FOR UPDATE`,
      [objectKey],
    );
    return r.rows[0] ? toLease(r.rows[0]) : undefined;
  }

  /**
   * Takes or renews the lease for `owner` (the caller locked the row and checked leaseIsFree); a renewal
   * keeps its acquisition time. A missing row is inserted only if nobody inserted one meanwhile: false
   * then, and nothing was taken.
   */
  protected async putLease(
    c: pg.PoolClient,
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holder: ObjectLease | undefined,
    now: number,
    holdMs: number,
  ): Promise<boolean> {
    const acquiredAt = holder?.owner === owner.envelopeHash ? holder.acquiredAt : now;
    if (holder) {
      await c.query(
        `UPDATE ${this.s}.object_leases SET owner = $2, thread_id = $3, acquired_at = $4, expires_at = $5 WHERE object_key = $1`,
        [objectKey, owner.envelopeHash, owner.threadId, acquiredAt, now + holdMs],
      );
      return true;
    }
    const taken = await c.query(
      `INSERT INTO ${this.s}.object_leases (object_key, owner, thread_id, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (object_key) DO NOTHING`,
      [objectKey, owner.envelopeHash, owner.threadId, acquiredAt, now + holdMs],
    );
    return taken.rowCount === 1;
  }
}
