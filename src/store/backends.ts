/**
 * Picks the storage for a process: files under the data directory (the default, one machine) or
 * the PostgreSQL database named by DATABASE_URL (several processes or hosts sharing state). The
 * journal and the audit log share one store: one SQLite connection to `journal.sqlite`, or one pool.
 */
import path from "node:path";
import type { AppConfig } from "../config/env.js";
import { SqliteJournal, type Journal, type JournalOptions } from "./journal.js";
import { SqliteAuditLog, adoptAuditFile, type AuditLog } from "./audit.js";
import { loadJournalKey } from "./journal-key.js";
import type { Keeper } from "./keeper.js";
import { anchorUnsentCloses, checkWriteAnchor, writeAnchorOf } from "./write-anchor.js";

export async function createJournal(config: AppConfig, opts: JournalOptions = {}): Promise<Journal> {
  const key = loadJournalKey(config);
  checkWriteAnchor(config);
  const journal = await openJournal(config, key, opts);
  anchorUnsentCloses(journal, writeAnchorOf(config), opts.clock ?? (() => new Date()));
  return journal instanceof SqliteJournal ? withAuditFileAdopted(journal, config) : journal;
}

/** `store`, once the data directory's old audit file is adopted into its connection; closed if that fails. */
async function withAuditFileAdopted<T extends SqliteJournal | SqliteAuditLog>(store: T, config: AppConfig) {
  try {
    adoptAuditFile(store.conn.db, path.join(config.dataDir, "audit.sqlite"));
  } catch (e) {
    await store.close();
    throw e;
  }
  return store;
}

/**
 * The journal of the configured store under `key`, as it stands: no key is created, the write anchor is
 * not checked and no legacy audit file is adopted (createJournal does those for a process that writes).
 */
export async function openJournal(
  config: AppConfig,
  key: Buffer,
  opts: JournalOptions = {},
): Promise<Journal> {
  opts = { resumeGraceMs: config.resumeGraceMs, ...opts };
  // The PostgreSQL stores (and the pg driver) are loaded only when DATABASE_URL names a database.
  if (config.database)
    return (await import("./pg-journal.js")).PostgresJournal.open(config.database, key, opts);
  return new SqliteJournal(path.join(config.dataDir, "journal.sqlite"), key, opts);
}

/** The audit log alone (reading, verifying, exporting), on the journal's store. */
export async function createAuditLog(
  config: AppConfig,
  opts: { clock?: () => Date } = {},
): Promise<AuditLog> {
  if (config.database) return (await import("./pg-audit.js")).PostgresAuditLog.open(config.database, opts);
  return withAuditFileAdopted(new SqliteAuditLog(path.join(config.dataDir, "journal.sqlite"), opts), config);
}

/** For messages: where this process keeps its state, without any password. */
export function storageLabel(config: AppConfig): string {
  return config.database
    ? `${config.database.label} (schema ${config.database.schema})`
    : `${config.dataDir} (SQLite)`;
}

/** Both stores on one connection (SQLite) or one pool (PostgreSQL), so a transition and its audit records commit in one transaction. */
export async function openStores(
  config: AppConfig,
  opts: { clock?: () => Date; keeper?: Keeper } = {},
): Promise<{ journal: Journal; audit: AuditLog }> {
  const journal = await createJournal(config, opts);
  if (journal instanceof SqliteJournal) return { journal, audit: new SqliteAuditLog(journal.conn, opts) };
  const { PostgresAuditLog } = await import("./pg-audit.js");
  return {
    journal,
    audit: await PostgresAuditLog.open(
      config.database!,
      opts,
      (journal as import("./pg-journal.js").PostgresJournal).pool,
    ),
  };
}
