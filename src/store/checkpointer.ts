/**
 * Where LangGraph keeps checkpoints: SQLite under the data directory by default, PostgreSQL when
 * DATABASE_URL is set. The PostgreSQL tables are created by `prepareDatabase` (run by createDeps
 * before any graph exists), so this factory can stay synchronous.
 */
import path from "node:path";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointListOptions, CheckpointMetadata, PendingWrite } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
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

export function createCheckpointer(config: AppConfig): BaseCheckpointSaver {
  if (config.database) return new AppPostgresSaver(config.database);
  return SqliteSaver.fromConnString(path.join(config.dataDir, "checkpoints.sqlite"));
}

/** Ends the saver's pool or closes its file; without this a PostgreSQL pool keeps the process alive. */
export async function closeCheckpointer(saver: BaseCheckpointSaver): Promise<void> {
  if (saver instanceof PostgresSaver) {
    await saver.end().catch(() => {});
    return;
  }
  const db = (saver as unknown as { db?: { close(): void; open?: boolean } }).db;
  if (db?.open) db.close();
}
