/**
 * The SQLite checkpointer's group commit (src/store/checkpointer.ts): a call settles only once its
 * rows are committed and visible to another connection; calls issued in the same turn of the event
 * loop share one transaction; two savers on one file in one process do not block each other; a
 * real graph resumes from what it wrote; and whether a thread is paused at an interrupt is read as
 * getState reads it.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { JsonPlusSerializer, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { GroupCommitSqliteSaver, LeanLoadSerializer, pausedAtInterrupt } from "../src/store/checkpointer.js";
import { tempDir } from "./support/harness.js";
import { PAUSE_STAGES, pauseStages } from "./support/pause-stages.js";

/** Counts the transactions the saver commits. */
class CountingSaver extends GroupCommitSqliteSaver {
  commits = 0;
  protected override commit(writes: Array<() => void>): void {
    super.commit(writes);
    this.commits++;
  }
}

const cfg = (thread: string, checkpointId?: string) => ({
  configurable: {
    thread_id: thread,
    checkpoint_ns: "",
    ...(checkpointId ? { checkpoint_id: checkpointId } : {}),
  },
});
const checkpoint = () => ({ ...emptyCheckpoint(), id: uuid6(-1) });

describe("group-commit SQLite checkpointer", () => {
  it("a put settles only after its row is committed: another connection sees it the moment the promise resolves", async () => {
    const file = path.join(tempDir(), "cp.sqlite");
    const saver = new CountingSaver(file);
    const other = new Database(file, { readonly: false });
    try {
      const cp = checkpoint();
      const pending = saver.put(cfg("t1"), cp, { source: "input", step: -1, parents: {} }, {});
      // Not yet: the row is written when the event loop turns (put has created the tables already).
      expect(other.prepare("SELECT COUNT(*) AS n FROM checkpoints").get()).toEqual({ n: 0 });
      await pending;
      expect(other.prepare("SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't1'").get()).toEqual({
        checkpoint_id: cp.id,
      });
      expect(saver.commits).toBe(1);
    } finally {
      other.close();
      saver.db.close();
    }
  });

  it("its commits do not fsync: WAL with synchronous=NORMAL, better-sqlite3's default for WAL (SQLITE_DEFAULT_WAL_SYNCHRONOUS=1)", async () => {
    const saver = new CountingSaver(path.join(tempDir(), "cp.sqlite"));
    try {
      await saver.put(cfg("t1"), checkpoint(), { source: "input", step: -1, parents: {} }, {});
      expect(saver.db.pragma("journal_mode", { simple: true })).toBe("wal");
      // 1 = NORMAL: a commit is in the WAL (safe from a process crash), not fsynced.
      expect(saver.db.pragma("synchronous", { simple: true })).toBe(1);
    } finally {
      saver.db.close();
    }
  });

  it("puts and writes issued in one turn, across threads, share one commit; each reads back intact", async () => {
    const saver = new CountingSaver(path.join(tempDir(), "cp.sqlite"));
    try {
      const cps = Array.from({ length: 20 }, () => checkpoint());
      await Promise.all(
        cps.map((cp, i) => saver.put(cfg(`t${i}`), cp, { source: "loop", step: 0, parents: {} }, {})),
      );
      expect(saver.commits).toBe(1);
      await Promise.all(
        cps.map((cp, i) => saver.putWrites(cfg(`t${i}`, cp.id), [["answer", { n: i }]], `task-${i}`)),
      );
      expect(saver.commits).toBe(2);
      for (let i = 0; i < cps.length; i++) {
        const t = await saver.getTuple(cfg(`t${i}`));
        expect(t?.checkpoint.id).toBe(cps[i]!.id);
        expect(t?.pendingWrites).toEqual([[`task-${i}`, "answer", { n: i }]]);
      }
      // One after another (awaited in turn): one commit each, as before.
      for (let i = 0; i < 3; i++)
        await saver.put(cfg(`s${i}`), checkpoint(), { source: "loop", step: 0, parents: {} }, {});
      expect(saver.commits).toBe(5);
    } finally {
      saver.db.close();
    }
  });

  it("two savers on one file in one process, writing at the same time, both finish (no transaction is held across an await)", async () => {
    const file = path.join(tempDir(), "cp.sqlite");
    const a = new CountingSaver(file);
    const b = new CountingSaver(file);
    try {
      const started = Date.now();
      await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          (i % 2 ? a : b).put(cfg(`x${i}`), checkpoint(), { source: "loop", step: 0, parents: {} }, {}),
        ),
      );
      // A deadlock would have waited out the 10 s busy timeout and failed.
      expect(Date.now() - started).toBeLessThan(5000);
      for (let i = 0; i < 30; i++) expect((await a.getTuple(cfg(`x${i}`)))?.checkpoint).toBeDefined();
    } finally {
      a.db.close();
      b.db.close();
    }
  });

  it("a graph interrupted with durability sync resumes from another saver on the same file (what a second process sees)", async () => {
    const file = path.join(tempDir(), "cp.sqlite");
    const State = Annotation.Root({
      asked: Annotation<string | null>(),
      answer: Annotation<string | null>(),
    });
    const build = (saver: GroupCommitSqliteSaver) =>
      new StateGraph(State)
        .addNode("ask", () => ({ answer: interrupt({ q: "?" }) as string }))
        .addNode("after", (s) => ({ asked: `got ${s.answer}` }))
        .addEdge(START, "ask")
        .addEdge("ask", "after")
        .addEdge("after", END)
        .compile({ checkpointer: saver });
    const first = new CountingSaver(file);
    const config = { configurable: { thread_id: "g1" }, durability: "sync" as const };
    await build(first).invoke({ asked: null, answer: null }, config);
    first.db.close();
    const second = new CountingSaver(file);
    try {
      const out = await build(second).invoke(new Command({ resume: "yes" }), config);
      expect(out.asked).toBe("got yes");
      expect(second.commits).toBeGreaterThan(0);
    } finally {
      second.db.close();
    }
  });

  it("says a thread is paused at an interrupt exactly when getState's tasks carry one, at every stage of a run", async () => {
    const saver = new GroupCommitSqliteSaver(path.join(tempDir(), "cp.sqlite"));
    try {
      expect(await pauseStages(saver)).toEqual(PAUSE_STAGES);
    } finally {
      saver.db.close();
    }
  });

  it("loads what the library's serializer loads: messages, undefined, Set, Map, a __proto__ key and plain JSON", async () => {
    const value = {
      messages: [
        new HumanMessage("rename task 4"),
        new AIMessage({ content: "", tool_calls: [{ id: "c1", name: "getTask", args: { taskId: 4 } }] }),
      ],
      nested: { list: [1, "two", null, { deep: new ToolMessage({ content: "{}", tool_call_id: "c1" }) }] },
      gone: undefined,
      set: new Set([1, 2]),
      map: new Map([["k", { v: [true] }]]),
      plain: { a: { b: [1.5, -2, { c: "d" }] } },
    };
    const library = new JsonPlusSerializer();
    const lean = new LeanLoadSerializer();
    const [type, bytes] = await library.dumpsTyped(value);
    const loaded = (await lean.loadsTyped(type, bytes)) as typeof value;
    expect(loaded).toStrictEqual(await library.loadsTyped(type, bytes));
    expect(loaded.messages[1]).toBeInstanceOf(AIMessage);
    expect(loaded.nested.list[3]).toEqual({ deep: expect.any(ToolMessage) });
    expect(loaded.set).toEqual(new Set([1, 2]));
    // JSON.parse keeps "__proto__" as a key; the library's reviver assigns it (a prototype): the same here.
    const text = '{"a":{"__proto__":{"x":1},"y":2},"b":[{"lc":2,"type":"undefined"}],"c":{"lc":3}}';
    expect(await lean.loadsTyped("json", text)).toStrictEqual(await library.loadsTyped("json", text));
  });

  it("answers from the graph's own getState for any other saver", async () => {
    const { MemorySaver } = await import("@langchain/langgraph");
    let asked = 0;
    const inFull = async () => (asked++, true);
    expect(await pausedAtInterrupt(new MemorySaver(), "t", inFull)).toBe(true);
    expect(asked).toBe(1);
  });
});
