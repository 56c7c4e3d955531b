/**
 * 2. Post-approval latency against the three round trips. The emulator holds every tasks.task.get and
 * tasks.task.update answer for 50 ms (`latency` fault, times 0). From the resume to the final outcome,
 * our graph makes three sequential calls (pre-read, write, verify), so 150 ms is the floor; the ratio
 * says how close we are, and the per-node breakdown says where the rest goes. The bare graph makes
 * one call (50 ms floor) and is shown for context.
 *
 *   npm run bench -- post-approval-latency [--samples 30] [--warmup 3] [--latency 50]
 */
import { performance } from "node:perf_hooks";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { intArg, pool, round, summary, tempDir, writeResult, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, breakdown, openBareGraph, openBenchApp, timedDecision, waitingRun, type TimedDecision } from "./support/app.js";

const SAMPLES = intArg("samples", 30);
const WARMUP = intArg("warmup", 3);
const LATENCY = intArg("latency", 50);
const ROUND_TRIPS = 3;

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-latency-");
  const total = WARMUP + SAMPLES;
  const portal = await startBenchPortal({ dir, tasks: 2 * total, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  const bare = openBareGraph(bench.app.deps.tools, `${dir}/data`, bench.probe);
  try {
    // Runs wait for approval before the latency is armed: only what follows the resume is measured.
    const views = await pool(Array.from({ length: total }, (_, i) => FIRST_BENCH_TASK + i), 10, (t) => waitingRun(bench.app, t));
    const bareIds = Array.from({ length: total }, (_, i) => `bare-${i}`);
    await pool(bareIds, 10, (id, i) => bare.start(id, FIRST_BENCH_TASK + total + i));
    for (const method of ["tasks.task.get", "tasks.task.update"]) {
      await portal.control.armFault({ method, kind: "latency", ms: LATENCY, times: 0 });
    }

    const ours: TimedDecision[] = [];
    const bareMs: number[] = [];
    const bareMcp: number[] = [];
    for (let i = 0; i < total; i++) {
      const runOurs = async () => {
        const v = views[i]!;
        const timed = await timedDecision(bench, v.threadId, approvalOf(v));
        if (timed.view.state?.outcome !== "VERIFIED") throw new Error(`expected VERIFIED, got ${timed.view.status} ${timed.view.state?.outcome}/${timed.view.state?.reasonCode}: ${timed.view.state?.reason}`);
        if (i >= WARMUP) ours.push(timed);
      };
      const runBare = async () => {
        bench.probe.clear();
        const t0 = performance.now();
        await bare.resume(bareIds[i]!);
        const t1 = performance.now();
        if (i >= WARMUP) {
          bareMs.push(t1 - t0);
          bareMcp.push(bench.probe.within(t0, t1).mcp);
        }
      };
      if (i % 2 === 0) {
        await runOurs();
        await runBare();
      } else {
        await runBare();
        await runOurs();
      }
    }
    // One round trip on its own, to split the MCP figure: HTTP to the emulator vs the stdio hop.
    const direct = new Bitrix24Client({ webhookUrl: portal.webhookUrl, rate: 0 });
    const directMs: number[] = [];
    const viaMcpMs: number[] = [];
    for (let i = 0; i < 20; i++) {
      let t0 = performance.now();
      await direct.getTask(4);
      directMs.push(performance.now() - t0);
      t0 = performance.now();
      const r = await bench.app.deps.tools.read("getTask", { taskId: 4 });
      if (!r.ok) throw new Error(`MCP read failed: ${r.text}`);
      viaMcpMs.push(performance.now() - t0);
    }
    const calls = await portal.control.calls();
    await portal.control.clearFaults();

    const totals = ours.map((s) => s.totalMs);
    const s = summary(totals);
    const b = summary(bareMs);
    const floor = ROUND_TRIPS * LATENCY;
    const bd = breakdown(ours);
    const mcpCalls = ours.length * ROUND_TRIPS;
    const perCallOverhead = round((bd.totals.mcp * ours.length - mcpCalls * LATENCY) / mcpCalls);
    const rest = {
      floorMs: floor,
      beyondFloorMeanMs: round(bd.totals.meanMs - floor),
      mcpBeyondLatencyPerCallMs: perCallOverhead,
      mcpBeyondLatencyPerActionMs: round(bd.totals.mcp - floor),
      checkpointerMs: bd.totals.checkpointer,
      journalMs: bd.totals.journal,
      auditMs: bd.totals.audit,
      otherMs: bd.totals.other,
    };
    const table = [
      { variant: "ours: pre-read + write + verify", medianMs: s.median, p95Ms: s.p95, floorMs: floor, ratioMedian: round(s.median / floor), ratioP95: round(s.p95 / floor), n: s.n },
      { variant: "bare: write only", medianMs: b.median, p95Ms: b.p95, floorMs: LATENCY, ratioMedian: round(b.median / LATENCY), ratioP95: round(b.p95 / LATENCY), n: b.n },
    ];
    console.log(`post-approval latency, emulator latency ${LATENCY} ms on tasks.task.get and tasks.task.update`);
    console.table(table);
    console.log("ours: mean ms per segment");
    console.table(bd.rows.map(({ callsPerAction: _c, ...r }) => r));
    console.log("where the time beyond the floor goes (mean ms per action)", rest);
    const oneCall = { directRestMedianMs: round(summary(directMs).median), viaMcpMedianMs: round(summary(viaMcpMs).median), mcpHopMs: round(summary(viaMcpMs).median - summary(directMs).median) };
    console.log(`one tasks.task.get with ${LATENCY} ms latency: direct REST from this process ${oneCall.directRestMedianMs} ms, through MCP ${oneCall.viaMcpMedianMs} ms`);

    writeResult(
      "post-approval-latency",
      {
        setup: {
          emulator: { process: portal.command, rate: 0, fault: { methods: ["tasks.task.get", "tasks.task.update"], kind: "latency", ms: LATENCY, times: 0 } },
          samples: SAMPLES,
          warmup: WARMUP,
          note: "runs were waiting for approval before the latency was armed; timing starts at submitDecision and ends when it returns",
        },
        results: { table, breakdownOurs: bd, beyondFloor: rest, oneCall, bareMcpMeanMs: round(bareMcp.reduce((a, x) => a + x, 0) / bareMcp.length) },
        raw: {
          oursMs: totals,
          oursSegments: ours.map((o) => o.segments.map((g) => ({ name: g.name, ms: round(g.ms, 3), checkpointer: round(g.checkpointer, 3), journal: round(g.journal, 3), audit: round(g.audit, 3), mcp: round(g.mcp, 3) }))),
          bareMs,
          oneCallDirectRestMs: directMs,
          oneCallViaMcpMs: viaMcpMs,
          emulatorCallsDuringRun: calls.length,
        },
      },
      startedAt,
    );
  } finally {
    bare.close();
    await bench.close();
    await portal.close();
    removeScratch(dir);
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
