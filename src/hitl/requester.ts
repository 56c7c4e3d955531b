/**
 * How a run's requester is verified, decided once when the thread is registered: a token-authenticated
 * caller is `authentication`; a run carrying a requester signature that verifies under the key
 * registered for `requestedBy` is `signature`; anyone else named themselves (`self_declared`). A
 * signature that does not verify is refused, never downgraded to self-declared, so a requester who
 * meant to sign learns that it did not count. Pure: the keys come from the runtime's registry, the
 * signature from the run input, and nothing else is read.
 */
import type { KeyObject } from "node:crypto";
import { verifyRequestSignature, type RequesterVerification } from "../envelope/index.js";
import type { RequestScope } from "../envelope/records.js";

export interface RequestToVerify {
  request: string;
  requestedBy: string;
  scope?: RequestScope | undefined;
  requesterSignature?: string | undefined;
}

export function verifyRequester(
  threadId: string,
  input: RequestToVerify,
  caller: string | undefined,
  publicKeys: Map<string, KeyObject>,
): { ok: true; verifiedBy: RequesterVerification } | { ok: false; problem: string } {
  if (input.requesterSignature !== undefined) {
    const key = publicKeys.get(input.requestedBy);
    const payload = {
      kind: "request" as const,
      threadId,
      request: input.request,
      requestedBy: input.requestedBy,
      scope: { ...(input.scope ?? {}) },
    };
    if (!key) {
      return {
        ok: false,
        problem: `REQUESTER_SIGNATURE_INVALID: the request is signed, but no key is registered for ${input.requestedBy} in ACTION_ENVELOPE_APPROVER_KEYS; nothing was started`,
      };
    }
    if (!verifyRequestSignature(payload, input.requesterSignature, key)) {
      return {
        ok: false,
        problem: `REQUESTER_SIGNATURE_INVALID: the signature is not ${input.requestedBy}'s canonical Ed25519 signature over this request for thread ${threadId}; nothing was started`,
      };
    }
    return { ok: true, verifiedBy: caller !== undefined ? "authentication" : "signature" };
  }
  return { ok: true, verifiedBy: caller !== undefined ? "authentication" : "self_declared" };
}
