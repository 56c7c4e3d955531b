import type { ActionRow } from "../store/action-machine.js";
import { exampleApproval, type ApprovalRequest } from "./contract.js";

/**
 * Pure: the interrupt payload for a registered action, built from the journal's row — the envelope,
 * hash and card registered for it — never from graph state, so what is shown is what was sealed.
 */
export function approvalRequestFrom(action: ActionRow, opts: { approverId?: string } = {}): ApprovalRequest {
  const envelope = action.envelope;
  const last = action.progress.lastRefusal;
  return {
    kind: "approval",
    actionRequests: [{ name: "update_task", args: { taskId: envelope.object.id, fields: envelope.params }, description: action.card }],
    reviewConfigs: [{ actionName: "update_task", allowedDecisions: ["approve", "edit", "reject"] }],
    envelope,
    envelopeHash: action.envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    expiresAt: envelope.expiresAt,
    threadId: action.threadId,
    ...(last ? { lastRefusal: { code: last.code, reason: last.reason } } : {}),
    ...(action.escalatedTo ? { escalatedTo: action.escalatedTo } : {}),
    exampleResume: exampleApproval(action.envelopeHash, envelope.nonce, opts.approverId ?? "<your approver id>"),
  };
}
