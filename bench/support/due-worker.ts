/**
 * A worker process for scale-pg: `runDueWork` rounds (what `worker` runs each round) on the CLI's own
 * stores, printing one JSON line per round with its CPU, wall time and checkpoint reads. Its clock
 * steps forward by BENCH_CLOCK_STEP_MS at BENCH_CLOCK_STEP_AT (epoch ms), so approvals created over a
 * minute fall due together, at one known instant. Stops on SIGTERM after the round under way.
 *
 *   tsx bench/support/due-worker.ts   (env: DATABASE_URL and the rest of the CLI's, BENCH_INTERVAL_MS,
 *                                      BENCH_ROUNDS (0: until stopped), BENCH_CLOCK_STEP_AT, BENCH_CLOCK_STEP_MS)
 */
import { performance } from "node:perf_hooks";
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { openApp } from "../../src/app/open-app.js";
import { runDueWork } from "../../src/app/due-work.js";
import { createCheckpointer } from "../../src/store/checkpointer.js";
import { ROOT, round, sleep } from "./common.js";
import type { BaseCheckpointSaver } from "@langchain/langgraph";

/** Counts every checkpoint read (getTuple, list) made through `saver`. */
export function countReads(saver: BaseCheckpointSaver): { reads: number } {
  const counter = { reads: 0 };
  const getTuple = saver.getTuple.bind(saver);
  const list = saver.list.bind(saver);
  saver.getTuple = (config) => ((counter.reads += 1), getTuple(config));
  saver.list = (config, options) => ((counter.reads += 1), list(config, options));
  return counter;
}

/** The clock BENCH_CLOCK_STEP_AT / BENCH_CLOCK_STEP_MS describe (the real one without them). */
export function steppedClock(env: NodeJS.ProcessEnv): () => Date {
  const at = Number(env.BENCH_CLOCK_STEP_AT ?? Infinity);
  const step = Number(env.BENCH_CLOCK_STEP_MS ?? 0);
  return () => {
    const now = Date.now();
    return new Date(now >= at ? now + step : now);
  };
}

async function main(): Promise<void> {
  const interval = Number(process.env.BENCH_INTERVAL_MS ?? 5000);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 0);
  const config = loadConfig(process.env, ROOT);
  const deps = await createDeps(config, { clock: steppedClock(process.env) });
  const checkpointer = createCheckpointer(deps.config);
  const counter = countReads(checkpointer);
  const app = openApp(deps, { checkpointer });
  let stop = false;
  process.once("SIGTERM", () => (stop = true));
  try {
    for (let n = 0; !stop && (rounds === 0 || n < rounds); n++) {
      const reads0 = counter.reads;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const startedAt = Date.now();
      const r = await runDueWork(app);
      const cpu = process.cpuUsage(cpu0);
      console.log(
        JSON.stringify({
          startedAt,
          endedAt: Date.now(),
          wallMs: round(performance.now() - t0),
          cpuMs: round((cpu.user + cpu.system) / 1000),
          checkpointReads: counter.reads - reads0,
          swept: r.swept.map((s) => ({ threadId: s.threadId, result: s.result })),
          recovered: r.recovered.length,
        }),
      );
      if (rounds === 0 || n + 1 < rounds) await sleep(interval);
    }
  } finally {
    await app.close();
  }
}

if (process.argv[1]?.endsWith("due-worker.ts"))
  main().catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
