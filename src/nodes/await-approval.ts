import { interrupt } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { approvalRequestFrom } from "../hitl/approval-request.js";

/**
 * The pause. Nothing but building the payload (pure, from state) and `interrupt()`: this node re-runs
 * from its first line on resume, so it must have no side effects.
 */
export async function awaitApproval(state: State): Promise<Update> {
  const decision: unknown = interrupt(approvalRequestFrom(state));
  return { pendingDecision: decision };
}
