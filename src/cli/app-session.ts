/**
 * A read-only session for commands that look at what happened (`audit …`): the audit log and the
 * checkpoints, without the portal, MCP server or model that a run needs, so an investigator can
 * inspect a data directory on a machine that cannot reach Bitrix24.
 */
import fs from "node:fs";
import path from "node:path";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { loadConfig, type AppConfig } from "../config/env.js";
import type { CaseSource, CheckpointReader } from "../evidence/case-source.js";
import type { AuditLog } from "../store/audit.js";
import type { Journal } from "../store/journal.js";

/** A CaseSource over the data directory: its journal only when the journal key already exists. */
export interface InspectSession extends CaseSource {
  config: AppConfig;
  audit: AuditLog;
}

export async function withInspectSession<T>(
  fn: (s: InspectSession) => Promise<T>,
  config: AppConfig = loadConfig(),
): Promise<T> {
  // Loaded when a command opens a session, not when the CLI starts (docs/operations.md: Performance);
  // the checkpointer (LangGraph's savers, @langchain/core) only when a thread is read: `audit list`
  // and `audit verify` read the audit log alone.
  const [{ threadFromCheckpoints }, { createAuditLog, openJournal }, { existingJournalKey }] =
    await Promise.all([
      import("../evidence/case-source.js"),
      import("../store/backends.js"),
      import("../store/journal-key.js"),
    ]);
  // The same storage the runs used: files under the data directory, or the DATABASE_URL database.
  const audit = await createAuditLog(config);
  const checkpointsFile = path.join(config.dataDir, "checkpoints.sqlite");
  let saver: BaseCheckpointSaver | undefined;
  let read: CheckpointReader | undefined;
  let closeSaver: ((saver: BaseCheckpointSaver) => Promise<void>) | undefined;
  // The journal, opened on the first row asked for, only with a key that already exists.
  const key = existingJournalKey(config);
  let journal: Promise<Journal> | undefined;
  const opened = () => (journal ??= openJournal(config!, key!));
  const session: InspectSession = {
    config,
    audit,
    ...(key
      ? {
          journal: {
            async getThread(threadId) {
              // A journal that cannot be opened here leaves the case record to check the whole chain.
              return (await opened().catch(() => undefined))?.getThread(threadId);
            },
            // The rows a thread's records are held against: a journal that cannot be opened cannot
            // confirm them, and says why.
            getAction: async (envelopeHash) => (await opened()).getAction(envelopeHash),
            findExecution: async (envelopeHash) => (await opened()).findExecution(envelopeHash),
          },
        }
      : {}),
    async thread(threadId) {
      // Never create a checkpoint file just by looking.
      if (!config.database && !fs.existsSync(checkpointsFile)) return { status: "not_found" };
      if (!saver) {
        const [{ closeCheckpointer, createCheckpointer }, { checkpointReader }] = await Promise.all([
          import("../store/checkpointer.js"),
          import("../graph/graph.js"),
        ]);
        saver = createCheckpointer(config);
        closeSaver = closeCheckpointer;
        read = checkpointReader(saver);
      }
      return threadFromCheckpoints(read!, threadId);
    },
  };
  try {
    return await fn(session);
  } finally {
    await audit.close();
    if (saver) await closeSaver!(saver);
    if (journal) await (await journal.catch(() => undefined))?.close();
  }
}
