/**
 * The one typed contract between the graph and whoever decides: the interrupt payload (a superset of
 * LangChain v1's HITLRequest) and the resume value (a superset of HITLResponse). Every interface —
 * CLI, LangGraph API, Studio, tests — goes through these shapes.
 */
import { z } from "zod";
import type { Envelope } from "../envelope/index.js";

export interface ApprovalRequest {
  kind: "approval";
  actionRequests: [{ name: "update_task"; args: { taskId: number; fields: Record<string, unknown> }; description: string }];
  reviewConfigs: [{ actionName: "update_task"; allowedDecisions: ["approve", "edit", "reject"] }];
  envelope: Envelope;
  envelopeHash: string;
  nonce: string;
  revision: number;
  expiresAt: string;
  threadId: string;
  /** Why the previous decision for this envelope was refused, if one was. */
  lastRefusal?: { code: string; reason: string };
  /** A resume value that would approve, to copy into Studio or an HTTP client after checking the card. */
  exampleResume: ResumeValue;
}

export type InterruptPayload = ApprovalRequest;

/** Outer shape only; each decision is validated by the envelope core, which knows hash, nonce and policy. */
export const ResumeSchema = z.object({
  decisions: z.array(z.unknown()).length(1, "exactly one decision per approval request"),
});
export type ResumeValue = { decisions: unknown[] };

export function exampleApproval(hash: string, nonce: string, approverId: string): ResumeValue {
  return { decisions: [{ type: "approve", envelopeHash: hash, nonce, approver: { id: approverId } }] };
}
