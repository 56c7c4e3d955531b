import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { inputRequestFrom } from "../hitl/input-request.js";
import { admitResume } from "../hitl/bounds.js";

/** The pause for a structured question; like await_approval, nothing but the interrupt. */
export async function askInput(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  // No question in state (a goto here, an edited checkpoint): nothing to ask; check_input goes by the
  // journal's question, or where the journal says the thread is.
  if (!state.inputRequest) return {};
  const answer: unknown = interrupt(inputRequestFrom(state, String(config.configurable?.thread_id ?? "")));
  return { pendingDecision: admitResume(answer) };
}
