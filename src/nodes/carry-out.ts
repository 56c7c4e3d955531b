import { Command, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { noteStateDrift, openGate, refuseUnlessAllowed, unchangedLeftOut } from "../hitl/journal-gate.js";
import { carryOutApproved } from "../executor/index.js";

/**
 * The approved action, from the journal: pre-read → bound write → verify (src/executor). One node, so
 * no pause, goto or state edit can fall between its phases; each phase streams a custom event
 * (`streamMode: "custom"`). Reached while the journal holds nothing approved to carry out, it refuses
 * and the run resumes where the journal says.
 */
export async function carryOut(state: State, config: LangGraphRunnableConfig): Promise<Command> {
  const deps = await getDeps();
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "carry_out", state);
  if (refused) return new Command({ update: refused, goto: "resync" });
  await noteStateDrift(deps, gate, "carry_out", state);
  const update = await carryOutApproved(deps, gate.threadId, gate.action, config.writer ? (e) => config.writer!(e) : undefined);
  // Evidence is written as state keeps it (without the target's raw answers).
  return new Command({ update: unchangedLeftOut(update, state), goto: "finish" });
}
