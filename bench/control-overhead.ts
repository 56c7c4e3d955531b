/**
 * 1. Control overhead against a bare LangGraph graph making the same three calls. Same MCP client over
 * stdio, same emulator (its own process, no latency, no rate limit), SQLite files in one directory.
 * Measured from the resume to the end:
 *   bare: interrupt, resume, then read → write → read (tasks.task.get, tasks.task.update,
 *         tasks.task.get), a node each, SqliteSaver as LangGraph ships it;
 *   ours: submitDecision from the interrupt to VERIFIED, with everything our app does on the way.
 * At 1 thread the two alternate action by action (paired: drift on a shared machine hits both alike);
 * at N concurrent threads, N waiting runs are resumed with Promise.all, rounds alternating which goes
 * first. Commits and fsync-level commits are counted per SQLite connection with its actual settings
 * (./support/sqlite-commits.ts), for both variants.
 *
 * The timed figures (1-thread latency and CPU, throughput at N) come from uninstrumented samples: the
 * timing probe and the commit counter are off and no per-step marks are taken, so neither variant pays
 * for being watched. Commit and fsync counts and ours' per-segment breakdown come from separate
 * instrumented samples after them: INSTRUMENTED = max(5, ceil(samples / 3)) actions per variant at 1
 * thread, alternating, and one extra round per variant at N.
 *
 *   npm run bench -- control-overhead [--quick] [--samples 40] [--warmup 5] [--threads 50] [--rounds 3] [--out NAME]
 *
 * --quick is --samples 12 --warmup 2 --rounds 2 and writes bench/results/control-overhead.quick.json.
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { submitDecision } from "../src/app/threads.js";
import type { ThreadView } from "../src/app/view-thread.js";
import {
  flag,
  intArg,
  pool,
  quantile,
  round,
  strArg,
  summary,
  tempDir,
  writeResult,
  removeScratch,
} from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import {
  BARE_CHECKPOINTS,
  approvalOf,
  breakdown,
  instrument,
  leanDecision,
  openBareGraph,
  openBenchApp,
  timedDecision,
  waitingRun,
  type TimedDecision,
} from "./support/app.js";
import { diff, total, type Counts, type FileCounts } from "./support/sqlite-commits.js";

const QUICK = flag("quick");
const SAMPLES = intArg("samples", QUICK ? 12 : 40);
const WARMUP = intArg("warmup", QUICK ? 2 : 5);
const THREADS = intArg("threads", 50);
const ROUNDS = intArg("rounds", QUICK ? 2 : 3);
const OUT = strArg("out", QUICK ? "control-overhead.quick" : "control-overhead");
const INSTRUMENTED = Math.max(5, Math.ceil(SAMPLES / 3));

/** Which samples each figure comes from; printed under the tables and kept in the result. */
const METHOD = `timed figures (1-thread latency and CPU, ${THREADS}-concurrent throughput and per-resume ms) come from uninstrumented samples: timing probe and commit counter off, no per-step marks, for both variants; commit and fsync-level counts, the per-file table and ours' per-segment breakdown come from ${INSTRUMENTED} instrumented actions per variant at 1 thread (after the timed ones, alternating) and from one extra instrumented round per variant at ${THREADS} (its row has instrumented: true and is left out of the throughput figure)`;

/** One portal's limit is 2 requests/s; an action makes three calls. */
export const PORTAL_ACTIONS_PER_SECOND = 2 / 3;

const isBare = (file: string) => file === BARE_CHECKPOINTS;
const isOurs = (file: string) => !isBare(file) && file !== ":memory:" && file !== "commit-probe.sqlite";

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-overhead-");
  const portal = await startBenchPortal({
    dir,
    tasks: 2 * (WARMUP + SAMPLES + INSTRUMENTED + THREADS * (ROUNDS + 1)),
    rate: 0,
  });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  const bare = openBareGraph(bench.app.deps.tools, `${dir}/data`);
  let nextTask = FIRST_BENCH_TASK;
  const task = () => nextTask++;

  try {
    // --- one at a time, alternating: timed, uninstrumented --------------------------------------------
    instrument(bench, false);
    const seqBare: Array<{ ms: number; cpuMs: number }> = [];
    const seqOurs: Array<{ totalMs: number; cpuMs: number }> = [];
    const expectVerified = (view: ThreadView) => {
      if (view.state?.outcome !== "VERIFIED")
        throw new Error(
          `expected VERIFIED, got ${view.status} ${view.state?.outcome}/${view.state?.reasonCode}: ${view.state?.reason} ${JSON.stringify(view.state?.refusals)}`,
        );
    };
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const runBare = async () => {
        const id = `bare-seq-${i}`;
        await bare.start(id, task());
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await bare.resume(id);
        const ms = performance.now() - t0;
        const c = process.cpuUsage(c0);
        if (i >= WARMUP) seqBare.push({ ms, cpuMs: (c.user + c.system) / 1000 });
      };
      const runOurs = async () => {
        const view = await waitingRun(bench.app, task());
        const timed = await leanDecision(bench, view.threadId, approvalOf(view));
        expectVerified(timed.view);
        if (i >= WARMUP) seqOurs.push({ totalMs: timed.totalMs, cpuMs: timed.cpuMs });
      };
      await alternate(i, runBare, runOurs);
    }

    // --- one at a time, alternating: instrumented (commits, fsyncs, segments) --------------------------
    instrument(bench, true);
    const insBare: Array<{ ms: number; commits: Counts }> = [];
    const insOurs: TimedDecision[] = [];
    for (let i = 0; i < INSTRUMENTED; i++) {
      const runBare = async () => {
        const id = `bare-ins-${i}`;
        await bare.start(id, task());
        const k0 = bench.commits.snapshot();
        const t0 = performance.now();
        await bare.resume(id);
        const ms = performance.now() - t0;
        insBare.push({ ms, commits: diff(bench.commits.snapshot(), k0) });
      };
      const runOurs = async () => {
        const view = await waitingRun(bench.app, task());
        const timed = await timedDecision(bench, view.threadId, approvalOf(view));
        expectVerified(timed.view);
        insOurs.push(timed);
      };
      await alternate(i, runBare, runOurs);
    }
    instrument(bench, false);

    // --- N waiting threads resumed at once: timed rounds uninstrumented, then one counted round each ----
    const rounds: Array<{
      round: number;
      variant: "bare" | "ours";
      instrumented: boolean;
      wallMs: number;
      actionsPerSecond: number;
      cpuMsPerAction: number;
      eventLoopBusy: number;
      commitsPerAction: number | null;
      fsyncLevelPerAction: number | null;
    }> = [];
    const conMs: Record<"bare" | "ours", number[]> = { bare: [], ours: [] };
    const batch = async (
      r: number,
      variant: "bare" | "ours",
      counted: boolean,
      resumeAll: () => Promise<Array<Promise<unknown>>>,
    ) => {
      const k0 = counted ? bench.commits.snapshot() : undefined;
      const c0 = process.cpuUsage();
      const e0 = performance.eventLoopUtilization();
      const t0 = performance.now();
      const ends = await Promise.all((await resumeAll()).map((p) => p.then(() => performance.now() - t0)));
      const wall = performance.now() - t0;
      const c = process.cpuUsage(c0);
      const elu = performance.eventLoopUtilization(e0).utilization;
      const k = k0 && total(diff(bench.commits.snapshot(), k0), variant === "bare" ? isBare : isOurs);
      if (!counted) conMs[variant].push(...ends);
      rounds.push({
        round: r,
        variant,
        instrumented: counted,
        wallMs: round(wall),
        actionsPerSecond: round((THREADS * 1000) / wall),
        cpuMsPerAction: round((c.user + c.system) / 1000 / THREADS),
        eventLoopBusy: round(elu),
        commitsPerAction: k ? round(k.commits / THREADS) : null,
        fsyncLevelPerAction: k ? round((k.durableCommits + k.syncCalls) / THREADS) : null,
      });
    };
    // Rounds 0..ROUNDS-1 are timed; round ROUNDS counts commits with the counter on (the probe stays
    // off: no figure reads its spans at N).
    for (let r = 0; r <= ROUNDS; r++) {
      const counted = r === ROUNDS;
      const ids = Array.from({ length: THREADS }, (_, k) => `bare-con-${r}-${k}`);
      await pool(ids, 10, (id) => bare.start(id, task()));
      const views = await pool(
        Array.from({ length: THREADS }, () => task()),
        10,
        (t) => waitingRun(bench.app, t),
      );
      if (counted) bench.commits.resume();
      const roundBare = () => batch(r, "bare", counted, async () => ids.map((id) => bare.resume(id)));
      const roundOurs = () =>
        batch(r, "ours", counted, async () =>
          views.map(async (v) => {
            const done = await submitDecision(bench.app, v.threadId, approvalOf(v));
            if (done.state?.outcome !== "VERIFIED")
              throw new Error(
                `expected VERIFIED, got ${done.state?.outcome}/${done.state?.reasonCode}: ${done.state?.reason}`,
              );
          }),
        );
      await alternate(r, roundBare, roundOurs);
      if (counted) bench.commits.pause();
    }

    // --- report -----------------------------------------------------------------------------------------
    const latBare = summary(seqBare.map((s) => s.ms));
    const latOurs = summary(seqOurs.map((s) => s.totalMs));
    const cpuBare = summary(seqBare.map((s) => s.cpuMs));
    const cpuOurs = summary(seqOurs.map((s) => s.cpuMs));
    const perAction = (samples: Counts[], pick: (file: string) => boolean) => {
      const totals = samples.map((c) => total(c, pick));
      return {
        commits: summary(totals.map((t) => t.commits)),
        durableCommits: summary(totals.map((t) => t.durableCommits)),
        syncCalls: summary(totals.map((t) => t.syncCalls)),
        fsyncLevel: summary(totals.map((t) => t.durableCommits + t.syncCalls)),
      };
    };
    const commitsBare = perAction(
      insBare.map((s) => s.commits),
      isBare,
    );
    const commitsOurs = perAction(
      insOurs.map((s) => s.commits),
      isOurs,
    );
    const aps = (v: "bare" | "ours") =>
      summary(rounds.filter((x) => x.variant === v && !x.instrumented).map((x) => x.actionsPerSecond)).median;
    const conCommits = (v: "bare" | "ours", k: "commitsPerAction" | "fsyncLevelPerAction") =>
      summary(rounds.filter((x) => x.variant === v && x.instrumented).map((x) => x[k] ?? NaN)).median;
    const apsBare = aps("bare");
    const apsOurs = aps("ours");
    // How far the ratios move inside this run: each 1-thread pair (run back to back) and each round at N
    // (both variants resumed one after the other) gives a ratio of its own.
    const pairRatios = (k: "ms" | "cpuMs") =>
      seqOurs.map((o, i) => (k === "ms" ? o.totalMs : o.cpuMs) / seqBare[i]![k]);
    const roundRatios = [...new Set(rounds.filter((x) => !x.instrumented).map((x) => x.round))].map((r) => {
      const of = (v: "bare" | "ours") =>
        rounds.find((x) => x.round === r && x.variant === v && !x.instrumented)!.actionsPerSecond;
      return of("ours") / of("bare");
    });
    const between = (xs: number[], lo: number, hi: number) =>
      `${round(quantile(xs, lo))}–${round(quantile(xs, hi))}`;
    const figures = [
      {
        figure: "resume → VERIFIED, 1 thread, median ms",
        ours: latOurs.median,
        bare: latBare.median,
        ratio: round(latOurs.median / latBare.median),
        target: "≤ 1.5×",
        met: latOurs.median / latBare.median <= 1.5,
      },
      {
        figure: "resume → VERIFIED, 1 thread, p95 ms",
        ours: latOurs.p95,
        bare: latBare.p95,
        ratio: round(latOurs.p95 / latBare.p95),
        target: "",
        met: null,
      },
      {
        figure: "CPU per action, 1 thread, median ms",
        ours: cpuOurs.median,
        bare: cpuBare.median,
        ratio: round(cpuOurs.median / cpuBare.median),
        target: "≤ 2×",
        met: cpuOurs.median / cpuBare.median <= 2,
      },
      {
        figure: `throughput, ${THREADS} concurrent resumes, actions/s (median of ${ROUNDS} rounds)`,
        ours: apsOurs,
        bare: apsBare,
        ratio: round(apsOurs / apsBare),
        target: "≥ 0.6×",
        met: apsOurs / apsBare >= 0.6,
      },
      {
        figure: "actions/s per process ÷ one portal's limit (2 req/s = 0.67 actions/s)",
        ours: round(apsOurs / PORTAL_ACTIONS_PER_SECOND, 1),
        bare: round(apsBare / PORTAL_ACTIONS_PER_SECOND, 1),
        ratio: round(apsOurs / apsBare),
        target: "ours ≥ 50",
        met: apsOurs / PORTAL_ACTIONS_PER_SECOND >= 50,
      },
      {
        figure: "SQLite commits per action, 1 thread (median)",
        ours: commitsOurs.commits.median,
        bare: commitsBare.commits.median,
        ratio: round(commitsOurs.commits.median / commitsBare.commits.median),
        target: "shown",
        met: null,
      },
      {
        figure:
          "fsync-level commits per action, 1 thread (median; SQLite commits that fsync + fsync calls outside SQLite)",
        ours: `${commitsOurs.fsyncLevel.median} (${commitsOurs.durableCommits.median} + ${commitsOurs.syncCalls.median})`,
        bare: `${commitsBare.fsyncLevel.median} (${commitsBare.durableCommits.median} + ${commitsBare.syncCalls.median})`,
        ratio: null,
        target: "ours ≤ 2",
        met: commitsOurs.fsyncLevel.median <= 2,
      },
      {
        figure: `ratios within this run: latency and CPU of each 1-thread pair (25th–75th percentile), throughput of each round at ${THREADS} (lowest–highest)`,
        ours: `${between(pairRatios("ms"), 0.25, 0.75)} / ${between(pairRatios("cpuMs"), 0.25, 0.75)} / ${between(roundRatios, 0, 1)}`,
        bare: "",
        ratio: null,
        target: "",
        met: null,
      },
      {
        figure: `commits / fsync-level commits per action, ${THREADS} concurrent (median of instrumented rounds)`,
        ours: `${conCommits("ours", "commitsPerAction")} / ${conCommits("ours", "fsyncLevelPerAction")}`,
        bare: `${conCommits("bare", "commitsPerAction")} / ${conCommits("bare", "fsyncLevelPerAction")}`,
        ratio: null,
        target: "",
        met: null,
      },
    ];
    const files = perFile(
      insOurs.map((s) => s.commits),
      insBare.map((s) => s.commits),
    );
    const bd = breakdown(insOurs);
    // What the instrumented samples took: against the timed figures, the instrumentation's own cost.
    const instrumentedLat = {
      ours: summary(insOurs.map((s) => s.totalMs)),
      bare: summary(insBare.map((s) => s.ms)),
    };
    const oneCommit = durableCommitMs(`${dir}/data`);

    console.log(
      "control overhead: ours vs bare LangGraph making the same three calls; emulator without latency or rate limit",
    );
    console.table(figures.map(({ met, ...f }) => ({ ...f, met: met === null ? "" : met ? "yes" : "NO" })));
    console.log(`samples: ${METHOD}`);
    console.log(
      `instrumented 1-thread samples, median ms (not a figure): ours ${instrumentedLat.ours.median}, bare ${instrumentedLat.bare.median}`,
    );
    console.log(
      "per action, 1 thread, per file (mean, instrumented samples): commits, those that fsync, fsync calls outside SQLite, settings at commit",
    );
    console.table(files);
    console.table(rounds);
    console.log(
      "ours, 1 thread, instrumented samples: mean ms per segment (a node's segment also holds the previous step's checkpoint write)",
    );
    console.table(bd.rows.map(({ callsPerAction: _c, ...rest }) => rest));
    console.log("ours totals (mean ms per action)", bd.totals);
    console.log(
      `one fsync-level commit on this disk (WAL, synchronous=FULL, one row): median ${oneCommit.medianMs} ms, p95 ${oneCommit.p95Ms} ms`,
    );

    writeResult(
      "control-overhead",
      {
        setup: {
          emulator: { process: portal.command, rate: 0, latencyMs: 0 },
          mcp: "our MCP server over stdio (one client, shared by both variants)",
          checkpointers:
            "ours: the app's own (createCheckpointer); bare: SqliteSaver on bare-checkpoints.sqlite; durability sync for both",
          model: "scripted, not measured (the run is already waiting when timing starts)",
          counting:
            "commits per SQLite connection at the better-sqlite3 level with the connection's synchronous and journal_mode read at each commit , plus fsync calls outside SQLite from this process (bench/support/sqlite-commits.ts); WAL checkpoints, WAL-header and directory syncs, and PostgreSQL are not counted",
          method: METHOD,
          quick: QUICK,
          samples: SAMPLES,
          warmup: WARMUP,
          instrumentedSamples: INSTRUMENTED,
          threads: THREADS,
          rounds: ROUNDS,
          instrumentedRounds: 1,
        },
        results: {
          figures,
          portalActionsPerSecond: round(PORTAL_ACTIONS_PER_SECOND, 3),
          latency1Thread: { ours: latOurs, bare: latBare },
          cpu1Thread: { ours: cpuOurs, bare: cpuBare },
          commits1Thread: { ours: commitsOurs, bare: commitsBare, perFile: files },
          concurrent: { ours: summary(conMs.ours), bare: summary(conMs.bare), rounds },
          breakdownOurs1Thread: bd,
          instrumented1Thread: instrumentedLat,
          oneDurableCommit: { medianMs: oneCommit.medianMs, p95Ms: oneCommit.p95Ms },
          // Everything this process committed, per file (waiting runs included): compare with
          // strace -f -e trace=fsync,fdatasync -y on the same run to see the WAL checkpoints too.
          processTotals: bench.commits.snapshot(),
        },
        raw: {
          ours1ThreadMs: seqOurs.map((s) => round(s.totalMs, 3)),
          bare1ThreadMs: seqBare.map((s) => round(s.ms, 3)),
          ours1ThreadCpuMs: seqOurs.map((s) => round(s.cpuMs, 3)),
          bare1ThreadCpuMs: seqBare.map((s) => round(s.cpuMs, 3)),
          ours1ThreadCommits: insOurs.map((s) => compact(s.commits)),
          bare1ThreadCommits: insBare.map((s) => compact(s.commits)),
          ours1ThreadInstrumentedMs: insOurs.map((s) => round(s.totalMs, 3)),
          bare1ThreadInstrumentedMs: insBare.map((s) => round(s.ms, 3)),
          ours1ThreadSegments: insOurs.map((s) =>
            s.segments.map((g) => ({
              name: g.name,
              ms: round(g.ms, 3),
              journal: round(g.journal, 3),
              audit: round(g.audit, 3),
              mcp: round(g.mcp, 3),
              sqlite: Object.fromEntries(Object.entries(g.sqlite).map(([f, v]) => [f, round(v, 3)])),
            })),
          ),
          oursConcurrentMs: conMs.ours.map((x) => round(x, 3)),
          bareConcurrentMs: conMs.bare.map((x) => round(x, 3)),
          oneDurableCommitMs: oneCommit.samples,
        },
      },
      startedAt,
      OUT,
    );
  } finally {
    bare.close();
    await bench.close();
    await portal.close();
    removeScratch(dir);
  }
}

/** Runs the pair in the order that alternates with `i`: drift on a shared machine hits both alike. */
async function alternate(i: number, first: () => Promise<void>, second: () => Promise<void>): Promise<void> {
  if (i % 2 === 0) {
    await first();
    await second();
  } else {
    await second();
    await first();
  }
}

/** Mean commits per action of each file, with the settings they committed under. */
function perFile(ours: Counts[], bare: Counts[]) {
  const rows: Array<{
    variant: string;
    file: string;
    commits: number;
    fsyncLevel: number;
    syncCalls: number;
    settings: string;
  }> = [];
  for (const [variant, samples, pick] of [
    ["ours", ours, isOurs],
    ["bare", bare, isBare],
  ] as const) {
    const sum: Record<string, FileCounts> = {};
    for (const c of samples) {
      for (const [file, f] of Object.entries(c)) {
        if (!pick(file)) continue;
        const s = (sum[file] ??= {
          commits: 0,
          durableCommits: 0,
          syncCalls: 0,
          settings: {},
          statements: 0,
          ms: 0,
        });
        s.commits += f.commits;
        s.durableCommits += f.durableCommits;
        s.syncCalls += f.syncCalls;
        for (const [k, v] of Object.entries(f.settings)) s.settings[k] = (s.settings[k] ?? 0) + v;
      }
    }
    const n = samples.length;
    for (const [file, s] of Object.entries(sum)) {
      rows.push({
        variant,
        file,
        commits: round(s.commits / n),
        fsyncLevel: round(s.durableCommits / n),
        syncCalls: round(s.syncCalls / n),
        settings: Object.entries(s.settings)
          .map(([k, v]) => `${k} ${round(v / n)}`)
          .join(", "),
      });
    }
  }
  return rows;
}

function compact(c: Counts) {
  return Object.fromEntries(
    Object.entries(c)
      .filter(([, f]) => f.commits > 0 || f.syncCalls > 0)
      .map(([file, f]) => [
        file,
        { commits: f.commits, durable: f.durableCommits, syncCalls: f.syncCalls, settings: f.settings },
      ]),
  );
}

/** What one fsync-level write costs on this disk: a one-row transaction in WAL mode with synchronous=FULL. */
function durableCommitMs(dir: string) {
  const db = new Database(path.join(dir, "commit-probe.sqlite"));
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)");
    const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
    const samples: number[] = [];
    for (let i = 0; i < 120; i++) {
      const t0 = performance.now();
      insert.run("x".repeat(700));
      if (i >= 20) samples.push(performance.now() - t0);
    }
    return {
      medianMs: round(summary(samples).median, 3),
      p95Ms: round(summary(samples).p95, 3),
      samples: samples.map((x) => round(x, 3)),
    };
  } finally {
    db.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
