import type { ActionRow } from "../store/action-machine.js";
import { APPROVER_PLACEHOLDER, exampleApproval, type ApprovalRequest } from "./contract.js";

/**
 * Pure: the interrupt payload for a registered action, built from the journal's row — the envelope,
 * hash and card registered for it — never from graph state, so what is shown is what was sealed.
 */
export function approvalRequestFrom(action: ActionRow, opts: { approverId?: string } = {}): ApprovalRequest {
  // `approverId` is the authenticated caller of the run that reached this pause (usually the
  // requester, not the approver). Its presence says the server authenticates callers, so the example
  // names no approver: whoever resumes is the approver, filled in from their token.
  const authenticated = opts.approverId !== undefined;
  const envelope = action.envelope;
  const last = action.progress.lastRefusal;
  return {
    kind: "approval",
    actionRequests: [{ name: envelope.operation, args: { taskId: envelope.object.id, fields: envelope.params }, description: action.card }],
    reviewConfigs: [{ actionName: envelope.operation, allowedDecisions: ["approve", "edit", "reject"] }],
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
