/**
 * 4c. Past one machine (issue 28's "Done when"): 1,000 / 10,000 / 100,000 waiting approvals in
 * PostgreSQL, the population built as pending-scale-pg builds it (--real runs through the graph, the
 * rest sealed index-only replicas of them, inserted in bulk), measured at each size:
 *
 *   idle round   a worker round with nothing due (`runDueWork`, what `worker` runs each round), in this
 *                process with a checkpointer that counts reads: checkpoint reads and CPU ms per round
 *                (--idle-rounds rounds); and one `worker --once --json` process (CPU includes start-up);
 *   listing      `pending --json` first page, `--mine --as demo-approver`, the last page (by its cursor)
 *                and `--limit <size>`, each a CLI process under /usr/bin/time -v: wall and peak RSS;
 *   plans        EXPLAIN of the listing's count and page queries as the journal sends them.
 *
 * Then, at the largest size, the expiry burst: --burst more real runs whose approvals expire in an hour,
 * and --workers processes (bench/support/due-worker.ts: `runDueWork` every --interval seconds) whose
 * clocks step past that hour at one instant, so every one of them falls due at once. Measured: when
 * the last was closed, in intervals after the step; how many each worker swept; and the audit records
 * per thread (each must be decided exactly once).
 *
 *   DATABASE_URL=postgres://… npm run bench -- scale-pg [--quick] [--sizes 1000,10000,100000]
 *       [--real 200] [--burst 1000] [--workers 4] [--interval 5] [--idle-rounds 5] [--repeat 2]
 *       [--keep-schema]
 *
 * --quick: sizes 1,000 and 10,000 (writes bench/results/scale-pg.quick.json). Everything goes into a
 * fresh schema (bench_scale_<time>), dropped at the end unless --keep-schema.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { loadConfig } from "../src/config/env.js";
import { createDeps, loadPolicyFile } from "../src/runtime/deps.js";
import { openApp, type App } from "../src/app/open-app.js";
import { runDueWork } from "../src/app/due-work.js";
import { createCheckpointer } from "../src/store/checkpointer.js";
import { cursorOf, decidableIn } from "../src/app/pending.js";
import { countSql, pageSql, POSTGRES, type RegisteredFilter } from "../src/store/waiting-list.js";
import { ScriptedChatModel } from "../test/support/scripted-model.js";
import {
  flag,
  intArg,
  median,
  pool,
  removeScratch,
  ROOT,
  round,
  sleep,
  strArg,
  tempDir,
  TSX,
  writeResult,
} from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal, stopGroup } from "./support/portal.js";
import { proposeFromRequest, waitingRun } from "./support/app.js";
import { brief, cli, jsonOf, replicate, templates, type Spawned } from "./support/pg-population.js";
import { countReads } from "./support/due-worker.js";

const QUICK = flag("quick");
const SIZES = strArg("sizes", QUICK ? "1000,10000" : "1000,10000,100000")
  .split(",")
  .map(Number)
  .sort((a, b) => a - b);
const REAL = intArg("real", 200);
const BURST = intArg("burst", 1000);
const WORKERS = intArg("workers", 4);
const INTERVAL_S = intArg("interval", 5);
const IDLE_ROUNDS = intArg("idle-rounds", 5);
const REPEAT = intArg("repeat", 2);
const CONCURRENCY = intArg("concurrency", 20);
const REQUESTERS = 100;
const SPREAD_MS = 10 * 3600_000;
const TTL_SECONDS = 86_400;
/** The burst's approvals expire this long after they are made; the workers' clocks step past it. */
const BURST_TTL_SECONDS = 3600;
/** The issue's targets. */
const TARGETS = { idleCpuMs: 50, pageWallMs: 500, pageRssKb: 150 * 1024, allRssKb: 300 * 1024 };

const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL)
  throw new Error("scale-pg needs DATABASE_URL (a PostgreSQL it may create and drop schemas in)");
if (SIZES.some((n) => !Number.isInteger(n) || n < REAL))
  throw new Error(`--sizes must be whole numbers of at least --real (${REAL})`);

/** `runDueWork` rounds with nothing due, in this process: checkpoint reads and CPU per round. */
async function idleRounds(env: Record<string, string>) {
  const deps = await createDeps(loadConfig(env, ROOT));
  const checkpointer = createCheckpointer(deps.config);
  const counter = countReads(checkpointer);
  const app = openApp(deps, { checkpointer });
  const rounds: Array<{ cpuMs: number; wallMs: number; checkpointReads: number; claimed: number }> = [];
  try {
    for (let i = 0; i < IDLE_ROUNDS + 1; i++) {
      const reads0 = counter.reads;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const r = await runDueWork(app);
      const cpu = process.cpuUsage(cpu0);
      // The first round warms the pool and the modules; it is reported, not counted.
      rounds.push({
        cpuMs: round((cpu.user + cpu.system) / 1000),
        wallMs: round(performance.now() - t0),
        checkpointReads: counter.reads - reads0,
        claimed: r.swept.length + r.recovered.length,
      });
    }
  } finally {
    await app.close();
  }
  const counted = rounds.slice(1);
  return {
    rounds,
    medianCpuMs: round(median(counted.map((r) => r.cpuMs))),
    maxCpuMs: Math.max(...counted.map((r) => r.cpuMs)),
    medianWallMs: round(median(counted.map((r) => r.wallMs))),
    checkpointReads: counted.reduce((a, r) => a + r.checkpointReads, 0),
    claimed: counted.reduce((a, r) => a + r.claimed, 0),
  };
}

async function explain(db: pg.Pool, q: { text: string; args: unknown[] }): Promise<string[]> {
  // PostgreSQL 15 cannot EXPLAIN a statement with parameters: the values are written in.
  let text = q.text;
  q.args.forEach((v, i) => {
    const lit = Array.isArray(v)
      ? `ARRAY[${v.map((x) => pg.escapeLiteral(String(x))).join(",")}]::text[]`
      : typeof v === "number"
        ? String(v)
        : pg.escapeLiteral(String(v));
    text = text.replace(new RegExp(`\\$${i + 1}(?!\\d)`, "g"), lit);
  });
  const r = await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`);
  return r.rows.map((x) => x["QUERY PLAN"]);
}

interface BurstWorker {
  child: ChildProcess;
  rounds: Array<{
    startedAt: number;
    endedAt: number;
    wallMs: number;
    cpuMs: number;
    checkpointReads: number;
    swept: Array<{ threadId: string; result: string }>;
  }>;
  stderr: string;
}

function startBurstWorker(env: Record<string, string>): BurstWorker {
  const child = spawn(TSX, [path.join("bench/support/due-worker.ts")], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const w: BurstWorker = { child, rounds: [], stderr: "" };
  let buf = "";
  child.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.startsWith("{")) w.rounds.push(JSON.parse(line) as BurstWorker["rounds"][number]);
    }
  });
  child.stderr!.on("data", (d: Buffer) => (w.stderr += d.toString()));
  return w;
}

async function realRuns(
  env: Record<string, string>,
  tasks: number[],
): Promise<{ threads: string[]; seconds: number }> {
  const deps = await createDeps(loadConfig(env, ROOT), {
    model: new ScriptedChatModel(proposeFromRequest),
    modelLabel: "scripted (bench)",
  });
  const app: App = openApp(deps);
  const t0 = performance.now();
  const threads: string[] = [];
  try {
    await pool(tasks, CONCURRENCY, async (task) => {
      threads.push((await waitingRun(app, task)).threadId);
    });
  } finally {
    await app.close();
  }
  return { threads, seconds: round((performance.now() - t0) / 1000) };
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const schema = `bench_scale_${startedAt.toISOString().replace(/\D/g, "").slice(0, 14)}`;
  const s = pg.escapeIdentifier(schema);
  const keyB64 = randomBytes(32).toString("base64");
  const key = Buffer.from(keyB64, "base64");
  const dir = tempDir("ae-bench-scale-pg-");
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const built = spawnSync("node", ["scripts/build.mjs", "--if-stale"], { cwd: ROOT, encoding: "utf8" });
  if (built.status !== 0) throw new Error(`npm run build failed: ${built.stderr}`);
  const portal = await startBenchPortal({ dir, tasks: REAL + BURST + 10, rate: 0 });
  const env: Record<string, string> = {
    DATABASE_URL: DATABASE_URL!,
    ACTION_ENVELOPE_DB_SCHEMA: schema,
    ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"),
    ACTION_ENVELOPE_JOURNAL_KEY: keyB64,
    ACTION_ENVELOPE_TTL_SECONDS: String(TTL_SECONDS),
    BITRIX24_WEBHOOK_URL: portal.webhookUrl,
    MODEL: "offline",
    BITRIX24_RATE: "0",
  };
  const processes: Spawned[] = [];
  const measure = async (label: string, args: string[]) => {
    const r = await cli(label, args, env);
    processes.push(r);
    console.log(
      `${label}: ${r.wallMs} ms wall, ${r.cpuMs} ms CPU, ${r.maxRssKb} KB peak RSS, exit ${r.exitCode}`,
    );
    if (r.exitCode !== 0) throw new Error(`${label} exited ${r.exitCode}: ${r.stderr.slice(-1500)}`);
    return r;
  };
  const workers: BurstWorker[] = [];
  const result: Record<string, unknown> = {};
  try {
    // The fixed cost of a CLI process listing: the same command against an empty schema.
    const emptyEnv = { ...env, ACTION_ENVELOPE_DB_SCHEMA: `${schema}_empty` };
    await cli("warm-up (creates the empty schema)", ["pending", "--json"], emptyEnv);
    const empty: Spawned[] = [];
    for (let r = 0; r < REPEAT; r++)
      empty.push(await cli("empty: pending --json", ["pending", "--json"], emptyEnv));
    result.emptySchema = { pendingJson: empty.map(brief) };
    console.log(
      `empty schema: pending --json ${empty.map((x) => `${x.wallMs} ms / ${x.maxRssKb} KB`).join(", ")}`,
    );
    const real = await realRuns(
      env,
      Array.from({ length: REAL }, (_, i) => FIRST_BENCH_TASK + i),
    );
    console.log(`${REAL} real waiting runs in ${real.seconds} s`);
    result.real = { runs: REAL, createSeconds: real.seconds };
    const tpl = await templates(admin, schema, key);
    if (tpl.some((t) => !t.cardMatches)) throw new Error("real cards do not re-render identically");

    const sizes: Record<string, unknown>[] = [];
    let have = REAL;
    const largest = SIZES.at(-1)!;
    for (const size of SIZES) {
      const rep = await replicate(admin, schema, key, tpl, size - have, {
        requesters: REQUESTERS,
        spreadMs: SPREAD_MS,
        first: have - REAL,
        of: largest - REAL,
      });
      have = size;
      await admin.query(`VACUUM ANALYZE ${s}.actions, ${s}.threads`);
      console.log(`\n${size} waiting (${rep.seconds} s to insert the replicas)`);

      const idle = await idleRounds(env);
      console.log(
        `${size}: idle round ${idle.medianCpuMs} ms CPU (median), ${idle.checkpointReads} checkpoint reads`,
      );
      const once = await measure(`${size}: worker --once --json`, ["worker", "--once", "--json"]);

      const last = await admin.query<{ registered_at: string; envelope_hash: string }>(
        `SELECT registered_at, envelope_hash FROM ${s}.actions WHERE phase = 'registered'
         ORDER BY registered_at COLLATE "C", envelope_hash COLLATE "C" OFFSET $1 LIMIT 1`,
        [size - 101],
      );
      const lastCursor = cursorOf({
        registeredAt: last.rows[0]!.registered_at,
        envelopeHash: last.rows[0]!.envelope_hash,
      });
      const listing: Array<[string, string[], number]> = [
        ["first page", ["pending", "--json"], 100],
        ["--mine", ["pending", "--json", "--mine", "--as", "demo-approver"], 100],
        ["last page", ["pending", "--json", "--cursor", lastCursor], 100],
        [`--limit ${size}`, ["pending", "--json", "--limit", String(size)], size],
      ];
      const listed: Record<string, unknown>[] = [];
      for (const [label, args, expect] of listing) {
        const samples: Spawned[] = [];
        for (let r = 0; r < REPEAT; r++) samples.push(await measure(`${size}: pending ${label}`, args));
        const page = jsonOf(samples[0]!);
        if (page.total !== size || page.pending.length !== expect || page.damaged.length !== 0)
          throw new Error(
            `${label}: expected ${expect} of ${size} listed, none damaged; got ${page.pending.length} of ${page.total}, ${page.damaged.length} damaged`,
          );
        if (label === "last page" && page.next !== null) throw new Error("the last page has a next cursor");
        listed.push({
          label,
          total: page.total,
          listed: page.pending.length,
          wallMs: Math.max(...samples.map((x) => x.wallMs)),
          maxRssKb: Math.max(...samples.map((x) => x.maxRssKb ?? 0)),
          samples: samples.map(brief),
        });
      }

      const policy = loadPolicyFile(loadConfig(env, ROOT));
      const mine: RegisteredFilter = { decidable: decidableIn(policy, "demo-approver") };
      const plans = {
        count: await explain(admin, countSql(POSTGRES, `${s}.actions`, {})),
        countMine: await explain(admin, countSql(POSTGRES, `${s}.actions`, mine)),
        firstPage: await explain(admin, pageSql(POSTGRES, `${s}.actions`, { limit: 256 })),
        minePage: await explain(admin, pageSql(POSTGRES, `${s}.actions`, { ...mine, limit: 256 })),
      };
      const seqScans = Object.entries(plans)
        .filter(([, lines]) => lines.some((l) => l.includes("Seq Scan")))
        .map(([k]) => k);
      sizes.push({
        waiting: size,
        replicasInsertSeconds: rep.seconds,
        idleRound: { ...idle, workerOnceProcess: brief(once) },
        listing: listed,
        plans,
        planSeqScans: seqScans,
      });
    }
    result.sizes = sizes;

    // The burst: BURST approvals expiring in BURST_TTL_SECONDS, then workers whose clocks step past it.
    const burstEnv = { ...env, ACTION_ENVELOPE_TTL_SECONDS: String(BURST_TTL_SECONDS) };
    const burst = await realRuns(
      burstEnv,
      Array.from({ length: BURST }, (_, i) => FIRST_BENCH_TASK + REAL + i),
    );
    console.log(`\n${BURST} burst runs (expiring in ${BURST_TTL_SECONDS} s) in ${burst.seconds} s`);
    // The approvals themselves: an escalated one is followed by a fresh one on the same thread.
    const burstHashes = (
      await admin.query<{ envelope_hash: string }>(
        `SELECT envelope_hash FROM ${s}.actions WHERE phase = 'registered' AND thread_id = ANY($1)`,
        [burst.threads],
      )
    ).rows.map((r) => r.envelope_hash);
    await admin.query(`VACUUM ANALYZE ${s}.actions, ${s}.threads`);
    const stepAt = Date.now() + 30_000;
    const workerEnv = {
      ...env,
      BENCH_INTERVAL_MS: String(INTERVAL_S * 1000),
      BENCH_CLOCK_STEP_AT: String(stepAt),
      BENCH_CLOCK_STEP_MS: String((BURST_TTL_SECONDS + 60) * 1000),
    };
    for (let i = 0; i < WORKERS; i++) workers.push(startBurstWorker(workerEnv));
    const readyBy = workers.map(() => null as number | null);
    const waitingOf = async () =>
      Number(
        (
          await admin.query<{ n: string }>(
            `SELECT COUNT(*) AS n FROM ${s}.actions WHERE phase = 'registered' AND envelope_hash = ANY($1)`,
            [burstHashes],
          )
        ).rows[0]!.n,
      );
    let closedAt: number | null = null;
    const giveUp = stepAt + 20 * INTERVAL_S * 1000 + 120_000;
    while (Date.now() < giveUp) {
      workers.forEach((w, i) => (readyBy[i] ??= w.rounds[0]?.endedAt ?? null));
      if (Date.now() > stepAt && (await waitingOf()) === 0) {
        // Seen by this poll (every 0.5 s): a worker stopped mid-round never prints that round.
        closedAt = Date.now();
        break;
      }
      await sleep(500);
    }
    await Promise.all(workers.map((w) => stopGroup(w.child)));
    const sweeps = new Map<string, string[]>();
    for (const w of workers)
      for (const r of w.rounds)
        for (const x of r.swept) sweeps.set(x.threadId, [...(sweeps.get(x.threadId) ?? []), x.result]);
    const burstSet = new Set(burst.threads);
    const audit = (
      await admin.query<{ thread_id: string; event: string; discriminator: string; n: string }>(
        `SELECT thread_id, event, discriminator, COUNT(*) AS n FROM ${s}.audit_records
         WHERE thread_id = ANY($1) AND recorded_at >= $2 GROUP BY thread_id, event, discriminator`,
        [burst.threads, new Date(stepAt).toISOString()],
      )
    ).rows;
    const byKind: Record<string, number> = {};
    const perThread = new Map<string, number>();
    for (const a of audit) {
      const kind = `${a.event}/${a.discriminator}`;
      byKind[kind] = (byKind[kind] ?? 0) + Number(a.n);
    }
    const decisionKinds = Object.keys(byKind).filter((k) => /expire|escalat/i.test(k));
    for (const a of audit)
      if (decisionKinds.includes(`${a.event}/${a.discriminator}`))
        perThread.set(a.thread_id, (perThread.get(a.thread_id) ?? 0) + Number(a.n));
    const onceEach = burst.threads.filter((t) => perThread.get(t) === 1).length;
    const intervals = closedAt !== null ? round((closedAt - stepAt) / (INTERVAL_S * 1000), 2) : null;
    result.burst = {
      approvals: BURST,
      createSeconds: burst.seconds,
      workers: WORKERS,
      intervalSeconds: INTERVAL_S,
      workersReadyBeforeStep: readyBy.map((t) => (t === null ? null : t < stepAt)),
      allClosed: closedAt !== null,
      stillWaiting: await waitingOf(),
      lastClosedMsAfterStep: closedAt !== null ? closedAt - stepAt : null,
      intervalsAfterStep: intervals,
      // As the workers printed them: a round under way when the workers are stopped is not printed.
      sweptByWorker: workers.map((w) =>
        w.rounds.reduce((a, r) => a + r.swept.filter((x) => burstSet.has(x.threadId)).length, 0),
      ),
      sweepResults: [...sweeps.values()]
        .flat()
        .reduce<Record<string, number>>((a, r) => ((a[r] = (a[r] ?? 0) + 1), a), {}),
      threadsSweptMoreThanOnce: [...sweeps.values()].filter((v) => v.length > 1).length,
      auditRecordsByKind: byKind,
      decisionRecordKinds: decisionKinds,
      threadsWithExactlyOneDecisionRecord: onceEach,
      workerRounds: workers.map((w) => w.rounds.map((r) => ({ ...r, swept: r.swept.length }))),
      workerStderrTail: workers.map((w) => w.stderr.slice(-800)),
    };
    console.log(
      `burst: ${closedAt !== null ? `all ${BURST} closed ${intervals} intervals after the step` : "NOT all closed"}; ${onceEach} with exactly one decision record (${decisionKinds.join(", ")})`,
    );

    const at = (size: number) => (sizes.find((x) => x.waiting === size) ?? sizes.at(-1)!) as any;
    const big = at(largest);
    const row = (label: string) => big.listing.find((l: any) => l.label === label);
    result.targets = {
      atWaiting: largest,
      idleRoundCheckpointReads: { value: big.idleRound.checkpointReads, target: 0 },
      idleRoundCpuMs: { value: big.idleRound.medianCpuMs, target: TARGETS.idleCpuMs },
      burstIntervals: { value: intervals, target: 2 },
      burstExactlyOnce: { value: onceEach, target: BURST },
      pages: ["first page", "--mine", "last page"].map((l) => ({
        label: l,
        wallMs: row(l).wallMs,
        maxRssKb: row(l).maxRssKb,
        target: { wallMs: TARGETS.pageWallMs, maxRssKb: TARGETS.pageRssKb },
      })),
      all: {
        label: `--limit ${largest}`,
        maxRssKb: row(`--limit ${largest}`).maxRssKb,
        target: TARGETS.allRssKb,
      },
    };
    console.log(JSON.stringify(result.targets, null, 1));
  } finally {
    await Promise.all(workers.map((w) => stopGroup(w.child)));
    await portal.close();
    if (!flag("keep-schema"))
      await admin
        .query(`DROP SCHEMA IF EXISTS ${s}, ${pg.escapeIdentifier(`${schema}_empty`)} CASCADE`)
        .catch((e: unknown) => console.error(`dropping ${schema}: ${(e as Error).message}`));
    await admin.end();
    removeScratch(dir);
  }

  writeResult(
    "scale-pg",
    {
      setup: {
        database: "PostgreSQL (DATABASE_URL), one fresh schema per run",
        sizes: SIZES,
        population: `${REAL} runs through startRun (scripted model, our MCP server, emulator process), the rest index-only replicas of them (threads, actions rows: new ids, nonce, requester of ${REQUESTERS}, createdAt spread over ${SPREAD_MS / 3600_000} h; hashed, card re-rendered, sealed with the journal key), inserted 1,000 rows per statement`,
        idleRound: `runDueWork in this process, ${IDLE_ROUNDS} rounds after a warm-up one, checkpointer reads counted (getTuple, list)`,
        listing: "node dist/cli/main.js pending --json … under /usr/bin/time -v; the max of --repeat samples",
        burst: `${BURST} runs through startRun with ACTION_ENVELOPE_TTL_SECONDS=${BURST_TTL_SECONDS}; ${WORKERS} processes of bench/support/due-worker.ts (runDueWork every ${INTERVAL_S} s) whose clocks step ${BURST_TTL_SECONDS + 60} s forward at one instant (30 s after they start)`,
        real: REAL,
        repeat: REPEAT,
      },
      postgres: await (async () => {
        const p = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
        try {
          return (
            await p.query(
              `SELECT version() AS v, current_setting('fsync') AS fsync, current_setting('shared_buffers') AS sb`,
            )
          ).rows[0];
        } finally {
          await p.end();
        }
      })(),
      results: result,
      processes: processes.map(brief),
    },
    startedAt,
    QUICK ? "scale-pg.quick" : "scale-pg",
  );
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
