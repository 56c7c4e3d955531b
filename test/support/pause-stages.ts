/**
 * The pause check of a saver (pausedAtInterrupt, src/store/checkpointer.ts) against getState at every
 * stage of a real run: before it, at two pauses (the second interrupt's value a list), at the end, a
 * neighbour thread paused beside an ended one, and a pending interrupt write whose value is an empty
 * list (no pause for getState). Each stage returns [the saver's answer, getState's answer].
 */
import { Annotation, Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { pausedAtInterrupt } from "../../src/store/checkpointer.js";

export async function pauseStages(saver: BaseCheckpointSaver): Promise<Array<[string, boolean[]]>> {
  const State = Annotation.Root({ n: Annotation<number>(), answer: Annotation<string | null>() });
  const graph = new StateGraph(State)
    .addNode("ask", () => ({ answer: interrupt({ q: "first?" }) as string }))
    .addNode("again", () => ({ answer: interrupt(["second?"]) as string }))
    .addNode("after", (s) => ({ n: s.n + 1 }))
    .addEdge(START, "ask")
    .addEdge("ask", "again")
    .addEdge("again", "after")
    .addEdge("after", END)
    .compile({ checkpointer: saver });
  const fromGetState = async (threadId: string) =>
    (await graph.getState({ configurable: { thread_id: threadId } })).tasks.some(
      (t) => (t.interrupts ?? []).length > 0,
    );
  const stages: Array<[string, boolean[]]> = [];
  const both = async (label: string, threadId: string) =>
    stages.push([
      label,
      [
        await pausedAtInterrupt(saver, threadId, async () => {
          throw new Error("the saver answers from its own rows");
        }),
        await fromGetState(threadId),
      ],
    ]);
  const config = (threadId: string) => ({
    configurable: { thread_id: threadId },
    durability: "sync" as const,
  });
  await both("no such thread", "none");
  await graph.invoke({ n: 0, answer: null }, config("t"));
  await both("first pause", "t");
  await graph.invoke(new Command({ resume: "one" }), config("t"));
  await both("second pause", "t");
  await graph.invoke(new Command({ resume: "two" }), config("t"));
  await both("ended", "t");
  await graph.invoke({ n: 0, answer: null }, config("u"));
  await both("neighbour paused", "u");
  await both("ended beside a paused neighbour", "t");
  const { checkpoint_id } = (await saver.getTuple({ configurable: { thread_id: "t" } }))!.config
    .configurable as { checkpoint_id: string };
  await saver.putWrites(
    { configurable: { thread_id: "t", checkpoint_ns: "", checkpoint_id } },
    [["__interrupt__", []]],
    "task-1",
  );
  await both("an empty interrupt write", "t");
  return stages;
}

/** What every saver must answer at those stages: as getState does. */
export const PAUSE_STAGES: Array<[string, boolean[]]> = [
  ["no such thread", [false, false]],
  ["first pause", [true, true]],
  ["second pause", [true, true]],
  ["ended", [false, false]],
  ["neighbour paused", [true, true]],
  ["ended beside a paused neighbour", [false, false]],
  ["an empty interrupt write", [false, false]],
];
