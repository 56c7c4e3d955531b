/**
 * `pending` pages by a keyset cursor over (registered_at, envelope hash) with its filters in SQL: rows
 * registered between pages are neither skipped nor listed twice, a row whose seal fails is named on
 * the page where it lies without moving any page, `--mine` is answered by the journal's query (the
 * approver's operations and escalation groups), and at 100,000 waiting rows every listing query is
 * read through an index, never by scanning the table (SQLite's EXPLAIN QUERY PLAN; PostgreSQL's is in
 * test/postgres-stores.test.ts). Real stores (SQLite, or PostgreSQL under ACTION_ENVELOPE_TEST_DATABASE_URL),
 * rows registered and sealed by the real journal, and the real CLI.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { createStoreDeps, type StoreDeps } from "../src/runtime/deps.js";
import { decidableIn, type PendingQuery } from "../src/app/pending.js";
import { pendingPage } from "./support/pending-page.js";
import { SqliteJournal } from "../src/store/journal.js";
import { countSql, pageSql, SQLITE, type RegisteredFilter } from "../src/store/waiting-list.js";
import type { RegisteredAction } from "../src/store/action-machine.js";
import { journalSql, parseJsonOutput, runCli, tempDir } from "./support/harness.js";
import { testAction } from "./support/journal-rows.js";
import { databaseEnv, usingPostgres } from "./support/postgres.js";

let dataDir: string;
let env: Record<string, string>;
let deps: StoreDeps | undefined;
const T0 = Date.parse("2026-03-01T00:00:00.000Z");
let now = new Date(T0);

beforeEach(async () => {
  dataDir = tempDir();
  env = {
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    MODEL: "offline",
    ...(usingPostgres ? databaseEnv(dataDir) : {}),
  };
  now = new Date(T0 + 86_400_000);
  deps = await createStoreDeps(loadConfig(env), { clock: () => now });
});
afterEach(async () => {
  await deps?.close();
  deps = undefined;
});

interface Row {
  operation?: string;
  object?: { type: "task" | "deal"; id: number };
  requestedBy?: string;
  escalatedTo?: string | null;
}

/** Registers a waiting approval through the journal (sealed with its key) at T0 + `second` seconds. */
async function register(name: string, second: number, r: Row = {}): Promise<RegisteredAction> {
  const hash = `sha256:${Buffer.from(name).toString("hex").padEnd(64, "0")}`;
  const base = testAction(`thread-${name}`, hash, { nonce: `n-${name}` });
  const a: RegisteredAction = {
    ...base,
    envelope: {
      ...base.envelope,
      requestedBy: r.requestedBy ?? "demo-user",
      operation: r.operation ?? "update_task",
      object: r.object ?? { type: "task", id: 4 },
      risk: { level: "medium", reversibility: "reversible" },
    } as never,
    escalatedTo: r.escalatedTo ?? null,
  };
  const at = new Date(T0 + second * 1000).toISOString();
  await deps!.journal.registerThread({
    threadId: a.threadId,
    request: "test",
    requestedBy: a.envelope.requestedBy,
    scope: {},
    createdAt: at,
  });
  await deps!.journal.registerAction(a, at);
  return a;
}

/** Every page from the first, following `next`, calling `between` after each page. */
async function allPages(q: PendingQuery, between: (page: number) => Promise<void> = async () => {}) {
  const pages: Array<{ threads: string[]; damaged: string[]; next: string | null; total: number }> = [];
  let cursor: string | undefined;
  for (let i = 0; i < 50; i++) {
    const p = await pendingPage({ deps: deps! }, { ...q, ...(cursor !== undefined ? { cursor } : {}) });
    pages.push({
      threads: p.pending.map((x) => x.threadId),
      damaged: p.damaged.map((d) => d.threadId),
      next: p.next,
      total: p.total,
    });
    if (p.next === null) return pages;
    cursor = p.next;
    await between(i);
  }
  throw new Error("more than 50 pages");
}

describe("pending by keyset", () => {
  it("rows registered between pages are listed once each, in order, none skipped; ties on the instant are ordered by hash", async () => {
    for (let i = 0; i < 7; i++) await register(`r${i}`, i);
    // Two at the same instant: the hash decides, on every page boundary alike.
    await register("tie-b", 7);
    await register("tie-a", 7);
    let added = 0;
    const pages = await allPages({ limit: 3 }, async (i) => {
      // Arrivals while the reader pages: later instants, and one at the instant of the rows already read.
      if (i < 3) {
        await register(`late${added}`, 100 + added);
        added += 1;
      }
      if (i === 0) await register("zz-same-instant-as-page-one", 2);
    });
    const listed = pages.flatMap((p) => p.threads);
    const expected = [
      "r0",
      "r1",
      "r2",
      "zz-same-instant-as-page-one",
      "r3",
      "r4",
      "r5",
      "r6",
      "tie-a",
      "tie-b",
      "late0",
      "late1",
      "late2",
    ].map((n) => `thread-${n}`);
    expect(listed).toEqual(expected);
    expect(new Set(listed).size).toBe(listed.length);
    expect(pages.slice(0, -1).every((p) => p.threads.length === 3)).toBe(true);
    expect(pages.at(-1)!.next).toBeNull();
  });

  it("a damaged row is named on the page where it lies; no page moves", async () => {
    const names = ["a", "b", "c", "d", "e", "f"];
    const rows = [];
    for (const [i, n] of names.entries()) rows.push(await register(n, i));
    const before = await allPages({ limit: 2 });
    expect(before.map((p) => p.threads)).toEqual([
      ["thread-a", "thread-b"],
      ["thread-c", "thread-d"],
      ["thread-e", "thread-f"],
    ]);
    expect(
      await journalSql(dataDir, "UPDATE T.actions SET mac = ? WHERE envelope_hash = ?", [
        "0".repeat(64),
        rows[2]!.envelopeHash,
      ]),
    ).toBeDefined();
    const after = await allPages({ limit: 2 });
    // The first page and its cursor are unchanged; c is named where it lies, and d, e, f follow it.
    expect(after[0]).toEqual(before[0]);
    expect(after[1]).toMatchObject({ threads: ["thread-d", "thread-e"], damaged: ["thread-c"] });
    expect(after[2]).toMatchObject({ threads: ["thread-f"], damaged: [], next: null });
    expect(after.map((p) => p.total)).toEqual([6, 6, 6]);
    // A reader who took the second page's cursor before the damage continues from where they were.
    const resumed = await pendingPage({ deps: deps! }, { limit: 2, cursor: before[1]!.next! });
    expect(resumed.pending.map((p) => p.threadId)).toEqual(["thread-e", "thread-f"]);
    expect(resumed.damaged).toEqual([]);
  });

  it("--mine is the journal's query: the approver's operations and escalation groups filter in SQL", async () => {
    await register("task", 1);
    await register("deal", 2, { operation: "update_deal", object: { type: "deal", id: 3 } });
    await register("leads", 3, { escalatedTo: "task-leads" });
    await register("deal-esc", 4, {
      operation: "update_deal",
      object: { type: "deal", id: 5 },
      escalatedTo: "deal-approvers",
    });
    await register("delete", 5, { operation: "delete_task" });
    const sqlRows = async (approver: string) =>
      (
        await deps!.journal.listRegistered({ decidable: decidableIn(deps!.policy, approver), limit: 100 })
      ).map((r) => r.threadId);
    const listed = async (approver: string) => {
      const p = await pendingPage({ deps: deps! }, { decidableBy: approver });
      return { threads: p.pending.map((x) => x.threadId), total: p.total };
    };
    // carol approves tasks (task-approvers, the default) and leads task-leads; she is no deal approver.
    expect(await sqlRows("carol")).toEqual(["thread-task", "thread-leads", "thread-delete"]);
    expect(await listed("carol")).toEqual({
      threads: ["thread-task", "thread-leads", "thread-delete"],
      total: 3,
    });
    // alice approves tasks and deals, and is in deal-approvers but not task-leads.
    expect(await sqlRows("alice")).toEqual([
      "thread-task",
      "thread-deal",
      "thread-deal-esc",
      "thread-delete",
    ]);
    expect(await listed("alice")).toEqual({
      threads: ["thread-task", "thread-deal", "thread-deal-esc", "thread-delete"],
      total: 4,
    });
    // Nobody's approver: the query itself returns nothing, with five rows waiting.
    expect(await sqlRows("mallory")).toEqual([]);
    expect(await listed("mallory")).toEqual({ threads: [], total: 0 });
    // Paged by cursor within the filter.
    const pages = await allPages({ decidableBy: "alice", limit: 3 });
    expect(pages.map((p) => p.threads)).toEqual([
      ["thread-task", "thread-deal", "thread-deal-esc"],
      ["thread-delete"],
    ]);
  });

  it("the CLI prints the next cursor (--json and text), --cursor continues, --offset still passes over, a bad cursor is a usage error", async () => {
    for (let i = 0; i < 5; i++) await register(`c${i}`, i);
    await deps!.close();
    deps = undefined;
    const first = await runCli(["pending", "--json", "--limit", "2"], env);
    expect(first.code, first.stderr).toBe(0);
    const p1 = parseJsonOutput(first.stdout);
    expect(p1).toMatchObject({ total: 5, offset: 0, damaged: [] });
    expect(p1.pending.map((p: { threadId: string }) => p.threadId)).toEqual(["thread-c0", "thread-c1"]);
    expect(typeof p1.next).toBe("string");
    const text = await runCli(["pending", "--limit", "2", "--cursor", p1.next], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("thread-c2");
    expect(text.stdout).toContain("thread-c3");
    expect(text.stdout).not.toContain("thread-c1");
    const more = /\(2 shown of 5; --cursor (\S+) for more\)/.exec(text.stdout);
    expect(more, text.stdout).not.toBeNull();
    const last = parseJsonOutput(
      (await runCli(["pending", "--json", "--limit", "2", "--cursor", more![1]!], env)).stdout,
    );
    expect(last.pending.map((p: { threadId: string }) => p.threadId)).toEqual(["thread-c4"]);
    expect(last.next).toBeNull();
    const offset = parseJsonOutput(
      (await runCli(["pending", "--json", "--limit", "2", "--offset", "3"], env)).stdout,
    );
    expect(offset.pending.map((p: { threadId: string }) => p.threadId)).toEqual(["thread-c3", "thread-c4"]);
    const bad = await runCli(["pending", "--cursor", "not-a-cursor"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("expected a cursor as a page printed it");
  });
});

describe.skipIf(usingPostgres)("the listing's SQL at 100,000 waiting rows (SQLite)", () => {
  const N = 100_000;

  /** A journal file with N waiting rows (and N closed ones), written in bulk; the journal's own schema and indexes. */
  function bulkJournal(): string {
    const file = path.join(tempDir(), "journal.sqlite");
    new SqliteJournal(file, Buffer.alloc(32)).close();
    const db = new Database(file);
    db.exec(`
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${2 * N})
      INSERT INTO actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at)
      SELECT printf('sha256:%064d', i), 't' || i, 1,
        json_object('envelope', json_object('requestedBy', 'u' || (i % 100), 'operation', CASE WHEN i % 3 = 0 THEN 'update_deal' ELSE 'update_task' END,
          'object', json_object('type', CASE WHEN i % 3 = 0 THEN 'deal' ELSE 'task' END, 'id', i % 1000)),
          'escalatedTo', CASE WHEN i % 10 = 0 THEN 'task-leads' ELSE NULL END),
        'x', CASE WHEN i % 2 = 0 THEN 'registered' ELSE 'closed' END, '{}', strftime('%Y-%m-%dT%H:%M:%fZ', 1767225600 + i, 'unixepoch')
      FROM n;`);
    db.close();
    return file;
  }

  it("every page and count query is read through a waiting-rows index: no table scan, no sort of all rows", () => {
    const file = bulkJournal();
    // Opening it again is what an existing journal meets: its indexes are there (made if missing).
    const db = new Database(file);
    try {
      db.exec("DROP INDEX actions_waiting_keyset");
      new SqliteJournal(file, Buffer.alloc(32)).close();
      expect(db.prepare("SELECT COUNT(*) AS n FROM actions WHERE phase = 'registered'").get()).toEqual({
        n: N,
      });
      const mine = decidableIn(loadConfigPolicy(), "carol");
      const after = {
        registeredAt: "2026-01-01T12:00:00.000Z",
        envelopeHash: `sha256:${"0".repeat(60)}5000`,
      };
      const filters: RegisteredFilter[] = [
        {},
        { requestedBy: "u7" },
        { object: { type: "task", id: 7 } },
        { decidable: mine },
        { registeredBefore: "2026-01-02T00:00:00.000Z" },
      ];
      const plans: Array<[string, string]> = [];
      for (const f of filters) {
        for (const q of [
          pageSql(SQLITE, "actions", { ...f, limit: 100 }),
          pageSql(SQLITE, "actions", { ...f, after, limit: 100 }),
          countSql(SQLITE, "actions", f),
        ]) {
          const plan = (
            db.prepare(`EXPLAIN QUERY PLAN ${q.text}`).all(...q.args) as Array<{ detail: string }>
          )
            .map((r) => r.detail)
            .join("\n");
          plans.push([q.text, plan]);
        }
      }
      if (process.env["SHOW_PLANS"])
        for (const [text, plan] of plans) console.log(`${text}\n  ${plan.replaceAll("\n", "\n  ")}`);
      for (const [text, plan] of plans) {
        expect(plan, text).toMatch(
          /USING (COVERING )?INDEX actions_waiting_(keyset|requester_keyset|object_keyset)/,
        );
        expect(plan, text).not.toMatch(/SCAN actions$|SCAN actions\n/m);
        expect(plan, text).not.toContain("TEMP B-TREE FOR ORDER BY");
      }
      // The filters use their own index, and the cursor is a range of it.
      expect(plans[3]![1]).toMatch(/SEARCH actions USING INDEX actions_waiting_requester_keyset/);
      expect(plans[6]![1]).toMatch(/SEARCH actions USING INDEX actions_waiting_object_keyset/);
      expect(plans[1]![1]).toMatch(
        /SEARCH actions USING INDEX actions_waiting_keyset \(\(registered_at,envelope_hash\)>\(\?,\?\)\)/,
      );
    } finally {
      db.close();
    }
  }, 120_000);
});

function loadConfigPolicy() {
  // The repository's default policy, as the stores load it when none is configured.
  return deps!.policy;
}
