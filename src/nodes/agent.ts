import { HumanMessage } from "@langchain/core/messages";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { agentPrompt } from "../prompts.js";
import { proposeChangeTool, requestInputTool } from "../tools/proposal-tools.js";
import { endRun } from "./finish-with.js";

/** One model turn: the model sees read tools and propose_change, never the write tool. */
export async function agent(state: State): Promise<Update> {
  const deps = await getDeps();
  if (state.agentSteps >= deps.config.limits.maxAgentSteps) {
    return endRun("NOT_EXECUTED", "AGENT_STEP_LIMIT", `the model took ${state.agentSteps} steps without a valid proposal (limit ${deps.config.limits.maxAgentSteps})`);
  }
  const opening = state.messages.length === 0 ? [new HumanMessage(state.request)] : [];
  const messages = [...state.messages, ...opening];
  if (!deps.model.bindTools) throw new Error(`model ${deps.modelLabel} cannot call tools`);
  const model = deps.model.bindTools([...deps.tools.readTools, proposeChangeTool, requestInputTool]);
  const prompt = await agentPrompt.invoke({ messages, requestedBy: state.requestedBy });
  const reply = await model.invoke(prompt);
  return { messages: [...opening, reply], agentSteps: state.agentSteps + 1 };
}
