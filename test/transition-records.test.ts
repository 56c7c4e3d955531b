/**
 * A registration, a refused decision and an invalid answer commit with their audit records in one
 * transaction, on SQLite and PostgreSQL: an audit append that fails inside the transaction (a trigger
 * refusing that one event) leaves the journal as it was, so no registered action lacks its
 * approval_requested record and no counted refusal lacks its decision_refused or answer_refused record.
 */
import path from "node:path";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, type DatabaseConfig } from "../src/config/env.js";
import { SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { SqliteAuditLog, type AuditEntry, type AuditLog } from "../src/store/audit.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import type { RegisteredAction } from "../src/store/action-machine.js";
import { tempDir } from "./support/harness.js";
import { testAction } from "./support/journal-rows.js";
import { NO_POSTGRES, createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";

const KEY = randomBytes(32);

/** The record of `event` for action `a`, as the program keys it (one per thread, revision, event, discriminator). */
function recordOf(a: RegisteredAction, event: AuditEntry["event"], discriminator: string): AuditEntry {
  return {
    threadId: a.threadId,
    revision: a.revision,
    event,
    discriminator,
    at: a.envelope.createdAt,
    requestedBy: "u",
    risk: null,
    what: {
      operation: "update_task",
      taskId: 4,
      params: { TITLE: "x" },
      envelopeHash: a.envelopeHash,
      envelope: null,
    },
    approver: null,
    override: null,
    policy: { id: "test", version: "1" },
    refusal: null,
    outcome: null,
  };
}

interface Store {
  journal: Journal;
  audit: AuditLog;
  /** From now on, appending a record of `event` fails inside whatever transaction appends it. */
  refuseEvent(event: string): Promise<void>;
  /** The thread's open question, asked now. */
  ask(threadId: string): Promise<void>;
  close(): Promise<void>;
}

/** The same checks on each backend. */
function transitionRecords(open: () => Promise<Store>) {
  let store: Store | undefined;
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });

  async function registered(threadId: string, hash: string) {
    store = await open();
    const a = testAction(threadId, hash);
    await store.journal.registerThread({
      threadId,
      request: "test",
      requestedBy: "u",
      scope: {},
      createdAt: a.envelope.createdAt,
    });
    await store.journal.registerAction(a, a.envelope.createdAt, [recordOf(a, "approval_requested", hash)]);
    return { s: store, a };
  }

  it("registers an action with its approval_requested record, or neither", async () => {
    const { s, a } = await registered("t1", "sha256:a1");
    expect((await s.journal.getAction(a.envelopeHash))?.phase).toBe("registered");
    expect((await s.audit.records({ threadId: "t1" })).map((r) => r.event)).toEqual(["approval_requested"]);

    await s.refuseEvent("approval_requested");
    const next = testAction("t1", "sha256:a2", { revision: 2, nonce: "n2" });
    await expect(
      s.journal.registerAction(next, next.envelope.createdAt, [
        recordOf(next, "approval_requested", next.envelopeHash),
      ]),
    ).rejects.toThrow(/refused by test/);
    // Neither the new row nor the supersession of the waiting one survived the failed append.
    expect(await s.journal.getAction(next.envelopeHash)).toBeUndefined();
    expect((await s.journal.getAction(a.envelopeHash))?.phase).toBe("registered");
    expect((await s.audit.records({ threadId: "t1" })).map((r) => r.event)).toEqual(["approval_requested"]);
    expect((await s.audit.verify()).intact).toBe(true);
  });

  it("registers a change set's actions with their records, or none of them", async () => {
    store = await open();
    const rows = [testAction("t2", "sha256:s1"), testAction("t2", "sha256:s2", { nonce: "n2" })];
    await store.refuseEvent("approval_requested");
    await expect(
      store.journal.registerActions(
        rows,
        rows[0]!.envelope.createdAt,
        rows.map((r) => recordOf(r, "approval_requested", r.envelopeHash)),
      ),
    ).rejects.toThrow(/refused by test/);
    for (const r of rows) expect(await store.journal.getAction(r.envelopeHash)).toBeUndefined();
  });

  it("counts a refused decision with its decision_refused record, or neither", async () => {
    const { s, a } = await registered("t3", "sha256:r1");
    const refusal = { code: "HASH_MISMATCH", reason: "test", at: a.envelope.createdAt };
    const noted = await s.journal.noteRefusal(a.envelopeHash, refusal, true, (row) => [
      recordOf(a, "decision_refused", String(row.progress.refusalsSeen)),
    ]);
    expect(noted?.progress).toMatchObject({ refusalsSeen: 1, refusalsCounted: 1 });
    const refused = await s.audit.records({ threadId: "t3", events: ["decision_refused"] });
    expect(refused.map((r) => r.discriminator)).toEqual(["1"]);

    await s.refuseEvent("decision_refused");
    await expect(
      s.journal.noteRefusal(a.envelopeHash, refusal, true, (row) => [
        recordOf(a, "decision_refused", String(row.progress.refusalsSeen)),
      ]),
    ).rejects.toThrow(/refused by test/);
    expect((await s.journal.getAction(a.envelopeHash))?.progress).toMatchObject({
      refusalsSeen: 1,
      refusalsCounted: 1,
    });
    expect(await s.audit.records({ threadId: "t3", events: ["decision_refused"] })).toHaveLength(1);
  });

  it("counts an invalid answer with its answer_refused record, or neither", async () => {
    const { s, a } = await registered("t4", "sha256:q1");
    await s.ask("t4");
    const answerRecord = (n: number) => [recordOf(a, "answer_refused", `call-1:${n}`)];
    expect(await s.journal.noteInvalidAnswer("t4", "first", answerRecord)).toBe(1);
    await s.refuseEvent("answer_refused");
    await expect(s.journal.noteInvalidAnswer("t4", "second", answerRecord)).rejects.toThrow(
      /refused by test/,
    );
    expect((await s.journal.getQuestion("t4"))?.invalidAnswers).toBe(1);
    expect(await s.audit.records({ threadId: "t4", events: ["answer_refused"] })).toHaveLength(1);
  });
}

const question = (threadId: string) => ({
  threadId,
  toolCallId: "call-1",
  question: "which task?",
  fields: { taskId: { type: "number" as const } },
  askedAt: new Date().toISOString(),
});

describe("SQLite: transitions and their records in one transaction", () => {
  transitionRecords(async () => {
    const file = path.join(tempDir(), "journal.sqlite");
    const journal = new SqliteJournal(file, KEY);
    const audit = new SqliteAuditLog(journal.conn);
    return {
      journal,
      audit,
      refuseEvent: async (event) => {
        // Another connection to the same file, as a tool outside the program would open it.
        const db = new Database(file);
        db.exec(
          `CREATE TRIGGER refuse_${event} BEFORE INSERT ON audit_records WHEN NEW.event = '${event}'
             BEGIN SELECT RAISE(ABORT, 'refused by test'); END;`,
        );
        db.close();
      },
      ask: (threadId) => journal.recordQuestion(question(threadId)),
      close: () => journal.close(),
    };
  });

  it("commits a registration and its record once", async () => {
    const journal = new SqliteJournal(path.join(tempDir(), "journal.sqlite"), KEY);
    try {
      const audit = new SqliteAuditLog(journal.conn);
      const a = testAction("t5", "sha256:c1");
      const before = journal.commits.total;
      await journal.registerAction(a, a.envelope.createdAt, [
        recordOf(a, "approval_requested", a.envelopeHash),
      ]);
      expect(journal.commits.total - before).toBe(1);
      expect(await audit.records({ threadId: "t5" })).toHaveLength(1);
    } finally {
      await journal.close();
    }
  });
});

if (!usingPostgres) console.info(`test/transition-records.test.ts: ${NO_POSTGRES}`);

describe.skipIf(!usingPostgres)("PostgreSQL: transitions and their records in one transaction", () => {
  let db: TestDatabase;
  let seq = 0;
  beforeAll(async () => {
    db = await createTestDatabase("txrecords");
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function sql(text: string): Promise<void> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  }

  transitionRecords(async () => {
    seq += 1;
    const config: DatabaseConfig = loadConfig({
      DATABASE_URL: db.url,
      ACTION_ENVELOPE_DB_SCHEMA: `tx${seq}_${Date.now() % 100000}`,
    }).database!;
    const journal = await PostgresJournal.open(config, KEY);
    const audit = await PostgresAuditLog.open(config);
    const s = `"${config.schema}"`;
    return {
      journal,
      audit,
      refuseEvent: async (event) => {
        await sql(
          `CREATE FUNCTION ${s}.refuse_${event}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'refused by test'; END $$;
           CREATE TRIGGER refuse_${event} BEFORE INSERT ON ${s}.audit_records
             FOR EACH ROW WHEN (NEW.event = '${event}') EXECUTE FUNCTION ${s}.refuse_${event}();`,
        );
      },
      ask: (threadId) => journal.recordQuestion(question(threadId)),
      close: async () => {
        await audit.close();
        await journal.close();
      },
    };
  });
});
