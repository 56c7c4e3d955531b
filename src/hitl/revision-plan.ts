/**
 * What build_envelope builds next, from the journal's rows: a change set (the model's, the next revision
 * of a set decided action by action, or the same set again after an escalation), or the one proposal an
 * envelope is built from, with who edited it and the group it is escalated to.
 */
import type { ProposalRecord } from "../envelope/records.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import { withActionIds, type PlannedAction } from "./change-sets.js";
import type { Gate } from "./journal-gate.js";

type Prior = ActionRow["progress"]["decision"];

/** The actions of the change set to build, or null when the thread builds a single envelope. */
export function plannedActions(
  gate: Gate,
  thread: ThreadRecord,
  proposal: ProposalRecord | null,
): PlannedAction[] | null {
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const members = gate.members ?? (previous ? [previous] : []);
  return gate.next === "build_envelope" && prior?.setPlan
    ? prior.setPlan.actions.map(({ names: _n, ...a }) => a)
    : gate.next === "build_envelope" && previous?.set && prior?.type !== "edit"
      ? members.map((m) => ({
          actionId: m.set!.actionId,
          operation: m.envelope.operation,
          taskId: m.envelope.object.id,
          fields: m.envelope.params,
        }))
      : gate.next !== "build_envelope" &&
          !thread.compensates &&
          proposal?.actions &&
          proposal.actions.length > 1
        ? withActionIds(proposal.actions)
        : null;
}

/**
 * The proposal a single envelope is built from: an undo's restore, what is left of a change set after a
 * partial approval (`onlyOne`), an edit's content as the journal accepted it, the same change again for
 * a fresh approval, or else the model's proposal (none on an undo thread).
 */
export function proposalToBuild(
  gate: Gate,
  thread: ThreadRecord,
  proposal: ProposalRecord | null,
  onlyOne: PlannedAction | undefined,
  undoProposal: ProposalRecord | undefined,
): ProposalRecord | null {
  const previous = gate.action;
  const prior = previous?.progress.decision;
  return undoProposal
    ? undoProposal
    : onlyOne
      ? {
          operation: onlyOne.operation,
          taskId: onlyOne.taskId,
          fields: onlyOne.fields,
          rationale: `the part of change set ${previous?.set?.setHash} that ${prior?.approverId} ${prior?.setPlan?.perAction.some((p) => p.type === "edit") ? "approved or edited" : "approved (the rest rejected)"}`,
          source: "human_edit",
        }
      : gate.next === "build_envelope" && prior?.type === "edit" && prior.edit
        ? {
            operation: previous!.envelope.operation,
            taskId: prior.edit.taskId,
            fields: prior.edit.fields,
            rationale: `edited by ${prior.approverId}`,
            source: "human_edit",
          }
        : gate.next === "build_envelope"
          ? previous
            ? {
                operation: previous.envelope.operation,
                taskId: previous.envelope.object.id,
                fields: previous.envelope.params,
                rationale: "the same change, for a fresh approval",
                source: "model",
              }
            : null
          : thread.compensates
            ? null
            : proposal;
}

/** The group an envelope is escalated to: set by the expiry that led here, and kept for later revisions of the same approval. */
export function escalationOf(previous: ActionRow | undefined): string | null {
  const prior: Prior = previous?.progress.decision;
  return (prior?.type === "expire" ? prior.escalateTo : undefined) ?? previous?.escalatedTo ?? null;
}

/**
 * Who wrote an edited revision (and so may not also approve it). Removing rejected actions of a set is
 * not an edit: only a plan with an edited action names an editor.
 */
export function editorOf(proposal: ProposalRecord, prior: Prior): string | undefined {
  const planEdited = prior?.setPlan ? prior.setPlan.perAction.some((p) => p.type === "edit") : true;
  return proposal.source === "human_edit" &&
    prior?.type === "edit" &&
    planEdited &&
    !prior.setPlan?.runWithoutReapproval
    ? prior.approverId
    : undefined;
}
