import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import type { ReasonCode } from "../envelope/records.js";
import { endRunInJournal, ensureThread, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { isDeletePart } from "../hitl/compensation.js";
import { buildSet } from "../hitl/build-set.js";
import { readUndo } from "../hitl/undo-reads.js";
import { plannedActions, proposalToBuild } from "../hitl/revision-plan.js";
import { checkBeforeShowing } from "../hitl/proposal-checks.js";
import { registerEnvelope } from "../hitl/register-envelope.js";
import { settledPending } from "../hitl/pending-value.js";

/**
 * Policy and scope first (a denied proposal is never shown for approval), then a baseline read by
 * code — not the model's account of the task — and the frozen, hashed envelope, registered in the
 * journal with the card exactly as rendered. Request, scope, revision, escalation and an edit's
 * content all come from the journal; only a model proposal comes from state, and it is checked
 * against the journal's scope like any proposal.
 */
export async function buildEnvelope(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  return settledPending(await builtEnvelope(state, config), state.pendingDecision);
}

async function builtEnvelope(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "build_envelope", state);
  if (refused) return refused;
  const thread = await ensureThread(deps, gate, state);
  const previous = gate.action;
  const end = (code: ReasonCode, reason: string): Promise<Update> =>
    endRunInJournal(deps, gate, state, code, reason);
  const givenRunId = config.runId ?? config.configurable?.run_id;
  const runId = givenRunId ? String(givenRunId) : undefined;

  // A change set: proposed by the model, the next revision of a set decided action by action, or the
  // same set again after an escalation. Built and registered as one (src/hitl/change-sets.ts).
  const setActions = plannedActions(gate, thread, state.proposal);
  if (setActions && setActions.length > 1) return buildSet(deps, gate, state, thread, setActions, runId);

  // An undo thread's first proposal is the journal's restore of the action it compensates, every part
  // read fresh and checked (src/hitl/undo-reads.ts); an undo of several objects is a change set.
  const undo = await readUndo(deps, thread, previous);
  if ("ended" in undo) return end(undo.ended.code, undo.ended.reason);
  if ("set" in undo) {
    const { actions, note, reads } = undo.set;
    return buildSet(deps, gate, state, thread, actions, runId, note, reads);
  }
  const { part: undoPart, notUndone } = undo;
  // An edit's content is the decision the journal accepted; any other proposal is the model's.
  const onlyOne = setActions?.length === 1 ? setActions[0]! : undefined;
  const proposal = proposalToBuild(gate, thread, state.proposal, onlyOne, undoPart?.proposal);
  if (!proposal) return end("NO_PROPOSAL", "no proposal to build an envelope from");
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return end(
      "TOO_MANY_REVISIONS",
      `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`,
    );
  }

  // Policy, the requester's verification, the baseline read and a change that changes something, all
  // before anyone is asked; an undo's checked read is its baseline.
  const threadId = gate.threadId;
  const checked = await checkBeforeShowing(deps, state, thread, proposal, {
    threadId,
    revision,
    undoObject: undoPart?.object,
    earlier: [...(gate.members ?? []), ...(previous ? [previous] : [])].map((m) => m.envelope),
  });
  if (!checked.ok) return end(checked.code, checked.reason);

  return registerEnvelope(deps, {
    threadId,
    runId,
    thread,
    previous,
    revision,
    proposal,
    operation: checked.operation,
    task: checked.task,
    undoDeletes: undoPart ? isDeletePart(undoPart.plan) : false,
    notUndone,
    onlyOne,
    // A partial approval covers the kept action only as the decided revision showed it.
    decided: gate.members ?? (previous ? [previous] : []),
  });
}
