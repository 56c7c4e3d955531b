/** Who made a decision, as far as it can be established: the payload an approver's signature covers and whether that signature verifies. */
import type { KeyObject } from "node:crypto";
import { DecisionSchema, type Decision } from "./decision-schema.js";
import type { Policy } from "./policy.js";
import { verifyDecisionSignature, type SignedDecisionPayload } from "./signature.js";

/**
 * Whether the identity a decision claims is established as far as the policy asks, whatever else is
 * wrong with the decision: the caller is authenticated as that approver, or the decision carries a
 * signature that verifies with that approver's key over this thread, or the policy accepts
 * self-declared approvers (allowUnauthenticated, no signature required). Only such a decision may
 * count toward the refused-decision budget: otherwise anyone could end an approval by sending bad
 * decisions that merely name an entitled approver.
 */
export function identityEstablished(
  decision: unknown,
  ctx: {
    policy: Policy;
    publicKeys: ReadonlyMap<string, KeyObject>;
    threadId: string;
    authenticatedUser?: string | undefined;
  },
): boolean {
  const claimed = (decision as { approver?: { id?: unknown } } | null)?.approver?.id;
  if (typeof claimed !== "string" || claimed === "") return false;
  if (ctx.authenticatedUser !== undefined) return ctx.authenticatedUser === claimed;
  if (signatureVerifies(decision, claimed, ctx)) return true;
  return ctx.policy.approvers.allowUnauthenticated && !ctx.policy.requireSignature;
}

function signatureVerifies(
  decision: unknown,
  approverId: string,
  ctx: { publicKeys: ReadonlyMap<string, KeyObject>; threadId: string },
): boolean {
  const parsed = DecisionSchema.safeParse(decision);
  if (!parsed.success || parsed.data.signature === undefined || parsed.data.decidedAt === undefined)
    return false;
  const key = ctx.publicKeys.get(approverId);
  if (!key) return false;
  try {
    return verifyDecisionSignature(signedPayloadOf(parsed.data, ctx.threadId), parsed.data.signature, key);
  } catch {
    return false;
  }
}

/** The payload a decision's signature covers; the approver's tool builds the same object to sign. */
export function signedPayloadOf(d: Decision, threadId: string): SignedDecisionPayload {
  if (d.decidedAt === undefined) throw new TypeError("a decision without decidedAt cannot be signed");
  return {
    envelopeHash: d.envelopeHash,
    nonce: d.nonce,
    threadId,
    decision: d.type,
    approverId: d.approver.id,
    decidedAt: d.decidedAt,
    ...(d.type === "edit" ? { editedAction: d.editedAction } : {}),
    ...(d.type === "approve" && d.override ? { override: d.override } : {}),
    ...(d.type === "reject" && d.message !== undefined ? { message: d.message } : {}),
    ...(d.actionId !== undefined ? { actionId: d.actionId } : {}),
  };
}
