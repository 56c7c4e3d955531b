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
import { membersOf } from "../hitl/journal-gate.js";
import type { PhaseFunction } from "./context.js";
import { preRead } from "./pre-read.js";
import { reconcileWrite, write } from "./write.js";
import { verify } from "./verify.js";

const PHASE_FUNCTIONS: Readonly<Record<Step, PhaseFunction>> = { pre_read: preRead, write, reconcile: reconcileWrite, verify };

/** What each phase streams (LangGraph `streamMode: "custom"`): the step and its evidence, without raw answers. */
export interface PhaseEvent {
  event: "action_envelope_phase";
  step: Step;
  envelopeHash: string;
  actionId?: string;
  preRead?: { verdict: string; reason: string };
  write?: { tool: string; args: unknown; idempotencyKey: string; protocol?: string };
  acknowledgement?: { status: string; reason?: string; replayed?: boolean; resent?: boolean };
  verification?: { verdict: string; reason: string };
  outcome?: { outcome: string; reasonCode: string; reason: string };
}

function eventOf(step: Step, action: ActionRow, u: Partial<State>): PhaseEvent {
  return {
    event: "action_envelope_phase",
    step,
    envelopeHash: action.envelopeHash,
    ...(action.set ? { actionId: action.set.actionId } : {}),
    ...(u.preRead ? { preRead: { verdict: u.preRead.verdict, reason: u.preRead.reason } } : {}),
    ...(u.invocation ? { write: { tool: u.invocation.tool, args: u.invocation.args, idempotencyKey: u.invocation.idempotencyKey, ...(u.invocation.protocol ? { protocol: u.invocation.protocol } : {}) } } : {}),
    ...(u.acknowledgement
      ? { acknowledgement: { status: u.acknowledgement.status, ...(u.acknowledgement.reason ? { reason: u.acknowledgement.reason } : {}), ...(u.acknowledgement.replayed ? { replayed: true } : {}), ...(u.acknowledgement.resent ? { resent: true } : {}) } }
      : {}),
    ...(u.verification ? { verification: { verdict: u.verification.verdict, reason: u.verification.reason } } : {}),
    ...(u.outcome && u.reasonCode ? { outcome: { outcome: u.outcome, reasonCode: u.reasonCode, reason: u.reason ?? "" } } : {}),
  };
}

/**
 * Runs the thread's approved action(s) from wherever the journal says they are. Returns the evidence
 * of the phases run (for the state mirror; `finish` reports from the journal).
 */
export async function carryOutApproved(deps: Deps, threadId: string, first: ActionRow | undefined, emit?: (e: PhaseEvent) => void): Promise<Update> {
  let update: Update = {};
  let action = first;
  for (;;) {
    const step = action ? stepOf(action) : null;
    if (!action || step === null) return update;
    const members = action.set ? await membersOf(deps, action) : undefined;
    const { needsResync: _ignored, ...evidence } = await PHASE_FUNCTIONS[step]({ deps, ...(members ? { members } : {}) }, action);
    emit?.(eventOf(step, action, evidence as Partial<State>));
    update = { ...update, ...evidence };
    const before = action;
    action = await deps.journal.currentAction(threadId);
    // A phase moves its action, or another process moved it meanwhile; a phase that left the journal
    // where it was would run again forever.
    if (action && action.envelopeHash === before.envelopeHash && action.phase === before.phase) {
      throw new Error(`the ${step} step of action ${before.envelopeHash} left it ${before.phase}; the run stops here and continues from the journal when recovered`);
    }
  }
}
