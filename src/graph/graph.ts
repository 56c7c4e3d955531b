/**
 * Wiring only. Graph id in langgraph.json: bitrix24_task_agent.
 *
 *   agent ⇄ read_tools
 *   agent → propose → ask_input ⇄ check_input → agent            (structured input)
 *   ask_input → check_input by its command; with an answer already taken it asks nothing and its branch ends
 *   agent → check_input | ask_input   (a question is open in the journal: chat sent meanwhile is a candidate answer; no model call)
 *   agent → check_decision      (an approval waits: a chat message sent meanwhile is a candidate decision; no model call)
 *   agent → build_envelope      (an undo thread: the proposal is built by code from the journal, no model call)
 *   agent → propose → build_envelope → await_approval ⇄ check_decision → END
 *   check_decision, on an approval: the claim, then carry_out's work in the same step, so no pause,
 *              goto or state edit falls between the claim and the write
 *   carry_out: pre-read → bound write → verify, each action of a change set in turn, driven by the
 *              journal's phase table (src/executor); no router or state channel picks its steps; it
 *              then does finish's work itself (the close and the final record) and ends the run
 *   build_envelope → carry_out   (a change set approved in part, where the policy lets the approved part run at once)
 *   check_decision → build_envelope (edit, escalation) | agent (reject with feedback, revision allowed)
 *   any journal-checked node → resync → wherever the journal says the thread is (a node driven out of
 *   order by goto, new input, replay or a fork does nothing and hands over to resync)
 */
import { END, START, StateGraph, type BaseCheckpointSaver } from "@langchain/langgraph";
import { AgentInput, AgentOutput, AgentState } from "./state.js";
import type { CheckpointReader } from "../evidence/case-source.js";
import {
  afterAgent,
  afterAwaitApproval,
  afterBuildEnvelope,
  afterCheckInput,
  afterFinish,
  afterPropose,
  afterResync,
} from "./routes.js";
import { agent } from "../nodes/agent.js";
import { readTools } from "../nodes/read-tools.js";
import { propose } from "../nodes/propose.js";
import { askInput } from "../nodes/ask-input.js";
import { checkInput } from "../nodes/check-input.js";
import { buildEnvelope } from "../nodes/build-envelope.js";
import { awaitApproval } from "../nodes/await-approval.js";
import { checkDecision } from "../nodes/check-decision.js";
import { carryOut } from "../nodes/carry-out.js";
import { finish } from "../nodes/finish.js";
import { resync } from "../nodes/resync.js";

export const builder = new StateGraph({ state: AgentState, input: AgentInput, output: AgentOutput })
  .addNode("agent", agent)
  .addNode("read_tools", readTools)
  .addNode("propose", propose)
  .addNode("ask_input", askInput, { ends: ["check_input"] })
  .addNode("check_input", checkInput)
  .addNode("build_envelope", buildEnvelope)
  .addNode("await_approval", awaitApproval)
  .addNode("check_decision", checkDecision, {
    ends: ["agent", "await_approval", "build_envelope", "finish", "resync", END],
    metadata: { phases: "decide → pre-read → bound write → verify on an approval (src/executor)" },
  })
  .addNode("carry_out", carryOut, {
    ends: ["finish", "resync", END],
    metadata: { phases: "pre-read → bound write → verify (src/executor; one node, no pause between phases)" },
  })
  .addNode("finish", finish)
  .addNode("resync", resync)
  .addEdge(START, "agent")
  .addConditionalEdges("agent", afterAgent, [
    "read_tools",
    "propose",
    "ask_input",
    "check_input",
    "check_decision",
    "build_envelope",
    "finish",
    "resync",
  ])
  .addEdge("read_tools", "agent")
  .addConditionalEdges("propose", afterPropose, ["agent", "ask_input", "build_envelope", "finish", "resync"])
  .addConditionalEdges("check_input", afterCheckInput, ["agent", "ask_input", "finish", "resync"])
  .addConditionalEdges("build_envelope", afterBuildEnvelope, [
    "await_approval",
    "carry_out",
    "finish",
    "resync",
  ])
  .addConditionalEdges("await_approval", afterAwaitApproval, ["check_decision", "resync"])
  .addConditionalEdges("finish", afterFinish, ["resync", END])
  .addConditionalEdges("resync", afterResync, [
    "agent",
    "build_envelope",
    "await_approval",
    "carry_out",
    "finish",
  ]);

export interface CompileOptions {
  checkpointer: BaseCheckpointSaver;
  /**
   * For tests that pause before a node (e.g. to tamper with a checkpoint before the envelope is
   * built). The steps from the claim of an approval to the close run in one step, so no pause can fall
   * between them.
   */
  interruptBefore?: Array<"propose" | "build_envelope">;
}

export function compileGraph(opts: CompileOptions) {
  return builder.compile({
    checkpointer: opts.checkpointer,
    ...(opts.interruptBefore ? { interruptBefore: opts.interruptBefore } : {}),
    name: "bitrix24_task_agent",
  });
}

/** Reads a thread's latest checkpoint in `checkpointer` through this graph (for the case record). */
export function checkpointReader(checkpointer: BaseCheckpointSaver): CheckpointReader {
  const graph = compileGraph({ checkpointer });
  return (threadId) => graph.getState({ configurable: { thread_id: threadId } });
}

/**
 * The one instance the LangGraph API server runs, with the checkpointer the server brings (it sets
 * it on this object). langgraph.json names it through src/api/served-graph.ts, which guards its runs
 * and gives them the server's dependencies; auth reads the served threads' checkpoints through it.
 */
export const apiGraph = builder.compile({ name: "bitrix24_task_agent" });
