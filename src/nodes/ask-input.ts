import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { inputRequestFrom } from "../hitl/input-request.js";
import { admitResume } from "../hitl/bounds.js";

/** The pause for a structured question; like await_approval, nothing but the interrupt. */
export async function askInput(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const answer: unknown = interrupt(inputRequestFrom(state, String(config.configurable?.thread_id ?? "")));
  return { pendingDecision: admitResume(answer) };
}
