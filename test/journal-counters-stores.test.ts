/**
 * The model's turns kept in the journal's thread row (SQLite, and PostgreSQL when
 * ACTION_ENVELOPE_TEST_DATABASE_URL is set): turns counted per model call, invalid proposals at most
 * once per turn, the last reply bounded; a journal made before these columns gains them on open
 * (SQLite) or by migration 9 (PostgreSQL), its existing threads starting from zero.
 */
import path from "node:path";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, type DatabaseConfig } from "../src/config/env.js";
import { MAX_REPLY_CHARS, SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { quoteIdent } from "../src/store/postgres.js";
import { MIGRATIONS } from "../src/store/pg-migrations.js";
import { tempDir } from "./support/harness.js";
import { createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";

const KEY = randomBytes(32);
const thread = (threadId: string) => ({
  threadId,
  request: "rename task 4",
  requestedBy: "demo-user",
  scope: {},
  createdAt: new Date().toISOString(),
});

const opened: Journal[] = [];
afterEach(async () => {
  for (const j of opened.splice(0)) await j.close();
});

/** The same checks on either backend. */
async function countsTurns(j: Journal): Promise<void> {
  expect(await j.noteAgentStep("unregistered")).toBe(0);
  expect(await j.noteInvalidProposal("unregistered")).toBe(0);
  await j.noteModelReply("unregistered", "ignored", []);
  expect(await j.getThreadTurns("unregistered")).toBeUndefined();

  await j.registerThread(thread("t1"));
  expect(await j.getThreadTurns("t1")).toEqual({
    agentSteps: 0,
    invalidProposals: 0,
    lastReply: null,
    lastToolCalls: null,
    lastReplySealValid: true,
  });
  // No model turn yet: nothing the model did can be invalid.
  expect(await j.noteInvalidProposal("t1")).toBe(0);
  expect(await j.noteAgentStep("t1")).toBe(1);
  expect(await j.noteInvalidProposal("t1")).toBe(1);
  // The same turn again (a re-run of propose, or propose driven twice): not counted twice.
  expect(await j.noteInvalidProposal("t1")).toBe(1);
  expect(await j.noteAgentStep("t1")).toBe(2);
  expect(await j.noteInvalidProposal("t1")).toBe(2);
  const calls = [
    {
      id: "call_1",
      name: "propose_change",
      args: { taskId: 4, fields: { TITLE: "X\u202E" }, rationale: "r" },
    },
  ];
  await j.noteModelReply("t1", `${"x".repeat(MAX_REPLY_CHARS)}TAIL`, calls);
  expect(await j.getThreadTurns("t1")).toEqual({
    agentSteps: 2,
    invalidProposals: 2,
    lastReply: "x".repeat(MAX_REPLY_CHARS),
    lastToolCalls: calls,
    lastReplySealValid: true,
  });
  // The next reply's calls replace them: only the last reply's calls are kept.
  await j.noteModelReply("t1", "", []);
  expect(await j.getThreadTurns("t1")).toMatchObject({ lastReply: "", lastToolCalls: [] });
  // Another thread's row is its own.
  await j.registerThread(thread("t2"));
  expect(await j.getThreadTurns("t2")).toEqual({
    agentSteps: 0,
    invalidProposals: 0,
    lastReply: null,
    lastToolCalls: null,
    lastReplySealValid: true,
  });
}

describe("journal thread turns: SQLite", () => {
  it("counts model turns, invalid proposals once per turn, and keeps the last reply bounded", async () => {
    const j = new SqliteJournal(path.join(tempDir("ae-turns-"), "journal.sqlite"), KEY);
    opened.push(j);
    await countsTurns(j);
  });

  it("a journal file made before the turn columns gains them on open; its threads start from zero", async () => {
    const file = path.join(tempDir("ae-turns-old-"), "journal.sqlite");
    const j0 = new SqliteJournal(file, KEY);
    await j0.registerThread(thread("old"));
    await j0.close();
    // Back to the older layout: the thread table without the turn columns.
    const raw = new Database(file);
    raw.exec(`CREATE TABLE threads_old (thread_id TEXT PRIMARY KEY, record_json TEXT NOT NULL, mac TEXT NOT NULL, closed_json TEXT, created_at TEXT NOT NULL);
      INSERT INTO threads_old SELECT thread_id, record_json, mac, closed_json, created_at FROM threads;
      DROP TABLE threads; ALTER TABLE threads_old RENAME TO threads;`);
    expect(
      (raw.prepare("PRAGMA table_info(threads)").all() as Array<{ name: string }>).map((c) => c.name),
    ).not.toContain("agent_steps");
    raw.close();

    const j = new SqliteJournal(file, KEY);
    opened.push(j);
    expect((await j.getThread("old"))?.macValid).toBe(true);
    expect(await j.getThreadTurns("old")).toEqual({
      agentSteps: 0,
      invalidProposals: 0,
      lastReply: null,
      lastToolCalls: null,
      lastReplySealValid: true,
    });
    expect(await j.noteAgentStep("old")).toBe(1);
    expect(await j.noteInvalidProposal("old")).toBe(1);
  });
});

describe.skipIf(!usingPostgres)("journal thread turns: PostgreSQL", () => {
  let db: TestDatabase;
  let seq = 0;
  const freshConfig = (): DatabaseConfig =>
    loadConfig({ DATABASE_URL: db.url, ACTION_ENVELOPE_DB_SCHEMA: `turns${++seq}_${Date.now() % 100000}` })
      .database!;
  async function sql<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      return (await c.query<R>(text, values)).rows;
    } finally {
      await c.end();
    }
  }

  beforeAll(async () => {
    db = await createTestDatabase("turns");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("counts model turns, invalid proposals once per turn, and keeps the last reply bounded", async () => {
    const j = await PostgresJournal.open(freshConfig(), KEY);
    opened.push(j);
    await countsTurns(j);
  });

  it("concurrent invalid proposals in one turn are counted once", async () => {
    const config = freshConfig();
    const a = await PostgresJournal.open(config, KEY);
    const b = await PostgresJournal.open({ ...config, url: `${config.url}?application_name=b` }, KEY);
    opened.push(a, b);
    await a.registerThread(thread("race"));
    await a.noteAgentStep("race");
    const counts = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).noteInvalidProposal("race")),
    );
    expect(counts).toEqual(counts.map(() => 1));
    expect((await b.getThreadTurns("race"))?.invalidProposals).toBe(1);
  });

  it("a schema at migration 8 is migrated to 9: existing threads gain the turn columns at zero", async () => {
    const config = freshConfig();
    const s = quoteIdent(config.schema);
    // The schema as an older release left it: migrations 1 to 8, one thread row.
    await sql(`CREATE SCHEMA ${s}`);
    await sql(
      `CREATE TABLE ${s}.schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
    );
    for (const m of MIGRATIONS.filter((m) => m.version <= 8)) {
      await sql(m.sql(s));
      await sql(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
    }
    await sql(
      `INSERT INTO ${s}.threads (thread_id, record_json, mac, created_at) VALUES ('old', '{}', 'x', '2026-01-01T00:00:00.000Z')`,
    );

    const j = await PostgresJournal.open(config, KEY);
    opened.push(j);
    const applied = await sql<{ version: number }>(
      `SELECT version FROM ${s}.schema_migrations ORDER BY version`,
    );
    expect(applied.map((r) => r.version)).toEqual(expect.arrayContaining([9, 10]));
    expect(await j.getThreadTurns("old")).toEqual({
      agentSteps: 0,
      invalidProposals: 0,
      lastReply: null,
      lastToolCalls: null,
      lastReplySealValid: true,
    });
    expect(await j.noteAgentStep("old")).toBe(1);
  });
});
