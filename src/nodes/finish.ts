import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { finishFromJournal } from "../hitl/finish-run.js";

/**
 * The final record, derived from the journal alone: a closed action's outcome, or a verified one's
 * verdict (a target that refused and whose task shows no change is REJECTED_BY_TARGET). The thread is
 * closed in the journal (the first close wins) and the closing audit record is built from journal
 * rows, so no state field can make a run VERIFIED. Reached while the journal says the thread is
 * elsewhere (a goto, a waiting approval), it refuses and the run resumes where the journal says.
 */
export async function finish(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "finish", state);
  if (refused) return refused;
  await noteStateDrift(deps, gate, "finish", state);
  return finishFromJournal(deps, gate, state);
}
