/**
 * CPU profile of the decision path only (resume → VERIFIED), for finding where the control layer's
 * time goes. Not part of `npm run bench`; run by hand:
 *   npx tsx bench/profile-decision.ts [--samples 60] [--concurrent 1] [--out /tmp/decision.cpuprofile] [--no-profile] [--sql] [--nodes] [--heap]
 * --concurrent N resumes N waiting runs at once (as control-overhead's throughput rounds do), batch after batch;
 * --sql times every SQLite statement (run, get, all) by its text; --nodes splits each decision into the node bodies
 * (from LangGraph's own chain-start/end callbacks) and what lies between them (LangGraph's step
 * machinery and checkpointing, submitDecision's lock, re-check and final view); --heap samples what the
 * decisions allocate, garbage included, into OUT with .heapprofile (open it in Chrome's DevTools).
 */
import fs from "node:fs";
import { Session } from "node:inspector/promises";
import Database from "better-sqlite3";
import { intArg, tempDir, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, openBenchApp, waitingRun } from "./support/app.js";
import { submitDecision } from "../src/app/threads.js";

const SAMPLES = intArg("samples", 60);
const CONCURRENT = intArg("concurrent", 1);
const outIdx = process.argv.indexOf("--out");
const OUT = outIdx > 0 ? process.argv[outIdx + 1]! : "/tmp/decision.cpuprofile";

/** With --sql: time every better-sqlite3 Statement#run, #get and #all by its SQL text (what the profile shows as "run", "get", "all"). */
const sqlTimes = new Map<string, { n: number; ms: number }>();
function timeStatements(): void {
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<
    "run" | "get" | "all",
    (...a: unknown[]) => unknown
  >;
  probe.close();
  for (const method of ["run", "get", "all"] as const) {
    const original = proto[method];
    proto[method] = function (this: { source: string }, ...args: unknown[]) {
      const t0 = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        const key = `${method} ${this.source.replace(/\s+/g, " ").slice(0, 86)}`;
        const e = sqlTimes.get(key) ?? { n: 0, ms: 0 };
        e.n++;
        e.ms += performance.now() - t0;
        sqlTimes.set(key, e);
      }
    };
  }
}

/** With --nodes: when each node's body started (`name>`) and ended (`<name`), from LangGraph's callbacks. */
const nodeEvents: Array<[string, number]> = [];
function timeNodes(graph: { stream: (input: never, config: never) => unknown }): void {
  const stream = graph.stream.bind(graph);
  const running = new Map<string, string>();
  const ended = (runId: string) => {
    const name = running.get(runId);
    if (name) nodeEvents.push([`<${name}`, performance.now()]);
    running.delete(runId);
  };
  const handler = {
    name: "node-timer",
    // A node's own run carries its name and metadata.langgraph_node; its routers and writers do not both.
    handleChainStart: (
      _c: unknown,
      _i: unknown,
      runId: string,
      _p?: string,
      _t?: string[],
      meta?: Record<string, unknown>,
      _rt?: string,
      name?: string,
    ) => {
      if (!name || meta?.["langgraph_node"] !== name) return;
      running.set(runId, name);
      nodeEvents.push([`${name}>`, performance.now()]);
    },
    handleChainEnd: (_o: unknown, runId: string) => ended(runId),
    handleChainError: (_e: unknown, runId: string) => ended(runId),
  };
  graph.stream = ((input: never, config: Record<string, unknown>) =>
    stream(input, { ...config, callbacks: [handler] } as never)) as typeof graph.stream;
}

/** Mean ms per decision of each node body and of each stretch between them (what is not a node). */
function nodeTable(
  decisions: Array<Array<[string, number]>>,
): Array<{ part: string; msPerDecision: number }> {
  const sums = new Map<string, number>();
  for (const ev of decisions) {
    for (let i = 1; i < ev.length; i++) {
      const [a, ta] = ev[i - 1]!;
      const [b, tb] = ev[i]!;
      const part =
        a.endsWith(">") && b === `<${a.slice(0, -1)}` ? `node ${a.slice(0, -1)}` : `between ${a} and ${b}`;
      sums.set(part, (sums.get(part) ?? 0) + tb - ta);
    }
  }
  const rows = [...sums].map(([part, ms]) => ({ part, msPerDecision: +(ms / decisions.length).toFixed(2) }));
  const total = (re: RegExp) =>
    +rows
      .filter((r) => re.test(r.part))
      .reduce((x, r) => x + r.msPerDecision, 0)
      .toFixed(2);
  return [
    ...rows,
    { part: "all node bodies", msPerDecision: total(/^node /) },
    { part: "all between", msPerDecision: total(/^between /) },
  ];
}

async function main(): Promise<void> {
  if (process.argv.includes("--sql")) timeStatements();
  const dir = tempDir("ae-bench-profile-");
  const portal = await startBenchPortal({ dir, tasks: SAMPLES + 10, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  bench.probe.enabled = false;
  const nodes = process.argv.includes("--nodes");
  if (nodes) timeNodes(bench.app.graph as never);
  const session = new Session();
  session.connect();
  try {
    let task = FIRST_BENCH_TASK;
    for (let i = 0; i < 5; i++) {
      const v = await waitingRun(bench.app, task++);
      await submitDecision(bench.app, v.threadId, approvalOf(v));
    }
    const views = [];
    for (let i = 0; i < SAMPLES; i++) views.push(await waitingRun(bench.app, task++));
    const profiling = !process.argv.includes("--no-profile");
    const heap = process.argv.includes("--heap");
    if (heap)
      await session.post("HeapProfiler.startSampling", {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      } as never);
    if (profiling) {
      await session.post("Profiler.enable");
      await session.post("Profiler.setSamplingInterval", { interval: 100 });
      await session.post("Profiler.start");
    }
    sqlTimes.clear();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const perDecision: Array<Array<[string, number]>> = [];
    for (let i = 0; CONCURRENT > 1 && i < views.length; i += CONCURRENT) {
      const batch = await Promise.all(
        views.slice(i, i + CONCURRENT).map((v) => submitDecision(bench.app, v.threadId, approvalOf(v))),
      );
      const off = batch.find((done) => done.state?.outcome !== "VERIFIED");
      if (off) throw new Error(`not verified: ${off.state?.outcome}`);
    }
    for (const v of CONCURRENT > 1 ? [] : views) {
      nodeEvents.length = 0;
      nodeEvents.push(["submitDecision>", performance.now()]);
      const done = await submitDecision(bench.app, v.threadId, approvalOf(v));
      nodeEvents.push(["<submitDecision", performance.now()]);
      perDecision.push([...nodeEvents]);
      if (done.state?.outcome !== "VERIFIED") throw new Error(`not verified: ${done.state?.outcome}`);
    }
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    console.log(
      `${SAMPLES} decisions in ${ms.toFixed(0)} ms (${(ms / SAMPLES).toFixed(1)} ms each, CPU ${((cpu.user + cpu.system) / 1000 / SAMPLES).toFixed(1)} ms each: user ${(cpu.user / 1000 / SAMPLES).toFixed(1)}, system ${(cpu.system / 1000 / SAMPLES).toFixed(1)})`,
    );
    if (nodes) console.table(nodeTable(perDecision));
    if (sqlTimes.size > 0) {
      const rows = [...sqlTimes].map(([sql, e]) => ({
        sql,
        perDecision: +(e.n / SAMPLES).toFixed(2),
        msPerDecision: +(e.ms / SAMPLES).toFixed(3),
        msEach: +(e.ms / e.n).toFixed(3),
      }));
      console.table(rows.sort((a, b) => b.msPerDecision - a.msPerDecision).slice(0, 30));
    }
    if (heap) {
      const { profile } = await session.post("HeapProfiler.stopSampling");
      const file = OUT.replace(/\.cpuprofile$/, "") + ".heapprofile";
      fs.writeFileSync(file, JSON.stringify(profile));
      console.log(`allocation profile at ${file}`);
    }
    if (profiling) {
      const { profile } = await session.post("Profiler.stop");
      fs.writeFileSync(OUT, JSON.stringify(profile));
      console.log(`profile at ${OUT}`);
    }
  } finally {
    session.disconnect();
    await bench.close();
    await portal.close();
    if (process.argv.includes("--keep")) console.log(`kept ${dir}`);
    else removeScratch(dir);
  }
}
main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
