import type { State } from "../graph/state.js";
import { exampleApproval, type ApprovalRequest } from "./contract.js";

/** Pure: the interrupt payload for the current envelope. */
export function approvalRequestFrom(state: State): ApprovalRequest {
  const envelope = state.envelope;
  if (!envelope || !state.envelopeHash || !state.card) throw new Error("await_approval reached without an envelope");
  const last = state.refusals.at(-1);
  const lastRefusal = last && last.envelopeHash === state.envelopeHash ? { code: last.code, reason: last.reason } : undefined;
  return {
    kind: "approval",
    actionRequests: [
      { name: "update_task", args: { taskId: envelope.object.id, fields: envelope.params }, description: state.card },
    ],
    reviewConfigs: [{ actionName: "update_task", allowedDecisions: ["approve", "edit", "reject"] }],
    envelope,
    envelopeHash: state.envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    expiresAt: envelope.expiresAt,
    threadId: envelope.runContext.threadId,
    ...(lastRefusal ? { lastRefusal } : {}),
    ...(state.escalatedTo ? { escalatedTo: state.escalatedTo } : {}),
    exampleResume: exampleApproval(state.envelopeHash, envelope.nonce, "<your approver id>"),
  };
}
