import type Database from "better-sqlite3";

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
