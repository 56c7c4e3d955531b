/**
 * 4b. Pending approvals at scale in PostgreSQL: 100,000 waiting approvals, 4 workers.
 *
 * Creating 100,000 waiting runs through the graph would take over an hour on this machine (~25 runs/s),
 * so the population is built in two parts, and the result file says which is which:
 *
 *   real      --real runs (default 300) created through the real path (startRun with the scripted
 *             model, our MCP server, the emulator in its own process, DATABASE_URL set): each has its
 *             checkpoints, audit records, thread row and sealed action row.
 *   replicas  --total minus --real index-only copies: for each, a thread row and an action row,
 *             inserted in bulk. Each copies a real run's registered action with a
 *             new thread id, envelope id, nonce and requester (one of 100), an older createdAt (spread
 *             over the 10 hours before the real runs), so a new envelope hash (hashEnvelope), a card
 *             rendered again for it (renderCard) and a seal made with the journal key (sealAction,
 *             sealThread): `pending` checks every seal and accepts them. No checkpoints, no audit.
 *
 * That is enough for what is measured: `pending` reads only the journal's index (no checkpoint is
 * loaded), and `show` / `approve` are measured on real runs among the 100,000. What the replicas do
 * NOT exercise: anything that loads a checkpoint per waiting thread (the worker's recovery scan does,
 * see below), and the checkpoint/audit tables at 100,000 (their bytes are measured per real run and
 * multiplied on paper).
 *
 * Every CLI command is a new process `node dist/cli/main.js ARGS` (the compiled CLI that `npm run cli`
 * runs, without npm and the freshness check) under /usr/bin/time -v: wall, user+sys CPU, peak RSS.
 * Then --workers worker processes (`worker --json --interval 5`) run while show/approve/pending are
 * measured again.
 *
 *   DATABASE_URL=postgres://… npm run bench -- pending-scale-pg [--total 100000] [--real 300] [--workers 4]
 *       [--concurrency 20] [--repeat 2] [--busy-samples 3] [--keep-schema] [--out NAME]
 *
 * --out NAME writes bench/results/NAME.json instead (e.g. a run with --total equal to --real, where
 * every waiting approval is a real run with its checkpoints).
 *
 * Everything goes into a fresh schema (bench_pending_<time>, and <that>_empty for the fixed cost),
 * dropped at the end unless --keep-schema.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { loadConfig } from "../src/config/env.js";
import { createDeps } from "../src/runtime/deps.js";
import { openApp } from "../src/app/open-app.js";
import { ScriptedChatModel } from "../test/support/scripted-model.js";
import {
  flag,
  intArg,
  pool,
  removeScratch,
  ROOT,
  round,
  sleep,
  tempDir,
  writeResult,
} from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal, stopGroup } from "./support/portal.js";
import { proposeFromRequest, waitingRun } from "./support/app.js";
import { brief, cli, jsonOf, replicate, templates, type Spawned } from "./support/pg-population.js";

const TOTAL = intArg("total", 100_000);
const REAL = intArg("real", 300);
const WORKERS = intArg("workers", 4);
const CONCURRENCY = intArg("concurrency", 20);
const REPEAT = intArg("repeat", 2);
/** show + approve + pending samples taken while the workers are mid-round. */
const BUSY_SAMPLES = intArg("busy-samples", 3);
const REQUESTERS = 100;
/** Replicas' createdAt spread over this many ms before the first real run. */
const SPREAD_MS = 10 * 3600_000;
const TTL_SECONDS = 86_400;
const OUT = (() => {
  const i = process.argv.indexOf("--out");
  return i >= 0 ? process.argv[i + 1]! : "pending-scale-pg";
})();
const CLI = path.join(ROOT, "dist/cli/main.js");

const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL)
  throw new Error("pending-scale-pg needs DATABASE_URL (a PostgreSQL it may create and drop schemas in)");
if (REAL > TOTAL) throw new Error("--real must not exceed --total");

const JOURNAL_TABLES = ["threads", "actions", "decision_claims", "executions", "questions", "object_leases"];
const CHECKPOINT_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"];
const AUDIT_TABLES = ["audit_records"];

async function sizes(client: pg.Pool, schema: string) {
  const rows = (
    await client.query<{
      name: string;
      total: string;
      heap: string;
      indexes: string;
      toast: string;
      n: string;
    }>(
      `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS total, pg_relation_size(c.oid) AS heap,
              pg_indexes_size(c.oid) AS indexes, COALESCE(pg_total_relation_size(c.reltoastrelid), 0) AS toast, c.reltuples AS n
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`,
      [schema],
    )
  ).rows;
  const tables: Record<
    string,
    { total: number; heap: number; indexes: number; toast: number; rows: number }
  > = {};
  for (const r of rows) {
    const count = await client.query<{ n: string }>(
      `SELECT COUNT(*) AS n FROM ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(r.name)}`,
    );
    tables[r.name] = {
      total: Number(r.total),
      heap: Number(r.heap),
      indexes: Number(r.indexes),
      toast: Number(r.toast),
      rows: Number(count.rows[0]!.n),
    };
  }
  const sum = (names: string[]) => names.reduce((a, n) => a + (tables[n]?.total ?? 0), 0);
  return {
    tables,
    journal: sum(JOURNAL_TABLES),
    checkpoints: sum(CHECKPOINT_TABLES),
    audit: sum(AUDIT_TABLES),
  };
}

async function explain(client: pg.Pool, sql: string, values: unknown[] = []): Promise<string[]> {
  const r = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, values);
  return r.rows.map((x) => x["QUERY PLAN"]);
}

interface WorkerProc {
  child: ChildProcess;
  rounds: Array<{
    at: string;
    seenAtMs: number;
    roundMs: number | null;
    swept: number;
    recovered: number;
    error?: string;
  }>;
  stderr: string;
}

function startWorker(env: Record<string, string>, t0: number): WorkerProc {
  // Its own process group, so it (and its MCP server child) can be stopped together by its own id.
  const child = spawn("node", [CLI, "worker", "--json", "--interval", "5"], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const w: WorkerProc = { child, rounds: [], stderr: "" };
  let buf = "";
  // `worker --json` prints each round as one pretty-printed object: it ends at a "}" line of its own.
  child.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf("\n}\n"); i >= 0; i = buf.indexOf("\n}\n")) {
      const text = buf.slice(0, i + 2);
      buf = buf.slice(i + 3);
      const seen = Date.now();
      try {
        const r = JSON.parse(text.slice(text.indexOf("{"))) as {
          at: string;
          swept: unknown[];
          recovered: unknown[];
          error?: string;
        };
        w.rounds.push({
          at: r.at,
          seenAtMs: round(performance.now() - t0),
          roundMs: seen - Date.parse(r.at),
          swept: r.swept.length,
          recovered: r.recovered.length,
          ...(r.error ? { error: r.error } : {}),
        });
      } catch (e) {
        w.rounds.push({
          at: "",
          seenAtMs: round(performance.now() - t0),
          roundMs: null,
          swept: 0,
          recovered: 0,
          error: `unparsed output: ${(e as Error).message}`,
        });
      }
    }
  });
  child.stderr!.on("data", (d: Buffer) => (w.stderr += d.toString()));
  return w;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const schema = `bench_pending_${startedAt.toISOString().replace(/\D/g, "").slice(0, 14)}`;
  const emptySchema = `${schema}_empty`;
  const keyB64 = randomBytes(32).toString("base64");
  const key = Buffer.from(keyB64, "base64");
  const dir = tempDir("ae-bench-pending-pg-");
  const dataDir = path.join(dir, "data");
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const built = spawnSync("node", ["scripts/build.mjs", "--if-stale"], { cwd: ROOT, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}`);
  const portal = await startBenchPortal({ dir, tasks: REAL + 10, rate: 0 });
  const env: Record<string, string> = {
    DATABASE_URL: DATABASE_URL!,
    ACTION_ENVELOPE_DB_SCHEMA: schema,
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    ACTION_ENVELOPE_JOURNAL_KEY: keyB64,
    ACTION_ENVELOPE_TTL_SECONDS: String(TTL_SECONDS),
    BITRIX24_WEBHOOK_URL: portal.webhookUrl,
    MODEL: "offline",
    BITRIX24_RATE: "0",
  };
  const runs: Spawned[] = [];
  const measure = async (label: string, args: string[], e = env) => {
    const r = await cli(label, args, e);
    runs.push(r);
    console.log(
      `${label}: ${r.wallMs} ms wall, ${r.cpuMs} ms CPU, ${r.maxRssKb} KB peak RSS, exit ${r.exitCode}`,
    );
    return r;
  };
  const workers: WorkerProc[] = [];
  const result: Record<string, unknown> = {};
  try {
    // Fixed cost: the same listing against an empty schema (the first run creates it; not counted).
    const emptyEnv = { ...env, ACTION_ENVELOPE_DB_SCHEMA: emptySchema };
    await cli("warm-up (creates the empty schema)", ["pending", "--json"], emptyEnv);
    for (let r = 0; r < REPEAT; r++) await measure("empty: pending --json", ["pending", "--json"], emptyEnv);
    for (let r = 0; r < REPEAT; r++)
      await measure("empty: worker --once", ["worker", "--once", "--json"], emptyEnv);

    // Real waiting runs through the graph.
    const config = loadConfig(env, ROOT);
    const deps = await createDeps(config, {
      model: new ScriptedChatModel(proposeFromRequest),
      modelLabel: "scripted (bench)",
    });
    const app = openApp(deps);
    const t0 = performance.now();
    const realThreads: string[] = [];
    await pool(
      Array.from({ length: REAL }, (_, i) => FIRST_BENCH_TASK + i),
      CONCURRENCY,
      async (task) => {
        const v = await waitingRun(app, task);
        realThreads.push(v.threadId);
      },
    );
    const createSeconds = (performance.now() - t0) / 1000;
    await app.close();
    console.log(
      `${REAL} real waiting runs in ${round(createSeconds)} s (${round(REAL / createSeconds)} runs/s)`,
    );
    await admin.query(`VACUUM ANALYZE`);
    const sizesReal = await sizes(admin, schema);
    result.real = {
      runs: REAL,
      createSeconds: round(createSeconds),
      runsPerSecond: round(REAL / createSeconds),
      sizes: sizesReal,
    };

    const allReal = await measure(`${REAL} real: pending --json --limit ${TOTAL}`, [
      "pending",
      "--json",
      "--limit",
      String(TOTAL),
    ]);
    if (jsonOf(allReal).total !== REAL)
      throw new Error(`expected ${REAL} waiting, pending says ${jsonOf(allReal).total}`);
    await measure(`${REAL} real: worker --once`, ["worker", "--once", "--json"]);

    // Index-only replicas up to TOTAL.
    const tpl = await templates(admin, schema, key);
    const cardMismatch = tpl.filter((t) => !t.cardMatches).length;
    if (cardMismatch)
      throw new Error(
        `${cardMismatch} real cards do not re-render identically; replicas' cards would differ from what build_envelope makes`,
      );
    console.log(`replicating ${TOTAL - REAL} index-only rows from ${tpl.length} real ones`);
    const rep = await replicate(admin, schema, key, tpl, TOTAL - REAL, {
      requesters: REQUESTERS,
      spreadMs: SPREAD_MS,
    });
    const v0 = performance.now();
    await admin.query(`VACUUM ANALYZE`);
    const vacuumSeconds = round((performance.now() - v0) / 1000);
    const sizesTotal = await sizes(admin, schema);
    // What building the listing indexes costs on a table that already holds TOTAL rows (migration 6
    // applied to an existing deployment): the same definitions under other names, timed, dropped.
    const defs = (
      await admin.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE 'actions_waiting%'`,
        [schema],
      )
    ).rows;
    const indexBuild: Record<string, number> = {};
    for (const d of defs) {
      const i0 = performance.now();
      await admin.query(d.indexdef.replace(`INDEX ${d.indexname} ON`, `INDEX ${d.indexname}_probe ON`));
      indexBuild[d.indexname] = round(performance.now() - i0);
      await admin.query(
        `DROP INDEX ${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(`${d.indexname}_probe`)}`,
      );
    }
    result.replicas = {
      rows: TOTAL - REAL,
      insertSeconds: rep.seconds,
      hashRenderSealSeconds: rep.sealSeconds,
      vacuumAnalyzeSeconds: vacuumSeconds,
      listingIndexBuildMs: indexBuild,
      requesters: REQUESTERS,
      createdAtSpreadHours: SPREAD_MS / 3600_000,
    };
    result.total = { waiting: TOTAL, sizes: sizesTotal };

    // The listing, all of it and filtered.
    const realPick = await admin.query<{ thread_id: string; envelope_hash: string; task: string }>(
      `SELECT thread_id, envelope_hash, registered_json::jsonb #>> '{envelope,object,id}' AS task FROM ${pg.escapeIdentifier(schema)}.actions WHERE thread_id = ANY($1) AND phase = 'registered'`,
      [realThreads],
    );
    const task = realPick.rows[0]!.task;
    const listing: Array<[string, string[]]> = [
      ["pending --json (default --limit 100)", ["pending", "--json"]],
      [`pending --json --limit ${TOTAL}`, ["pending", "--json", "--limit", String(TOTAL)]],
      [`pending --json --offset ${TOTAL - 100}`, ["pending", "--json", "--offset", String(TOTAL - 100)]],
      [`pending --json --object ${task}`, ["pending", "--json", "--object", task]],
      [
        "pending --json --requested-by bench-user-07",
        ["pending", "--json", "--requested-by", "bench-user-07"],
      ],
      ["pending --json --older-than 5h", ["pending", "--json", "--older-than", "5h"]],
      ["pending --json --mine --as demo-approver", ["pending", "--json", "--mine", "--as", "demo-approver"]],
    ];
    const listed: Record<string, unknown>[] = [];
    for (const [label, args] of listing) {
      const samples: Spawned[] = [];
      for (let r = 0; r < REPEAT; r++) samples.push(await measure(`${TOTAL}: ${label}`, args));
      const page = jsonOf(samples[0]!);
      if (samples.some((x) => x.exitCode !== 0))
        throw new Error(`${label} failed: ${samples[0]!.stderr.slice(-1500)}`);
      listed.push({
        label,
        total: page.total,
        listed: page.pending.length,
        damaged: page.damaged.length,
        samples: samples.map(brief),
      });
    }
    const all = listed[1]!;
    if (all.total !== TOTAL || all.listed !== TOTAL || all.damaged !== 0)
      throw new Error(`expected ${TOTAL} listed, none damaged; got ${JSON.stringify(all)}`);
    result.listing = listed;

    // The queries behind them, as PostgreSQL runs them at this size.
    const s = pg.escapeIdentifier(schema);
    result.plans = {
      count: await explain(admin, `SELECT COUNT(*) AS n FROM ${s}.actions WHERE phase = 'registered'`),
      firstPage: await explain(
        admin,
        `SELECT * FROM ${s}.actions WHERE phase = 'registered' ORDER BY registered_at, id LIMIT 100 OFFSET 0`,
      ),
      byRequester: await explain(
        admin,
        `SELECT COUNT(*) AS n FROM ${s}.actions WHERE phase = 'registered' AND (registered_json::jsonb #>> '{envelope,requestedBy}') = $1`,
        ["bench-user-07"],
      ),
      byTask: await explain(
        admin,
        `SELECT COUNT(*) AS n FROM ${s}.actions WHERE phase = 'registered' AND (registered_json::jsonb #>> '{envelope,object,id}') = $1`,
        [task],
      ),
      openThreads: await explain(
        admin,
        `SELECT thread_id, MIN(id) AS first FROM ${s}.actions WHERE phase IN ('registered','decided','pre_read','intent','acknowledged','verified') GROUP BY thread_id ORDER BY first`,
      ),
    };

    // show / approve one real run among TOTAL, each a fresh process; then a worker round.
    const picks = realPick.rows.slice(0, REPEAT + BUSY_SAMPLES);
    const act = async (phase: string, pick: { thread_id: string; envelope_hash: string }) => {
      const show = await measure(`${phase}: show ${pick.thread_id} --json`, [
        "show",
        pick.thread_id,
        "--json",
      ]);
      if (jsonOf(show).status !== "awaiting_approval") throw new Error(`show: ${show.stdout.slice(0, 500)}`);
      const approve = await measure(`${phase}: approve --json`, [
        "approve",
        pick.thread_id,
        "--hash",
        pick.envelope_hash,
        "--as",
        "demo-approver",
        "--json",
      ]);
      const outcome = `${jsonOf(approve).outcome ?? jsonOf(approve).state?.outcome}`;
      if (approve.exitCode !== 0)
        throw new Error(
          `approve exited ${approve.exitCode} (${outcome}): ${approve.stdout.slice(-1000)} ${approve.stderr.slice(-1000)}`,
        );
      return { thread: pick.thread_id, show: brief(show), approve: brief(approve), outcome };
    };
    const quiet = [];
    for (const p of picks.slice(0, REPEAT)) quiet.push(await act(`${TOTAL}, no worker`, p));
    const onceRound = await measure(`${TOTAL}: worker --once`, ["worker", "--once", "--json"]);
    result.noWorkers = {
      decisions: quiet,
      workerOnce: {
        ...brief(onceRound),
        round: (() => {
          try {
            const r = jsonOf(onceRound);
            return { swept: r.swept.length, recovered: r.recovered.length, error: r.error ?? null };
          } catch {
            return null;
          }
        })(),
      },
    };

    // --workers worker processes sweeping while we decide.
    const wt0 = performance.now();
    for (let i = 0; i < WORKERS; i++) workers.push(startWorker(env, wt0));
    // Let every worker finish its first round (start-up + one sweep) before measuring, bounded.
    const deadline = performance.now() + 300_000;
    while (workers.some((w) => w.rounds.length === 0) && performance.now() < deadline) await sleep(500);
    const firstRoundsMs = workers.map((w) => w.rounds[0]?.seenAtMs ?? null);
    console.log(`workers' first round done at ${firstRoundsMs.join(", ")} ms`);
    // All workers started together, so their rounds stay roughly in step, with a 5 s pause between
    // them. Start measuring once the second rounds are under way, so the samples fall inside rounds
    // rather than in the pause (the first run of this benchmark measured right after the first
    // rounds, partly in the pause); each sample records how much of it the workers spent in a round.
    await sleep(6000);
    const spans: Array<{ label: string; startMs: number; endMs: number }> = [];
    const during = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
      const startMs = performance.now() - wt0;
      const out = await fn();
      spans.push({ label, startMs: round(startMs), endMs: round(performance.now() - wt0) });
      return out;
    };
    const busy = [];
    const busyList = [];
    for (const p of picks.slice(REPEAT, REPEAT + BUSY_SAMPLES)) {
      busy.push(await during(`decide ${p.thread_id}`, () => act(`${TOTAL}, ${WORKERS} workers`, p)));
      busyList.push(
        brief(
          await during("pending", () =>
            measure(`${TOTAL}, ${WORKERS} workers: pending --json`, ["pending", "--json"]),
          ),
        ),
      );
    }
    // Wait until every worker has reported a round that ended after the last sample (bounded), so
    // each sample's overlap with rounds can be computed from the rounds' start and end.
    const lastEnd = spans.at(-1)!.endMs;
    const more = performance.now() + 300_000;
    while (workers.some((w) => !w.rounds.some((r) => r.seenAtMs >= lastEnd)) && performance.now() < more)
      await sleep(1000);
    const inRound = spans.map((sp) => {
      const shares = workers.map((w) => {
        let covered = 0;
        for (const r of w.rounds) {
          if (r.roundMs === null) continue;
          const from = Math.max(sp.startMs, r.seenAtMs - r.roundMs);
          const to = Math.min(sp.endMs, r.seenAtMs);
          if (to > from) covered += to - from;
        }
        return covered / (sp.endMs - sp.startMs);
      });
      return {
        ...sp,
        workersInRound: round(
          shares.reduce((a, b) => a + b, 0),
          2,
        ),
      };
    });
    console.log("samples and the number of workers mid-round during each (average)", inRound);
    const cpu = await admin.query<{ n: string }>(
      `SELECT COUNT(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'action-envelope:%'`,
    );
    result.withWorkers = {
      workers: WORKERS,
      interval: 5,
      firstRoundDoneMs: firstRoundsMs,
      decisions: busy,
      pendingDefault: busyList,
      samplesInRound: inRound,
      rounds: workers.map((w) => w.rounds),
      connectionsOpen: Number(cpu.rows[0]!.n),
      workerStderrTail: workers.map((w) => w.stderr.slice(-800)),
    };
  } finally {
    await Promise.all(workers.map((w) => stopGroup(w.child)));
    await portal.close();
    if (!flag("keep-schema")) {
      for (const sc of [schema, emptySchema])
        await admin
          .query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(sc)} CASCADE`)
          .catch((e: unknown) => console.error(`dropping ${sc}: ${(e as Error).message}`));
    }
    await admin.end();
    removeScratch(dir);
  }

  writeResult(
    "pending-scale-pg",
    {
      setup: {
        database: "PostgreSQL (DATABASE_URL; version recorded below), one fresh schema per run",
        population: {
          real: `${REAL} runs through startRun (scripted model proposing at once, our MCP server, emulator process), ${CONCURRENCY} at a time: checkpoints, audit, journal rows`,
          replicas: `${TOTAL - REAL} index-only rows (threads, actions): a real run's registered action with new thread id, envelope id, nonce, requester (bench-user-00..99) and createdAt (spread over the ${SPREAD_MS / 3600_000} h before the real runs), hashed (hashEnvelope), card re-rendered (renderCard), sealed (sealAction/sealThread) with the journal key; no checkpoints, no audit records`,
          ttlSeconds: `${TTL_SECONDS} (ACTION_ENVELOPE_TTL_SECONDS), so nothing expires during the run`,
        },
        commands:
          "node dist/cli/main.js ARGS (the compiled CLI npm run cli runs, without npm's own start) under /usr/bin/time -v, one process each",
        workers: `${WORKERS} × node dist/cli/main.js worker --json --interval 5`,
        total: TOTAL,
        real: REAL,
        repeat: REPEAT,
        busySamples: BUSY_SAMPLES,
      },
      postgres: await (async () => {
        const p = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
        try {
          const v = await p.query<{ v: string; fsync: string; sb: string }>(
            `SELECT version() AS v, current_setting('fsync') AS fsync, current_setting('shared_buffers') AS sb`,
          );
          return v.rows[0];
        } finally {
          await p.end();
        }
      })(),
      results: result,
      processes: runs.map(brief),
    },
    startedAt,
    OUT,
  );
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
