/**
 * 1. Control overhead against bare LangGraph. Same SqliteSaver on files, same MCP client over stdio,
 * same emulator (its own process, no latency, no rate limit). Measured from the resume to the end:
 *   (a) a bare HITL graph: interrupt, resume, one tasks.task.update;
 *   (a3) a bare HITL graph making the same three calls as ours (read, write, read), a node each;
 *   (b) our graph: submitDecision from the interrupt to VERIFIED (lock, pending re-check, decision
 *       validation and claim, pre-read, write-ahead, write, acknowledgement, verification, audit).
 * At 1 thread (a and b alternate, one action at a time) and at N concurrent threads (N waiting runs
 * resumed with Promise.all).
 *
 *   npm run bench -- control-overhead [--samples 40] [--warmup 5] [--threads 50] [--rounds 3]
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { submitDecision } from "../src/app/threads.js";
import { intArg, pool, round, summary, tempDir, writeResult, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, breakdown, openBareGraph, openBenchApp, timedDecision, waitingRun, type BareGraph, type TimedDecision } from "./support/app.js";

const SAMPLES = intArg("samples", 40);
const WARMUP = intArg("warmup", 5);
const THREADS = intArg("threads", 50);
const ROUNDS = intArg("rounds", 3);

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-overhead-");
  const tasksNeeded = 3 * (WARMUP + SAMPLES + THREADS * ROUNDS);
  const portal = await startBenchPortal({ dir, tasks: tasksNeeded, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  const bare = openBareGraph(bench.app.deps.tools, `${dir}/data`, bench.probe);
  const bare3 = openBareGraph(bench.app.deps.tools, `${dir}/data`, undefined, { threeCalls: true });
  let nextTask = FIRST_BENCH_TASK;
  const task = () => nextTask++;

  try {
    // --- one at a time, a and b alternating so drift on a shared machine hits both alike ----------
    const seqBare: number[] = [];
    const seqBareCpu: number[] = [];
    const seqBareParts: Array<{ checkpointer: number; mcp: number; other: number }> = [];
    const seqBareCommits: number[] = [];
    const seqOurs: TimedDecision[] = [];
    const seqBare3: number[] = [];
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const runBare3 = async () => {
        const id = `bare3-seq-${i}`;
        await bare3.start(id, task());
        const t0 = performance.now();
        await bare3.resume(id);
        if (i >= WARMUP) seqBare3.push(performance.now() - t0);
      };
      const runBare = async () => {
        const id = `bare-seq-${i}`;
        await bare.start(id, task());
        bench.probe.clear();
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await bare.resume(id);
        const t1 = performance.now();
        const c = process.cpuUsage(c0);
        if (i >= WARMUP) {
          const parts = bench.probe.within(t0, t1);
          seqBare.push(t1 - t0);
          seqBareCpu.push((c.user + c.system) / 1000);
          seqBareParts.push({ checkpointer: parts.checkpointer, mcp: parts.mcp, other: t1 - t0 - parts.checkpointer - parts.mcp });
          seqBareCommits.push(commitsIn(parts.calls));
        }
      };
      const runOurs = async () => {
        const view = await waitingRun(bench.app, task());
        const timed = await timedDecision(bench, view.threadId, approvalOf(view));
        if (timed.view.state?.outcome !== "VERIFIED") throw new Error(`expected VERIFIED, got ${timed.view.status} ${timed.view.state?.outcome}/${timed.view.state?.reasonCode}: ${timed.view.state?.reason} ${JSON.stringify(timed.view.state?.refusals)}`);
        if (i >= WARMUP) seqOurs.push(timed);
      };
      // Rotate the order so drift on a shared machine hits every variant alike.
      const order = [runBare, runBare3, runOurs];
      for (let k = 0; k < order.length; k++) await order[(i + k) % order.length]!();
    }
    bench.probe.clear();

    // --- N waiting threads resumed at once --------------------------------------------------------
    const conBare: number[] = [];
    const conOurs: number[] = [];
    const conBare3: number[] = [];
    const rounds: Array<{ round: number; variant: string; wallMs: number; actionsPerSecond: number; cpuMs: number; cpuShareOfWall: number; eventLoopBusy: number }> = [];
    for (let r = 0; r < ROUNDS; r++) {
      /** One batch of a bare variant: THREADS waiting runs, resumed at once. */
      const roundOfBare = (graph: BareGraph, variant: "bare" | "bare3", sink: number[]) => async () => {
        const ids = Array.from({ length: THREADS }, (_, k) => `${variant}-con-${r}-${k}`);
        await pool(ids, 10, (id) => graph.start(id, task()));
        const c0 = process.cpuUsage();
        const e0 = performance.eventLoopUtilization();
        const t0 = performance.now();
        const ends = await Promise.all(ids.map(async (id) => {
          await graph.resume(id);
          return performance.now() - t0;
        }));
        const wall = performance.now() - t0;
        const c = process.cpuUsage(c0);
        const elu = performance.eventLoopUtilization(e0).utilization;
        sink.push(...ends);
        const cpuMs = (c.user + c.system) / 1000;
        rounds.push({ round: r, variant, wallMs: round(wall), actionsPerSecond: round((THREADS * 1000) / wall), cpuMs: round(cpuMs), cpuShareOfWall: round(cpuMs / wall), eventLoopBusy: round(elu) });
      };
      const roundBare = roundOfBare(bare, "bare", conBare);
      const roundBare3 = roundOfBare(bare3, "bare3", conBare3);
      const roundOurs = async () => {
        const views = await pool(Array.from({ length: THREADS }, () => task()), 10, (t) => waitingRun(bench.app, t));
        const c0 = process.cpuUsage();
        const e0 = performance.eventLoopUtilization();
        const t0 = performance.now();
        const ends = await Promise.all(views.map(async (v) => {
          const done = await submitDecision(bench.app, v.threadId, approvalOf(v));
          if (done.state?.outcome !== "VERIFIED") throw new Error(`expected VERIFIED, got ${done.state?.outcome}/${done.state?.reasonCode}: ${done.state?.reason}`);
          return performance.now() - t0;
        }));
        const wall = performance.now() - t0;
        const c = process.cpuUsage(c0);
        const elu = performance.eventLoopUtilization(e0).utilization;
        bench.probe.clear();
        conOurs.push(...ends);
        const cpuMs = (c.user + c.system) / 1000;
        rounds.push({ round: r, variant: "ours", wallMs: round(wall), actionsPerSecond: round((THREADS * 1000) / wall), cpuMs: round(cpuMs), cpuShareOfWall: round(cpuMs / wall), eventLoopBusy: round(elu) });
      };
      const order = [roundBare, roundBare3, roundOurs];
      for (let k = 0; k < order.length; k++) await order[(r + k) % order.length]!();
    }

    // --- report -------------------------------------------------------------------------------------
    const oursMs = seqOurs.map((s) => s.totalMs);
    const oursCpu = seqOurs.map((s) => s.cpuMs);
    const sA = summary(seqBare);
    const sB = summary(oursMs);
    const cA = summary(conBare);
    const cB = summary(conOurs);
    const s3 = summary(seqBare3);
    const c3 = summary(conBare3);
    const wall = (v: string) => rounds.filter((x) => x.variant === v).map((x) => x.wallMs);
    const table = [
      { case: "1 thread", bareMedianMs: sA.median, bareP95Ms: sA.p95, oursMedianMs: sB.median, oursP95Ms: sB.p95, ratioMedian: round(sB.median / sA.median), ratioP95: round(sB.p95 / sA.p95), n: sA.n },
      { case: `${THREADS} concurrent`, bareMedianMs: cA.median, bareP95Ms: cA.p95, oursMedianMs: cB.median, oursP95Ms: cB.p95, ratioMedian: round(cB.median / cA.median), ratioP95: round(cB.p95 / cA.p95), n: cA.n },
    ];
    const againstThreeCalls = [
      { case: "1 thread", bare3MedianMs: s3.median, bare3P95Ms: s3.p95, oursMedianMs: sB.median, oursP95Ms: sB.p95, ratioMedian: round(sB.median / s3.median), ratioP95: round(sB.p95 / s3.p95), target: "≤ 1.5", n: s3.n },
      { case: `${THREADS} concurrent`, bare3MedianMs: c3.median, bare3P95Ms: c3.p95, oursMedianMs: cB.median, oursP95Ms: cB.p95, ratioMedian: round(cB.median / c3.median), ratioP95: round(cB.p95 / c3.p95), target: "", n: c3.n },
    ];
    const cpu = { bareMedianMs: round(summary(seqBareCpu).median), oursMedianMs: round(summary(oursCpu).median), ratio: round(summary(oursCpu).median / summary(seqBareCpu).median) };
    const bd = breakdown(seqOurs);
    const oursCommits = seqOurs.map((t) => {
      const all: Record<string, number> = {};
      for (const g of t.segments) for (const [k, v] of Object.entries(g.calls)) all[k] = (all[k] ?? 0) + v;
      return commitsIn(all);
    });
    const commit = durableCommitMs(`${dir}/data`);
    const commits = {
      barePerAction: round(summary(seqBareCommits).median),
      oursPerAction: round(summary(oursCommits).median),
      oneCommitMedianMs: commit.medianMs,
      oneCommitP95Ms: commit.p95Ms,
      note: "write transactions per action, counted from the calls made: journal and audit writes, and the checkpointer's commits (ours group-commits a step's put and putWrites, so its commit spans are counted; bare commits each put and putWrites). Each is a WAL commit; all but the journal's lock and lease takes (synchronous=NORMAL) fsync",
    };
    const avg = (k: "checkpointer" | "mcp" | "other") => round(seqBareParts.reduce((x, p) => x + p[k], 0) / seqBareParts.length);
    const bareBreakdown = { meanMs: round(seqBare.reduce((a, b) => a + b, 0) / seqBare.length), checkpointer: avg("checkpointer"), mcp: avg("mcp"), other: avg("other") };
    const throughput = {
      bareActionsPerSecond: round((THREADS * 1000) / summary(wall("bare")).median),
      oursActionsPerSecond: round((THREADS * 1000) / summary(wall("ours")).median),
      bare3ActionsPerSecond: round((THREADS * 1000) / summary(wall("bare3")).median),
      oursOverBare3: round(summary(wall("bare3")).median / summary(wall("ours")).median),
      oursOverBare3Target: "≥ 0.7",
    };
    console.log(`control overhead: per action from resume to end; bare LangGraph (a) vs ours (b); emulator without latency or rate limit`);
    console.table(table);
    console.log("against bare LangGraph making the same three calls (a3)");
    console.table(againstThreeCalls);
    console.log(`CPU of the benchmark process per action, 1 thread (median ms): bare ${cpu.bareMedianMs}, ours ${cpu.oursMedianMs}, ratio ${cpu.ratio}`);
    console.log(`${THREADS} concurrent, whole batch: bare ${throughput.bareActionsPerSecond} actions/s, bare3 ${throughput.bare3ActionsPerSecond} actions/s, ours ${throughput.oursActionsPerSecond} actions/s (ours/bare3 ${throughput.oursOverBare3})`);
    console.table(rounds);
    console.log("ours, 1 thread: mean ms per segment (a node's segment also holds the previous step's checkpoint write)");
    console.table(bd.rows.map(({ callsPerAction: _c, ...rest }) => rest));
    console.log("ours totals (mean ms per action)", bd.totals);
    console.log("bare (mean ms per action)", bareBreakdown);
    console.log(`durable SQLite commits per action: bare ${commits.barePerAction}, ours ${commits.oursPerAction}; one commit on this disk (WAL, synchronous=FULL): median ${commits.oneCommitMedianMs} ms, p95 ${commits.oneCommitP95Ms} ms`);

    writeResult(
      "control-overhead",
      {
        setup: {
          emulator: { process: portal.command, rate: 0, latencyMs: 0 },
          mcp: "our MCP server over stdio (one client, shared by a and b)",
          checkpointer: "SqliteSaver on a file (WAL), durability sync, separate files for a and b in one directory",
          model: "scripted, not measured (the run is already waiting when timing starts)",
          samples: SAMPLES,
          warmup: WARMUP,
          threads: THREADS,
          rounds: ROUNDS,
        },
        results: { table, againstThreeCalls, cpuPerAction1Thread: cpu, throughputConcurrent: throughput, rounds, breakdownOurs1Thread: bd, breakdownBare1Thread: bareBreakdown, durableCommits: commits },
        raw: {
          bare1ThreadMs: seqBare,
          bare1ThreadCpuMs: seqBareCpu,
          ours1ThreadMs: oursMs,
          ours1ThreadCpuMs: oursCpu,
          ours1ThreadSegments: seqOurs.map((s) => s.segments.map((g) => ({ name: g.name, ms: round(g.ms, 3), checkpointer: round(g.checkpointer, 3), journal: round(g.journal, 3), audit: round(g.audit, 3), mcp: round(g.mcp, 3) }))),
          oneCommitMs: commit.samples,
          bareConcurrentMs: conBare,
          bare3OneThreadMs: seqBare3,
          bare3ConcurrentMs: conBare3,
          oursConcurrentMs: conOurs,
        },
      },
      startedAt,
    );
  } finally {
    bare.close();
    bare3.close();
    await bench.close();
    await portal.close();
    removeScratch(dir);
  }
}

/**
 * Calls that write: everything but the reads (getTuple, find*, list*, get*, read*, currentAction,
 * records, threads, verify). Where the checkpointer group-commits (ours), its put and putWrites are
 * not commits of their own: its "commit" spans are.
 */
function commitsIn(calls: Record<string, number>): number {
  let n = 0;
  const grouped = Object.keys(calls).some((name) => name === "checkpointer.commit");
  for (const [name, count] of Object.entries(calls)) {
    const method = name.slice(name.indexOf(".") + 1);
    if (name.startsWith("mcp.") || /^(getTuple|find|list|get|read|currentAction$|records$|threads$|verify$)/.test(method)) continue;
    if (grouped && (name === "checkpointer.put" || name === "checkpointer.putWrites")) continue;
    n += count;
  }
  return n;
}

/** What one durable write costs on this disk: a one-row transaction in WAL mode with synchronous=FULL. */
function durableCommitMs(dir: string) {
  const db = new Database(path.join(dir, "commit-probe.sqlite"));
  try {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)");
    const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
    const samples: number[] = [];
    for (let i = 0; i < 220; i++) {
      const t0 = performance.now();
      insert.run("x".repeat(700));
      if (i >= 20) samples.push(performance.now() - t0);
    }
    return { medianMs: round(summary(samples).median, 3), p95Ms: round(summary(samples).p95, 3), samples: samples.map((x) => round(x, 3)) };
  } finally {
    db.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
