import fs from "node:fs";
import { promisify } from "node:util";
import Database from "better-sqlite3";

/**
 * A connection's statements, each prepared once per SQL text and reused: preparing is a measurable
 * share of the short transactions the journal, audit log and checkpointer run on every step.
 */
export function preparedOnce(db: Database.Database): (sql: string) => Database.Statement {
  const cache = new Map<string, Database.Statement>();
  return (sql) => {
    let stmt = cache.get(sql);
    if (!stmt) cache.set(sql, (stmt = db.prepare(sql)));
    return stmt;
  };
}

/** Commits made through a store connection: all of them, and those made durable (fsynced, or synchronous_commit on). */
export interface CommitCount {
  total: number;
  durable: number;
}

/**
 * One SQLite connection shared by the journal and the audit log, in WAL mode with synchronous=NORMAL:
 * a commit survives a killed process at once and reaches the disk at the next fsync. `write` runs one
 * IMMEDIATE transaction. `writeDurable` runs one and returns only once its WAL file is fsynced, which
 * also makes every earlier commit on the file durable (docs/durability.md says which transitions are
 * durable). The fsync runs on libuv's thread pool, not inside the commit as synchronous=FULL would, so
 * the event loop (other threads' steps) keeps running while the disk flushes.
 */
export class SqliteConnection {
  readonly db: Database.Database;
  readonly sql: (text: string) => Database.Statement;
  readonly commits: CommitCount = { total: 0, durable: 0 };

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("busy_timeout = 10000");
    this.db.pragma("synchronous = NORMAL");
    this.sql = preparedOnce(this.db);
    this.transaction = this.db.transaction((fn: () => unknown) => fn());
  }

  /** One transaction function for every write: better-sqlite3 builds four wrappers per `transaction()`. */
  private readonly transaction: Database.Transaction<(fn: () => unknown) => unknown>;

  write<T>(fn: () => T): T {
    const result = this.transaction.immediate(fn) as T;
    this.commits.total += 1;
    return result;
  }

  /** One transaction, on disk when the promise settles: committed, then its WAL file fsynced. */
  async writeDurable<T>(fn: () => T): Promise<T> {
    const result = this.write(fn);
    this.commits.durable += 1;
    if (!this.db.memory) await promisify(fs.fsync)(this.walFd());
    return result;
  }

  /**
   * The WAL file, opened once: it stays in place while this connection is open (a checkpoint that
   * restarts it syncs the database file first and writes the same file again), so an fsync of it
   * after a commit flushes that commit's frames.
   */
  private wal: number | undefined;
  private walFd(): number {
    return (this.wal ??= fs.openSync(`${this.db.name}-wal`, "r"));
  }

  close(): void {
    if (this.wal !== undefined) fs.closeSync(this.wal);
    this.wal = undefined;
    if (this.db.open) this.db.close();
  }
}
