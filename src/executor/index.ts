/**
 * The journal-driven executor: everything after an approval. It loops on the thread's current action
 * as the journal holds it, asks the phase table (stepOf, src/store/action-machine.ts) what comes next
 * and runs that phase function, until nothing is left for it (the action, or every approved action
 * of a change set, verified or closed). A first run, a replay, a fork, `recover`, a worker and the API
 * server all enter here and continue from the journal's phase; graph state chooses nothing.
 */
import type { State, Update } from "../graph/state.js";
import type { Deps } from "../runtime/deps.js";
import { stepOf, type ActionRow, type Step } from "../store/action-machine.js";
import { membersOf, unchangedLeftOut } from "../hitl/journal-gate.js";
import { preRead } from "./pre-read.js";
import { reconcileWrite, write } from "./write.js";
import { verify } from "./verify.js";

/** What every phase function runs with: the process's dependencies and, for a change set, its actions in set order. */
export interface PhaseContext {
  deps: Deps;
  members?: ActionRow[];
}

/**
 * One phase of an approved action: its only durable act is one journal transition (or the close that
 * ends the action). It returns the evidence it produced, for the stream and the state mirror; the
 * executor reads where the action is from the journal, never from this.
 */
type PhaseFunction = (ctx: PhaseContext, action: ActionRow) => Promise<Update>;

const PHASE_FUNCTIONS: Readonly<Record<Step, PhaseFunction>> = { pre_read: preRead, write, reconcile: reconcileWrite, verify };

/**
 * What each phase streams (LangGraph `streamMode: "custom"`, Studio): the step and its evidence as
 * state keeps it (raw answers stay in the journal): the pre-read verdict, the write sent, the
 * acknowledgement, the verification, and the outcome when the phase closed the action.
 */
export type PhaseEvent = { event: "action_envelope_phase"; step: Step; envelopeHash: string; actionId?: string } & Omit<Update, "envelopeHash">;

function eventOf(step: Step, action: ActionRow, evidence: Update): PhaseEvent {
  // Against an empty state every channel differs, so this is the evidence in state's form.
  return { ...unchangedLeftOut(evidence, {} as State), event: "action_envelope_phase", step, envelopeHash: action.envelopeHash, ...(action.set ? { actionId: action.set.actionId } : {}) };
}

/**
 * Runs the thread's approved action(s) from wherever the journal says they are. Returns the evidence
 * of the phases run (for the state mirror; `finish` reports from the journal).
 */
export async function carryOutApproved(deps: Deps, threadId: string, first: ActionRow | undefined, emit?: (e: PhaseEvent) => void): Promise<Update> {
  let update: Update = {};
  let action = first;
  for (let step = action && stepOf(action); action && step; step = action && stepOf(action)) {
    const members = action.set ? await membersOf(deps, action) : undefined;
    const { needsResync: _ignored, ...evidence } = await PHASE_FUNCTIONS[step]({ deps, ...(members ? { members } : {}) }, action);
    emit?.(eventOf(step, action, evidence));
    update = { ...update, ...evidence };
    const before = action;
    action = await deps.journal.currentAction(threadId);
    // A phase moves its action, or another process moved it meanwhile; a phase that left the journal
    // where it was would run again forever.
    if (action?.envelopeHash === before.envelopeHash && action.phase === before.phase) {
      throw new Error(`the ${step} step of action ${before.envelopeHash} left it ${before.phase}; the run stops here and continues from the journal when recovered`);
    }
  }
  return update;
}
