/**
 * build_envelope for a change set: every action built, checked and registered as one set (and, for a
 * partial approval the policy lets run at once, decided), its proposal recorded as the set.
 */
import { requesterVerificationOf } from "../envelope/index.js";
import type { ProposalRecord } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import type { ThreadRecord } from "../store/action-machine.js";
import { buildChangeSet, type PlannedAction } from "./change-sets.js";
import { endRunInJournal, type Gate } from "./journal-gate.js";
import { auditDenied } from "./proposal-checks.js";
import { registeredUpdate, type RegisteredUpdate } from "./register-envelope.js";
import { escalationOf } from "./revision-plan.js";
import type { MirrorUpdate, ThreadMirror } from "./thread-mirror.js";
import { decisionOf } from "./thread-view.js";

/** build_envelope for a change set: built, registered (and, for an allowed partial approval, decided) as one. */
export async function buildSet(
  deps: Deps,
  gate: Gate,
  state: ThreadMirror,
  thread: ThreadRecord,
  actions: PlannedAction[],
  runId: string | undefined,
  note?: string,
  reads?: ReadonlyMap<string, Record<string, unknown>>,
): Promise<RegisteredUpdate | MirrorUpdate> {
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return endRunInJournal(
      deps,
      gate,
      state,
      "TOO_MANY_REVISIONS",
      `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`,
    );
  }
  const plan = gate.next === "build_envelope" ? prior?.setPlan : undefined;
  const escalatedTo = escalationOf(previous);
  const built = await buildChangeSet(
    deps,
    {
      threadId: gate.threadId,
      ...(runId ? { runId } : {}),
      requestedBy: thread.requestedBy,
      requesterVerifiedBy: requesterVerificationOf(thread),
      request: thread.request,
      scope: thread.scope,
      previous,
      previousMembers: gate.members ?? (previous ? [previous] : []),
      escalatedTo,
      ...(note ? { note } : {}),
      ...(reads ? { reads } : {}),
      ...(plan && !plan.runWithoutReapproval && plan.perAction.some((p) => p.type === "edit") && prior
        ? { editedBy: prior.approverId }
        : // The same set again after an expiry (escalated) is still what its editor wrote.
          prior?.type === "expire" && previous?.set?.set.editedBy
          ? { editedBy: previous.set.set.editedBy }
          : {}),
      ...(plan?.runWithoutReapproval && prior
        ? { runWithoutReapproval: { plan, decision: decisionOf(previous)! } }
        : {}),
    },
    actions,
  );
  const proposal: ProposalRecord = {
    operation: actions[0]!.operation,
    taskId: actions[0]!.taskId,
    fields: actions[0]!.fields,
    actions: actions.map(({ actionId: _id, ...a }) => a),
    rationale: plan
      ? `revision of change set ${previous?.set?.setHash} decided action by action by ${prior?.approverId}`
      : note
        ? note.trim()
        : (state.proposal?.rationale ?? ""),
    source: plan ? "human_edit" : note ? "compensation" : "model",
  };
  if (!built.ok) {
    if (built.denied)
      await auditDenied(deps, state, thread, proposal, {
        threadId: gate.threadId,
        revision,
        ...built.denied,
      });
    return endRunInJournal(deps, gate, state, built.code, built.reason);
  }
  const first = built.rows[0]!;
  // Decided now (autoApproved): the decision_accepted record committed with the claim.
  return registeredUpdate(first, proposal, built.autoApproved ? { decision: decisionOf(first) } : undefined);
}
