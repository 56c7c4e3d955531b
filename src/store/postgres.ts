/**
 * PostgreSQL plumbing shared by the journal, the audit log and the checkpointer: one connection
 * budget per process (openPools), errors that name the server (never the password), transactions and
 * advisory-lock keys. The tables' migrations are in src/store/pg-migrations.ts.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { parse as parseArray } from "postgres-array";
import { DEFAULT_PG_POOL, type DatabaseConfig } from "../config/env.js";

/**
 * The shared database cannot be reached or went away mid-operation. Whatever was being recorded
 * was not recorded (PostgreSQL rolls back an unfinished transaction), so the caller must not act as
 * if it had been: in particular no write is sent after a claim or intent that failed this way.
 */
export class StoreUnavailableError extends Error {
  constructor(
    readonly database: string,
    readonly doing: string,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(
      `the database ${database} is unavailable while ${doing}: ${problem}; nothing was recorded by this step`,
      options,
    );
    this.name = "StoreUnavailableError";
    // The CLI prints the stack of unexpected errors; for this one the message is the whole story.
    this.stack = `${this.name}: ${this.message}`;
  }
}

/** SQLSTATE classes and driver messages that mean "the server is not there", as opposed to a bug in a query. */
const UNAVAILABLE_SQLSTATE = /^(08|53|57P|3D000|28)/;
const UNAVAILABLE_NODE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);
const UNAVAILABLE_MESSAGES =
  /Connection terminated|connection timeout|timeout expired|Client has encountered a connection error|Cannot use a pool after calling end|not queryable/i;

export function isUnavailable(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown } | null;
  if (!err || typeof err !== "object") return false;
  const code = typeof err.code === "string" ? err.code : "";
  if (UNAVAILABLE_NODE_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code) || code === "55000") return true;
  return typeof err.message === "string" && UNAVAILABLE_MESSAGES.test(err.message);
}

/** A connection-level failure as StoreUnavailableError; anything else (a real SQL error) unchanged. For `throw storeError(…)`. */
export function storeError(db: DatabaseConfig, doing: string, e: unknown): unknown {
  if (e instanceof StoreUnavailableError || !isUnavailable(e)) return e;
  const err = e as { code?: string; message?: string };
  // The driver's message can quote the connection string; keep only what cannot hold the password.
  const message = (err.message ?? String(e)).replaceAll(db.url, db.label);
  const problem = err.code && !message.includes(err.code) ? `${message} (${err.code})` : message;
  return new StoreUnavailableError(db.label, doing, problem, { cause: e });
}

/** The type OID of bytea[]. */
const BYTEA_ARRAY = 1001;
const parseBytea = pg.types.getTypeParser(17, "text") as (text: string) => Buffer;

/**
 * pg's own parsers, but for bytea[]: the checkpointer reads each checkpoint's channel values and
 * pending writes as one bytea[][] of hex text (tens of KB), which pg's array parser walks a character
 * at a time (its largest cost when a worker escalates approvals: bench/README.md). postgres-array 3
 * parses the same text, with the same bytea parser per element.
 */
const TYPES = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === BYTEA_ARRAY && format !== "binary"
      ? (text: string) => parseArray(text, parseBytea)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The most statement texts one connection keeps prepared; past it, a new text runs unnamed (parsed each time). */
export const MAX_PREPARED_PER_CONNECTION = 200;
const statementNames = new Map<string, string>();
/** SQLSTATE of "cached plan must not change result type": a table a prepared statement reads has changed. */
const PLAN_CHANGED = "0A000";

/**
 * A connection that gives every statement with parameters a name derived from its text, so the
 * server parses and analyses it once per connection and then only binds and executes it. An action's
 * step sends tens of short statements, and on a loopback connection their parsing was about a third
 * of the server's CPU per escalation (bench/README.md, scale-pg). Texts carry the schema, so the set
 * is small and fixed per deployment; MAX_PREPARED_PER_CONNECTION bounds it when one process serves
 * many schemas (the tests). Statements without parameters (BEGIN, COMMIT, multi-statement text) run
 * unnamed. Off (ACTION_ENVELOPE_PG_PREPARE=off) for a connection pooler that does not keep named
 * statements per client.
 *
 * When another process migrates a table a prepared `SELECT *` reads, the server refuses that statement
 * ("cached plan must not change result type"); that one statement fails (its transaction rolls back)
 * and the text is prepared afresh under a new name on its next use.
 */
class NamedStatementClient extends pg.Client {
  private readonly prepared = new Set<string>();
  /** Texts whose statement the server refused as changed, with how many times: their next name. */
  private readonly renamed = new Map<string, number>();

  // pg's overloads: (text, values, callback) as pg.Pool calls it; anything else is passed on as given.
  override query(...args: unknown[]): never {
    const [text, values, callback] = args;
    const query = super.query as (...a: unknown[]) => never;
    if (typeof text !== "string" || !Array.isArray(values)) return query.apply(this, args);
    const name = this.nameOf(text);
    if (name === undefined) return query.apply(this, args);
    const config = { name, text, values };
    const refused = (e: unknown) => {
      if ((e as { code?: unknown } | null)?.code === PLAN_CHANGED)
        this.renamed.set(text, (this.renamed.get(text) ?? 0) + 1);
    };
    if (typeof callback === "function")
      return query.call(this, config, (err: unknown, res: unknown) => {
        if (err) refused(err);
        (callback as (err: unknown, res: unknown) => void)(err, res);
      });
    const result = query.call(this, config) as Promise<unknown>;
    result.catch(refused);
    return result as never;
  }

  /** The text's name on this connection, or undefined when it runs unnamed (the connection holds its most). */
  private nameOf(text: string): string | undefined {
    let base = statementNames.get(text);
    if (base === undefined) {
      base = `ae_${createHash("sha256").update(text).digest("base64url").slice(0, 24)}`;
      statementNames.set(text, base);
    }
    const generation = this.renamed.get(text);
    const name = generation === undefined ? base : `${base}_${generation}`;
    if (this.prepared.has(name)) return name;
    if (this.prepared.size >= MAX_PREPARED_PER_CONNECTION) return undefined;
    this.prepared.add(name);
    return name;
  }
}

/**
 * `asyncCommit`: the connections commit with synchronous_commit = off (a commit survives a crash of
 * this process, not of the server's machine); a transaction that needs durability turns it on
 * (inTransaction's `durable`), and its commit flushes every earlier one with it.
 */
export function createPool(
  db: DatabaseConfig,
  opts: { max?: number; name: string; asyncCommit?: boolean },
): pg.Pool {
  const pool = new pg.Pool({
    connectionString: db.url,
    ...(opts.asyncCommit ? { options: "-c synchronous_commit=off" } : {}),
    max: opts.max ?? 10,
    // Without a timeout an unreachable host makes every command hang instead of failing clearly.
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 10_000,
    keepAlive: true,
    application_name: `action-envelope:${opts.name}:${process.pid}`,
    types: TYPES,
    ...(db.prepare === false ? {} : { Client: NamedStatementClient }),
  });
  // An idle connection the server closed emits 'error' on the pool; unhandled, that would end the
  // process. The next query gets a fresh connection or a clear StoreUnavailableError instead.
  pool.on("error", () => {});
  // A connection that dies while checked out (mid-query, or holding a thread lock) emits 'error' on
  // the client, where nobody listens; the failed query already rejects, so the event only needs a home.
  pool.on("connect", (client) => client.on("error", () => {}));
  return pool;
}

/**
 * Connections for session-level advisory locks (thread locks, the migration lock). Such a lock lives
 * on its connection for as long as it is held, across awaits, so these connections cannot come from
 * the query pool: with every query connection holding a thread lock, the runs under those locks would
 * wait for a query connection that none of them gives back. A caller waits for a free lock connection
 * as long as it takes (a holder lets go when its run ends), then connects within the pool's timeout;
 * pg.Pool's own queue would give up after connectionTimeoutMillis and report the server unavailable.
 */
export class LockConnections {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(
    readonly pool: pg.Pool,
    readonly size: number,
  ) {
    this.free = size;
  }

  async connect(): Promise<pg.PoolClient> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await this.pool.connect();
    } catch (e) {
      this.handOn();
      throw e;
    }
  }

  /** `destroy` (an error or true) closes the connection, which ends its session and every lock it held. */
  release(client: pg.PoolClient, destroy?: Error | boolean): void {
    client.release(destroy);
    this.handOn();
  }

  private handOn(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free += 1;
  }
}

/** What a store holds of the process's connections; `close` gives its share back (the last one ends the pools). */
export interface PoolLease {
  readonly pool: pg.Pool;
  readonly locks: LockConnections;
  close(): Promise<void>;
}

/** One budget's split: half (rounded down, at least 1) for lock connections, the rest for queries. */
export function splitBudget(budget: number): { queries: number; locks: number } {
  const locks = Math.max(1, Math.floor(budget / 2));
  return { queries: budget - locks, locks };
}

const processPools = new Map<string, { pool: pg.Pool; locks: LockConnections; users: number }>();

/**
 * The process's connections to one database: the journal, the audit log and the checkpointer share
 * one query pool, and thread locks use a lock pool beside it; together they never open more than
 * `db.poolSize` connections (ACTION_ENVELOPE_PG_POOL). Nothing here holds a query connection while
 * waiting for another query connection: a transaction uses only its own connection, and the
 * migration, which holds the migration lock while the checkpointer's setup takes a query connection,
 * holds that lock on a lock connection. So the smallest budget (1 + 1) cannot deadlock.
 *
 * The query pool commits with synchronous_commit = off, checkpoints included: WAL is flushed in
 * order, so the journal's durable commits (inTransaction's `durable`) also flush every checkpoint
 * committed before them, and a checkpoint lost with the server's machine is one the journal (the
 * authority) never relied on.
 */
export function openPools(db: DatabaseConfig): PoolLease {
  let shared = processPools.get(db.url);
  if (!shared) {
    const split = splitBudget(db.poolSize ?? DEFAULT_PG_POOL);
    const pool = createPool(db, { name: "queries", max: split.queries, asyncCommit: true });
    shared = {
      pool,
      locks: new LockConnections(createPool(db, { name: "locks", max: split.locks }), split.locks),
      users: 0,
    };
    processPools.set(db.url, shared);
  }
  shared.users += 1;
  const mine = shared;
  let closed = false;
  return {
    pool: mine.pool,
    locks: mine.locks,
    async close() {
      if (closed) return;
      closed = true;
      mine.users -= 1;
      if (mine.users > 0) return;
      if (processPools.get(db.url) === mine) processPools.delete(db.url);
      await Promise.allSettled([mine.pool.end(), mine.locks.pool.end()]);
    },
  };
}

export const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Runs fn in one transaction on one connection; a connection failure surfaces as StoreUnavailableError.
 * `durable`: committed with synchronous_commit = on, whatever the pool's setting.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  db: DatabaseConfig,
  doing: string,
  fn: (c: pg.PoolClient) => Promise<T>,
  durable = false,
): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (e) {
    throw storeError(db, doing, e);
  }
  let broken: unknown;
  try {
    await client.query(durable ? "BEGIN; SET LOCAL synchronous_commit = on" : "BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (e) {
    broken = isUnavailable(e) ? e : undefined;
    if (!broken) await client.query("ROLLBACK").catch((r: unknown) => (broken = r));
    throw storeError(db, doing, e);
  } finally {
    // A connection that failed mid-transaction is thrown away rather than handed to the next caller.
    client.release(broken !== undefined ? (broken as Error) : undefined);
  }
}

/** One statement outside an explicit transaction. */
export async function query<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  db: DatabaseConfig,
  doing: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  try {
    return (await pool.query<R>(text, values)).rows;
  } catch (e) {
    throw storeError(db, doing, e);
  }
}

/** A 64-bit advisory-lock key for a purpose within a schema (advisory locks are database-wide). */
export function lockKey(db: DatabaseConfig, purpose: string): { sql: string; values: string[] } {
  return { sql: "hashtextextended($1, 0)", values: [`action-envelope:${db.schema}:${purpose}`] };
}
