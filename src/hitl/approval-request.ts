import type { ActionRow } from "../store/action-machine.js";
import { APPROVER_PLACEHOLDER, exampleApproval, type ActionArgs, type ApprovalRequest } from "./contract.js";
import { OPERATIONS, writeArgsOf, type OperationName } from "../envelope/operations.js";
import type { ReviewConfig } from "./contract.js";

/** What agent-inbox offers for an action: an edit of a delete is refused (OUT_OF_SCOPE), so it is not offered. */
function reviewConfigOf(operation: OperationName): ReviewConfig {
  return { actionName: operation, allowedDecisions: OPERATIONS[operation].effect === "delete" ? ["approve", "reject"] : ["approve", "edit", "reject"] };
}

/**
 * Pure: the interrupt payload for a registered action, built from the journal's row — the envelope,
 * hash and card registered for it — never from graph state, so what is shown is what was sealed.
 */
export function approvalRequestFrom(action: ActionRow, opts: { approverId?: string; members?: ActionRow[] } = {}): ApprovalRequest {
  if (action.set && opts.members) return setApprovalRequest(action, opts.members, opts);
  // `approverId` is the authenticated caller of the run that reached this pause (usually the
  // requester, not the approver). Its presence says the server authenticates callers, so the example
  // names no approver: whoever resumes is the approver, filled in from their token.
  const authenticated = opts.approverId !== undefined;
  const envelope = action.envelope;
  const last = action.progress.lastRefusal;
  return {
    kind: "approval",
    actionRequests: [{ name: envelope.operation, args: writeArgsOf(envelope.operation, envelope.object.id, envelope.params) as ActionArgs, description: action.card }],
    reviewConfigs: [reviewConfigOf(envelope.operation)],
    envelope,
    envelopeHash: action.envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    expiresAt: envelope.expiresAt,
    threadId: action.threadId,
    ...(last ? { lastRefusal: { code: last.code, reason: last.reason } } : {}),
    ...(action.escalatedTo ? { escalatedTo: action.escalatedTo } : {}),
    exampleResume: authenticated ? exampleApproval(action.envelopeHash, envelope.nonce) : exampleApproval(action.envelopeHash, envelope.nonce, APPROVER_PLACEHOLDER),
    exampleResumeFill: authenticated ? [] : [{ path: "decisions[0].approver.id", with: "your approver id (the policy's approvers list, or the escalation group when escalated)" }],
  };
}

/**
 * A change set's pause: one action request per action (in set order, each named by its operation,
 * with its own card section), bound to the set's hash and nonce. `envelope` is the first action's, for
 * clients that show one; `changeSet` holds the set and every action's envelope.
 */
function setApprovalRequest(action: ActionRow, members: ActionRow[], opts: { approverId?: string }): ApprovalRequest {
  const m = action.set!;
  const authenticated = opts.approverId !== undefined;
  const last = action.progress.lastRefusal;
  const sections = action.card.split(/\n(?=──── ACTION \d+ of \d+: )/);
  return {
    kind: "approval",
    actionRequests: members.map((x, i) => ({ name: x.envelope.operation, args: writeArgsOf(x.envelope.operation, x.envelope.object.id, x.envelope.params) as ActionArgs, description: i === 0 ? action.card : (sections[i + 1] ?? "") })) as ApprovalRequest["actionRequests"],
    reviewConfigs: members.map((x) => reviewConfigOf(x.envelope.operation)) as ApprovalRequest["reviewConfigs"],
    envelope: members[0]!.envelope,
    envelopeHash: m.setHash,
    nonce: m.set.nonce,
    revision: m.set.revision,
    expiresAt: m.set.expiresAt,
    threadId: action.threadId,
    changeSet: { set: m.set, setHash: m.setHash, actions: members.map((x) => ({ actionId: x.set!.actionId, envelopeHash: x.envelopeHash, envelope: x.envelope })) },
    ...(last ? { lastRefusal: { code: last.code, reason: last.reason } } : {}),
    ...(action.escalatedTo ? { escalatedTo: action.escalatedTo } : {}),
    exampleResume: authenticated ? exampleApproval(m.setHash, m.set.nonce) : exampleApproval(m.setHash, m.set.nonce, APPROVER_PLACEHOLDER),
    exampleResumeFill: authenticated ? [] : [{ path: "decisions[0].approver.id", with: "your approver id (the policy's approvers list, or the escalation group when escalated)" }],
  };
}
