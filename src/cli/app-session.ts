/**
 * A read-only session for commands that look at what happened (`audit …`): the audit log and the
 * checkpoints, without the portal, MCP server or model that a run needs, so an investigator can
 * inspect a data directory on a machine that cannot reach Bitrix24.
 */
import fs from "node:fs";
import path from "node:path";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { loadConfig, type AppConfig } from "../config/env.js";
import { compileGraph } from "../graph/graph.js";
import type { State } from "../graph/state.js";
import type { RunStatus } from "../evidence/bundle.js";
import { SqliteAuditLog } from "../store/audit.js";

export interface InspectSession {
  config: AppConfig;
  audit: SqliteAuditLog;
  /** The thread's state and status as its checkpoints record them. */
  thread(threadId: string): Promise<{ status: RunStatus; state?: State }>;
}

export async function withInspectSession<T>(fn: (s: InspectSession) => Promise<T>, config: AppConfig = loadConfig()): Promise<T> {
  const audit = new SqliteAuditLog(path.join(config.dataDir, "audit.sqlite"));
  const checkpointsFile = path.join(config.dataDir, "checkpoints.sqlite");
  let saver: SqliteSaver | undefined;
  const session: InspectSession = {
    config,
    audit,
    async thread(threadId) {
      // Never create a checkpoint file just by looking.
      if (!fs.existsSync(checkpointsFile)) return { status: "not_found" };
      saver ??= SqliteSaver.fromConnString(checkpointsFile);
      const snapshot = await compileGraph({ checkpointer: saver }).getState({ configurable: { thread_id: threadId } });
      const values = snapshot.values as State | undefined;
      if (!values || Object.keys(values).length === 0) return { status: "not_found" };
      if (snapshot.tasks.some((t) => (t.interrupts ?? []).length > 0)) return { status: "awaiting_approval", state: values };
      if (snapshot.next.length > 0) return { status: "interrupted_run", state: values };
      return { status: "finished", state: values };
    },
  };
  try {
    return await fn(session);
  } finally {
    await audit.close();
    const db = (saver as unknown as { db?: { close(): void; open?: boolean } } | undefined)?.db;
    if (db?.open) db.close();
  }
}
