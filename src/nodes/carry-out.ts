import { Command, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { evidenceForState, viewOf } from "../hitl/thread-view.js";
import { carryOutApproved } from "../executor/index.js";

/**
 * The approved action, from the journal: pre-read → bound write → verify (src/executor). One node, so
 * no pause, goto or state edit can fall between its phases; each phase streams a custom event
 * (`streamMode: "custom"`). Reached while the journal holds nothing approved to carry out, it refuses
 * and the run resumes where the journal says.
 */
export async function carryOut(state: State, config: LangGraphRunnableConfig): Promise<Command> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "carry_out", state);
  if (refused) return new Command({ update: refused, goto: "resync" });
  await noteStateDrift(deps, gate, "carry_out", state);
  const { row, execution } = await carryOutApproved(deps, gate.action, config.writer ? (e) => config.writer!(e) : undefined);
  // The action's evidence as the thread view keeps it in state (`finish` then reports the ending).
  const view = viewOf({ action: row, execution });
  return new Command({ update: { ...evidenceForState(view.evidence), ...(view.ending.outcome ? view.ending : {}) }, goto: "finish" });
}
