import { HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { agentPrompt } from "../prompts.js";
import { proposeChangeTool, requestInputTool } from "../tools/proposal-tools.js";
import { ensureThread, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { endRun } from "./finish-with.js";

/** Longest request text accepted; a longer one ends the run before any model call. */
export const MAX_REQUEST_CHARS = 4000;

/**
 * One model turn: the model sees read tools and propose_change, never the write tool. The thread's
 * request is recorded in the journal on the first turn and read back from there on every later one,
 * so new input sent to a thread cannot change what it is about.
 */
export async function agent(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "agent", state);
  if (refused) return refused;
  if (!gate.thread) {
    const problem = inputProblem(state);
    if (problem) return endRun("NOT_EXECUTED", "INVALID_INPUT", problem);
  }
  const thread = await ensureThread(deps, gate, state);
  if (state.agentSteps >= deps.config.limits.maxAgentSteps) {
    return endRun("NOT_EXECUTED", "AGENT_STEP_LIMIT", `the model took ${state.agentSteps} steps without a valid proposal (limit ${deps.config.limits.maxAgentSteps})`);
  }
  const opening = state.messages.length === 0 ? [new HumanMessage(thread.request)] : [];
  const messages = [...state.messages, ...opening];
  if (!deps.model.bindTools) throw new Error(`model ${deps.modelLabel} cannot call tools`);
  const model = deps.model.bindTools([...deps.tools.readTools, proposeChangeTool, requestInputTool]);
  const prompt = await agentPrompt.invoke({ messages, requestedBy: thread.requestedBy });
  const reply = await model.invoke(prompt);
  return { messages: [...opening, reply], agentSteps: state.agentSteps + 1 };
}

/** The input a run starts with, checked before anything is recorded or a model is called. */
function inputProblem(state: State): string | null {
  const request: unknown = state.request;
  const requestedBy: unknown = state.requestedBy;
  if (typeof request !== "string" || request.trim() === "") return 'input field "request" is required: a non-empty string saying what should change';
  if (request.length > MAX_REQUEST_CHARS) return `input field "request" is ${request.length} characters; at most ${MAX_REQUEST_CHARS} are accepted`;
  if (typeof requestedBy !== "string" || requestedBy.trim() === "") return 'input field "requestedBy" is required: the id of the person asking';
  if (requestedBy.length > 200) return `input field "requestedBy" is ${requestedBy.length} characters; at most 200 are accepted`;
  return null;
}
