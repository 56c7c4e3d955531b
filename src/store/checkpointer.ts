/**
 * Where LangGraph keeps checkpoints: SQLite under the data directory by default, PostgreSQL when
 * DATABASE_URL is set. The PostgreSQL tables are created by `prepareDatabase` (run by createDeps
 * before any graph exists), so this factory can stay synchronous.
 */
import path from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  JsonPlusSerializer,
  WRITES_IDX_MAP,
  copyCheckpoint,
  type BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { preparedOnce } from "./statements.js";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type pg from "pg";
import type { AppConfig, DatabaseConfig } from "../config/env.js";
import { openPools, quoteIdent, storeError, type PoolLease } from "./postgres.js";

/**
 * PostgresSaver whose connection failures say which server is gone (StoreUnavailableError) instead
 * of surfacing as a bare "Connection terminated unexpectedly" from deep inside a graph step.
 */
class AppPostgresSaver extends PostgresSaver {
  /** On the process's query pool (openPools), shared with the journal and the audit log. */
  constructor(
    private readonly db: DatabaseConfig,
    private readonly lease: PoolLease = openPools(db),
  ) {
    super(lease.pool, new LeanLoadSerializer(), { schema: db.schema });
    this.s = quoteIdent(db.schema);
  }

  /** The schema, quoted for the statements this saver sends itself. */
  private readonly s: string;

  /** One statement on the saver's pool; a failure names the server (StoreUnavailableError). */
  private async send<R extends pg.QueryResultRow>(doing: string, text: string, values: unknown[]) {
    return this.lease.pool.query<R>(text, values).catch((e: unknown) => {
      throw storeError(this.db, doing, e);
    });
  }

  /** Gives this saver's share of the process's connections back; the pool ends with its last user. */
  override async end(): Promise<void> {
    await this.lease.close();
  }

  /**
   * A channel's value is stored once per (thread, channel, version) and never overwritten, so two
   * branches of one thread (a fork of an older checkpoint) that reach the same step must not number a
   * channel's versions alike, or the fork reads the other branch's value back (a finished run shown as
   * stopped before `finish`). Versions stay increasing numbers, with a random fraction per branch.
   */
  override getNextVersion(current: number | undefined): number {
    return Math.floor(current ?? 0) + 1 + Math.floor(Math.random() * 1e6) / 1e6;
  }

  override async getTuple(config: RunnableConfig) {
    return super.getTuple(config).catch((e: unknown) => {
      throw storeError(this.db, "reading a checkpoint", e);
    });
  }

  override async *list(config: RunnableConfig, options?: CheckpointListOptions) {
    try {
      yield* super.list(config, options);
    } catch (e) {
      throw storeError(this.db, "listing checkpoints", e);
    }
  }

  /**
   * PostgresSaver's put, in one statement (so one round trip, atomic as its transaction was): the new
   * channel versions' blobs and the checkpoint row, with its SQL's conflict rules. PostgresSaver sends
   * BEGIN, one INSERT per changed channel, the checkpoint and COMMIT, each a round trip.
   */
  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ) {
    const { thread_id, checkpoint_ns = "", checkpoint_id } = config.configurable ?? {};
    if (thread_id === undefined) throw new Error('Missing "thread_id" in the config\'s "configurable"');
    const [blobs, meta] = await Promise.all([
      this._dumpBlobs(thread_id, checkpoint_ns, checkpoint.channel_values, newVersions),
      this._dumpMetadata(metadata),
    ]);
    await this.send(
      "saving a checkpoint",
      `WITH blobs AS (
         INSERT INTO ${this.s}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
         SELECT $1, $2, b.channel, b.version, b.type, b.blob
           FROM unnest($7::text[], $8::text[], $9::text[], $10::bytea[]) AS b(channel, version, type, blob)
         ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)
       INSERT INTO ${this.s}.checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
       DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`,
      [
        thread_id,
        checkpoint_ns,
        checkpoint.id,
        checkpoint_id,
        this._dumpCheckpoint(checkpoint),
        meta,
        blobs.map((b) => b[2]),
        blobs.map((b) => b[3]),
        blobs.map((b) => b[4]),
        blobs.map((b) => (b[5] ? asBuffer(b[5]) : null)),
      ],
    );
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  /**
   * PostgresSaver's putWrites in one statement: every write of the task, with its SQL's conflict rule
   * (a write to a special channel replaces the one before; others keep the first). Rows one statement
   * would insert twice are merged first by that rule, as its INSERT after INSERT did.
   */
  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string) {
    const { thread_id, checkpoint_ns, checkpoint_id } = config.configurable ?? {};
    const replace = writes.every((w) => w[0] in WRITES_IDX_MAP);
    const dumped = await this._dumpWrites(thread_id, checkpoint_ns, checkpoint_id, taskId, writes);
    const byIdx = new Map<number, (typeof dumped)[number]>();
    for (const row of dumped) if (replace || !byIdx.has(row[4])) byIdx.set(row[4], row);
    const rows = [...byIdx.values()];
    await this.send(
      "saving a step's writes",
      `INSERT INTO ${this.s}.checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
       SELECT $1, $2, $3, $4, w.idx, w.channel, w.type, w.blob
         FROM unnest($5::int[], $6::text[], $7::text[], $8::bytea[]) AS w(idx, channel, type, blob)
       ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ${
         replace
           ? "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
           : "DO NOTHING"
       }`,
      [
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        taskId,
        rows.map((r) => r[4]),
        rows.map((r) => r[5]),
        rows.map((r) => r[6]),
        rows.map((r) => asBuffer(r[7])),
      ],
    );
  }

  /** As GroupCommitSqliteSaver.hasPendingInterrupt: only the newest root checkpoint's `__interrupt__` writes are read. */
  async hasPendingInterrupt(threadId: string): Promise<boolean> {
    const rows = await this.send<{ type: string | null; blob: Buffer | null }>(
      "reading a checkpoint",
      `SELECT type, blob FROM ${this.s}.checkpoint_writes
        WHERE thread_id = $1 AND checkpoint_ns = '' AND channel = '__interrupt__'
          AND checkpoint_id = (SELECT checkpoint_id FROM ${this.s}.checkpoints WHERE thread_id = $1
                                AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1)`,
      [threadId],
    );
    return anyInterrupt(
      this.serde,
      rows.rows.map((r) => ({ type: r.type, value: r.blob })),
    );
  }
}

/** The bytes as a Buffer without copying them (pg sends a Buffer, in an array too, as bytea). */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * Whether any of a checkpoint's `__interrupt__` writes is an interrupt as getState counts one: getState
 * flattens each write's value into the task's interrupts, so a write of an empty list is none.
 */
async function anyInterrupt(
  serde: BaseCheckpointSaver["serde"],
  rows: Array<{ type: string | null; value: Uint8Array | string | null }>,
): Promise<boolean> {
  for (const row of rows) {
    // JSON text is an interrupt unless it is an empty list; anything else is read as getState reads it.
    if ((row.type ?? "json") === "json" && row.value !== null) {
      const text = typeof row.value === "string" ? row.value : Buffer.from(row.value).toString("utf8");
      if (!EMPTY_LIST.test(text)) return true;
      continue;
    }
    const value: unknown = await serde.loadsTyped(row.type ?? "json", row.value ?? "");
    if (!Array.isArray(value) || value.length > 0) return true;
  }
  return false;
}

/**
 * JsonPlusSerializer that revives only what needs reviving. The library's reviver awaits every value of
 * the parsed JSON, strings and numbers included: thousands of promises for the checkpoint and the
 * interrupt a resume loads. Only an object with an `lc` key (an encoded message, undefined, Set, Map,
 * ...) revives into anything but what JSON.parse made, so only those objects (and any with a
 * `__proto__` key) go through the library's reviver, each on its own, and the rest is kept as parsed.
 * The values are the library's, but that a -0 inside such an object reads back as 0 (it is
 * serialised again for the library).
 */
export class LeanLoadSerializer extends JsonPlusSerializer {
  protected override async _loads(data: string): Promise<unknown> {
    const parsed = JSON.parse(data) as unknown;
    if (revivedByLibrary(parsed)) return super._loads(data);
    const pending: Array<Promise<void>> = [];
    this.reviveWithin(parsed, pending);
    await Promise.all(pending);
    return parsed;
  }

  /** Replaces each object under `value` that the library revives with what it revives it to. */
  private reviveWithin(value: unknown, pending: Array<Promise<void>>): void {
    if (value === null || typeof value !== "object") return;
    const holder = value as Record<string, unknown>;
    for (const key of Object.keys(holder)) {
      const child = holder[key];
      if (!revivedByLibrary(child)) this.reviveWithin(child, pending);
      else
        pending.push(
          super._loads(JSON.stringify(child)).then((revived: unknown) => {
            holder[key] = revived;
          }),
        );
    }
  }
}

const revivedByLibrary = (value: unknown): boolean =>
  value !== null &&
  typeof value === "object" &&
  !Array.isArray(value) &&
  (Object.hasOwn(value, "lc") || Object.hasOwn(value, "__proto__"));

/**
 * SqliteSaver with group commit. put, putWrites and deleteThread serialise at once (as SqliteSaver
 * does) but their rows are written when the event loop turns: every row queued until then goes in one
 * synchronous transaction, and each call's promise settles only after that transaction has committed.
 * The commit does not fsync: SqliteSaver puts the file in WAL mode and better-sqlite3 is built with
 * SQLITE_DEFAULT_WAL_SYNCHRONOUS=1, so this connection runs synchronous=NORMAL and never fsyncs (a
 * commit survives a process crash; a power loss may drop the last ones, and the journal, which is
 * durable at the write-ahead and the close, decides where the run continues: docs/durability.md). So
 * "durability: sync" keeps its meaning for a crash (LangGraph does not start the next step until the
 * step's checkpoint is committed), and a step's writes and its checkpoint, and the steps of concurrent
 * threads, cost one commit instead of one each.
 *
 * The transaction never spans an await, so another connection to the same file (in this process or
 * another) never waits on it for longer than one commit, and no reader ever sees an uncommitted row.
 * The statements are SqliteSaver's own (@langchain/langgraph-checkpoint-sqlite 1.0.x), on its tables.
 */
export class GroupCommitSqliteSaver extends SqliteSaver {
  private queue: Array<{ write: () => void; done: (error?: unknown) => void }> = [];
  private flushScheduled = false;

  constructor(file: string) {
    const db = new Database(file);
    // Another process (the API server, a worker) may be committing; wait for it rather than fail.
    db.pragma("busy_timeout = 10000");
    super(db, new LeanLoadSerializer());
  }

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    _newVersions?: ChannelVersions,
  ): Promise<RunnableConfig> {
    this.setup();
    const threadId = config.configurable?.["thread_id"] as string | undefined;
    const ns = (config.configurable?.["checkpoint_ns"] as string | undefined) ?? "";
    const parentId = config.configurable?.["checkpoint_id"] as string | undefined;
    if (!threadId) throw new Error('Missing "thread_id" field in passed "config.configurable".');
    const [[type1, serializedCheckpoint], [type2, serializedMetadata]] = await Promise.all([
      this.serde.dumpsTyped(copyCheckpoint(checkpoint)),
      this.serde.dumpsTyped(metadata),
    ]);
    if (type1 !== type2) throw new Error("Failed to serialized checkpoint and metadata to the same type.");
    const insert = this.statement(
      "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
    );
    await this.enqueue(() =>
      insert.run(threadId, ns, checkpoint.id, parentId, type1, serializedCheckpoint, serializedMetadata),
    );
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    this.setup();
    const c = config.configurable;
    if (!c) throw new Error("Empty configuration supplied.");
    if (!c["thread_id"]) throw new Error("Missing thread_id field in config.configurable.");
    if (!c["checkpoint_id"]) throw new Error("Missing checkpoint_id field in config.configurable.");
    const allSpecial = writes.every(([channel]) => channel in WRITES_IDX_MAP);
    const insert = this.statement(
      `INSERT ${allSpecial ? "OR REPLACE" : "OR IGNORE"} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const rows = await Promise.all(
      writes.map(async ([channel, value], idx) => {
        const [type, serialized] = await this.serde.dumpsTyped(value);
        return [
          c["thread_id"],
          c["checkpoint_ns"],
          c["checkpoint_id"],
          taskId,
          WRITES_IDX_MAP[channel] ?? idx,
          channel,
          type,
          serialized,
        ] as unknown[];
      }),
    );
    await this.enqueue(() => {
      for (const row of rows) insert.run(...row);
    });
  }

  override async deleteThread(threadId: string): Promise<void> {
    this.setup();
    await this.enqueue(() => {
      this.statement("DELETE FROM checkpoints WHERE thread_id = ?").run(threadId);
      this.statement("DELETE FROM writes WHERE thread_id = ?").run(threadId);
    });
  }

  /**
   * Whether the thread's newest root checkpoint holds an interrupt (what `getState(...).tasks[].interrupts`
   * reports), reading only that checkpoint's `__interrupt__` writes instead of loading and rebuilding the
   * whole state.
   */
  async hasPendingInterrupt(threadId: string): Promise<boolean> {
    this.setup();
    const rows = this.statement(
      `SELECT type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND channel = '__interrupt__'
         AND checkpoint_id = (SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''
                              ORDER BY checkpoint_id DESC LIMIT 1)`,
    ).all(threadId, threadId) as Array<{ type: string | null; value: Uint8Array | string | null }>;
    return anyInterrupt(this.serde, rows);
  }

  /** Settles once every row queued so far is committed (or has failed). */
  async flush(): Promise<void> {
    if (this.queue.length > 0) await this.enqueue(() => {}).catch(() => {});
  }

  /** One group's transaction; a method of its own so a benchmark can count and time the commits. */
  protected commit(writes: Array<() => void>): void {
    this.transaction(writes);
  }

  /** One transaction function for every group: better-sqlite3 builds four wrappers per `transaction()`. */
  private readonly transaction = this.db.transaction((writes: Array<() => void>) => {
    for (const w of writes) w();
  });

  private readonly statement = preparedOnce(this.db);

  private enqueue(write: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({
        write,
        done: (e) => (e === undefined ? resolve() : reject(e instanceof Error ? e : new Error(String(e)))),
      });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      // setImmediate runs after every microtask: a step's putWrites and put (chained promises) join.
      setImmediate(() => this.flushQueue());
    });
  }

  private flushQueue(): void {
    this.flushScheduled = false;
    const group = this.queue;
    this.queue = [];
    if (group.length === 0) return;
    try {
      this.commit(group.map((g) => g.write));
    } catch {
      // One bad row must not fail its neighbours: retry each on its own, reporting its own error.
      for (const g of group) {
        try {
          this.commit([g.write]);
          g.done();
        } catch (e) {
          g.done(e ?? new Error("checkpoint write failed"));
        }
      }
      return;
    }
    for (const g of group) g.done();
  }
}

/** The JSON text of an empty list. */
const EMPTY_LIST = /^\s*\[\s*\]\s*$/;

/**
 * Whether a thread's run is paused at an interrupt, as `inFull` (the graph's getState) says; on our
 * SQLite and PostgreSQL savers from the newest checkpoint's interrupt writes alone.
 */
export async function pausedAtInterrupt(
  saver: BaseCheckpointSaver,
  threadId: string,
  inFull: () => Promise<boolean>,
): Promise<boolean> {
  if (saver instanceof GroupCommitSqliteSaver || saver instanceof AppPostgresSaver)
    return saver.hasPendingInterrupt(threadId);
  return inFull();
}

export function createCheckpointer(config: AppConfig): BaseCheckpointSaver {
  if (config.database) return new AppPostgresSaver(config.database);
  return new GroupCommitSqliteSaver(path.join(config.dataDir, "checkpoints.sqlite"));
}

/** Ends the saver's pool or closes its file; without this a PostgreSQL pool keeps the process alive. */
export async function closeCheckpointer(saver: BaseCheckpointSaver): Promise<void> {
  if (saver instanceof PostgresSaver) {
    await saver.end().catch(() => {});
    return;
  }
  if (saver instanceof GroupCommitSqliteSaver) await saver.flush();
  const db = (saver as unknown as { db?: { close(): void; open?: boolean } }).db;
  if (db?.open) db.close();
}
