// The decision judgement of the pure core (src/envelope/decision-judgement.ts), without a graph or a
// journal: who may decide, which refusals count, and what a cancel or an expiry needs.
import { describe, expect, it } from "vitest";
import { createEnvelope, defaultPolicy, hashEnvelope, type Envelope } from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";
import { validateDecision } from "../src/envelope/decision.js";
import {
  decisionContext,
  entitlementProblem,
  judgeSystemDecision,
  setShapeProblem,
  type Answered,
  type Judge,
} from "../src/envelope/decision-judgement.js";

const CREATED = new Date("2026-11-30T10:00:00Z");

function answered(): Answered {
  const envelope: Envelope = createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params: { TITLE: "Renamed" },
    task: exampleTask(),
    requestedBy: "demo-user",
    runContext: { threadId: "thread-1" },
    policy: defaultPolicy(),
    now: CREATED,
  });
  return {
    threadId: "thread-1",
    envelope,
    envelopeHash: hashEnvelope(envelope),
    supersededHashes: ["sha256:old"],
    scope: { taskIds: [4] },
  };
}

const judge = (over: Partial<Judge> = {}): Judge => ({
  policy: defaultPolicy(),
  publicKeys: new Map(),
  now: new Date("2026-11-30T10:05:00Z"),
  authUser: undefined,
  ...over,
});

describe("decision judgement in the core", () => {
  it("an authenticated caller speaks only for themselves; a decision without an approver names none", () => {
    const a = answered();
    expect(entitlementProblem(a, judge({ authUser: "bob" }), "demo-approver", "approve")).toMatch(
      /authenticated as bob/,
    );
    expect(entitlementProblem(a, judge(), undefined, "approve")).toMatch(/names its approver/);
    expect(entitlementProblem(a, judge(), "demo-approver", "approve")).toBeNull();
  });

  it("an expiry before the approval lapses is refused NOT_EXPIRED, uncounted; after it, accepted at this server's time", () => {
    const a = answered();
    const expire = {
      type: "expire" as const,
      envelopeHash: a.envelopeHash,
      nonce: a.envelope.nonce,
      by: { id: "system" },
    };
    expect(judgeSystemDecision(a, expire, judge(), ["update_task"], null)).toMatchObject({
      refused: { code: "NOT_EXPIRED", counted: false },
    });
    const later = new Date(Date.parse(a.envelope.expiresAt) + 1000);
    const accepted = judgeSystemDecision(a, expire, judge({ now: later }), ["update_task"], null);
    expect(accepted).toMatchObject({
      record: {
        type: "expire",
        approverId: "system",
        decidedAt: later.toISOString(),
        verifiedBy: "self_declared",
      },
    });
  });

  it("approval and expiry meet at the expiry's millisecond: before it only an approval is taken, from it only an expiry", () => {
    const a = answered();
    const at = Date.parse(a.envelope.expiresAt);
    const expire = {
      type: "expire" as const,
      envelopeHash: a.envelopeHash,
      nonce: a.envelope.nonce,
      by: { id: "system" },
    };
    const approve = {
      type: "approve",
      envelopeHash: a.envelopeHash,
      nonce: a.envelope.nonce,
      approver: { id: "demo-approver" },
    };
    const taken = (ms: number) => {
      const j = judge({ now: new Date(ms) });
      return {
        approve: validateDecision(a.envelope, approve, decisionContext(a, a.envelopeHash, j, [])).ok,
        expire: "record" in judgeSystemDecision(a, expire, j, ["update_task"], null),
      };
    };
    expect(taken(at - 1)).toEqual({ approve: true, expire: false });
    expect(taken(at)).toEqual({ approve: false, expire: true });
  });

  it("a cancel for an earlier revision is STALE_REVISION and counts; one from someone neither requester nor approver does not", () => {
    const a = answered();
    const cancel = {
      type: "cancel" as const,
      envelopeHash: "sha256:old",
      nonce: a.envelope.nonce,
      by: { id: "demo-user" },
      reason: "not needed",
    };
    expect(judgeSystemDecision(a, cancel, judge(), ["update_task"], null)).toMatchObject({
      refused: { code: "STALE_REVISION", counted: true },
    });
    const stranger = { ...cancel, envelopeHash: a.envelopeHash, by: { id: "mallory" } };
    expect(judgeSystemDecision(a, stranger, judge(), ["update_task"], null)).toMatchObject({
      refused: { code: "APPROVER_NOT_ALLOWED", counted: false },
    });
  });

  it("a change set is decided by one approver, as a whole or action by action, each action once", () => {
    const by = (id: string, actionId?: string) => ({
      type: "approve",
      approver: { id },
      ...(actionId ? { actionId } : {}),
    });
    expect(setShapeProblem([by("a")], ["a1", "a2"])).toBeNull();
    expect(setShapeProblem([by("a", "a1"), by("a", "a2")], ["a1", "a2"])).toBeNull();
    expect(setShapeProblem([by("a", "a1"), by("b", "a2")], ["a1", "a2"])?.refused.reason).toMatch(
      /one approver/,
    );
    expect(setShapeProblem([by("a", "a1"), by("a", "a1")], ["a1", "a2"])?.refused.code).toBe("MALFORMED");
  });
});
