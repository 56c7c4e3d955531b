/**
 * The entry builders on their own: event kinds for decisions that close an approval without anyone
 * approving, what a refused decision is recorded as, and values the canonical form would refuse.
 */
import { describe, expect, it } from "vitest";
import { createEnvelope, defaultPolicy, hashEnvelope, sha256Json } from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";
import { decisionAcceptedEntry, decisionRefusedEntry, jsonSafe } from "../src/hitl/audit-records.js";
import type { DecisionRecord } from "../src/envelope/records.js";

const envelope = createEnvelope({
  portal: "127.0.0.1:1",
  taskId: 4,
  params: { TITLE: "x" },
  task: exampleTask(),
  requestedBy: "demo-user",
  runContext: { threadId: "t1" },
  policy: defaultPolicy(),
  now: new Date(),
});
const hash = hashEnvelope(envelope);

function closing(type: string): DecisionRecord {
  // The lifecycle decisions (cancel, expire) arrive through the same record type.
  return {
    type,
    envelopeHash: hash,
    nonce: envelope.nonce,
    revision: 1,
    approverId: "system",
    verifiedBy: "self_declared",
    decidedAt: "2026-01-01T00:00:00.000Z",
    acceptedAt: "2026-01-01T00:00:00.000Z",
    raw: null,
  } as unknown as DecisionRecord;
}

describe("audit entry builders", () => {
  it("records a cancel and an expiry under their own event kinds, an approval as decision_accepted", () => {
    expect(decisionAcceptedEntry(envelope, hash, closing("cancel")).event).toBe("approval_cancelled");
    expect(decisionAcceptedEntry(envelope, hash, closing("expire")).event).toBe("approval_expired");
    expect(decisionAcceptedEntry(envelope, hash, closing("approve")).event).toBe("decision_accepted");
  });

  it("records a refused decision's claimed approver as unverified, whatever shape the resume value had", () => {
    const refusal = (raw: unknown) => ({
      code: "MALFORMED",
      reason: "r",
      at: "2026-01-01T00:00:00.000Z",
      envelopeHash: hash,
      raw,
    });
    expect(
      decisionRefusedEntry(
        envelope,
        hash,
        refusal({ decisions: [{ approver: { id: "eve" }, type: "approve" }] }),
        1,
      ).approver,
    ).toEqual({
      id: "eve",
      verifiedBy: "unverified",
      decision: "approve",
      decidedAt: null,
    });
    const odd = decisionRefusedEntry(envelope, hash, refusal("not even an object"), 2);
    expect(odd.approver).toEqual({ id: null, verifiedBy: "unverified", decision: null, decidedAt: null });
    expect(odd.discriminator).toBe("2");
    expect(odd.received).toBe("not even an object");
  });

  it("makes any value hashable: unpaired surrogates become U+FFFD, non-JSON values their JSON form", () => {
    const safe = jsonSafe({
      id: "\ud800a",
      when: new Date("2026-01-01T00:00:00Z"),
      gone: undefined,
      list: ["\udc00"],
    });
    expect(safe).toEqual({ id: "\ufffda", when: "2026-01-01T00:00:00.000Z", list: ["\ufffd"] });
    expect(() => sha256Json(safe)).not.toThrow();
    expect(jsonSafe(undefined)).toBeNull();
  });
});
