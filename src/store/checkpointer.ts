/**
 * Where LangGraph keeps checkpoints: SQLite under the data directory by default, PostgreSQL when
 * DATABASE_URL is set. The PostgreSQL tables are created by `prepareDatabase` (run by createDeps
 * before any graph exists), so this factory can stay synchronous.
 */
import path from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointListOptions, CheckpointMetadata, PendingWrite } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type { AppConfig, DatabaseConfig } from "../config/env.js";
import { createPool, storeError } from "./postgres.js";

/**
 * PostgresSaver whose connection failures say which server is gone (StoreUnavailableError) instead
 * of surfacing as a bare "Connection terminated unexpectedly" from deep inside a graph step.
 */
class AppPostgresSaver extends PostgresSaver {
  constructor(private readonly db: DatabaseConfig) {
    super(createPool(db, { name: "checkpoints" }), undefined, { schema: db.schema });
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

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions) {
    return super.put(config, checkpoint, metadata, newVersions).catch((e: unknown) => {
      throw storeError(this.db, "saving a checkpoint", e);
    });
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string) {
    return super.putWrites(config, writes, taskId).catch((e: unknown) => {
      throw storeError(this.db, "saving a step's writes", e);
    });
  }
}

/**
 * SqliteSaver with group commit: every put, putWrites and deleteThread issued before the event loop
 * turns share one transaction, and each call's promise settles only after that transaction has
 * committed (WAL, synchronous=FULL: after its fsync). So "durability: sync" means what it meant —
 * LangGraph does not start the next step until the step's checkpoint is on disk — but a step's writes
 * and its checkpoint, and the steps of concurrent threads, cost one commit instead of one each.
 *
 * What it changes: a reader on this same connection may see a checkpoint a moment before it is
 * durable (other processes see it only after the commit). Nothing acts on that: every decision
 * about a write is taken from the journal, never from a checkpoint (see trust-boundaries).
 */
export class GroupCommitSqliteSaver extends SqliteSaver {
  private group: { ops: Array<Promise<unknown>>; committed: Promise<void> } | undefined;

  constructor(file: string) {
    const db = new Database(file);
    // Another process (the API server, a worker) may hold the write lock for one commit; wait for it.
    db.pragma("busy_timeout = 10000");
    super(db);
  }

  override put(...args: Parameters<SqliteSaver["put"]>) {
    return this.inGroup(() => super.put(...args));
  }

  override putWrites(...args: Parameters<SqliteSaver["putWrites"]>) {
    return this.inGroup(() => super.putWrites(...args));
  }

  override deleteThread(...args: Parameters<SqliteSaver["deleteThread"]>) {
    return this.inGroup(() => super.deleteThread(...args));
  }

  /** One group's COMMIT; a method of its own so a benchmark can count and time the commits. */
  protected commit(): void {
    this.db.exec("COMMIT");
  }

  /** Settles once everything issued so far is committed (or has failed). */
  async flush(): Promise<void> {
    await this.group?.committed.catch(() => {});
  }

  private inGroup<T>(op: () => Promise<T>): Promise<T> {
    let group = this.group;
    if (!group) {
      try {
        group = this.openGroup();
      } catch (e) {
        return Promise.reject(e);
      }
    }
    const result = op();
    group.ops.push(result);
    return group.committed.then(() => result);
  }

  private openGroup(): NonNullable<GroupCommitSqliteSaver["group"]> {
    this.setup();
    this.db.exec("BEGIN IMMEDIATE");
    const ops: Array<Promise<unknown>> = [];
    const committed = new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        void (async () => {
          // Ops serialise before they insert; wait for every op of this group, including ones that
          // joined while we waited, then close the group and commit with no await in between.
          for (let seen = -1; seen !== ops.length; ) {
            seen = ops.length;
            await Promise.allSettled(ops);
          }
          this.group = undefined;
          try {
            this.commit();
            resolve();
          } catch (e) {
            if (this.db.inTransaction) this.db.exec("ROLLBACK");
            reject(e instanceof Error ? e : new Error(String(e)));
          }
        })();
      });
    });
    // Callers observe the failure through their own chained promise; this keeps the group's own
    // promise from being reported as unhandled when every caller's op had failed already.
    committed.catch(() => {});
    const group = { ops, committed };
    this.group = group;
    return group;
  }
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
