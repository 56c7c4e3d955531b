/**
 * Journal rows for store tests, made through the journal's own methods (register → decide →
 * pre-read), so a test of claims or write-ahead entries exercises what the program calls.
 */
import type { Journal } from "../../src/store/journal.js";
import type { ActionProgress, RegisteredAction } from "../../src/store/action-machine.js";

export interface TestActionOptions {
  nonce?: string;
  revision?: number;
  createdAt?: string;
  expiresAt?: string;
}

/** A registered action with just enough of an envelope for the journal's indexes and leases. */
export function testAction(
  threadId: string,
  envelopeHash: string,
  o: TestActionOptions = {},
): RegisteredAction {
  const revision = o.revision ?? 1;
  const envelope = {
    requestedBy: "u",
    createdAt: o.createdAt ?? "2026-01-01T00:00:00Z",
    expiresAt: o.expiresAt ?? "2026-01-02T00:00:00Z",
    nonce: o.nonce ?? "n1",
    revision,
    portal: "https://portal.test",
    operation: "update_task",
    object: { type: "task", id: 4 },
    params: { TITLE: "x" },
  };
  return {
    envelopeHash,
    threadId,
    revision,
    envelope: envelope as never,
    card: "",
    scope: {},
    policy: { id: "test", version: "1" },
    escalatedTo: null,
    supersededHashes: [],
    editedBy: null,
  };
}

/** The claim and decision record of an approval of `a` by `approverId`. */
export function approvalOf(a: RegisteredAction, approverId: string, decidedAt = new Date().toISOString()) {
  const claim = {
    threadId: a.threadId,
    envelopeHash: a.envelopeHash,
    nonce: a.envelope.nonce,
    revision: a.revision,
    decisionType: "approve" as const,
    approverId,
    decidedAt,
  };
  const decision: NonNullable<ActionProgress["decision"]> = {
    type: "approve",
    envelopeHash: a.envelopeHash,
    nonce: a.envelope.nonce,
    revision: a.revision,
    approverId,
    verifiedBy: "self_declared",
    decidedAt,
    acceptedAt: decidedAt,
    raw: null,
  };
  return { claim, decision };
}

/** Registers, approves and passes the pre-read of an action: it is then ready for beginWrite. */
export async function readyToWrite(j: Journal, a: RegisteredAction): Promise<void> {
  await j.registerThread({
    threadId: a.threadId,
    request: "test",
    requestedBy: "u",
    scope: {},
    createdAt: a.envelope.createdAt,
  });
  await j.registerAction(a, a.envelope.createdAt);
  const { claim, decision } = approvalOf(a, "alice");
  // The approval takes the object lease, as a real one does: the write's beginning renews it.
  const decided = await j.decideAction(a.envelopeHash, claim, decision, [], leaseFor(a));
  if (!decided.claimed) throw new Error(`could not approve ${a.envelopeHash}`);
  const moved = await j.moveAction(a.envelopeHash, "pre_read", {
    preRead: {
      verdict: "MATCH",
      reason: "test",
      fields: [],
      moved: [],
      raw: null,
      canEdit: true,
      at: a.envelope.createdAt,
    } as never,
  });
  if (!moved.ok) throw new Error(moved.reason);
}

/** The lease a write on `a` renews (the test envelope's task). */
export const leaseFor = (a: RegisteredAction) => ({
  objectKey: `${a.envelope.portal}|task|${a.envelope.object.id}`,
  holdMs: 60_000,
});
