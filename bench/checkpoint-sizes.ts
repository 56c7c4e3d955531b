/**
 * What LangGraph serialises for one action after its approval: one action through the app as
 * control-overhead runs it (after one warm-up), then each checkpoint written from the resume to the end
 * with its size, each channel's JSON size and the writes of the step that ran from it, and the bytes
 * the checkpointer serialised and deserialised during `submitDecision`. Not a timed benchmark: sizes
 * do not depend on the machine's load. Not part of `npm run bench`; run by hand:
 *   npx tsx bench/checkpoint-sizes.ts [--dump CHANNEL,CHANNEL]   # --dump prints those channels' final values
 */
import type { BaseCheckpointSaver, CheckpointTuple } from "@langchain/langgraph";
import { submitDecision } from "../src/app/threads.js";
import { removeScratch, strArg, tempDir } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal } from "./support/portal.js";
import { approvalOf, openBenchApp, waitingRun } from "./support/app.js";

const DUMP = strArg("dump", "");

const jsonBytes = (v: unknown) => (v === undefined ? 0 : Buffer.byteLength(JSON.stringify(v) ?? ""));

type Serde = Record<"dumpsTyped" | "loadsTyped", (...a: unknown[]) => Promise<unknown>>;

/** Counts the bytes the checkpointer's serde writes and reads while `fn` runs. */
async function counted<T>(cp: BaseCheckpointSaver, fn: () => Promise<T>) {
  const serde = cp.serde as unknown as Serde;
  const { dumpsTyped, loadsTyped } = serde;
  const bytes = { serialised: 0, deserialised: 0 };
  serde.dumpsTyped = async (...a) => {
    const out = (await dumpsTyped.apply(serde, a)) as [string, { length: number }];
    bytes.serialised += out[1].length;
    return out;
  };
  serde.loadsTyped = (...a) => {
    bytes.deserialised += (a[1] as { length: number }).length;
    return loadsTyped.apply(serde, a);
  };
  try {
    return { out: await fn(), bytes };
  } finally {
    Object.assign(serde, { dumpsTyped, loadsTyped });
  }
}

async function tuples(cp: BaseCheckpointSaver, threadId: string): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of cp.list({ configurable: { thread_id: threadId } })) out.push(t);
  return out.reverse();
}

async function main(): Promise<void> {
  const dir = tempDir("ae-bench-ckpt-sizes-");
  const portal = await startBenchPortal({ dir, tasks: 2, rate: 0 });
  const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir: `${dir}/data`, rate: 0 });
  const cp = bench.app.checkpointer;
  try {
    for (const task of [FIRST_BENCH_TASK, FIRST_BENCH_TASK + 1]) {
      const view = await waitingRun(bench.app, task);
      const before = new Set((await tuples(cp, view.threadId)).map((t) => t.checkpoint.id));
      const { out: done, bytes } = await counted(cp, () =>
        submitDecision(bench.app, view.threadId, approvalOf(view)),
      );
      if (task === FIRST_BENCH_TASK) continue;
      console.log(
        `outcome ${done.state?.outcome}; submitDecision serialised ${bytes.serialised} B, deserialised ${bytes.deserialised} B`,
      );
      const all = await tuples(cp, view.threadId);
      for (const t of all) {
        const step = (t.metadata as { step?: number } | undefined)?.step;
        const [, text] = await cp.serde.dumpsTyped(t.checkpoint);
        const channels = Object.entries(t.checkpoint.channel_values)
          .map(([k, v]) => [k, jsonBytes(v)] as const)
          .filter(([, n]) => n > 4)
          .sort((a, b) => b[1] - a[1]);
        const after = before.has(t.checkpoint.id) ? "" : " (written after the resume)";
        console.log(`\nstep ${step}${after}: checkpoint ${text.length} B`);
        console.log(`  channels: ${channels.map(([k, n]) => `${k}=${n}`).join(" ")}`);
        const writes = (t.pendingWrites ?? []).map(([, ch, v]) => `${ch}=${jsonBytes(v)}`);
        console.log(`  writes of the next step: ${writes.join(" ") || "none"}`);
      }
      const last = all.at(-1)!.checkpoint.channel_values;
      for (const k of DUMP.split(",").filter(Boolean)) console.log(k, JSON.stringify(last[k], null, 1));
    }
  } finally {
    await bench.close();
    await portal.close();
    removeScratch(dir);
  }
}

await main();
