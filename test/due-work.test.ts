/**
 * Due work by index (src/store/due.ts, src/app/due-work.ts): the journal keeps each open action's
 * next due time beside its row, workers claim due actions under a lease, and a worker round reads
 * nothing else. On the journals directly (SQLite always; PostgreSQL too when a server is given:
 * ACTION_ENVELOPE_TEST_DATABASE_URL, or DATABASE_URL), and through worker rounds on the suite's backend.
 */
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it, vi } from "vitest";
import Database from "better-sqlite3";
import pg from "pg";
import { loadConfig } from "../src/config/env.js";
import { SqliteJournal, type Journal } from "../src/store/journal.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { SQLITE_DUE_SQL } from "../src/store/sqlite/due.js";
import { pgDueSql } from "../src/store/pg/due.js";
import { viewThread } from "../src/app/view-thread.js";
import { workerRound } from "../src/cli/worker-command.js";
import { sweepExpired, workDue } from "../src/app/due-work.js";
import type { SweepResult } from "../src/app/threads.js";
import type { App } from "../src/app/open-app.js";
import { approvalOf, testAction } from "./support/journal-rows.js";
import { adminQuery, usingPostgres } from "./support/postgres.js";
import { eachTestPortal, openTestApp, recordPendingRename, tempDir, type Portal } from "./support/harness.js";

const KEY = randomBytes(32);
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const HOUR = 3_600_000;
const GRACE = 10_000;
const LEASE = 60_000;
const at = (ms: number) => new Date(ms);
const iso = (ms: number) => new Date(ms).toISOString();

/** The server PostgreSQL journals are tested on, if one is given. */
const PG_URL = process.env.ACTION_ENVELOPE_TEST_DATABASE_URL || process.env.DATABASE_URL || undefined;
if (!PG_URL)
  console.info(
    "test/due-work.test.ts: PostgreSQL journals skipped (no ACTION_ENVELOPE_TEST_DATABASE_URL or DATABASE_URL)",
  );

/** Two journals on one store (two connections, as two worker processes have), a clock both read, and SQL on the store. */
interface Pair {
  a: Journal;
  b: Journal;
  /** A third journal on the store, as the API server opens it: the threads it registers are kept by the server. */
  api: Journal;
  clock: { now: number };
  /** EXPLAIN of the due query at `now`, one line per plan row. */
  explainDue(now: number): Promise<string>;
  /** Adds `n` closed and `n` waiting (due in an hour) rows in bulk, then refreshes the planner's statistics. */
  fill(n: number): Promise<void>;
  /** Closes both journals, takes the due columns and index away (a journal made before them), and opens the store again. */
  reopenOlder(): Promise<Journal>;
  /** Closes the journals, takes the threads' keeper column away (a journal made before it), and opens the store again. */
  reopenBeforeKeepers(): Promise<Journal>;
  close(): Promise<void>;
}

const DUE_COLUMNS = ["due_at", "due_reason", "due_owner", "due_lease_until"];

const dropDatabases: string[] = [];

const BACKENDS: Array<{ name: string; open: () => Promise<Pair> }> = [
  {
    name: "SQLite",
    async open() {
      const file = path.join(tempDir("ae-due-"), "journal.sqlite");
      const clock = { now: T0 };
      const opts = { clock: () => at(clock.now), resumeGraceMs: GRACE };
      const a = new SqliteJournal(file, KEY, opts);
      const b = new SqliteJournal(file, KEY, opts);
      const api = new SqliteJournal(file, KEY, { ...opts, keeper: "api" });
      let live: Journal[] = [a, b, api];
      return {
        a,
        b,
        api,
        clock,
        async explainDue(now) {
          const rows = a.conn.db
            .prepare(`EXPLAIN QUERY PLAN ${SQLITE_DUE_SQL}`)
            .all(now, now, "local", 20) as Array<{
            detail: string;
          }>;
          return rows.map((r) => r.detail).join("\n");
        },
        async fill(n) {
          const db = new Database(file);
          try {
            const insert = db.prepare(
              `INSERT INTO actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
               VALUES (?, ?, 1, '{}', '', ?, '{}', ?, ?, ?)`,
            );
            const thread = db.prepare(
              "INSERT INTO threads (thread_id, record_json, mac, created_at, keeper) VALUES (?, '{}', '', ?, 'local')",
            );
            db.transaction(() => {
              for (let i = 0; i < n; i++) {
                insert.run(`closed-${i}`, `tc-${i}`, "closed", iso(T0), null, null);
                insert.run(`waiting-${i}`, `tw-${i}`, "registered", iso(T0), T0 + HOUR + 1 + i, "expiry");
                thread.run(`tc-${i}`, iso(T0));
                thread.run(`tw-${i}`, iso(T0));
              }
            })();
            db.exec("ANALYZE");
          } finally {
            db.close();
          }
        },
        async reopenOlder() {
          for (const j of live) await j.close();
          const db = new Database(file);
          try {
            db.exec("DROP INDEX actions_due");
            for (const c of DUE_COLUMNS) db.exec(`ALTER TABLE actions DROP COLUMN ${c}`);
          } finally {
            db.close();
          }
          const again = new SqliteJournal(file, KEY, opts);
          live = [again];
          return again;
        },
        async reopenBeforeKeepers() {
          for (const j of live) await j.close();
          const db = new Database(file);
          try {
            db.exec("ALTER TABLE threads DROP COLUMN keeper");
          } finally {
            db.close();
          }
          const again = new SqliteJournal(file, KEY, opts);
          live = [again];
          return again;
        },
        async close() {
          for (const j of live) await j.close();
        },
      };
    },
  },
  ...(PG_URL
    ? [
        {
          name: "PostgreSQL",
          async open(): Promise<Pair> {
            const name = `ae_due_${process.pid}_${randomBytes(4).toString("hex")}`;
            await adminQuery(`CREATE DATABASE ${name}`, [], PG_URL);
            dropDatabases.push(name);
            const u = new URL(PG_URL);
            u.pathname = `/${name}`;
            const config = loadConfig({
              DATABASE_URL: u.toString(),
              ACTION_ENVELOPE_DB_SCHEMA: "due",
            }).database!;
            const clock = { now: T0 };
            const opts = { clock: () => at(clock.now), resumeGraceMs: GRACE };
            const a = await PostgresJournal.open(config, KEY, opts);
            const b = await PostgresJournal.open(config, KEY, opts);
            const api = await PostgresJournal.open(config, KEY, { ...opts, keeper: "api" });
            let live: Journal[] = [a, b, api];
            const sql = async (text: string) => {
              const c = new pg.Client({ connectionString: u.toString() });
              await c.connect();
              try {
                return (await c.query(text)).rows as Array<Record<string, string>>;
              } finally {
                await c.end();
              }
            };
            return {
              a,
              b,
              api,
              clock,
              async explainDue(now) {
                // PostgreSQL 15 cannot EXPLAIN a statement with parameters: the values are written in.
                const text = pgDueSql('"due"')
                  .replaceAll("$1", String(now))
                  .replaceAll("$2", "20")
                  .replaceAll("$3", "'local'");
                return (await sql(`EXPLAIN ${text}`)).map((r) => r["QUERY PLAN"]).join("\n");
              },
              async fill(n) {
                await sql(`
                  INSERT INTO due.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
                    SELECT 'closed-' || i, 'tc-' || i, 1, '{}', '', 'closed', '{}', '${iso(T0)}', NULL, NULL FROM generate_series(1, ${n}) i;
                  INSERT INTO due.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
                    SELECT 'waiting-' || i, 'tw-' || i, 1, '{}', '', 'registered', '{}', '${iso(T0)}', ${T0 + HOUR} + i, 'expiry' FROM generate_series(1, ${n}) i;
                  INSERT INTO due.threads (thread_id, record_json, mac, created_at, keeper)
                    SELECT t || i, '{}', '', '${iso(T0)}', 'local' FROM generate_series(1, ${n}) i, (VALUES ('tc-'), ('tw-')) AS p(t);
                  ANALYZE due.actions;
                  ANALYZE due.threads;`);
              },
              async reopenOlder() {
                for (const j of live) await j.close();
                await sql(`
                  DROP INDEX due.actions_due;
                  ALTER TABLE due.actions ${DUE_COLUMNS.map((c) => `DROP COLUMN ${c}`).join(", ")};
                  DELETE FROM due.schema_migrations WHERE version = 13;`);
                // Another URL: this process has not prepared (migrated) the database under it yet.
                const again = await PostgresJournal.open(
                  { ...config, url: `${config.url}?application_name=older` },
                  KEY,
                  opts,
                );
                live = [again];
                return again;
              },
              async reopenBeforeKeepers() {
                for (const j of live) await j.close();
                await sql(`
                  ALTER TABLE due.threads DROP COLUMN keeper;
                  DELETE FROM due.schema_migrations WHERE version = 14;`);
                const again = await PostgresJournal.open(
                  { ...config, url: `${config.url}?application_name=before-keepers` },
                  KEY,
                  opts,
                );
                live = [again];
                return again;
              },
              async close() {
                for (const j of live) await j.close();
              },
            };
          },
        },
      ]
    : []),
];

afterAll(async () => {
  for (const name of dropDatabases)
    await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`, [], PG_URL);
});

/** Registers a thread and one waiting approval expiring at `expiresAt`. */
async function waiting(j: Journal, threadId: string, hash: string, expiresAt: number) {
  await j.registerThread({ threadId, request: "test", requestedBy: "u", scope: {}, createdAt: iso(T0) });
  const a = testAction(threadId, hash, { nonce: `n-${hash}`, expiresAt: iso(expiresAt) });
  await j.registerAction(a, iso(T0));
  return a;
}

const hashes = (items: Array<{ envelopeHash: string }>) => items.map((i) => i.envelopeHash).sort();

describe.each(BACKENDS)("due work in the $name journal", ({ open }) => {
  it("nothing due: claimDue is empty (approvals not yet expired, a closed action)", async () => {
    const p = await open();
    try {
      for (let i = 0; i < 3; i++) await waiting(p.a, `t${i}`, `h${i}`, T0 + HOUR);
      const closed = await waiting(p.a, "tc", "hc", T0 - HOUR);
      const moved = await p.a.moveAction(closed.envelopeHash, "closed", {
        closed: { outcome: "NOT_EXECUTED", reasonCode: "CANCELLED", reason: "test", at: iso(T0) },
      });
      expect(moved.ok).toBe(true);
      expect(await p.a.claimDue(at(T0), 100, "w1", LEASE, "local")).toEqual([]);
      expect(await p.a.claimDue(at(T0 + HOUR - 1), 100, "w1", LEASE, "local")).toEqual([]);
    } finally {
      await p.close();
    }
  });

  it("a waiting approval is due at its expiry; a decision makes it due a grace later; closing ends it", async () => {
    const p = await open();
    try {
      const a = await waiting(p.a, "t1", "h1", T0 + HOUR);
      expect(await p.a.claimDue(at(T0 + HOUR - 1), 10, "w1", LEASE, "local")).toEqual([]);
      expect(await p.a.claimDue(at(T0 + HOUR), 10, "w1", LEASE, "local")).toEqual([
        { envelopeHash: "h1", threadId: "t1", dueAt: T0 + HOUR, reason: "expiry" },
      ]);
      // The decision (at T0 + 2h) moves the action, ends the claim and makes it due for a resume.
      p.clock.now = T0 + 2 * HOUR;
      const { claim, decision } = approvalOf(a, "approver", iso(p.clock.now));
      expect((await p.a.decideAction("h1", claim, decision)).claimed).toBe(true);
      expect(await p.b.claimDue(at(p.clock.now + GRACE - 1), 10, "w2", LEASE, "local")).toEqual([]);
      expect(await p.b.claimDue(at(p.clock.now + GRACE), 10, "w2", LEASE, "local")).toEqual([
        { envelopeHash: "h1", threadId: "t1", dueAt: p.clock.now + GRACE, reason: "resume" },
      ]);
      const closedAt = p.clock.now + GRACE;
      const closed = await p.b.moveAction("h1", "closed", {
        closed: { outcome: "NOT_EXECUTED", reasonCode: "CANCELLED", reason: "test", at: iso(closedAt) },
      });
      expect(closed.ok).toBe(true);
      expect(await p.a.claimDue(at(closedAt + 100 * HOUR), 10, "w3", LEASE, "local")).toEqual([]);
    } finally {
      await p.close();
    }
  });

  it("two workers claiming at once share the due actions: each is claimed by one of them", async () => {
    const p = await open();
    try {
      for (let i = 0; i < 30; i++) await waiting(p.a, `t${i}`, `h${String(i).padStart(2, "0")}`, T0 + i);
      const now = at(T0 + HOUR);
      const [x, y] = await Promise.all([
        p.a.claimDue(now, 20, "w1", LEASE, "local"),
        p.b.claimDue(now, 20, "w2", LEASE, "local"),
      ]);
      expect(x.length + y.length).toBe(30);
      expect(new Set([...hashes(x), ...hashes(y)]).size).toBe(30);
      expect(await p.a.claimDue(now, 100, "w3", LEASE, "local")).toEqual([]);
    } finally {
      await p.close();
    }
  });

  it("a round drives up to `concurrency` threads at once, reports in claim order, and one failure stops no other", async () => {
    const p = await open();
    const MINUTE = 60_000;
    // Group g: seven threads due at T0 + g hours (one ms apart, so the claim order is the due order),
    // worked by a round at T0 + g hours + 1 s that puts what it worked back for ten hours.
    const groupAt = (g: number) => T0 + g * HOUR;
    const names = (g: number) => Array.from({ length: 7 }, (_, i) => `g${g}t${i}`);
    try {
      for (const g of [0, 1, 2])
        for (const [i, t] of names(g).entries()) await waiting(p.a, t, `h-${t}`, groupAt(g) + i);
      for (const [g, concurrency] of [
        [0, 1],
        [1, 3],
      ] as const) {
        let inFlight = 0;
        let most = 0;
        const worked: string[] = [];
        const round = await workDue(
          p.a,
          () => at(groupAt(g) + 1000),
          "local",
          async (threadId, r, _owner, items) => {
            inFlight += 1;
            most = Math.max(most, inFlight);
            // The first thread claimed takes longest, so the threads finish out of claim order.
            for (let k = 0; k < 8 - Number(threadId.at(-1)); k++)
              await new Promise((res) => setImmediate(res));
            inFlight -= 1;
            worked.push(threadId);
            r.swept.push({
              threadId,
              envelopeHash: items[0]!.envelopeHash,
              result: "skipped",
              detail: "test",
            });
          },
          { concurrency, owner: `w-${concurrency}`, retryMs: 10 * HOUR },
        );
        expect(most, `at most ${concurrency} at once, and that many`).toBe(concurrency);
        expect(round.swept.map((x) => x.threadId)).toEqual(names(g));
        if (concurrency > 1) expect(worked).not.toEqual(names(g));
      }

      const worked: string[] = [];
      const failAt = groupAt(2) + 1000;
      const failed = workDue(
        p.a,
        () => at(failAt),
        "local",
        async (threadId) => {
          worked.push(threadId);
          if (threadId === "g2t2" || threadId === "g2t5") throw new Error(`${threadId} broke`);
        },
        { concurrency: 3, owner: "w-fail", retryMs: MINUTE, leaseMs: 2 * MINUTE },
      );
      await expect(failed).rejects.toThrow("g2t2 broke");
      expect(worked.sort()).toEqual(names(2));
      // A minute later the others are due again; the failed threads keep their claims until the lease ends.
      expect(hashes(await p.b.claimDue(at(failAt + MINUTE), 10, "w-next", LEASE, "local"))).toEqual(
        names(2)
          .filter((t) => t !== "g2t2" && t !== "g2t5")
          .map((t) => `h-${t}`),
      );
    } finally {
      await p.close();
    }
  });

  it("a claim of a worker that died is taken over when its lease ends, not before", async () => {
    const p = await open();
    try {
      await waiting(p.a, "t1", "h1", T0);
      // w1 claims and never releases (it died).
      expect(hashes(await p.a.claimDue(at(T0), 10, "w1", LEASE, "local"))).toEqual(["h1"]);
      expect(await p.b.claimDue(at(T0 + LEASE - 1), 10, "w2", LEASE, "local")).toEqual([]);
      expect(hashes(await p.b.claimDue(at(T0 + LEASE), 10, "w2", LEASE, "local"))).toEqual(["h1"]);
      // w1's late release does not free w2's claim.
      await p.a.releaseDue(["h1"], "w1");
      expect(await p.a.claimDue(at(T0 + LEASE + 1), 10, "w3", LEASE, "local")).toEqual([]);
      // w2's release does, and a release with a retry time defers the action.
      await p.b.releaseDue(["h1"], "w2", at(T0 + 3 * LEASE));
      expect(await p.a.claimDue(at(T0 + 3 * LEASE - 1), 10, "w3", LEASE, "local")).toEqual([]);
      expect(hashes(await p.a.claimDue(at(T0 + 3 * LEASE), 10, "w3", LEASE, "local"))).toEqual(["h1"]);
    } finally {
      await p.close();
    }
  });

  it("each kind of worker claims only the threads its side keeps: local for the CLI's, api for the server's", async () => {
    const p = await open();
    try {
      await waiting(p.a, "t-local", "h-local", T0);
      await waiting(p.api, "t-api", "h-api", T0);
      expect(hashes(await p.a.claimDue(at(T0), 10, "w1", LEASE, "local"))).toEqual(["h-local"]);
      expect(hashes(await p.b.claimDue(at(T0), 10, "w2", LEASE, "api"))).toEqual(["h-api"]);
      // The first registration keeps the thread's keeper: the API server's journal registering a local thread again changes nothing.
      await p.api.registerThread({
        threadId: "t-local",
        request: "test",
        requestedBy: "u",
        scope: {},
        createdAt: iso(T0),
      });
      await p.a.releaseDue(["h-local"], "w1");
      expect(await p.b.claimDue(at(T0), 10, "w2", LEASE, "api")).toEqual([]);
      expect(hashes(await p.a.claimDue(at(T0), 10, "w1", LEASE, "local"))).toEqual(["h-local"]);
    } finally {
      await p.close();
    }
  });

  it("the due query reads the partial index on due_at and each thread by key, not the tables", async () => {
    const p = await open();
    try {
      await p.fill(5000);
      const plan = await p.explainDue(T0);
      expect(plan).toContain("actions_due");
      // The keeper is checked on the action's thread row, found by its key.
      expect(plan).toMatch(/threads_pkey|sqlite_autoindex_threads_1/);
      expect(plan).not.toMatch(/Seq Scan|SCAN (actions|t)(?! USING)/);
      expect(await p.a.claimDue(at(T0), 20, "w1", LEASE, "local")).toEqual([]);
      expect(await p.a.claimDue(at(T0 + HOUR + 2), 20, "w1", LEASE, "local")).toHaveLength(2);
    } finally {
      await p.close();
    }
  });
});

describe.each(BACKENDS)("a $name journal made before due times", ({ open }) => {
  it("gains them on open: a waiting approval due at its expiry, an action past approval at once", async () => {
    const p = await open();
    try {
      await waiting(p.a, "t1", "h1", T0 + HOUR);
      const d = await waiting(p.a, "t2", "h2", T0 + HOUR);
      const { claim, decision } = approvalOf(d, "approver", iso(T0));
      expect((await p.a.decideAction("h2", claim, decision)).claimed).toBe(true);
      const closed = await waiting(p.a, "t3", "h3", T0);
      await p.a.moveAction(closed.envelopeHash, "closed", {
        closed: { outcome: "NOT_EXECUTED", reasonCode: "CANCELLED", reason: "test", at: iso(T0) },
      });
      const before = Date.now();
      const j = await p.reopenOlder();
      const after = Date.now();
      const due = await j.claimDue(at(after + 100 * HOUR), 10, "w1", LEASE, "local");
      expect(
        due
          .map(({ envelopeHash, reason }) => ({ envelopeHash, reason }))
          .sort((x, y) => x.envelopeHash.localeCompare(y.envelopeHash)),
      ).toEqual([
        { envelopeHash: "h1", reason: "expiry" },
        { envelopeHash: "h2", reason: "resume" },
      ]);
      expect(due.find((x) => x.envelopeHash === "h1")!.dueAt).toBe(T0 + HOUR);
      const resumeAt = due.find((x) => x.envelopeHash === "h2")!.dueAt;
      expect(resumeAt).toBeGreaterThanOrEqual(before - 1000);
      expect(resumeAt).toBeLessThanOrEqual(after + 1000);
    } finally {
      await p.close();
    }
  });
});

describe.each(BACKENDS)("a $name journal made before keepers were recorded", ({ open }) => {
  it("gains the column on open; its threads, kept by either side, are claimed by either kind of worker", async () => {
    const p = await open();
    try {
      await waiting(p.api, "t1", "h1", T0);
      const j = await p.reopenBeforeKeepers();
      expect(hashes(await j.claimDue(at(T0), 10, "w1", LEASE, "local"))).toEqual(["h1"]);
      await j.releaseDue(["h1"], "w1");
      expect(hashes(await j.claimDue(at(T0), 10, "w2", LEASE, "api"))).toEqual(["h1"]);
    } finally {
      await p.close();
    }
  });
});

/** The round expired (or escalated) the thread's approval, and the audit log holds one expiry for it. */
async function expectExpiredOnce(app: App, round: { swept: SweepResult[] }, threadId: string) {
  expect(round.swept).toEqual([
    expect.objectContaining({ threadId, result: expect.stringMatching(/^(expired|escalated)$/) }),
  ]);
  expect(await app.deps.audit.records({ threadId, events: ["approval_expired"] })).toHaveLength(1);
}

describe("worker rounds on due work", () => {
  let portal: Portal;
  let dataDir: string;
  eachTestPortal((f) => ({ portal, dataDir } = f));

  it("a round with nothing due reads no checkpoint", async () => {
    const view = await recordPendingRename(portal, dataDir, "NOT YET DUE");
    const app = await openTestApp(portal, dataDir);
    try {
      const reads = [vi.spyOn(app.checkpointer, "getTuple"), vi.spyOn(app.checkpointer, "list")];
      const count = () => reads.reduce((n, s) => n + s.mock.calls.length, 0);
      const round = await workerRound(app);
      expect(round).toMatchObject({ swept: [], recovered: [] });
      expect(round.error).toBeUndefined();
      // `sweep` too finds what is due by the index: no listing of the waiting approvals, no checkpoint.
      const listed = vi.spyOn(app.deps.journal, "listRegistered");
      expect(await sweepExpired(app)).toEqual([]);
      expect(listed).not.toHaveBeenCalled();
      expect(count()).toBe(0);
      // The count is real: looking at the thread reads its checkpoint.
      expect((await viewThread(app, view.threadId)).status).toBe("awaiting_approval");
      expect(count()).toBeGreaterThan(0);
    } finally {
      await app.close();
    }
  });

  it("an expired approval is expired (or escalated) once by two workers racing, audited once, nothing written", async () => {
    const view = await recordPendingRename(portal, dataDir, "EXPIRES UNDER RACE");
    let now = new Date(Date.parse(view.approval!.expiresAt) + 1000);
    const apps = [
      await openTestApp(portal, dataDir, { clock: () => now }),
      await openTestApp(portal, dataDir, { clock: () => now }),
    ];
    try {
      const rounds = await Promise.all(apps.map((app) => workerRound(app)));
      for (const r of rounds) expect(r.error).toBeUndefined();
      const acted = rounds.flatMap((r) => r.swept).filter((s) => s.result !== "skipped");
      expect(acted).toEqual([
        expect.objectContaining({ threadId: view.threadId, envelopeHash: view.approval!.envelopeHash }),
      ]);
      const expiries = await apps[0]!.deps.audit.records({
        threadId: view.threadId,
        events: ["approval_expired"],
      });
      expect(expiries).toHaveLength(1);
      expect(await portal.writes()).toHaveLength(0);
      // Afterwards nothing of it is due (ended, or a fresh approval with its own expiry).
      now = new Date(now.getTime() + 1000);
      const again = await workerRound(apps[1]!);
      expect(again).toMatchObject({ swept: [], recovered: [] });
    } finally {
      for (const app of apps) await app.close();
    }
  });

  it(`several expired approvals of one batch are expired at once, each once, in claim order${usingPostgres ? " (the smallest PostgreSQL pool: one lock connection for four lanes)" : ""}`, async () => {
    const views = [];
    for (const n of [1, 2, 3, 4, 5])
      views.push(await recordPendingRename(portal, dataDir, `BATCH EXPIRY ${n}`));
    const now = new Date(Math.max(...views.map((v) => Date.parse(v.approval!.expiresAt))) + 1000);
    const app = await openTestApp(portal, dataDir, {
      clock: () => now,
      ...(usingPostgres ? { env: { ACTION_ENVELOPE_PG_POOL: "2" } } : {}),
    });
    try {
      const round = await workerRound(app);
      expect(round.error).toBeUndefined();
      // Due in the order they expire, which is the order they were made.
      expect(round.swept.map((x) => [x.threadId, x.result])).toEqual(
        views.map((v) => [v.threadId, expect.stringMatching(/^(expired|escalated)$/)]),
      );
      for (const v of views)
        expect(
          await app.deps.audit.records({ threadId: v.threadId, events: ["approval_expired"] }),
          v.threadId,
        ).toHaveLength(1);
      expect(await portal.writes()).toHaveLength(0);
    } finally {
      await app.close();
    }
  });

  it("an expired approval is expired from the journal's rows: the run taking the decision is the only checkpoint read", async () => {
    const view = await recordPendingRename(portal, dataDir, "EXPIRED, ONE READ");
    const now = new Date(Date.parse(view.approval!.expiresAt) + 1000);
    const app = await openTestApp(portal, dataDir, { clock: () => now });
    try {
      const reads = [vi.spyOn(app.checkpointer, "getTuple"), vi.spyOn(app.checkpointer, "list")];
      const round = await workerRound(app);
      await expectExpiredOnce(app, round, view.threadId);
      expect(reads.map((s) => s.mock.calls.length)).toEqual([1, 0]);
    } finally {
      await app.close();
    }
  });

  it("an expired approval whose run is not paused at it is recovered to its pause first, then expired once", async () => {
    const view = await recordPendingRename(portal, dataDir, "EXPIRED, NOT PAUSED");
    let now = new Date(Date.parse(view.approval!.expiresAt) + 1000);
    const app = await openTestApp(portal, dataDir, { clock: () => now });
    try {
      // A checkpoint stopped before the pause, as a crash between the steps leaves it.
      await app.graph.updateState({ configurable: { thread_id: view.threadId } }, {}, "build_envelope");
      expect((await viewThread(app, view.threadId)).status).toBe("interrupted_run");
      const first = await workerRound(app);
      expect(first.swept).toEqual([]);
      expect(first.recovered).toEqual([
        expect.objectContaining({ threadId: view.threadId, result: "recovered" }),
      ]);
      expect((await viewThread(app, view.threadId)).status).toBe("awaiting_approval");
      // Put back for the worker's retry interval (a minute), then expired.
      now = new Date(now.getTime() + 61_000);
      const second = await workerRound(app);
      await expectExpiredOnce(app, second, view.threadId);
      expect(await portal.writes()).toHaveLength(0);
    } finally {
      await app.close();
    }
  });

  it("an expired approval claimed by a worker that died is expired by another once the claim's lease ends", async () => {
    const view = await recordPendingRename(portal, dataDir, "CLAIMED THEN ABANDONED");
    let now = new Date(Date.parse(view.approval!.expiresAt) + 1000);
    const app = await openTestApp(portal, dataDir, { clock: () => now });
    try {
      const claimed = await app.deps.journal.claimDue(now, 10, "crashed-worker", LEASE, "local");
      expect(claimed.map((c) => c.threadId)).toEqual([view.threadId]);
      now = new Date(now.getTime() + LEASE - 1);
      expect(await workerRound(app)).toMatchObject({ swept: [], recovered: [] });
      now = new Date(now.getTime() + 1);
      const round = await workerRound(app);
      await expectExpiredOnce(app, round, view.threadId);
    } finally {
      await app.close();
    }
  });
});
