/**
 * Picks the storage for a process: files under the data directory (the default, one machine) or
 * the PostgreSQL database named by DATABASE_URL (several processes or hosts sharing state).
 */
import path from "node:path";
import type { AppConfig } from "../config/env.js";
import { SqliteJournal, type Journal } from "./journal.js";
import { SqliteAuditLog, type AuditLog } from "./audit.js";
import { loadJournalKey } from "./journal-key.js";

export async function createJournal(config: AppConfig): Promise<Journal> {
  const key = loadJournalKey(config);
  // The PostgreSQL stores (and the pg driver) are loaded only when DATABASE_URL names a database.
  if (config.database) return (await import("./pg-journal.js")).PostgresJournal.open(config.database, key);
  return new SqliteJournal(path.join(config.dataDir, "journal.sqlite"), key);
}

export async function createAuditLog(config: AppConfig, opts: { clock?: () => Date } = {}): Promise<AuditLog> {
  if (config.database) return (await import("./pg-audit.js")).PostgresAuditLog.open(config.database, opts);
  return new SqliteAuditLog(path.join(config.dataDir, "audit.sqlite"), opts);
}

/** For messages: where this process keeps its state, without any password. */
export function storageLabel(config: AppConfig): string {
  return config.database ? `${config.database.label} (schema ${config.database.schema})` : `${config.dataDir} (SQLite)`;
}

/** Both stores, or neither: a journal opened before the audit log failed is closed again. */
export async function openStores(config: AppConfig, opts: { clock?: () => Date } = {}): Promise<{ journal: Journal; audit: AuditLog }> {
  const journal = await createJournal(config);
  try {
    return { journal, audit: await createAuditLog(config, opts) };
  } catch (e) {
    await journal.close();
    throw e;
  }
}
