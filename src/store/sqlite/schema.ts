/** The SQLite journal's tables, made on open, and the columns an older journal gains. */
import fs from "node:fs";
import path from "node:path";
import { SqliteConnection } from "../statements.js";
import { prepareAuditTable } from "../audit.js";
import { SQLITE, waitingIndexes } from "../waiting-list.js";
import { OPEN_PHASES_SQL } from "../journal/rows.js";
import { dueOnRegister } from "../due.js";
import type { RegisteredAction } from "../action-machine.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS decision_claims (
  envelope_hash TEXT NOT NULL,
  nonce TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  decision_type TEXT NOT NULL,
  approver_id TEXT NOT NULL,
  decided_at TEXT NOT NULL,
  claimed_at TEXT NOT NULL,
  PRIMARY KEY (envelope_hash, nonce)
);
CREATE TABLE IF NOT EXISTS executions (
  envelope_hash TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL UNIQUE,
  args_json TEXT NOT NULL,
  sent_at TEXT NOT NULL,
  ack_json TEXT,
  ack_at TEXT
);
CREATE TABLE IF NOT EXISTS threads (
  thread_id TEXT PRIMARY KEY,
  record_json TEXT NOT NULL,
  mac TEXT NOT NULL,
  closed_json TEXT,
  created_at TEXT NOT NULL,
  agent_steps INTEGER NOT NULL DEFAULT 0,
  invalid_proposals INTEGER NOT NULL DEFAULT 0,
  invalid_proposal_step INTEGER NOT NULL DEFAULT 0,
  last_reply TEXT,
  last_tool_calls TEXT,
  keeper TEXT
);
CREATE TABLE IF NOT EXISTS actions (
  envelope_hash TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  registered_json TEXT NOT NULL,
  mac TEXT NOT NULL,
  phase TEXT NOT NULL,
  progress_json TEXT NOT NULL,
  registered_at TEXT NOT NULL,
  due_at INTEGER,
  due_reason TEXT,
  due_owner TEXT,
  due_lease_until INTEGER
);
CREATE INDEX IF NOT EXISTS actions_thread ON actions (thread_id);
CREATE TABLE IF NOT EXISTS questions (
  thread_id TEXT PRIMARY KEY,
  tool_call_id TEXT NOT NULL,
  question TEXT NOT NULL,
  fields_json TEXT NOT NULL,
  asked_at TEXT NOT NULL,
  status TEXT NOT NULL,
  closed_at TEXT,
  invalid_answers INTEGER NOT NULL DEFAULT 0,
  last_refusal TEXT
);
CREATE TABLE IF NOT EXISTS object_leases (
  object_key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  acquired_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS object_leases_owner ON object_leases (owner);
CREATE TABLE IF NOT EXISTS thread_locks (
  thread_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
`;

/**
 * Columns added after their tables were first made, added to an older journal when it is opened: a
 * question's invalid answers and why the last was refused; the thread row's model turns, invalid
 * proposals, the model's last reply and which side keeps the thread's checkpoints (src/store/keeper.ts: none
 * for an existing thread, which either kind of worker claims); when an action is next due for a worker
 * (src/store/due.ts). (PostgreSQL adds them by migration: src/store/postgres.ts.)
 */
const ADDED_COLUMNS: Array<[table: string, columns: Array<[name: string, type: string]>]> = [
  [
    "questions",
    [
      ["invalid_answers", "INTEGER NOT NULL DEFAULT 0"],
      ["last_refusal", "TEXT"],
    ],
  ],
  ["executions", [["mac", "TEXT"]]],
  [
    "actions",
    [
      ["due_at", "INTEGER"],
      ["due_reason", "TEXT"],
      ["due_owner", "TEXT"],
      ["due_lease_until", "INTEGER"],
    ],
  ],
  [
    "threads",
    [
      ["agent_steps", "INTEGER NOT NULL DEFAULT 0"],
      ["invalid_proposals", "INTEGER NOT NULL DEFAULT 0"],
      ["invalid_proposal_step", "INTEGER NOT NULL DEFAULT 0"],
      ["last_reply", "TEXT"],
      ["last_tool_calls", "TEXT"],
      ["keeper", "TEXT"],
    ],
  ],
];

/** Opens the journal's file (made if missing) and brings its tables up to date. */
export function openSqliteFile(file: string): SqliteConnection {
  if (file !== ":memory:") fs.mkdirSync(path.dirname(file), { recursive: true });
  const conn = new SqliteConnection(file);
  const db = conn.db;
  db.exec(SCHEMA);
  // The listing's indexes; a journal made before them gains them here (built once, on this open).
  for (const sql of waitingIndexes(SQLITE, "actions")) db.exec(sql);
  prepareAuditTable(db);
  // A journal made before these columns gains them (existing rows: the column's default).
  let dueAdded = false;
  for (const [table, added] of ADDED_COLUMNS) {
    const has = new Set(
      (db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name),
    );
    for (const [name, type] of added)
      if (!has.has(name)) {
        db.exec(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
        if (table === "actions" && name === "due_at") dueAdded = true;
      }
  }
  if (dueAdded) conn.write(() => fillDue(conn, Date.now()));
  db.exec(DUE_INDEX);
  return conn;
}

/** Due work by index (src/app/due-work.ts): only open actions have a due time, so only they are in it. */
export const DUE_INDEX =
  "CREATE INDEX IF NOT EXISTS actions_due ON actions (due_at) WHERE due_at IS NOT NULL";

/**
 * Open actions of a journal made before due times: a waiting approval is due at its expiry, an action
 * past its approval now (when it entered its phase is not recorded; the thread lock keeps a live run's
 * thread from being driven twice).
 */
function fillDue(conn: SqliteConnection, nowMs: number): void {
  const rows = conn
    .sql(`SELECT envelope_hash, phase, registered_json FROM actions WHERE phase IN (${OPEN_PHASES_SQL})`)
    .all() as Array<{ envelope_hash: string; phase: string; registered_json: string }>;
  for (const r of rows) {
    const due =
      r.phase === "registered"
        ? dueOnRegister(JSON.parse(r.registered_json) as RegisteredAction)
        : { at: nowMs, reason: "resume" };
    if (due && Number.isFinite(due.at))
      conn
        .sql("UPDATE actions SET due_at = ?, due_reason = ? WHERE envelope_hash = ?")
        .run(due.at, due.reason, r.envelope_hash);
  }
}
