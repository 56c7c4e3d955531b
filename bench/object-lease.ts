/**
 * What the object lease (docs/architecture.md: "No lost update between runs") costs, measured in the same run:
 *   (1) uncontended: one approved action at a time, each on its own task, from the resume to VERIFIED;
 *       the share of that time spent taking and renewing the lease (journal.acquireObjectLease, timed
 *       by the probe around the real SQLite journal; the release is one DELETE inside the ending move).
 *   (2) contended: N approved actions on ONE task resumed at once, against N on N tasks. On one task
 *       they serialise: the first writes, each later one waits for the lease, reads the write and
 *       ends STALE_STATE (one write in all). Reported: wall time of each batch, its ratio, the
 *       outcomes and the number of writes the emulator applied.
 *
 *   npm run bench -- object-lease [--samples 30] [--warmup 3] [--contenders 10]
 */
import { performance } from "node:perf_hooks";
import { submitDecision } from "../src/app/threads.js";
import { intArg, round, summary, tempDir, writeResult, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, openBenchApp, timedDecision, waitingRun } from "./support/app.js";

const SAMPLES = intArg("samples", 30);
const WARMUP = intArg("warmup", 3);
const CONTENDERS = intArg("contenders", 10);

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-lease-");
  const portal = await startBenchPortal({ dir, tasks: WARMUP + SAMPLES + CONTENDERS + 2, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  let nextTask = FIRST_BENCH_TASK;
  const applied = async () =>
    (await portal.control.calls({ method: "tasks.task.update" })).filter((c) => c.status === 200).length;
  try {
    // (1) uncontended
    const totals: number[] = [];
    const leaseMs: number[] = [];
    const leaseCalls: number[] = [];
    for (let i = 0; i < WARMUP + SAMPLES; i++) {
      const view = await waitingRun(bench.app, nextTask++);
      const t = await timedDecision(bench, view.threadId, approvalOf(view));
      if (t.view.state?.outcome !== "VERIFIED")
        throw new Error(`expected VERIFIED, got ${t.view.state?.outcome}: ${t.view.state?.reason}`);
      if (i < WARMUP) continue;
      const spans = bench.probe.spans.filter(
        (s) => s.category === "journal" && s.name === "acquireObjectLease",
      );
      totals.push(t.totalMs);
      leaseMs.push(spans.reduce((a, s) => a + (s.end - s.start), 0));
      leaseCalls.push(spans.length);
    }
    bench.probe.enabled = false;

    // (2) contended: N on one task vs N on N tasks, each batch resumed at once
    const sameTask = nextTask++;
    const same = [];
    for (let i = 0; i < CONTENDERS; i++) same.push(await waitingRun(bench.app, sameTask));
    const spread = [];
    for (let i = 0; i < CONTENDERS; i++) spread.push(await waitingRun(bench.app, nextTask++));
    const writesBefore = await applied();
    const t0 = performance.now();
    const spreadViews = await Promise.all(
      spread.map((v) => submitDecision(bench.app, v.threadId, approvalOf(v))),
    );
    const spreadMs = performance.now() - t0;
    const writesSpread = (await applied()) - writesBefore;
    const t1 = performance.now();
    const sameViews = await Promise.all(
      same.map((v) => submitDecision(bench.app, v.threadId, approvalOf(v))),
    );
    const sameMs = performance.now() - t1;
    const writesSame = (await applied()) - writesBefore - writesSpread;
    const outcomes = (views: typeof sameViews) =>
      views.reduce<Record<string, number>>((acc, v) => {
        const k = `${v.state?.outcome}/${v.state?.reasonCode}`;
        acc[k] = (acc[k] ?? 0) + 1;
        return acc;
      }, {});

    const perAction = summary(totals);
    const lease = summary(leaseMs);
    const body = {
      uncontended: {
        samples: SAMPLES,
        actionMs: perAction,
        leaseMs: lease,
        leaseCallsPerAction: summary(leaseCalls),
        leaseShareOfActionMedian: round(lease.median / perAction.median, 4),
        raw: { totals, leaseMs },
      },
      contended: {
        contenders: CONTENDERS,
        oneTask: { wallMs: round(sameMs), outcomes: outcomes(sameViews), writes: writesSame },
        spreadTasks: { wallMs: round(spreadMs), outcomes: outcomes(spreadViews), writes: writesSpread },
        ratioOneTaskToSpread: round(sameMs / spreadMs, 2),
      },
    };
    console.table({
      "action (median ms)": perAction.median,
      "lease take+renew (median ms)": lease.median,
      "lease share of the action": `${round(100 * body.uncontended.leaseShareOfActionMedian, 2)} %`,
      [`${CONTENDERS} on one task (ms)`]: round(sameMs),
      [`${CONTENDERS} on ${CONTENDERS} tasks (ms)`]: round(spreadMs),
      "ratio one task / spread": body.contended.ratioOneTaskToSpread,
    });
    console.log("one task:", JSON.stringify(body.contended.oneTask.outcomes), `writes ${writesSame}`);
    console.log("spread:  ", JSON.stringify(body.contended.spreadTasks.outcomes), `writes ${writesSpread}`);
    console.log(`results: ${writeResult("object-lease", body, startedAt)}`);
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
