/**
 * The journal's questions index, which the web inbox lists structured questions from (no checkpoint
 * is loaded): recorded when asked, closed when answered, hidden once the thread is closed; the same
 * on SQLite and (with ACTION_ENVELOPE_TEST_DATABASE_URL) PostgreSQL.
 */
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { tempDir } from "./support/harness.js";
import { createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";

const KEY = randomBytes(32);
const FIELDS = { taskId: { type: "enum" as const, description: "task id", choices: ["1", "4"] } };

async function exercise(j: Journal): Promise<void> {
  await j.registerThread({
    threadId: "t1",
    request: "rename the lab task",
    requestedBy: "demo-user",
    scope: {},
    createdAt: "2026-01-01T00:00:00.000Z",
  });
  await j.registerThread({
    threadId: "t2",
    request: "rename another",
    requestedBy: "demo-user",
    scope: {},
    createdAt: "2026-01-01T00:00:00.000Z",
  });
  await j.recordQuestion({
    threadId: "t1",
    toolCallId: "c1",
    question: "Which task?",
    fields: FIELDS,
    askedAt: "2026-01-01T00:00:01.000Z",
  });
  await j.recordQuestion({
    threadId: "t2",
    toolCallId: "c2",
    question: "Which one?",
    fields: FIELDS,
    askedAt: "2026-01-01T00:00:02.000Z",
  });
  // Newest first; fields round-trip.
  expect((await j.listOpenQuestions()).map((q) => q.threadId)).toEqual(["t2", "t1"]);
  expect((await j.getQuestion("t1"))?.fields).toEqual(FIELDS);

  await j.closeQuestion("t1", "answered", "2026-01-01T00:00:03.000Z");
  expect(await j.getQuestion("t1")).toMatchObject({
    status: "answered",
    closedAt: "2026-01-01T00:00:03.000Z",
  });
  // A replay of the node that asked (same tool call) does not reopen an answered question ...
  await j.recordQuestion({
    threadId: "t1",
    toolCallId: "c1",
    question: "Which task?",
    fields: FIELDS,
    askedAt: "2026-01-01T00:00:04.000Z",
  });
  expect((await j.getQuestion("t1"))?.status).toBe("answered");
  // ... a new question (another tool call) does.
  await j.recordQuestion({
    threadId: "t1",
    toolCallId: "c3",
    question: "And the title?",
    fields: FIELDS,
    askedAt: "2026-01-01T00:00:05.000Z",
  });
  expect(await j.getQuestion("t1")).toMatchObject({
    status: "open",
    question: "And the title?",
    closedAt: null,
  });

  // A thread the journal has closed (the run ended) lists no question, whatever its row says.
  await j.closeThread("t2", {
    outcome: "NOT_EXECUTED",
    reasonCode: "CANCELLED",
    reason: "test",
    at: "2026-01-01T00:00:06.000Z",
  });
  expect((await j.listOpenQuestions()).map((q) => q.threadId)).toEqual(["t1"]);
}

describe("journal questions index", () => {
  it("SQLite", async () => {
    const j = new SqliteJournal(path.join(tempDir("ae-questions-"), "journal.sqlite"), KEY);
    try {
      await exercise(j);
    } finally {
      await j.close();
    }
  });

  let db: TestDatabase | undefined;
  afterAll(async () => {
    await db?.drop();
  });
  it.skipIf(!usingPostgres)("PostgreSQL (migration 4)", async () => {
    db = await createTestDatabase("questions");
    const j = await PostgresJournal.open(
      loadConfig({ DATABASE_URL: db.url, ACTION_ENVELOPE_DB_SCHEMA: "q1" }).database!,
      KEY,
    );
    try {
      await exercise(j);
    } finally {
      await j.close();
    }
  });
});
