/**
 * 3. Rate-limit saturation. N approved actions (3 requests each: pre-read, write, verify) resumed at
 * once against the emulator's leaky bucket, with the client's own bucket set to the same rate and
 * burst (the client keeps 10% of the burst free). Total time against the theoretical minimum, and how
 * many QUERY_LIMIT_EXCEEDED (503) answers the portal gave (target: zero).
 *
 * The portal's default bucket (2 req/s, burst 50) makes 600 requests take (600-50)/2 = 275 s; by
 * default this runs with the drain scaled to 20 req/s (burst unchanged), which keeps the shape
 * (50 free, then paced) and takes ~28 s. `--full` runs the real 2 req/s (~6 min with setup) and
 * writes bench/results/rate-limit-full.json instead of rate-limit.json.
 *
 *   npm run bench -- rate-limit [--full] [--rate 20] [--burst 50] [--actions 200]
 */
import { performance } from "node:perf_hooks";
import { submitDecision } from "../src/app/threads.js";
import {
  flag,
  intArg,
  numArg,
  pool,
  round,
  sleep,
  summary,
  tempDir,
  writeResult,
  removeScratch,
} from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, openBenchApp, waitingRun } from "./support/app.js";

const FULL = flag("full");
const RATE = FULL ? 2 : numArg("rate", 20);
const BURST = intArg("burst", 50);
const ACTIONS = intArg("actions", 200);
const PER_ACTION = 3;

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-rate-");
  const portal = await startBenchPortal({ dir, tasks: ACTIONS, rate: RATE, burst: BURST });
  const bench = await openBenchApp({
    webhookUrl: portal.webhookUrl,
    dataDir: `${dir}/data`,
    rate: RATE,
    burst: BURST,
  });
  bench.probe.enabled = false;
  try {
    // Creating the waiting runs reads each task once, through the same buckets, paced by the client.
    const c0 = performance.now();
    const views = await pool(
      Array.from({ length: ACTIONS }, (_, i) => FIRST_BENCH_TASK + i),
      20,
      (t) => waitingRun(bench.app, t),
    );
    const createSeconds = (performance.now() - c0) / 1000;
    // Start the measured phase with both buckets empty, as the theoretical minimum assumes.
    await sleep((BURST / RATE) * 1000 + 1000);
    const before = await portal.control.calls();
    const since = before.at(-1)?.seq ?? 0;
    const createdWith503 = before.filter((c) => c.status === 503).length;

    const wallStart = Date.now();
    const t0 = performance.now();
    const outcomes = await Promise.all(
      views.map(async (v) => {
        const done = await submitDecision(bench.app, v.threadId, approvalOf(v));
        return { outcome: `${done.state?.outcome}/${done.state?.reasonCode}`, ms: performance.now() - t0 };
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const wallEnd = Date.now();

    const calls = (await portal.control.calls()).filter((c) => c.seq > since);
    const limited = calls.filter((c) => c.status === 503);
    const byOutcome: Record<string, number> = {};
    for (const o of outcomes) byOutcome[o.outcome] = (byOutcome[o.outcome] ?? 0) + 1;
    const byMethod: Record<string, number> = {};
    for (const c of calls) byMethod[c.method] = (byMethod[c.method] ?? 0) + 1;
    const requests = ACTIONS * PER_ACTION;
    const clientCapacity = BURST - Math.max(1, Math.floor(BURST * 0.1));
    const portalMin = Math.max(0, requests - BURST) / RATE;
    const clientMin = Math.max(0, requests - clientCapacity) / RATE;
    const times = calls.map((c) => Date.parse(c.time));
    const spanSeconds = (Math.max(...times) - Math.min(...times)) / 1000;
    // The part of the total the bucket does not explain: local work before the first request is sent
    // (lock, pending re-check, decision checks for all threads) and after the last one is answered.
    const outsideBucket = {
      beforeFirstRequestSeconds: round((Math.min(...times) - wallStart) / 1000),
      afterLastRequestSeconds: round((wallEnd - Math.max(...times)) / 1000),
    };
    // Steady state: requests after the free burst, over the time they took.
    const steady = calls.slice(clientCapacity);
    const steadyRate =
      steady.length > 1
        ? (steady.length - 1) / ((Date.parse(steady.at(-1)!.time) - Date.parse(steady[0]!.time)) / 1000)
        : NaN;

    const table = [
      {
        actions: ACTIONS,
        requests: calls.length,
        rate: RATE,
        burst: BURST,
        totalSeconds: round(seconds),
        portalMinSeconds: round(portalMin),
        ratioToPortalMin: round(seconds / portalMin, 3),
        clientMinSeconds: round(clientMin),
        ratioToClientMin: round(seconds / clientMin, 3),
        steadyRequestsPerSecond: round(steadyRate, 3),
        queryLimitExceeded: limited.length,
      },
    ];
    console.log(
      `rate-limit saturation${FULL ? " (full: the portal's real 2 req/s)" : ` (scaled: drain ${RATE} req/s instead of 2; burst ${BURST} unchanged)`}`,
    );
    console.table(table);
    console.log(
      "outcomes",
      byOutcome,
      "calls by method",
      byMethod,
      `first-to-last request ${round(spanSeconds)} s (before the first ${outsideBucket.beforeFirstRequestSeconds} s, after the last ${outsideBucket.afterLastRequestSeconds} s); creating the waiting runs took ${round(createSeconds)} s (${createdWith503} answers 503 then)`,
    );
    const perAction = summary(outcomes.map((o) => o.ms / 1000));
    console.log(
      `per action, resume to end (s): median ${perAction.median}, p95 ${perAction.p95}, max ${perAction.max}`,
    );

    writeResult(
      "rate-limit",
      {
        setup: {
          emulator: { process: portal.command, rate: RATE, burst: BURST },
          client: { rate: RATE, burst: BURST, headroom: BURST - clientCapacity, capacity: clientCapacity },
          scaled: !FULL,
          scaling: FULL
            ? "none: the portal's default bucket"
            : `drain rate ${RATE} req/s instead of 2 (x${RATE / 2}); burst ${BURST}; all times scale by 2/${RATE}`,
          actions: ACTIONS,
          requestsPerAction: PER_ACTION,
          theory: `portal minimum = (requests - burst) / rate = (${requests} - ${BURST}) / ${RATE}; client minimum = (requests - (burst - 10% headroom)) / rate = (${requests} - ${clientCapacity}) / ${RATE}`,
        },
        results: {
          table,
          outcomes: byOutcome,
          callsByMethod: byMethod,
          firstToLastRequestSeconds: round(spanSeconds),
          ...outsideBucket,
          perActionSeconds: perAction,
          createSeconds: round(createSeconds),
          queryLimitExceededWhileCreating: createdWith503,
        },
        raw: {
          perActionMs: outcomes.map((o) => round(o.ms)),
          calls: calls.map((c) => ({ seq: c.seq, time: c.time, method: c.method, status: c.status })),
        },
      },
      startedAt,
      FULL ? "rate-limit-full" : "rate-limit",
    );
  } finally {
    await bench.close();
    await portal.close();
    removeScratch(dir);
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
