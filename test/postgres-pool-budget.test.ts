/**
 * One connection budget per process (ACTION_ENVELOPE_PG_POOL): a process resuming many threads at
 * once, at the smallest budget, finishes every one of them and never has more connections open than
 * the budget, counted by the server itself (pg_stat_activity, by the application_name that names the
 * process). The emulator over HTTP, our MCP server over stdio, the offline model; writes are counted
 * in the emulator's call log.
 */
import readline from "node:readline";
import { spawn } from "node:child_process";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { MIN_PG_POOL } from "../src/config/env.js";
import { startRun } from "../src/app/threads.js";
import { createPool, MAX_PREPARED_PER_CONNECTION } from "../src/store/postgres.js";
import {
  approvalOf,
  ROOT,
  scriptCommand,
  eachTestPortal,
  envFor,
  killGroup,
  openTestApp,
  type Portal,
} from "./support/harness.js";
import { adminQuery, NO_POSTGRES, TEST_DATABASE_URL, usingPostgres } from "./support/postgres.js";

if (!usingPostgres) console.info(`test/postgres-pool-budget.test.ts: ${NO_POSTGRES}`);

/** One thread per task, so no resume waits for another's object lease or finds its task already renamed. */
const TASKS = [1, 2, 3, 4, 5, 8];
const THREADS = TASKS.length;

describe.skipIf(!usingPostgres)("PostgreSQL: one connection budget per process", () => {
  let portal: Portal;
  let dataDir: string;
  eachTestPortal((f) => ({ portal, dataDir } = f));

  it(`${THREADS} concurrent resumes in one process at ACTION_ENVELOPE_PG_POOL=${MIN_PG_POOL}: all finish, never more than ${MIN_PG_POOL} connections`, async () => {
    const budget = String(MIN_PG_POOL);
    const app = await openTestApp(portal, dataDir, { env: { ACTION_ENVELOPE_PG_POOL: budget } });
    const views = [];
    try {
      for (const task of TASKS) {
        const view = await startRun(app, {
          request: `rename task ${task} to BUDGET ${task}`,
          requestedBy: "demo-user",
        });
        expect(view.status, `task ${task}`).toBe("awaiting_approval");
        views.push(view);
      }
    } finally {
      await app.close();
    }

    const env = envFor(portal, dataDir, { ACTION_ENVELOPE_PG_POOL: budget });
    const run = scriptCommand(`${ROOT}/test/support/resume-worker.ts`);
    const child = spawn(run.command, run.args, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const replies: Array<{
      ready?: boolean;
      pid?: number;
      armed?: number;
      id?: number;
      view?: { outcome?: string };
      error?: string;
    }> = [];
    let wake = () => {};
    readline.createInterface({ input: child.stdout }).on("line", (l) => {
      if (l.startsWith("{")) replies.push(JSON.parse(l));
      wake();
    });
    const exited = new Promise((resolve) => child.on("close", resolve));
    const waitFor = async (what: string, ok: () => boolean) => {
      const deadline = Date.now() + 120_000;
      while (!ok()) {
        if (child.exitCode !== null) throw new Error(`${what}: the worker ended; stderr:\n${stderr}`);
        if (Date.now() > deadline)
          throw new Error(`${what}: gave up; replies ${JSON.stringify(replies)}; stderr:\n${stderr}`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 200);
        });
      }
    };

    // The probe's own connection is named apart, so it never counts as the worker's.
    const probe = new pg.Client({
      connectionString: TEST_DATABASE_URL,
      application_name: "pool-budget-probe",
    });
    await probe.connect();
    let most = 0;
    let sampling = true;
    try {
      await waitFor("ready", () => replies.some((r) => r.ready));
      const pid = replies.find((r) => r.ready)!.pid!;
      const sampler = (async () => {
        while (sampling) {
          const r = await probe.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name LIKE $1",
            [`action-envelope:%:${pid}`],
          );
          most = Math.max(most, Number(r.rows[0]!.n));
          await new Promise((res) => setTimeout(res, 10));
        }
      })();
      for (const [i, v] of views.entries())
        child.stdin.write(
          `${JSON.stringify({ op: "arm", id: i, threadId: v.threadId, resume: approvalOf(v) })}\n`,
        );
      await waitFor("armed", () => replies.filter((r) => r.armed !== undefined).length === THREADS);
      for (let i = 0; i < THREADS; i++) child.stdin.write(`${JSON.stringify({ op: "go", id: i })}\n`);
      await waitFor("results", () => replies.filter((r) => r.id !== undefined).length === THREADS);
      sampling = false;
      await sampler;

      const results = replies.filter((r) => r.id !== undefined);
      expect(results.map((r) => r.view?.outcome ?? r.error)).toEqual(
        Array.from({ length: THREADS }, () => "VERIFIED"),
      );
      expect(
        (await portal.writes()).filter((w) =>
          String((w.params["fields"] as Record<string, unknown>)?.["TITLE"]).startsWith("BUDGET"),
        ),
      ).toHaveLength(THREADS);
      console.info(
        `test/postgres-pool-budget.test.ts: at most ${most} connections open from the worker (budget ${budget})`,
      );
      expect(most).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(MIN_PG_POOL);
    } finally {
      sampling = false;
      await probe.end();
      child.stdin.write(`${JSON.stringify({ op: "exit" })}\n`);
      const timer = setTimeout(() => child.pid && killGroup(child.pid), 30_000);
      await exited;
      clearTimeout(timer);
    }
  }, 300_000);
});

describe.skipIf(!usingPostgres)("PostgreSQL: statements prepared once per connection", () => {
  const db = (prepare: boolean) => ({
    url: TEST_DATABASE_URL!,
    schema: "public",
    label: "test",
    prepare,
  });
  /** The texts the server holds prepared on the pool's one connection, as pg_prepared_statements lists them. */
  const preparedOn = async (pool: pg.Pool) =>
    (
      await pool.query<{ name: string; statement: string }>(
        "SELECT name, statement FROM pg_prepared_statements ORDER BY statement",
      )
    ).rows;

  it("a statement with parameters is parsed once and then only executed; one without runs unnamed", async () => {
    const pool = createPool(db(true), { name: "prepare-test", max: 1 });
    try {
      for (const n of [1, 2, 3]) {
        const r = await pool.query<{ n: number }>("SELECT $1::int + 1 AS n", [n]);
        expect(r.rows[0]!.n).toBe(n + 1);
      }
      await pool.query("SELECT 1");
      const held = await preparedOn(pool);
      expect(held.map((p) => p.statement)).toEqual(["SELECT $1::int + 1 AS n"]);
      expect(held[0]!.name).toMatch(/^ae_/);
    } finally {
      await pool.end();
    }
  });

  it("a table changed under a prepared statement fails that one statement, then the text is prepared afresh", async () => {
    const pool = createPool(db(true), { name: "prepare-migrated-test", max: 1 });
    const table = `prepare_changed_${process.pid}`;
    // A checked-out connection, as a transaction holds one (pg.Pool's own query() drops a connection
    // after any error, so it would start afresh anyway).
    const c = await pool.connect();
    const read = () => c.query(`SELECT * FROM ${table} WHERE a = $1`, [1]);
    try {
      await c.query(`CREATE TABLE ${table} (a int, b text); INSERT INTO ${table} VALUES (1, 'x')`);
      expect((await read()).rows).toEqual([{ a: 1, b: "x" }]);
      // Another process's migration adds a column.
      await adminQuery(`ALTER TABLE ${table} ADD COLUMN c int`);
      await expect(read()).rejects.toMatchObject({ code: "0A000" });
      expect((await read()).rows).toEqual([{ a: 1, b: "x", c: null }]);
      expect((await read()).rows).toEqual([{ a: 1, b: "x", c: null }]);
      const held = await c.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements");
      expect(
        held.rows.filter((p) => p.statement.includes(table)),
        "the old name and the new",
      ).toHaveLength(2);
    } finally {
      await c.query(`DROP TABLE IF EXISTS ${table}`);
      c.release();
      await pool.end();
    }
  });

  it(`off (ACTION_ENVELOPE_PG_PREPARE=off): nothing is prepared; on: at most ${MAX_PREPARED_PER_CONNECTION} texts a connection, the rest unnamed`, async () => {
    const off = createPool(db(false), { name: "prepare-off-test", max: 1 });
    try {
      expect((await off.query<{ n: number }>("SELECT $1::int + 1 AS n", [1])).rows[0]!.n).toBe(2);
      expect(await preparedOn(off)).toEqual([]);
    } finally {
      await off.end();
    }
    const on = createPool(db(true), { name: "prepare-bound-test", max: 1 });
    try {
      const texts = MAX_PREPARED_PER_CONNECTION + 3;
      for (let i = 0; i < texts; i++) {
        const r = await on.query<{ n: number }>(`SELECT $1::int + ${i} AS n`, [1]);
        expect(r.rows[0]!.n).toBe(1 + i);
      }
      // The last texts ran unnamed; the first ones stay prepared and are still executed by name.
      expect((await on.query<{ n: number }>("SELECT $1::int + 0 AS n", [5])).rows[0]!.n).toBe(5);
      expect(await preparedOn(on)).toHaveLength(MAX_PREPARED_PER_CONNECTION);
    } finally {
      await on.end();
    }
  });
});
