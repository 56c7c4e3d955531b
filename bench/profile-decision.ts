/**
 * CPU profile of the decision path only (resume → VERIFIED), for finding where the control layer's
 * time goes. Not part of `npm run bench`; run by hand:
 *   npx tsx bench/profile-decision.ts [--samples 60] [--out /tmp/decision.cpuprofile]
 */
import fs from "node:fs";
import { Session } from "node:inspector/promises";
import Database from "better-sqlite3";
import { intArg, tempDir, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, openBenchApp, waitingRun } from "./support/app.js";
import { submitDecision } from "../src/app/threads.js";

const SAMPLES = intArg("samples", 60);
const outIdx = process.argv.indexOf("--out");
const OUT = outIdx > 0 ? process.argv[outIdx + 1]! : "/tmp/decision.cpuprofile";

/** With --sql: time every better-sqlite3 Statement#run by its SQL text (what the profile shows as "run"). */
const sqlTimes = new Map<string, { n: number; ms: number }>();
function timeStatements(): void {
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as { run: (...a: unknown[]) => unknown; source: string };
  probe.close();
  const run = proto.run;
  proto.run = function (this: { source: string }, ...args: unknown[]) {
    const t0 = performance.now();
    try {
      return run.apply(this, args);
    } finally {
      const key = this.source.replace(/\s+/g, " ").slice(0, 90);
      const e = sqlTimes.get(key) ?? { n: 0, ms: 0 };
      e.n++;
      e.ms += performance.now() - t0;
      sqlTimes.set(key, e);
    }
  };
}

async function main(): Promise<void> {
  if (process.argv.includes("--sql")) timeStatements();
  const dir = tempDir("ae-bench-profile-");
  const portal = await startBenchPortal({ dir, tasks: SAMPLES + 10, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  bench.probe.enabled = false;
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
    if (profiling) {
      await session.post("Profiler.enable");
      await session.post("Profiler.setSamplingInterval", { interval: 100 });
      await session.post("Profiler.start");
    }
    sqlTimes.clear();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (const v of views) {
      const done = await submitDecision(bench.app, v.threadId, approvalOf(v));
      if (done.state?.outcome !== "VERIFIED") throw new Error(`not verified: ${done.state?.outcome}`);
    }
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    console.log(`${SAMPLES} decisions in ${ms.toFixed(0)} ms (${(ms / SAMPLES).toFixed(1)} ms each, CPU ${((cpu.user + cpu.system) / 1000 / SAMPLES).toFixed(1)} ms each: user ${(cpu.user / 1000 / SAMPLES).toFixed(1)}, system ${(cpu.system / 1000 / SAMPLES).toFixed(1)})`);
    if (sqlTimes.size > 0) {
      const rows = [...sqlTimes].map(([sql, e]) => ({ sql, perDecision: +(e.n / SAMPLES).toFixed(2), msPerDecision: +(e.ms / SAMPLES).toFixed(3), msEach: +(e.ms / e.n).toFixed(3) }));
      console.table(rows.sort((a, b) => b.msPerDecision - a.msPerDecision).slice(0, 25));
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
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
