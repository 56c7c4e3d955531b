import { Command, type LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { afterCheckDecision } from "../graph/routes.js";
import { authenticatedIdentity } from "../auth/identity.js";
import { depsOf, sentWithThisRun } from "../runtime/run-deps.js";
import type { NameResolution } from "../envelope/index.js";
import { ResumeSchema, SystemDecisionSchema } from "../hitl/contract.js";
import { noteStateDrift, openGate, refuseUnlessAllowed, type Gate } from "../hitl/journal-gate.js";
import { boundedForEvidence, checkBounds, isOutOfBounds } from "../hitl/bounds.js";
import { decisionFromClient } from "../hitl/text-decision.js";
import { refuserFor } from "../hitl/decision-refusal.js";
import { approvalBinding } from "../hitl/approval-request.js";
import { setDecision } from "../hitl/set-decision.js";
import { singleDecision } from "../hitl/single-decision.js";
import { systemDecision } from "../hitl/system-decision.js";
import { settledPending } from "../hitl/pending-value.js";
import { carryOut } from "./carry-out.js";

/**
 * Deterministic validation of the human's answer against the action the journal registered — its
 * envelope, hash, nonce, scope, escalation group — never against graph state: exact hash, nonce,
 * entitled approver, expiry by this server's clock, single use, signature when required. The nonce is
 * consumed and the action moved to `decided` in one journal transaction, so a replayed or forked
 * checkpoint can never spend the same approval twice.
 *
 * A decision from someone who may not decide this approval is refused and audited, but it never
 * ends, expires or uses up the approval: only refusals of entitled callers whose identity is
 * established (authenticated, a valid signature, or self-declared where the policy accepts that)
 * count toward the budget. A decision that merely names an entitled approver counts for nothing.
 *
 * An approval goes on into the executor in this same step (`carry_out`'s work: pre-read → bound write
 * → verify → close), so no pause, goto or state edit can fall between the claim and the write. Reached
 * again once the journal holds the decision (the step that claimed it stopped, and the run is
 * recovered or replayed), it judges nothing and goes on from the journal's phase as `carry_out` does.
 */
export async function checkDecision(state: State, config: LangGraphRunnableConfig): Promise<Command> {
  const gate = await openGate(depsOf(config), config, state);
  const seen = state.pendingDecision;
  if (gate.next === "carry_out")
    return carriedOn(settledPending({ pendingDecision: null }, seen), state, config);
  const update = settledPending(await judged(gate, state, config), seen);
  const next = afterCheckDecision({ ...state, ...update } as State);
  return next === "carry_out" ? carriedOn(update, state, config) : new Command({ update, goto: next });
}

/** The executor's run (carry_out) after `update`, as one command: both updates, and where it goes next. */
async function carriedOn(update: Update, state: State, config: LangGraphRunnableConfig): Promise<Command> {
  const carried = await carryOut({ ...state, ...update } as State, config);
  const executed = carried.update as Update;
  const messages = [update.messages ?? [], executed.messages ?? []].flat() as Update["messages"][];
  return new Command({
    update: { ...update, ...executed, ...(messages.length ? { messages } : {}) },
    goto: carried.goto,
  });
}

/** The decision judged against the journal's row, and the claim when it is accepted. */
async function judged(gate: Gate, state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const refused = await refuseUnlessAllowed(deps, gate, "check_decision", state);
  if (refused) return { ...refused, pendingDecision: null };
  const action = gate.action!;
  await noteStateDrift(deps, gate, "check_decision", state);
  const now = deps.clock();
  const authUser = authenticatedIdentity(config.configurable);
  const incoming: unknown = state.pendingDecision;
  // await_approval admitted only a summary of a value past the bounds; anything else is checked here too.
  const bounds = isOutOfBounds(incoming)
    ? { ok: false as const, reason: incoming.outOfBounds }
    : checkBounds(incoming);
  const raw = isOutOfBounds(incoming) ? incoming.evidence : boundedForEvidence(incoming, bounds);
  // Names an edit typed for user fields (RESPONSIBLE_ID "Bob Smith") and what user.get resolved them to.
  const names: { people: NameResolution[] } = { people: [] };
  const bound = approvalBinding(action, gate.members !== undefined);
  const refuse = refuserFor(deps, { action, state, raw, now, authUser, bound, names });

  if (!bounds.ok) return refuse("MALFORMED", `the resume value was not read: ${bounds.reason}`, false);
  // Only a decision sent with this run is judged: one a run continues from its checkpoint (recover, the
  // worker) may have been put there by whoever can write the data directory, in no human's name.
  if (!sentWithThisRun(config, state.pendingFrom))
    return refuse(
      "NOT_SENT_WITH_THIS_RUN",
      "the pending decision was found in the thread's checkpoint, not sent with this run (a run that continues a stopped one judges no decision it did not receive itself); send the decision again",
      false,
    );
  // A chat message or an Agent Inbox response is read as the decision its text holds (src/hitl/text-decision.ts).
  const fromClient = decisionFromClient(incoming, authUser);
  if ("refused" in fromClient) return refuse(fromClient.refused.code, fromClient.refused.reason, false);
  const outer = ResumeSchema.safeParse(fromClient.value);
  if (!outer.success) {
    return refuse(
      "MALFORMED",
      `expected {"decisions":[<one decision>]}; got ${JSON.stringify(fromClient.value)?.slice(0, 500)}: ${outer.error.issues[0]?.message}`,
      false,
    );
  }
  if (action.set && gate.members)
    return setDecision(deps, state, action, gate.members, outer.data.decisions, authUser, raw, refuse);
  if (outer.data.decisions.length !== 1)
    return refuse(
      "MALFORMED",
      `exactly one decision per approval request; got ${outer.data.decisions.length}`,
      false,
    );
  const candidate = outer.data.decisions[0];
  const system = SystemDecisionSchema.safeParse(candidate);
  if (system.success) return systemDecision(deps, state, action, system.data, authUser, raw, refuse);
  return singleDecision(deps, state, action, candidate, authUser, now, raw, refuse, names);
}
