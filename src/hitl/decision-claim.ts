/**
 * A decision's claim in the journal (the nonce consumed, the action moved to `decided`, its audit
 * records appended in the same transaction), and the server-side inputs its judgement takes: the
 * judge (policy, keys, clock, caller) and the registered approval it answers, from the journal's row.
 */
import type { Answered, Judge } from "../envelope/decision-judgement.js";
import type { ActionProgress, ActionRow } from "../store/action-machine.js";
import type { AuditEntry } from "../store/audit.js";
import type { DecisionClaim } from "../store/journal/api.js";
import type { DecisionRecord } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import { DecisionNotAcceptedError } from "../errors.js";
import type { MirrorUpdate } from "./thread-mirror.js";
import { leaseOf } from "./object-lease.js";

/** This server's side of a decision: its policy, keys and clock, and the authenticated caller. */
export const judgeOf = (deps: Deps, authUser: string | undefined, now = deps.clock()): Judge => ({
  policy: deps.policy,
  publicKeys: deps.publicKeys,
  now,
  authUser,
});

/** The registered approval a decision answers, from the journal's row. */
export const answeredBy = (action: ActionRow): Answered => ({
  threadId: action.threadId,
  envelope: action.envelope,
  envelopeHash: action.envelopeHash,
  supersededHashes: action.supersededHashes,
  scope: action.scope,
  escalatedTo: action.escalatedTo,
});

/** A nonce claim: the hash, nonce and revision a decision is bound to, and who made it when. */
export function nonceClaim(
  threadId: string,
  bound: Pick<DecisionRecord, "envelopeHash" | "nonce" | "revision">,
  decision: Pick<DecisionRecord, "type" | "approverId" | "decidedAt">,
): DecisionClaim {
  const { envelopeHash, nonce, revision } = bound;
  const { type: decisionType, approverId, decidedAt } = decision;
  return { threadId, envelopeHash, nonce, revision, decisionType, approverId, decidedAt };
}

/**
 * Claims the nonce and moves the action to `decided`, appending `records` in the same transaction. For
 * a change set, `action` stands for the set (its hash and nonce) and every one of `members` is decided
 * at once. Losing a race to another process throws, which leaves this run's checkpoint untouched so
 * the winner's record is the only one; an action that moved meanwhile sends the run to `resync`.
 */
export async function decide(
  deps: Deps,
  action: ActionRow,
  decision: NonNullable<ActionProgress["decision"]>,
  records: AuditEntry[],
  members?: ActionRow[],
): Promise<{ row: ActionRow } | { update: MirrorUpdate }> {
  const bound = {
    envelopeHash: action.envelopeHash,
    nonce: action.envelope.nonce,
    revision: action.revision,
  };
  const claimOf = nonceClaim(action.threadId, bound, decision);
  const claim = members
    ? await deps.journal.decideActions(
        members.map((x) => ({ envelopeHash: x.envelopeHash, decision })),
        claimOf,
        records,
      )
    : await deps.journal.decideAction(
        action.envelopeHash,
        claimOf,
        decision,
        records,
        // An approval is carried out next: its object lease is taken with the claim (one commit fewer).
        decision.type === "approve" ? leaseOf(deps, action) : undefined,
      );
  if (claim.claimed) return { row: claim.row };
  if ("existing" in claim) {
    throw new DecisionNotAcceptedError(
      action.threadId,
      "IN_PROGRESS",
      `ALREADY_CONSUMED: the approval nonce was consumed by a ${claim.existing.decisionType} from ${claim.existing.approverId} at ${claim.existing.decidedAt}`,
    );
  }
  return { update: { needsResync: true } };
}
