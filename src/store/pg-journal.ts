/**
 * The execution journal in PostgreSQL, for several processes (or hosts) sharing one database.
 *
 * Exactly-once rests on constraints, not on timing: a nonce can be inserted into decision_claims
 * once (UNIQUE (nonce) and PRIMARY KEY (envelope_hash, nonce)), and an envelope into executions once
 * (PRIMARY KEY envelope_hash). Concurrent inserts of the same key wait for each other inside
 * PostgreSQL and exactly one commits; the others read the winner's row back.
 *
 * Thread locks are session-level advisory locks held on a connection dedicated to the lock for as
 * long as the thread is being driven. PostgreSQL drops them when that connection ends, so a process
 * that is killed (or whose host vanishes, once TCP keepalive notices) frees its threads without a
 * lease having to run out, and no clock is compared across hosts. The lease length the interface
 * passes is therefore not used here: a live holder keeps its lock however long the run takes.
 */
import type pg from "pg";
import type { DatabaseConfig } from "../config/env.js";
import { openPools, type PoolLease } from "./postgres.js";
import { prepareDatabase } from "./pg-migrations.js";
import type { CommitCount } from "./statements.js";
import { ComposedJournal } from "./journal/composed.js";
import type { PgCore } from "./pg/base.js";
import { PgExecutions } from "./pg/executions.js";
import { PgThreads } from "./pg/threads.js";
import { PgActions } from "./pg/actions.js";
import { PgListing } from "./pg/listing.js";
import { PgTurns } from "./pg/turns.js";
import { PgQuestions } from "./pg/questions.js";
import { PgLeases, PgLocks } from "./pg/leases.js";
import { PgDue } from "./pg/due.js";
import { PgThreadRows } from "./pg/thread-rows.js";
import { DEFAULT_RESUME_GRACE_MS } from "./due.js";
import { DEFAULT_KEEPER } from "./keeper.js";
import type { Journal, JournalOptions } from "./journal/api.js";

/** The journal in PostgreSQL: a part per concern (src/store/pg/), all on the process's pools. */
export class PostgresJournal extends ComposedJournal {
  readonly commits: CommitCount;

  /** Shared with the audit log (src/store/backends.ts), so a transition and its records commit together. */
  readonly pool: pg.Pool;

  /** The process's connections (openPools): queries on `pool`, thread locks on lock connections beside it. */
  readonly pools: PoolLease;

  private readonly locks: PgLocks;

  private readonly rows: PgThreadRows;

  /** One statement for the three rows (the parts' reads would be three round trips). */
  override readonly threadRows: Journal["threadRows"] = (threadId) => this.rows.threadRows(threadId);

  private constructor(core: PgCore) {
    const locks = new PgLocks(core);
    const actions = new PgActions(core);
    super({
      executions: new PgExecutions(core),
      threads: new PgThreads(core),
      actions,
      listing: new PgListing(core),
      turns: new PgTurns(core),
      questions: new PgQuestions(core),
      leases: new PgLeases(core),
      locks,
      due: new PgDue(core),
    });
    this.commits = core.commits;
    this.pool = core.pools.pool;
    this.pools = core.pools;
    this.locks = locks;
    this.rows = new PgThreadRows(core, actions);
  }

  /** Connects, applies pending migrations and returns a journal; fails with StoreUnavailableError when the server is not there. */
  static async open(db: DatabaseConfig, key: Buffer, opts: JournalOptions = {}): Promise<PostgresJournal> {
    const pools = openPools(db);
    await prepareDatabase(pools, db).catch(async (e: unknown) => {
      await pools.close();
      throw e;
    });
    return new PostgresJournal({
      pools,
      db,
      key,
      clock: opts.clock ?? (() => new Date()),
      commits: { total: 0, durable: 0 },
      resumeGraceMs: opts.resumeGraceMs ?? DEFAULT_RESUME_GRACE_MS,
      keeper: opts.keeper ?? DEFAULT_KEEPER,
    });
  }

  async close(): Promise<void> {
    this.locks.dropAll();
    await this.pools.close();
  }
}
