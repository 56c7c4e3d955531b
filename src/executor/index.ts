/**
 * The journal-driven executor: everything after an approval. Each phase function runs one transition
 * of the action and returns the row it left; the executor asks the phase table (stepOf,
 * src/store/action-machine.ts) what comes next for that row, until nothing is left for it (the action,
 * or every approved action of a change set, verified or closed). The journal is read once, at entry;
 * between phases the executor goes by the rows the phases return. A first run, a replay, a fork,
 * `recover`, a worker and the API server all enter here and continue from the journal's phase; graph
 * state chooses nothing.
 */
import type { Deps } from "../runtime/deps.js";
import { currentOfSet, stepOf, type ActionRow, type Step } from "../store/action-machine.js";
import type { ExecutionEntry } from "../store/journal.js";
import { membersOf } from "../hitl/journal-gate.js";
import {
  evidenceForState,
  viewOf,
  type EndingView,
  type EvidenceView,
  type WithheldParts,
} from "../hitl/thread-view.js";
import { preRead } from "./pre-read.js";
import { reconcileWrite, write } from "./write.js";
import { verify } from "./verify.js";
import type { PhaseContext } from "./phase-context.js";

/**
 * One phase of an approved action: its only durable act is one journal transition (or the close that
 * ends the action). It returns the row as that transition left it, or, when another process moved the
 * action meanwhile, as the journal holds it.
 */
type PhaseFunction = (ctx: PhaseContext, action: ActionRow) => Promise<ActionRow>;

const PHASE_FUNCTIONS: Readonly<Record<Step, PhaseFunction>> = {
  pre_read: preRead,
  write,
  reconcile: reconcileWrite,
  verify,
};

/**
 * What each phase streams (LangGraph `streamMode: "custom"`, Studio): the step and the action's
 * evidence as the thread view keeps it in state (raw answers stay in the journal): the pre-read
 * verdict, the write sent, the acknowledgement, the verification, and the outcome once it is closed; a
 * part whose seal does not hold is left out, and `withheld` says which and why.
 */
export type PhaseEvent = {
  event: "action_envelope_phase";
  step: Step;
  envelopeHash: string;
  actionId?: string;
} & Partial<EvidenceView & EndingView> & { withheld?: WithheldParts };

/**
 * Runs the thread's approved action(s) from wherever the journal says they are (`first`, read at
 * entry), and gives where it left them: the action's row, its write-ahead entry when one was recorded,
 * and for a change set every action of it, in the set's order.
 */
export async function carryOutApproved(
  deps: Deps,
  first: ActionRow | undefined,
  emit?: (e: PhaseEvent) => void,
): Promise<{ row: ActionRow | undefined; execution: ExecutionEntry | undefined; members?: ActionRow[] }> {
  const ctx: PhaseContext = { deps, ...(first?.set ? { members: await membersOf(deps, first) } : {}) };
  // A run that continues after the write was recorded: its entry, read once, for the view.
  if (first && (first.phase === "intent" || first.phase === "acknowledged"))
    ctx.execution = await deps.journal.findExecution(first.envelopeHash);
  let action = first;
  for (let step = action && stepOf(action); action && step; step = stepOf(action)) {
    const before: ActionRow = action;
    const after = await PHASE_FUNCTIONS[step](ctx, before);
    if (step === "pre_read" && after.phase === "pre_read") ctx.preReadThisRun = after.envelopeHash;
    emit?.(eventOf(step, after, ctx.execution));
    // A phase moves its action, or another process moved it meanwhile; a phase that left the journal
    // where it was would run again forever.
    if (after.envelopeHash === before.envelopeHash && after.phase === before.phase) {
      throw new Error(
        `the ${step} step of action ${before.envelopeHash} left it ${before.phase}; the run stops here and continues from the journal when recovered`,
      );
    }
    action = after;
    if (ctx.members) {
      // The set moves on to its next action when this one verified (currentOfSet: the chain rule).
      ctx.members = ctx.members.map((m) => (m.envelopeHash === after.envelopeHash ? after : m));
      const next = currentOfSet(ctx.members) ?? after;
      if (next.envelopeHash !== after.envelopeHash) delete ctx.execution;
      action = next;
    }
  }
  return { row: action, execution: ctx.execution, ...(ctx.members ? { members: ctx.members } : {}) };
}

function eventOf(step: Step, row: ActionRow, execution: ExecutionEntry | undefined): PhaseEvent {
  const view = viewOf({ action: row, execution });
  const { decision: _d, ...evidence } = evidenceForState(view.evidence);
  return {
    event: "action_envelope_phase",
    step,
    envelopeHash: row.envelopeHash,
    ...(row.set ? { actionId: row.set.actionId } : {}),
    ...Object.fromEntries(Object.entries(evidence).filter(([, v]) => v !== null)),
    ...(view.withheld ? { withheld: view.withheld } : {}),
    ...(view.ending.outcome ? view.ending : {}),
  };
}
