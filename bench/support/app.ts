/**
 * Our app as the CLI and tests build it (config → createDeps → openApp: MCP server over stdio, journal,
 * audit, SqliteSaver on files), with a scripted model so no model cost is measured, plus a timing
 * probe. The probe only wraps the real checkpointer, journal, audit log and MCP calls to note how
 * long each call took; every call still goes to the real implementation.
 *
 * The bare LangGraph graph is the baseline: the same SqliteSaver (its own file in the same directory),
 * the same MCP client and emulator; one interrupt, one resume, one tasks.task.update.
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import type { CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { RUN_DURABILITY, openApp, startRun, submitDecision, type App, type ThreadView } from "../../src/app/threads.js";
import type { Bitrix24Tools } from "../../src/tools/bitrix24-tools.js";
import { GroupCommitSqliteSaver } from "../../src/store/checkpointer.js";
import { ScriptedChatModel, call, type Script } from "../../test/support/scripted-model.js";
import { ROOT } from "./common.js";

export type Category = "checkpointer" | "journal" | "audit" | "mcp";
export const CATEGORIES: Category[] = ["checkpointer", "journal", "audit", "mcp"];

interface Span {
  category: Category;
  name: string;
  start: number;
  end: number;
}

/** Records when each instrumented call started and ended; sequential runs read it back per segment. */
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
    const out = { checkpointer: 0, journal: 0, audit: 0, mcp: 0, calls: {} as Record<string, number> };
    for (const s of this.spans) {
      const overlap = Math.min(s.end, to) - Math.max(s.start, from);
      if (overlap > 0) out[s.category] += overlap;
      if (s.start >= from && s.start < to) out.calls[`${s.category}.${s.name}`] = (out.calls[`${s.category}.${s.name}`] ?? 0) + 1;
    }
    return out;
  }
}

/** A checkpointer class with each checkpoint read and write timed (the probe is set right after construction). */
function timedSaver<B extends new (...args: any[]) => SqliteSaver>(Base: B) {
  return class extends Base {
    probe!: Probe;
    override getTuple(...args: Parameters<SqliteSaver["getTuple"]>): Promise<CheckpointTuple | undefined> {
      return this.probe.time("checkpointer", "getTuple", () => super.getTuple(...args));
    }
    override put(...args: Parameters<SqliteSaver["put"]>) {
      return this.probe.time("checkpointer", "put", () => super.put(...args));
    }
    override putWrites(...args: Parameters<SqliteSaver["putWrites"]>) {
      return this.probe.time("checkpointer", "putWrites", () => super.putWrites(...args));
    }
  };
}

/** SqliteSaver itself (the bare graphs'), timed. */
const TimedSqliteSaver = timedSaver(SqliteSaver);

/**
 * Our checkpointer (group commit), timed. A put or putWrites settles only when its group commits, so its
 * span would cover other work done meanwhile (and the commit twice over): they are recorded as calls
 * with no duration, and the time is each group COMMIT's ("commit" span: one durable commit). Their
 * serialisation is CPU on the event loop and falls under "other".
 */
class TimedGroupCommitSaver extends timedSaver(GroupCommitSqliteSaver) {
  private called(name: string): void {
    const at = performance.now();
    if (this.probe.enabled) this.probe.spans.push({ category: "checkpointer", name, start: at, end: at });
  }
  override put(...args: Parameters<SqliteSaver["put"]>) {
    this.called("put");
    return GroupCommitSqliteSaver.prototype.put.apply(this, args);
  }
  override putWrites(...args: Parameters<SqliteSaver["putWrites"]>) {
    this.called("putWrites");
    return GroupCommitSqliteSaver.prototype.putWrites.apply(this, args);
  }
  protected override commit(writes: Array<() => void>): void {
    const start = performance.now();
    super.commit(writes);
    if (this.probe.enabled) this.probe.spans.push({ category: "checkpointer", name: "commit", start, end: performance.now() });
  }
}

/** Replaces each method of a store object by one that times the same call. */
function timeMethods(target: object, category: Category, probe: Probe): void {
  const names = new Set<string>();
  for (let p = Object.getPrototypeOf(target); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
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
  tools.read = (role, args) => probe.time("mcp", `read.${role}`, () => read(role, args));
  const write = tools.writeHandle.call.bind(tools.writeHandle);
  tools.writeHandle.call = (role, args, opts) => probe.time("mcp", role, () => write(role, args, opts));
}

/** The model's part, scripted: propose the rename named in the request, without reading first. */
export const proposeFromRequest: Script = (messages: BaseMessage[]) => {
  if (messages.some((m) => m.getType() === "tool")) return new AIMessage("Proposed; waiting for the human.");
  const human = messages.find((m) => m.getType() === "human");
  const text = typeof human?.content === "string" ? human.content : "";
  const m = /task (\d+) to (.+)$/.exec(text);
  if (!m) throw new Error(`bench script expected "rename task N to TITLE", got ${JSON.stringify(text)}`);
  return new AIMessage({ content: "", tool_calls: [call("propose_change", { taskId: Number(m[1]), fields: { TITLE: m[2]! }, rationale: "benchmark" })] });
};

export interface BenchApp {
  app: App;
  probe: Probe;
  /** Stops recording spans (and the memory they take) when a benchmark does not need them. */
  close(): Promise<void>;
}

export async function openBenchApp(opts: { webhookUrl: string; dataDir: string; rate: number; burst?: number; env?: Record<string, string> }): Promise<BenchApp> {
  const env: Record<string, string> = {
    BITRIX24_WEBHOOK_URL: opts.webhookUrl,
    ACTION_ENVELOPE_DATA_DIR: opts.dataDir,
    MODEL: "offline",
    BITRIX24_RATE: String(opts.rate),
    BITRIX24_BURST: String(opts.burst ?? 50),
    ...opts.env,
  };
  const probe = new Probe();
  const config = loadConfig(env, ROOT);
  const deps = await createDeps(config, { model: new ScriptedChatModel(proposeFromRequest), modelLabel: "scripted (bench)" });
  timeTools(deps.tools, probe);
  timeMethods(deps.journal, "journal", probe);
  const audit = (deps as unknown as Record<string, unknown>)["audit"];
  if (audit && typeof audit === "object") timeMethods(audit, "audit", probe);
  const app = openApp(deps, { checkpointer: Object.assign(new TimedGroupCommitSaver(path.join(opts.dataDir, "checkpoints.sqlite")), { probe }) });
  return { app, probe, close: () => app.close() };
}

export function requestFor(taskId: number): string {
  return `rename task ${taskId} to BENCH-${taskId} - CLEAN TRUE PATH`;
}

/** A run up to its approval; throws if it did not stop there (the benchmark would measure nothing). */
export async function waitingRun(app: App, taskId: number): Promise<ThreadView> {
  const view = await startRun(app, { request: requestFor(taskId), requestedBy: "bench-user" });
  if (view.status !== "awaiting_approval") {
    throw new Error(`expected task ${taskId}'s run to wait for approval, got ${view.status} ${view.state?.outcome}/${view.state?.reasonCode}: ${view.state?.reason}`);
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
 * A bare HITL graph around the same MCP client: interrupt, resume, write. With `threeCalls` it makes
 * the same three Bitrix24 calls ours does (read, write, read), each in its own node, so the
 * difference to ours is the control layer alone (journal, audit, envelope checks, larger state).
 */
export function openBareGraph(tools: Bitrix24Tools, dataDir: string, probe?: Probe, opts: { threeCalls?: boolean } = {}): BareGraph {
  const file = path.join(dataDir, opts.threeCalls ? "bare3-checkpoints.sqlite" : "bare-checkpoints.sqlite");
  const checkpointer = probe ? Object.assign(new TimedSqliteSaver(new Database(file)), { probe }) : SqliteSaver.fromConnString(file);
  const read = async (taskId: number) => {
    const res = await tools.read("getTask", { taskId });
    if (!res.ok) throw new Error(`bare graph: read of task ${taskId} failed: ${JSON.stringify(res).slice(0, 400)}`);
    return {};
  };
  const ask = (s: typeof BareState.State) => {
    const answer = interrupt({ action: "update_task", args: { taskId: s.taskId, fields: { TITLE: s.title } } }) as { approve: boolean };
    return { approved: answer.approve };
  };
  const write = async (s: typeof BareState.State) => {
    if (!s.approved) return { result: null };
    const res = await tools.writeHandle.updateTask(s.taskId, { TITLE: s.title });
    return { result: res.ok ? res.body : res.error };
  };
  const graph = opts.threeCalls
    ? new StateGraph(BareState)
        .addNode("ask", ask)
        .addNode("pre_read", (s) => read(s.taskId))
        .addNode("write", write)
        .addNode("verify", (s) => read(s.taskId))
        .addEdge(START, "ask")
        .addEdge("ask", "pre_read")
        .addEdge("pre_read", "write")
        .addEdge("write", "verify")
        .addEdge("verify", END)
        .compile({ checkpointer })
    : new StateGraph(BareState).addNode("ask", ask).addNode("write", write).addEdge(START, "ask").addEdge("ask", "write").addEdge("write", END).compile({ checkpointer });
  // Same durability as our runs (RUN_DURABILITY): each step's checkpoint is committed before the next
  // step starts.
  const config = (threadId: string) => ({ configurable: { thread_id: threadId }, durability: RUN_DURABILITY });
  return {
    async start(threadId, taskId) {
      await graph.invoke({ taskId, title: `BENCH-${taskId} - BARE`, approved: null, result: null }, config(threadId));
    },
    async resume(threadId) {
      const out = await graph.invoke(new Command({ resume: { approve: true } }), config(threadId));
      const result = out.result as { result?: { task?: unknown } } | null;
      if (!result?.result?.task) throw new Error(`bare graph: the write did not succeed: ${JSON.stringify(out.result).slice(0, 300)}`);
      return out;
    },
    close() {
      checkpointer.db.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Where the time of one decision goes.

export interface Segment {
  /** "start" (lock, pending re-check, loading the checkpoint), a node name, or "end" (final view, unlock). */
  name: string;
  ms: number;
  checkpointer: number;
  journal: number;
  audit: number;
  mcp: number;
  /** Everything else: LangGraph's own work, state (de)serialisation, the envelope core, the event loop. */
  other: number;
  calls: Record<string, number>;
}

export interface TimedDecision {
  totalMs: number;
  cpuMs: number;
  view: ThreadView;
  segments: Segment[];
}

/**
 * One decision, sequentially, with a timestamp at each node's update. A node's segment runs from the
 * previous update to its own, so it also holds the previous step's checkpoint write.
 */
export async function timedDecision(bench: BenchApp, threadId: string, resume: unknown): Promise<TimedDecision> {
  bench.probe.clear();
  const marks: Array<{ name: string; at: number }> = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const view = await submitDecision(bench.app, threadId, resume, (node) => marks.push({ name: node, at: performance.now() }));
  const t1 = performance.now();
  const cpu = process.cpuUsage(cpu0);
  const bounds = [{ name: "start", at: t0 }, ...marks, { name: "end", at: t1 }];
  const segments: Segment[] = [];
  for (let i = 1; i < bounds.length; i++) {
    const from = bounds[i - 1]!.at;
    const to = bounds[i]!.at;
    const name = i === bounds.length - 1 ? "end" : i === 1 ? `start+${bounds[i]!.name}` : bounds[i]!.name;
    const c = bench.probe.within(from, to);
    const ms = to - from;
    segments.push({ name, ms, checkpointer: c.checkpointer, journal: c.journal, audit: c.audit, mcp: c.mcp, other: ms - c.checkpointer - c.journal - c.audit - c.mcp, calls: c.calls });
  }
  return { totalMs: t1 - t0, cpuMs: (cpu.user + cpu.system) / 1000, view, segments };
}

/** Mean of each column per segment name, in the order the segments ran (means add up; medians do not). */
export function breakdown(samples: TimedDecision[]) {
  const order: string[] = [];
  const acc = new Map<string, { n: number; sums: Record<string, number>; calls: Record<string, number> }>();
  for (const s of samples) {
    for (const seg of s.segments) {
      if (!acc.has(seg.name)) {
        order.push(seg.name);
        acc.set(seg.name, { n: 0, sums: {}, calls: {} });
      }
      const a = acc.get(seg.name)!;
      a.n += 1;
      for (const k of ["ms", "checkpointer", "journal", "audit", "mcp", "other"] as const) a.sums[k] = (a.sums[k] ?? 0) + seg[k];
      for (const [k, v] of Object.entries(seg.calls)) a.calls[k] = (a.calls[k] ?? 0) + v;
    }
  }
  const n = samples.length;
  const r = (x: number) => Math.round(x * 100) / 100;
  const rows = order.map((name) => {
    const a = acc.get(name)!;
    return {
      segment: name,
      meanMs: r(a.sums.ms! / n),
      checkpointer: r(a.sums.checkpointer! / n),
      journal: r(a.sums.journal! / n),
      audit: r(a.sums.audit! / n),
      mcp: r(a.sums.mcp! / n),
      other: r(a.sums.other! / n),
      callsPerAction: Object.fromEntries(Object.entries(a.calls).map(([k, v]) => [k, r(v / n)])),
    };
  });
  const total = (k: "meanMs" | "checkpointer" | "journal" | "audit" | "mcp" | "other") => r(rows.reduce((s, x) => s + x[k], 0));
  return {
    rows,
    totals: { meanMs: total("meanMs"), checkpointer: total("checkpointer"), journal: total("journal"), audit: total("audit"), mcp: total("mcp"), other: total("other") },
  };
}
