import { Command, END, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { evidenceChangedFrom, viewOf } from "../hitl/thread-view.js";
import { nextFromJournal } from "../store/action-machine.js";
import { carryOutApproved } from "../executor/index.js";
import { finishFromJournal } from "../hitl/finish-run.js";

/**
 * The approved action, from the journal: pre-read → bound write → verify (src/executor), then the
 * close and the final record (`finish`'s work, on the rows the executor returned). One node, so no
 * pause, goto or state edit can fall between its phases; each phase streams a custom event
 * (`streamMode: "custom"`). Reached while the journal holds nothing approved to carry out, it refuses
 * and the run resumes where the journal says.
 */
export async function carryOut(state: State, config: LangGraphRunnableConfig): Promise<Command> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "carry_out", state);
  if (refused) return new Command({ update: refused, goto: "resync" });
  await noteStateDrift(deps, gate, "carry_out", state);
  const { row, execution, members } = await carryOutApproved(
    deps,
    gate.action,
    config.writer ? (e) => config.writer!(e) : undefined,
  );
  // The action's evidence as the thread view keeps it in state: only the channels whose summary changed.
  const view = viewOf({ action: row, execution });
  const carried = {
    ...evidenceChangedFrom(view.evidence, state),
    ...(view.ending.outcome ? view.ending : {}),
  };
  // The journal's next step after the executor, from the rows it returned: the close, run here so the
  // run ends in this step (one checkpoint fewer); anything else goes through `finish`'s own gate.
  const after = {
    ...gate,
    action: row,
    ...(members ? { members } : {}),
    next: nextFromJournal(gate.thread, row),
  };
  if (after.next !== "finish") return new Command({ update: carried, goto: "finish" });
  const finished = await finishFromJournal(deps, after, { ...state, ...carried }, execution);
  return new Command({ update: { ...carried, ...finished }, goto: finished.needsResync ? "resync" : END });
}
