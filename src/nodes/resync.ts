import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { openGate } from "../hitl/journal-gate.js";
import { viewOf } from "../hitl/thread-view.js";
import { openAsked } from "../hitl/input-request.js";
import { settledPending } from "../hitl/pending-value.js";

/**
 * Where a node lands when the journal did not allow it to act (a goto, new input, replay or fork
 * drove the graph out of order). It reads where the journal says the thread is, refreshes the
 * state's mirror (the action's, and the open question's), and the router continues from there. It does
 * nothing else.
 */
export async function resync(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const view = viewOf({ thread: gate.thread, action: gate.action });
  // The open question, as the journal recorded it, or none (a question written into state goes).
  const q = await deps.journal.getQuestion(gate.threadId);
  return settledPending(
    {
      needsResync: false,
      journalNext: gate.next,
      pendingDecision: null,
      inputRequest: openAsked(q),
      ...view.registered,
      ...view.ending,
    },
    state.pendingDecision,
  );
}
