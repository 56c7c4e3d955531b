import Database from "better-sqlite3";
import { leak, type BucketState } from "./rate-limit.js";
import { parseSeed, seedCommentRecords, seedDealRecords, seedTaskRecords } from "./seed.js";
import type {
  CommentRecord,
  DealRecord,
  EmulatorSeed,
  HistoryRecord,
  ParsedSeed,
  SeedGroup,
  SeedUser,
  TaskRecord,
} from "./types.js";

export interface CallLogEntry {
  seq: number;
  time: string;
  method: string;
  params: unknown;
  status: number;
  error?: string;
  fault?: string;
  viaBatch?: boolean;
}

export interface KeptAnswer {
  method: string;
  bodySha256: string;
  status: number;
  body: string;
  contentType: string;
  at: number;
}

const COMMENT_COLUMNS = "id, task_id AS taskId, author_id AS authorId, post_date AS postDate, message";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workgroups (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS history (
  id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL, created REAL NOT NULL,
  field TEXT NOT NULL, from_value TEXT, to_value TEXT, user_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS history_task ON history(task_id);
CREATE TABLE IF NOT EXISTS deals (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS comments (
  id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL, author_id INTEGER NOT NULL, post_date REAL NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS comments_task ON comments(task_id);
CREATE TABLE IF NOT EXISTS calls (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, method TEXT NOT NULL, params TEXT NOT NULL,
  status INTEGER NOT NULL, error TEXT, fault TEXT, via_batch INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS idempotency_keys (
  key TEXT PRIMARY KEY, method TEXT NOT NULL, body_sha256 TEXT NOT NULL, status INTEGER NOT NULL,
  body TEXT NOT NULL, content_type TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS rate_bucket (id INTEGER PRIMARY KEY CHECK (id = 1), level REAL NOT NULL, updated REAL NOT NULL);
`;

/**
 * Portal state in SQLite. One file may be opened by several processes at once: every REST call runs
 * inside an IMMEDIATE transaction, so a read-modify-write never interleaves with another writer.
 */
export class Store {
  private readonly db: Database.Database;

  constructor(path: string, seed: EmulatorSeed) {
    this.db = new Database(path);
    this.db.pragma("busy_timeout = 10000");
    if (path !== ":memory:") this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.exec(SCHEMA);
    const parsed = parseSeed(seed);
    // The seed is applied only when the file is new; an existing portal keeps its state and its original seed.
    this.immediate(() => {
      if (this.getMeta("seed") === undefined) {
        this.setMeta("seed", JSON.stringify(parsed));
        this.applySeed(parsed);
      }
    });
  }

  close(): void {
    this.db.close();
  }

  immediate<T>(fn: () => T): T {
    if (this.db.inTransaction) return fn();
    return this.db.transaction(fn).immediate();
  }

  /** Restores the portal's seed (the one stored when the file was created) and clears the call log. */
  reset(): void {
    this.immediate(() => {
      const seed = JSON.parse(this.getMeta("seed") ?? "null") as ParsedSeed;
      this.db.exec(
        "DELETE FROM users; DELETE FROM workgroups; DELETE FROM tasks; DELETE FROM history; DELETE FROM calls; DELETE FROM rate_bucket; DELETE FROM idempotency_keys;" +
          "DELETE FROM deals; DELETE FROM comments;" +
          "DELETE FROM sqlite_sequence WHERE name IN ('history','calls','comments');",
      );
      this.applySeed(seed);
    });
  }

  private applySeed(stored: ParsedSeed): void {
    // A state file made before deals and comments existed keeps a seed without them.
    const seed: ParsedSeed = { ...stored, deals: stored.deals ?? [], comments: stored.comments ?? [] };
    const insUser = this.db.prepare("INSERT INTO users (id, data) VALUES (?, ?)");
    for (const u of seed.users) insUser.run(u.id, JSON.stringify(u));
    const insGroup = this.db.prepare("INSERT INTO workgroups (id, data) VALUES (?, ?)");
    for (const g of seed.groups) insGroup.run(g.id, JSON.stringify(g));
    const { tasks, history } = seedTaskRecords(seed);
    for (const t of tasks) this.putTask(t);
    for (const h of history) this.addHistory(h);
    for (const d of seedDealRecords(seed)) this.putDeal(d);
    const insComment = this.db.prepare(
      "INSERT INTO comments (id, task_id, author_id, post_date, message) VALUES (?, ?, ?, ?, ?)",
    );
    for (const c of seedCommentRecords(seed))
      insComment.run(c.id, c.taskId, c.authorId, c.postDate, c.message);
  }

  /** One row of a table that keeps each record as JSON in `data`. */
  private record<T>(table: "users" | "workgroups" | "tasks" | "deals", id: number): T | undefined {
    const row = this.db.prepare(`SELECT data FROM ${table} WHERE id = ?`).get(id) as
      { data: string } | undefined;
    return row ? (JSON.parse(row.data) as T) : undefined;
  }

  /** Every row of such a table, by id. */
  private records<T>(table: "users" | "tasks" | "deals"): T[] {
    const rows = this.db.prepare(`SELECT data FROM ${table} ORDER BY id`).all() as { data: string }[];
    return rows.map((r) => JSON.parse(r.data) as T);
  }

  private getMeta(key: string): string | undefined {
    const row = this.db.prepare("SELECT value FROM meta WHERE key = ?").get(key) as
      { value: string } | undefined;
    return row?.value;
  }

  private setMeta(key: string, value: string): void {
    this.db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)").run(key, value);
  }

  getUser(id: number): SeedUser | undefined {
    return this.record<SeedUser>("users", id);
  }

  /** Every user, by id (user.get filters and pages them). */
  allUsers(): SeedUser[] {
    return this.records<SeedUser>("users");
  }

  getGroup(id: number): SeedGroup | undefined {
    return this.record<SeedGroup>("workgroups", id);
  }

  getTask(id: number): TaskRecord | undefined {
    return this.record<TaskRecord>("tasks", id);
  }

  allTasks(): TaskRecord[] {
    return this.records<TaskRecord>("tasks");
  }

  nextTaskId(): number {
    const row = this.db.prepare("SELECT COALESCE(MAX(id), 0) + 1 AS id FROM tasks").get() as { id: number };
    return row.id;
  }

  putTask(task: TaskRecord): void {
    this.db
      .prepare("INSERT OR REPLACE INTO tasks (id, data) VALUES (?, ?)")
      .run(task.id, JSON.stringify(task));
  }

  /** Removes a task with its history and comments (tasks.task.delete). */
  deleteTask(id: number): void {
    this.db.prepare("DELETE FROM tasks WHERE id = ?").run(id);
    this.db.prepare("DELETE FROM history WHERE task_id = ?").run(id);
    this.db.prepare("DELETE FROM comments WHERE task_id = ?").run(id);
  }

  getDeal(id: number): DealRecord | undefined {
    return this.record<DealRecord>("deals", id);
  }

  allDeals(): DealRecord[] {
    return this.records<DealRecord>("deals");
  }

  putDeal(deal: DealRecord): void {
    this.db
      .prepare("INSERT OR REPLACE INTO deals (id, data) VALUES (?, ?)")
      .run(deal.id, JSON.stringify(deal));
  }

  /** Stores a new comment and returns its id (ids grow across tasks, like forum message ids). */
  addComment(c: Omit<CommentRecord, "id">): number {
    const info = this.db
      .prepare("INSERT INTO comments (task_id, author_id, post_date, message) VALUES (?, ?, ?, ?)")
      .run(c.taskId, c.authorId, c.postDate, c.message);
    return Number(info.lastInsertRowid);
  }

  /** Replaces a comment's text (task.commentitem.update). */
  updateCommentMessage(id: number, message: string): void {
    this.db.prepare("UPDATE comments SET message = ? WHERE id = ?").run(message, id);
  }

  getComment(id: number): CommentRecord | undefined {
    return this.db.prepare(`SELECT ${COMMENT_COLUMNS} FROM comments WHERE id = ?`).get(id) as
      CommentRecord | undefined;
  }

  comments(taskId: number): CommentRecord[] {
    return this.db
      .prepare(`SELECT ${COMMENT_COLUMNS} FROM comments WHERE task_id = ? ORDER BY id`)
      .all(taskId) as CommentRecord[];
  }

  deleteComment(id: number): void {
    this.db.prepare("DELETE FROM comments WHERE id = ?").run(id);
  }

  addHistory(h: Omit<HistoryRecord, "id">): void {
    this.db
      .prepare(
        "INSERT INTO history (task_id, created, field, from_value, to_value, user_id) VALUES (?, ?, ?, ?, ?, ?)",
      )
      .run(h.taskId, h.createdDate, h.field, h.from, h.to, h.userId);
  }

  history(taskId: number): HistoryRecord[] {
    return this.db
      .prepare(
        `SELECT id, task_id AS taskId, created AS createdDate, field, from_value AS "from", to_value AS "to", user_id AS userId
         FROM history WHERE task_id = ? ORDER BY id`,
      )
      .all(taskId) as HistoryRecord[];
  }

  logCall(call: Omit<CallLogEntry, "seq" | "time">): void {
    this.db
      .prepare(
        "INSERT INTO calls (time, method, params, status, error, fault, via_batch) VALUES (?, ?, ?, ?, ?, ?, ?)",
      )
      .run(
        new Date().toISOString(),
        call.method,
        JSON.stringify(call.params ?? {}),
        call.status,
        call.error ?? null,
        call.fault ?? null,
        call.viaBatch ? 1 : 0,
      );
  }

  calls(filter: { method?: string; sinceSeq?: number } = {}): CallLogEntry[] {
    const rows = this.db
      .prepare(
        "SELECT seq, time, method, params, status, error, fault, via_batch FROM calls WHERE seq > ? AND (? IS NULL OR method = ?) ORDER BY seq",
      )
      .all(filter.sinceSeq ?? 0, filter.method ?? null, filter.method ?? null) as {
      seq: number;
      time: string;
      method: string;
      params: string;
      status: number;
      error: string | null;
      fault: string | null;
      via_batch: number;
    }[];
    return rows.map((r) => {
      const entry: CallLogEntry = {
        seq: r.seq,
        time: r.time,
        method: r.method,
        params: JSON.parse(r.params),
        status: r.status,
      };
      if (r.error !== null) entry.error = r.error;
      if (r.fault !== null) entry.fault = r.fault;
      if (r.via_batch) entry.viaBatch = true;
      return entry;
    });
  }

  clearCalls(): void {
    this.db.exec("DELETE FROM calls");
  }

  /** A kept REST 3.0 idempotent answer (src/offline-demo/emulator/idempotency.ts), shared by every process on this file. */
  getIdempotent(key: string): KeptAnswer | undefined {
    return this.db
      .prepare(
        "SELECT method, body_sha256 AS bodySha256, status, body, content_type AS contentType, at FROM idempotency_keys WHERE key = ?",
      )
      .get(key) as KeptAnswer | undefined;
  }

  /** Keeps the first answer for `key`; a later one is ignored. */
  keepIdempotent(key: string, kept: KeptAnswer): void {
    this.db
      .prepare(
        "INSERT OR IGNORE INTO idempotency_keys (key, method, body_sha256, status, body, content_type, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      )
      .run(key, kept.method, kept.bodySha256, kept.status, kept.body, kept.contentType, kept.at);
  }

  dropIdempotent(key: string): void {
    this.db.prepare("DELETE FROM idempotency_keys WHERE key = ?").run(key);
  }

  /** One bucket per portal, kept in the file so every process sharing it draws from the same bucket. */
  takeRateToken(rate: number, burst: number, nowMs: number): boolean {
    if (rate <= 0) return true;
    const prev = this.db.prepare("SELECT level, updated FROM rate_bucket WHERE id = 1").get() as
      BucketState | undefined;
    const { state, allowed } = leak(prev, rate, burst, nowMs);
    this.db
      .prepare("INSERT OR REPLACE INTO rate_bucket (id, level, updated) VALUES (1, ?, ?)")
      .run(state.level, state.updated);
    return allowed;
  }
}
