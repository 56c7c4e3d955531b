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
 * IMMEDIATE transaction; a durable one runs with synchronous=FULL, whose fsync of the WAL also makes
 * every earlier commit on the file durable (docs/durability.md says which transitions are durable).
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
  }

  write<T>(fn: () => T, durable = false): T {
    if (durable) this.db.pragma("synchronous = FULL");
    try {
      const result = this.db.transaction(fn).immediate();
      this.commits.total += 1;
      if (durable) this.commits.durable += 1;
      return result;
    } finally {
      if (durable) this.db.pragma("synchronous = NORMAL");
    }
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
