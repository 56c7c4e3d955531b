/**
 * A thread's scope narrowed by a human's answer (setThreadScope), on SQLite and, when
 * ACTION_ENVELOPE_TEST_DATABASE_URL is set, on PostgreSQL: set while the thread has no action, its
 * record sealed again; left as it stands once the thread has an action or is closed. And a thread's
 * rows read together (threadRows): what the three reads of its record, action and question give,
 * edited rows included.
 */
import fs from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import { loadConfig } from "../src/config/env.js";
import { SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { tempDir } from "./support/harness.js";
import { SqliteAuditLog, type AuditLog } from "../src/store/audit.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import { caseOf } from "../src/evidence/case-source.js";
import { openStores } from "../src/store/backends.js";
import { withInspectSession } from "../src/cli/app-session.js";
import { refusalEntry } from "./support/audit-entries.js";
import { testAction } from "./support/journal-rows.js";
import { adminQuery, createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";

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

/** threadRows against the separate reads, for a thread as it moves and after `edit` changes its action row outside the program. */
async function readsRowsTogether(j: Journal, edit: (envelopeHash: string) => Promise<void>): Promise<void> {
  const separately = async (threadId: string) => ({
    thread: await j.getThread(threadId),
    action: await j.currentAction(threadId),
    question: await j.getQuestion(threadId),
  });
  const same = async (threadId: string) =>
    expect(await j.threadRows(threadId)).toEqual(await separately(threadId));
  expect(await j.threadRows("unregistered")).toEqual({
    thread: undefined,
    action: undefined,
    question: undefined,
  });
  await j.registerThread(thread("r1"));
  await same("r1");
  await j.recordQuestion({
    threadId: "r1",
    toolCallId: "call-1",
    question: "Which task?",
    fields: { taskId: { type: "number" } },
    askedAt: "2026-01-01T00:00:00Z",
  });
  await j.registerAction(testAction("r1", "sha256:r1"), "2026-01-01T00:00:00Z");
  await same("r1");
  expect((await j.threadRows("r1")).question?.question).toBe("Which task?");
  expect((await j.threadRows("r1")).action?.envelopeHash).toBe("sha256:r1");
  // A second revision supersedes the first: the newest action is the current one.
  await j.registerAction(testAction("r1", "sha256:r2", { revision: 2, nonce: "n2" }), "2026-01-01T00:01:00Z");
  await same("r1");
  expect((await j.threadRows("r1")).action?.envelopeHash).toBe("sha256:r2");
  await edit("sha256:r2");
  await same("r1");
  expect((await j.threadRows("r1")).action?.macValid).toBe(false);
}

/**
 * Where a thread's audit records begin (`auditFrom`, sealed at registration) and the case record that
 * checks the chain from there: `run` edits a table outside the program (its append-only triggers off).
 */
async function viewsFromRegistration(
  j: Journal,
  audit: AuditLog,
  run: (sql: string, ...values: unknown[]) => Promise<void>,
): Promise<void> {
  const append = (threadId: string, i: number) => audit.append(refusalEntry(threadId, i));
  await append("earlier", 1);
  await append("earlier", 2);
  // No record of the thread yet: its records begin at the log's next seq, 3.
  expect(await j.registerThread(thread("v"))).toMatchObject({ auditFrom: 3, macValid: true });
  expect(await j.setThreadScope("v", { taskIds: [4] })).toMatchObject({ auditFrom: 3, macValid: true });
  // A thread with a record before its registration gets none (its records may begin anywhere before).
  await append("late", 3);
  expect((await j.registerThread(thread("late"))).auditFrom).toBeUndefined();
  await append("v", 4); // seq 4
  await append("other", 5); // seq 5
  await append("v", 6); // seq 6
  await append("other", 7); // seq 7
  const source = { audit, thread: async () => ({ status: "finished" as const }), journal: j };
  const chainOf = async () => (await caseOf(source, "v"))!.caseRecord.auditChain;
  expect(await chainOf()).toMatchObject({
    intact: true,
    checkedFrom: 3,
    recordsChecked: 5,
    head: { seq: 7 },
    threadRecords: [{ seq: 4 }, { seq: 6 }],
  });
  // Another thread's record edited after the thread began breaks the view, named by its seq alone.
  await run(
    "UPDATE audit_records SET record_json = replace(record_json, 'demo-user', 'mallory') WHERE seq = 5",
  );
  const other = await chainOf();
  expect(other).toMatchObject({
    intact: false,
    problem: "edited at seq 5: a record of another thread, not named here (audit verify names it)",
  });
  expect(await audit.verify()).toMatchObject({ problem: { seq: 5, threadId: "other" } });
  await run(
    "UPDATE audit_records SET record_json = replace(record_json, 'mallory', 'demo-user') WHERE seq = 5",
  );
  expect(await chainOf()).toMatchObject({ intact: true });
  // An edit before the thread began is not its evidence (audit verify reports it).
  await run(
    "UPDATE audit_records SET record_json = replace(record_json, 'demo-user', 'mallory') WHERE seq = 1",
  );
  expect(await chainOf()).toMatchObject({ intact: true, checkedFrom: 3 });
  expect(await audit.verify()).toMatchObject({ intact: false, problem: { kind: "edited", seq: 1 } });
  // The thread's first record removed: the record after it links to it, and the view says so, though
  // the thread's first remaining record is seq 6.
  await run("DELETE FROM audit_records WHERE seq = 4");
  expect(await chainOf()).toMatchObject({
    intact: false,
    checkedFrom: 3,
    problem: expect.stringMatching(/^removed at seq 4:/),
  });
  // Moving where the thread's records begin past the gap breaks the row's seal: the whole chain is checked.
  await run(
    "UPDATE threads SET record_json = replace(record_json, '\"auditFrom\":3', '\"auditFrom\":6') WHERE thread_id = 'v'",
  );
  expect((await j.getThread("v"))!.macValid).toBe(false);
  expect(await chainOf()).toMatchObject({
    intact: false,
    checkedFrom: 1,
    problem: expect.stringMatching(/^edited at seq 1:/),
  });
}

describe("thread scope: SQLite", () => {
  it("is set before the thread has an action, and stays once it has one or is closed", async () => {
    const j = new SqliteJournal(path.join(tempDir("ae-scope-"), "journal.sqlite"), KEY);
    opened.push(j);
    await setsScope(j);
  });

  it("a thread's audit records begin where its registration says; its case record checks the chain from there", async () => {
    const j = new SqliteJournal(path.join(tempDir("ae-audit-from-"), "journal.sqlite"), KEY);
    opened.push(j);
    const audit = new SqliteAuditLog(j.conn);
    j.conn.db.exec("DROP TRIGGER audit_records_no_update; DROP TRIGGER audit_records_no_delete");
    await viewsFromRegistration(j, audit, async (sql, ...values) => {
      j.conn.db.prepare(sql).run(...values);
    });
  });

  it("audit show on a data directory checks from where a thread's records begin with the journal key at hand, the whole chain without it", async () => {
    const dir = tempDir("ae-inspect-from-");
    const withKey = loadConfig({
      ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"),
      ACTION_ENVELOPE_JOURNAL_KEY: KEY.toString("base64"),
    });
    const withoutKey = loadConfig({
      ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"),
      ACTION_ENVELOPE_JOURNAL_KEY_FILE: path.join(dir, "no-such.key"),
    });
    const { journal, audit } = await openStores(withKey);
    for (const [threadId, i] of [
      ["earlier", 1],
      ["earlier", 2],
    ] as const)
      await audit.append(refusalEntry(threadId, i));
    await journal.registerThread(thread("v"));
    for (const [threadId, i] of [
      ["v", 4],
      ["other", 5],
      ["v", 6],
    ] as const)
      await audit.append(refusalEntry(threadId, i));
    await journal.close();
    const chainOf = (config: typeof withKey) =>
      withInspectSession(async (s) => (await caseOf(s, "v"))!.caseRecord.auditChain, config);
    expect(await chainOf(withKey)).toMatchObject({ intact: true, checkedFrom: 3, recordsChecked: 3 });
    expect(await chainOf(withoutKey)).toMatchObject({ intact: true, checkedFrom: 1, recordsChecked: 5 });
    expect(fs.existsSync(path.join(dir, "no-such.key"))).toBe(false);
    // The thread's first record removed (its next record is not adjacent): found from auditFrom.
    const db = new Database(path.join(dir, "data", "journal.sqlite"));
    db.exec("DROP TRIGGER audit_records_no_delete; DELETE FROM audit_records WHERE seq = 3");
    db.close();
    expect(await chainOf(withKey)).toMatchObject({
      intact: false,
      problem: expect.stringMatching(/^removed at seq 3:/),
    });
  });

  it("threadRows reads what the three reads read, an edited action row included", async () => {
    const file = path.join(tempDir("ae-rows-"), "journal.sqlite");
    const j = new SqliteJournal(file, KEY);
    opened.push(j);
    await readsRowsTogether(j, async (hash) => {
      const db = new Database(file);
      db.prepare(
        "UPDATE actions SET registered_json = replace(registered_json, '\"x\"', '\"y\"') WHERE envelope_hash = ?",
      ).run(hash);
      db.close();
    });
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

  it("a thread's audit records begin where its registration says; its case record checks the chain from there", async () => {
    const config = loadConfig({ DATABASE_URL: db.url, ACTION_ENVELOPE_DB_SCHEMA: "audit_from" }).database!;
    const j = await PostgresJournal.open(config, KEY);
    opened.push(j);
    const audit = await PostgresAuditLog.open(config);
    try {
      await adminQuery("ALTER TABLE audit_from.audit_records DISABLE TRIGGER USER", [], db.url);
      await viewsFromRegistration(j, audit, async (sql, ...values) => {
        let n = 0;
        await adminQuery(
          sql.replace(/\b(audit_records|threads)\b/g, "audit_from.$1").replace(/\?/g, () => `$${++n}`),
          values,
          db.url,
        );
      });
    } finally {
      await audit.close();
    }
  });

  it("threadRows reads in one statement what the three reads read, an edited action row included", async () => {
    const config = loadConfig({ DATABASE_URL: db.url, ACTION_ENVELOPE_DB_SCHEMA: "rows" }).database!;
    const j = await PostgresJournal.open(config, KEY);
    opened.push(j);
    await readsRowsTogether(j, async (hash) => {
      await adminQuery(
        `UPDATE rows.actions SET registered_json = replace(registered_json, '"x"', '"y"') WHERE envelope_hash = $1`,
        [hash],
        db.url,
      );
    });
  });
});
