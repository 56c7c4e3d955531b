/**
 * A thread's scope narrowed by a human's answer (setThreadScope), on SQLite and, when
 * ACTION_ENVELOPE_TEST_DATABASE_URL is set, on PostgreSQL: set while the thread has no action, its
 * record sealed again; left as it stands once the thread has an action or is closed.
 */
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { tempDir } from "./support/harness.js";
import { testAction } from "./support/journal-rows.js";
import { createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";

const KEY = randomBytes(32);
const thread = (threadId: string) => ({
  threadId,
  request: "rename the task",
  requestedBy: "demo-user",
  scope: {},
  createdAt: new Date().toISOString(),
});
const closed = {
  outcome: "NOT_EXECUTED",
  reasonCode: "CANCELLED",
  reason: "test",
  at: "2026-01-01T00:00:00Z",
} as const;

const opened: Journal[] = [];
afterEach(async () => {
  for (const j of opened.splice(0)) await j.close();
});

/** The same checks on either backend. */
async function setsScope(j: Journal): Promise<void> {
  expect(await j.setThreadScope("unregistered", { taskIds: [4] })).toBeUndefined();
  await j.registerThread(thread("t1"));
  expect(await j.setThreadScope("t1", { taskIds: [4] })).toMatchObject({
    scope: { taskIds: [4] },
    macValid: true,
  });
  // Once the thread has an action, the scope it was registered under stays.
  await j.registerAction(testAction("t1", "sha256:a"), "2026-01-01T00:00:00Z");
  expect(await j.setThreadScope("t1", { taskIds: [5] })).toMatchObject({
    scope: { taskIds: [4] },
    macValid: true,
  });
  // A closed thread's scope stays too.
  await j.registerThread(thread("t2"));
  await j.closeThread("t2", closed);
  expect(await j.setThreadScope("t2", { taskIds: [5] })).toMatchObject({ scope: {}, closed, macValid: true });
}

describe("thread scope: SQLite", () => {
  it("is set before the thread has an action, and stays once it has one or is closed", async () => {
    const j = new SqliteJournal(path.join(tempDir("ae-scope-"), "journal.sqlite"), KEY);
    opened.push(j);
    await setsScope(j);
  });
});

describe.skipIf(!usingPostgres)("thread scope: PostgreSQL", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase("scope");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("is set before the thread has an action, and stays once it has one or is closed", async () => {
    const config = loadConfig({ DATABASE_URL: db.url, ACTION_ENVELOPE_DB_SCHEMA: "scope" }).database!;
    const j = await PostgresJournal.open(config, KEY);
    opened.push(j);
    await setsScope(j);
  });
});
