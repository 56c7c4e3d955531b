/**
 * Our app as the CLI and tests build it (config → createDeps → openApp: MCP server over stdio, the
 * stores and the checkpointer on files), with a scripted model so no model cost is measured, plus a
 * timing probe. The probe only wraps the journal's and audit log's methods and the MCP calls to note
 * how long each call took; every call still goes to the real implementation. What SQLite itself does
 * (time, commits, fsyncs per file) is counted below all of them by ./sqlite-commits.ts. `instrument`
 * switches both off for timed samples: the wrappers then call straight through.
 *
 * The bare LangGraph graph is the baseline: SqliteSaver on its own file in the same directory, the
 * same MCP client and emulator; one interrupt, one resume, then the same three calls as ours.
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { RUN_DURABILITY, startRun, submitDecision } from "../../src/app/threads.js";
import { openApp, type App } from "../../src/app/open-app.js";
import { type ThreadView } from "../../src/app/view-thread.js";
import type { Bitrix24Tools } from "../../src/tools/bitrix24-tools.js";
import { ScriptedChatModel, call, type Script } from "../../test/support/scripted-model.js";
import { ROOT } from "./common.js";
import { diff, installCommitCounter, type CommitCounter, type Counts } from "./sqlite-commits.js";

export type Category = "journal" | "audit" | "mcp";

interface Span {
  category: Category;
  name: string;
  start: number;
  end: number;
}

/**
 * Records when each instrumented call started and ended; sequential runs read it back per segment.
 * While `enabled` is false the wrapped calls go straight to the implementation, untimed.
 */
export class Probe {
  spans: Span[] = [];
  enabled = true;

  clear(): void {
    this.spans = [];
  }

  async time<T>(category: Category, name: string, fn: () => T | Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await fn();
    } finally {
      if (this.enabled) this.spans.push({ category, name, start, end: performance.now() });
    }
  }

  /** Milliseconds of each category inside [from, to), and how many calls started there. */
  within(from: number, to: number): Record<Category, number> & { calls: Record<string, number> } {
    const out = { journal: 0, audit: 0, mcp: 0, calls: {} as Record<string, number> };
    for (const s of this.spans) {
      const overlap = Math.min(s.end, to) - Math.max(s.start, from);
      if (overlap > 0) out[s.category] += overlap;
      if (s.start >= from && s.start < to)
        out.calls[`${s.category}.${s.name}`] = (out.calls[`${s.category}.${s.name}`] ?? 0) + 1;
    }
    return out;
  }
}

/** Replaces each method of a store object by one that times the same call. */
function timeMethods(target: object, category: Category, probe: Probe): void {
  // The object's own function properties too: the journal's methods are bound onto each journal
  // (src/store/journal/composed.ts), not found on its prototype.
  const names = new Set<string>();
  for (let p: object | null = target; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const n of Object.getOwnPropertyNames(p)) if (n !== "constructor" && n !== "close") names.add(n);
  }
  const record = target as Record<string, unknown>;
  for (const n of names) {
    const original = record[n];
    if (typeof original !== "function") continue;
    const bound = (original as (...a: unknown[]) => unknown).bind(target);
    // Only the store's own (asynchronous) methods are calls of it. A synchronous helper is a statement
    // run inside one of them, in its transaction: it must stay synchronous (never turned into a
    // promise) and is neither a call nor a commit of its own, so it is not recorded.
    record[n] = (...args: unknown[]) => {
      if (!probe.enabled) return bound(...args);
      const start = performance.now();
      const out = bound(...args);
      if (!(out instanceof Promise)) return out;
      return out.finally(() => {
        if (probe.enabled) probe.spans.push({ category, name: n, start, end: performance.now() });
      });
    };
  }
}

function timeTools(tools: Bitrix24Tools, probe: Probe): void {
  const read = tools.read.bind(tools);
  tools.read = (role, args) =>
    probe.enabled ? probe.time("mcp", `read.${role}`, () => read(role, args)) : read(role, args);
  const write = tools.writeHandle.call.bind(tools.writeHandle);
  tools.writeHandle.call = (role, args, opts) =>
    probe.enabled ? probe.time("mcp", role, () => write(role, args, opts)) : write(role, args, opts);
}

/** The model's part, scripted: propose the rename named in the request, without reading first. */
export const proposeFromRequest: Script = (messages: BaseMessage[]) => {
  if (messages.some((m) => m.getType() === "tool")) return new AIMessage("Proposed; waiting for the human.");
  const human = messages.find((m) => m.getType() === "human");
  const text = typeof human?.content === "string" ? human.content : "";
  const m = /task (\d+) to (.+)$/.exec(text);
  if (!m) throw new Error(`bench script expected "rename task N to TITLE", got ${JSON.stringify(text)}`);
  return new AIMessage({
    content: "",
    tool_calls: [
      call("propose_change", { taskId: Number(m[1]), fields: { TITLE: m[2]! }, rationale: "benchmark" }),
    ],
  });
};

export interface BenchApp {
  app: App;
  probe: Probe;
  commits: CommitCounter;
  /** Closes the app: its stores, checkpointer and MCP client. */
  close(): Promise<void>;
}

/**
 * Switches the probe and the commit counter on or off together: off for timed samples (every wrapper
 * calls straight through), on for the samples that count commits and split the time into segments.
 */
export function instrument(bench: BenchApp, on: boolean): void {
  bench.probe.enabled = on;
  if (on) bench.commits.resume();
  else bench.commits.pause();
}

export async function openBenchApp(opts: {
  webhookUrl: string;
  dataDir: string;
  rate: number;
  burst?: number;
  env?: Record<string, string>;
}): Promise<BenchApp> {
  const env: Record<string, string> = {
    BITRIX24_WEBHOOK_URL: opts.webhookUrl,
    ACTION_ENVELOPE_DATA_DIR: opts.dataDir,
    MODEL: "offline",
    BITRIX24_RATE: String(opts.rate),
    BITRIX24_BURST: String(opts.burst ?? 50),
    // The journal's key beside the data directory (removed with it), never in the real home.
    ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${opts.dataDir.replace(/\/+$/, "")}.journal.key`,
    ...opts.env,
  };
  const probe = new Probe();
  // Installed before any store opens, so every connection's statements are seen.
  const commits = installCommitCounter();
  const config = loadConfig(env, ROOT);
  const deps = await createDeps(config, {
    model: new ScriptedChatModel(proposeFromRequest),
    modelLabel: "scripted (bench)",
  });
  timeTools(deps.tools, probe);
  timeMethods(deps.journal, "journal", probe);
  const audit = (deps as unknown as Record<string, unknown>)["audit"];
  if (audit && typeof audit === "object") timeMethods(audit, "audit", probe);
  const app = openApp(deps);
  return { app, probe, commits, close: () => app.close() };
}

export function requestFor(taskId: number): string {
  return `rename task ${taskId} to BENCH-${taskId} - CLEAN TRUE PATH`;
}

/** A run up to its approval; throws if it did not stop there (the benchmark would measure nothing). */
export async function waitingRun(app: App, taskId: number): Promise<ThreadView> {
  const view = await startRun(app, { request: requestFor(taskId), requestedBy: "bench-user" });
  if (view.status !== "awaiting_approval") {
    throw new Error(
      `expected task ${taskId}'s run to wait for approval, got ${view.status} ${view.state?.outcome}/${view.state?.reasonCode}: ${view.state?.reason}`,
    );
  }
  return view;
}

/** The resume value approving the waiting approval as shown (the tests' own). */
export { approvalOf } from "../../test/support/harness.js";

// ---------------------------------------------------------------------------------------------
// Bare LangGraph: what a plain HITL graph does for the same action.

const BareState = Annotation.Root({
  taskId: Annotation<number>,
  title: Annotation<string>,
  approved: Annotation<boolean | null>,
  result: Annotation<unknown>,
});

export interface BareGraph {
  start(threadId: string, taskId: number): Promise<void>;
  resume(threadId: string): Promise<unknown>;
  close(): void;
}

/**
 * A bare HITL graph around the same MCP client making the same three Bitrix24 calls as ours (read,
 * write, read), each in its own node: the difference to ours is the control layer alone (journal,
 * audit, envelope checks, larger state). SqliteSaver as LangGraph ships it, on `bare-checkpoints.sqlite`.
 */
export function openBareGraph(tools: Bitrix24Tools, dataDir: string): BareGraph {
  const checkpointer = SqliteSaver.fromConnString(path.join(dataDir, BARE_CHECKPOINTS));
  const read = async (taskId: number) => {
    const res = await tools.read("getTask", { taskId });
    if (!res.ok)
      throw new Error(`bare graph: read of task ${taskId} failed: ${JSON.stringify(res).slice(0, 400)}`);
    return {};
  };
  const ask = (s: typeof BareState.State) => {
    const answer = interrupt({
      action: "update_task",
      args: { taskId: s.taskId, fields: { TITLE: s.title } },
    }) as { approve: boolean };
    return { approved: answer.approve };
  };
  const write = async (s: typeof BareState.State) => {
    if (!s.approved) return { result: null };
    const res = await tools.writeHandle.updateTask(s.taskId, { TITLE: s.title });
    return { result: res.ok ? res.body : res.error };
  };
  const graph = new StateGraph(BareState)
    .addNode("ask", ask)
    .addNode("pre_read", (s) => read(s.taskId))
    .addNode("write", write)
    .addNode("verify", (s) => read(s.taskId))
    .addEdge(START, "ask")
    .addEdge("ask", "pre_read")
    .addEdge("pre_read", "write")
    .addEdge("write", "verify")
    .addEdge("verify", END)
    .compile({ checkpointer });
  // Same durability as our runs (RUN_DURABILITY): each step's checkpoint is committed before the next
  // step starts.
  const config = (threadId: string) => ({
    configurable: { thread_id: threadId },
    durability: RUN_DURABILITY,
  });
  return {
    async start(threadId, taskId) {
      await graph.invoke(
        { taskId, title: `BENCH-${taskId} - BARE`, approved: null, result: null },
        config(threadId),
      );
    },
    async resume(threadId) {
      const out = await graph.invoke(new Command({ resume: { approve: true } }), config(threadId));
      const result = out.result as { result?: { task?: unknown } } | null;
      if (!result?.result?.task)
        throw new Error(`bare graph: the write did not succeed: ${JSON.stringify(out.result).slice(0, 300)}`);
      return out;
    },
    close() {
      checkpointer.db.close();
    },
  };
}

/** The bare graph's checkpoint file: every other SQLite file the benchmark process touches is ours. */
export const BARE_CHECKPOINTS = "bare-checkpoints.sqlite";

// ---------------------------------------------------------------------------------------------
// Where the time of one decision goes.

export interface Segment {
  /** "start+NODE" (lock, pending re-check, loading the checkpoint, the first node), a node name, or "end". */
  name: string;
  ms: number;
  journal: number;
  audit: number;
  mcp: number;
  /** Time inside SQLite statements per file (the checkpointer's is checkpoints.sqlite). */
  sqlite: Record<string, number>;
  /** Everything else: LangGraph's own work, state (de)serialisation, the envelope core, the event loop. */
  other: number;
  calls: Record<string, number>;
}

export interface TimedDecision {
  totalMs: number;
  cpuMs: number;
  view: ThreadView;
  segments: Segment[];
  /** SQLite commits per file from the call to its return. */
  commits: Counts;
}

/**
 * One decision, sequentially, timed without marks or snapshots: with `instrument(bench, false)` it
 * measures the app alone.
 */
export async function leanDecision(
  bench: BenchApp,
  threadId: string,
  resume: unknown,
): Promise<{ totalMs: number; cpuMs: number; view: ThreadView }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const view = await submitDecision(bench.app, threadId, resume);
  const totalMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { totalMs, cpuMs: (cpu.user + cpu.system) / 1000, view };
}

/**
 * One decision, sequentially, with a timestamp and a commit-counter snapshot at each node's update. A
 * node's segment runs from the previous update to its own, so it also holds the previous step's
 * checkpoint write. Its figures need `instrument(bench, true)`; the marks, snapshots and spans add to
 * the time it measures.
 */
export async function timedDecision(
  bench: BenchApp,
  threadId: string,
  resume: unknown,
): Promise<TimedDecision> {
  bench.probe.clear();
  const marks: Array<{ name: string; at: number; counts: Counts }> = [];
  const counts0 = bench.commits.snapshot();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const view = await submitDecision(bench.app, threadId, resume, (node) =>
    marks.push({ name: node, at: performance.now(), counts: bench.commits.snapshot() }),
  );
  const t1 = performance.now();
  const cpu = process.cpuUsage(cpu0);
  const counts1 = bench.commits.snapshot();
  const bounds = [
    { name: "start", at: t0, counts: counts0 },
    ...marks,
    { name: "end", at: t1, counts: counts1 },
  ];
  const segments: Segment[] = [];
  for (let i = 1; i < bounds.length; i++) {
    const from = bounds[i - 1]!;
    const to = bounds[i]!;
    const name = i === bounds.length - 1 ? "end" : i === 1 ? `start+${to.name}` : to.name;
    const c = bench.probe.within(from.at, to.at);
    const ms = to.at - from.at;
    const sqlite = Object.fromEntries(
      Object.entries(diff(to.counts, from.counts)).map(([file, f]) => [file, f.ms]),
    );
    // The journal's and the audit log's method times already hold their own SQLite time.
    const outside = sqlite[CHECKPOINTS] ?? 0;
    segments.push({
      name,
      ms,
      journal: c.journal,
      audit: c.audit,
      mcp: c.mcp,
      sqlite,
      other: ms - c.journal - c.audit - c.mcp - outside,
      calls: c.calls,
    });
  }
  return {
    totalMs: t1 - t0,
    cpuMs: (cpu.user + cpu.system) / 1000,
    view,
    segments,
    commits: diff(counts1, counts0),
  };
}

/** Our checkpointer's file, as createCheckpointer names it. */
const CHECKPOINTS = "checkpoints.sqlite";

/** Mean of each column per segment name, in the order the segments ran (means add up; medians do not). */
export function breakdown(samples: TimedDecision[]) {
  const order: string[] = [];
  const acc = new Map<string, { sums: Record<string, number>; calls: Record<string, number> }>();
  for (const s of samples) {
    for (const seg of s.segments) {
      if (!acc.has(seg.name)) {
        order.push(seg.name);
        acc.set(seg.name, { sums: {}, calls: {} });
      }
      const a = acc.get(seg.name)!;
      const add = (k: string, v: number) => (a.sums[k] = (a.sums[k] ?? 0) + v);
      for (const k of ["ms", "journal", "audit", "mcp", "other"] as const) add(k, seg[k]);
      add("checkpointer", seg.sqlite[CHECKPOINTS] ?? 0);
      for (const [k, v] of Object.entries(seg.calls)) a.calls[k] = (a.calls[k] ?? 0) + v;
    }
  }
  const n = samples.length;
  const r = (x: number) => Math.round(x * 100) / 100;
  const rows = order.map((name) => {
    const a = acc.get(name)!;
    const mean = (k: string) => r((a.sums[k] ?? 0) / n);
    return {
      segment: name,
      meanMs: mean("ms"),
      checkpointer: mean("checkpointer"),
      journal: mean("journal"),
      audit: mean("audit"),
      mcp: mean("mcp"),
      other: mean("other"),
      callsPerAction: Object.fromEntries(Object.entries(a.calls).map(([k, v]) => [k, r(v / n)])),
    };
  });
  const sum = (k: "meanMs" | "checkpointer" | "journal" | "audit" | "mcp" | "other") =>
    r(rows.reduce((s, x) => s + x[k], 0));
  return {
    note: "mean ms per action; checkpointer = time inside SQLite statements on checkpoints.sqlite; journal, audit = their methods' time (their SQLite included); mcp = tool calls",
    rows,
    totals: {
      meanMs: sum("meanMs"),
      checkpointer: sum("checkpointer"),
      journal: sum("journal"),
      audit: sum("audit"),
      mcp: sum("mcp"),
      other: sum("other"),
    },
  };
}
