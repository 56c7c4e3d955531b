/**
 * 2. Post-approval latency against the three round trips. The emulator holds every tasks.task.get and
 * tasks.task.update answer for 50 ms (`latency` fault, times 0). From the resume to the final outcome,
 * our app makes three sequential calls (pre-read, write, verify). Measured, interleaved in one process:
 *   ours:  submitDecision from the interrupt to VERIFIED;
 *   calls: the same three calls alone (read, write, read through the same MCP client, no graph, no
 *          store): the three measured round trips, the target's denominator;
 *   bare:  a bare LangGraph graph making the same three calls after its resume.
 * 3 × 50 ms is the nominal floor.
 *
 * The timed samples run uninstrumented (timing probe and commit counter off, no per-step marks), so ours
 * pays nothing for being watched that the other two do not. Ours' per-segment breakdown comes from
 * INSTRUMENTED = max(5, ceil(samples / 3)) separate instrumented decisions after the timed ones.
 *
 *   npm run bench -- post-approval-latency [--quick] [--samples 30] [--warmup 3] [--latency 50] [--out NAME]
 *
 * --quick is --samples 10 --warmup 2 and writes bench/results/post-approval-latency.quick.json.
 */
import { performance } from "node:perf_hooks";
import {
  flag,
  intArg,
  pool,
  round,
  strArg,
  summary,
  tempDir,
  writeResult,
  removeScratch,
} from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import type { ThreadView } from "../src/app/view-thread.js";
import {
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

const QUICK = flag("quick");
const SAMPLES = intArg("samples", QUICK ? 10 : 30);
const WARMUP = intArg("warmup", QUICK ? 2 : 3);
const LATENCY = intArg("latency", 50);
const OUT = strArg("out", QUICK ? "post-approval-latency.quick" : "post-approval-latency");
const ROUND_TRIPS = 3;
const INSTRUMENTED = Math.max(5, Math.ceil(SAMPLES / 3));

/** Which samples each figure comes from; printed under the tables and kept in the result. */
const METHOD = `timed figures come from uninstrumented samples (timing probe and commit counter off, no per-step marks) for ours, the three calls alone and the bare graph; ours' per-segment breakdown and the checkpointer, journal, audit, other and MCP-beyond-latency times come from ${INSTRUMENTED} instrumented decisions after the timed ones`;

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-latency-");
  const total = WARMUP + SAMPLES;
  const portal = await startBenchPortal({ dir, tasks: 3 * total + INSTRUMENTED, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  const bare = openBareGraph(bench.app.deps.tools, `${dir}/data`);
  const tools = bench.app.deps.tools;
  try {
    // Runs wait for approval before the latency is armed: only what follows the resume is measured.
    const views = await pool(
      Array.from({ length: total }, (_, i) => FIRST_BENCH_TASK + i),
      10,
      (t) => waitingRun(bench.app, t),
    );
    const instrumentedViews = await pool(
      Array.from({ length: INSTRUMENTED }, (_, i) => FIRST_BENCH_TASK + 3 * total + i),
      10,
      (t) => waitingRun(bench.app, t),
    );
    const bareIds = Array.from({ length: total }, (_, i) => `bare-${i}`);
    await pool(bareIds, 10, (id, i) => bare.start(id, FIRST_BENCH_TASK + total + i));
    for (const method of ["tasks.task.get", "tasks.task.update"]) {
      await portal.control.armFault({ method, kind: "latency", ms: LATENCY, times: 0 });
    }

    instrument(bench, false);
    const ours: Array<{ totalMs: number }> = [];
    const bareMs: number[] = [];
    const callsMs: number[] = [];
    for (let i = 0; i < total; i++) {
      const runOurs = async () => {
        const v = views[i]!;
        const timed = await leanDecision(bench, v.threadId, approvalOf(v));
        expectVerified(timed.view);
        if (i >= WARMUP) ours.push(timed);
      };
      const runBare = async () => {
        const t0 = performance.now();
        await bare.resume(bareIds[i]!);
        if (i >= WARMUP) bareMs.push(performance.now() - t0);
      };
      const runCalls = async () => {
        const taskId = FIRST_BENCH_TASK + 2 * total + i;
        const t0 = performance.now();
        for (const step of ["read", "write", "read"] as const) {
          const r =
            step === "read"
              ? await tools.read("getTask", { taskId })
              : await tools.writeHandle.updateTask(taskId, { TITLE: `BENCH-${taskId} - CALLS` });
          if (!r.ok)
            throw new Error(
              `the three calls alone: ${step} of task ${taskId} failed: ${JSON.stringify(r).slice(0, 300)}`,
            );
        }
        if (i >= WARMUP) callsMs.push(performance.now() - t0);
      };
      // Rotate the order so drift on a shared machine hits every variant alike.
      const order = [runOurs, runCalls, runBare];
      for (let k = 0; k < order.length; k++) await order[(i + k) % order.length]!();
    }
    // Ours again, instrumented, for where its time goes.
    instrument(bench, true);
    const segmented: TimedDecision[] = [];
    for (const v of instrumentedViews) {
      const timed = await timedDecision(bench, v.threadId, approvalOf(v));
      expectVerified(timed.view);
      segmented.push(timed);
    }
    instrument(bench, false);
    const calls = await portal.control.calls();
    await portal.control.clearFaults();

    const s = summary(ours.map((o) => o.totalMs));
    const c = summary(callsMs);
    const b = summary(bareMs);
    const floor = ROUND_TRIPS * LATENCY;
    const bd = breakdown(segmented);
    const figures = [
      {
        figure: `post-approval latency at ${LATENCY} ms per call, median ms (bare = the three calls alone)`,
        ours: s.median,
        bare: c.median,
        ratio: round(s.median / c.median),
        target: "≤ 1.2×",
        met: s.median / c.median <= 1.2,
      },
      {
        figure: `post-approval latency at ${LATENCY} ms per call, p95 ms (bare = the three calls alone)`,
        ours: s.p95,
        bare: c.p95,
        ratio: round(s.p95 / c.p95),
        target: "",
        met: null,
      },
      {
        figure: `… against the bare LangGraph graph making the three calls, median ms`,
        ours: s.median,
        bare: b.median,
        ratio: round(s.median / b.median),
        target: "",
        met: null,
      },
    ];
    const rest = {
      nominalFloorMs: floor,
      threeCallsAloneMedianMs: c.median,
      beyondThreeCallsMeanMs: round(s.mean - c.mean),
      mcpBeyondLatencyPerActionMs: round(bd.totals.mcp - floor),
      checkpointerMs: bd.totals.checkpointer,
      journalMs: bd.totals.journal,
      auditMs: bd.totals.audit,
      otherMs: bd.totals.other,
    };
    console.log(
      `post-approval latency, emulator latency ${LATENCY} ms on tasks.task.get and tasks.task.update (nominal floor ${floor} ms)`,
    );
    console.table(figures.map(({ met, ...f }) => ({ ...f, met: met === null ? "" : met ? "yes" : "NO" })));
    console.log(`samples: ${METHOD}`);
    console.log(
      `ours, instrumented samples: mean ms per segment (their median ${summary(segmented.map((o) => o.totalMs)).median} ms, not a figure)`,
    );
    console.table(bd.rows.map(({ callsPerAction: _c, ...r }) => r));
    console.log("where the time beyond the three calls goes (mean ms per action)", rest);

    writeResult(
      "post-approval-latency",
      {
        setup: {
          emulator: {
            process: portal.command,
            rate: 0,
            fault: {
              methods: ["tasks.task.get", "tasks.task.update"],
              kind: "latency",
              ms: LATENCY,
              times: 0,
            },
          },
          quick: QUICK,
          samples: SAMPLES,
          warmup: WARMUP,
          instrumentedSamples: INSTRUMENTED,
          method: METHOD,
          note: "runs were waiting for approval before the latency was armed; ours, the three calls alone and the bare graph rotate sample by sample",
        },
        results: {
          figures,
          ours: s,
          threeCallsAlone: c,
          bareGraph: b,
          breakdownOurs: bd,
          beyondThreeCalls: rest,
        },
        raw: {
          oursMs: ours.map((o) => round(o.totalMs, 3)),
          threeCallsAloneMs: callsMs.map((x) => round(x, 3)),
          bareMs: bareMs.map((x) => round(x, 3)),
          oursInstrumentedMs: segmented.map((o) => round(o.totalMs, 3)),
          oursSegments: segmented.map((o) =>
            o.segments.map((g) => ({
              name: g.name,
              ms: round(g.ms, 3),
              journal: round(g.journal, 3),
              audit: round(g.audit, 3),
              mcp: round(g.mcp, 3),
            })),
          ),
          emulatorCallsDuringRun: calls.length,
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

function expectVerified(view: ThreadView): void {
  if (view.state?.outcome !== "VERIFIED")
    throw new Error(
      `expected VERIFIED, got ${view.status} ${view.state?.outcome}/${view.state?.reasonCode}: ${view.state?.reason}`,
    );
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
