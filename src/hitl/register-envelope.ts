/**
 * The registered action build_envelope writes: the frozen, hashed envelope and its card exactly as
 * rendered (with the names of the people it shows), registered in the journal (sealed; superseding the
 * previous revision in the same transaction) and audited as approval_requested. What is left of a change
 * set after a partial approval the policy lets run at once is decided right away.
 */
import { randomUUID } from "node:crypto";
import { escalationNote, partialNotRunNote, undoNote } from "../envelope/card-notes.js";
import {
  createEnvelope,
  hashEnvelope,
  renderCard,
  requesterVerificationOf,
  userIdsOnCard,
  type OperationName,
} from "../envelope/index.js";
import type { DecisionRecord, ProposalRecord } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import { approvalRequestedEntry, decisionAcceptedEntry } from "./audit-records.js";
import { nonceClaim } from "./decision-claim.js";
import { movedSinceShown, type PlannedAction } from "./change-sets.js";
import { lookupNames } from "./people.js";
import { editorOf, escalationOf } from "./revision-plan.js";
import { decisionOf, viewOf, type RegisteredView } from "./thread-view.js";

/** What build_envelope writes into state once the action is registered (and, run at once, decided). */
export type RegisteredUpdate = Partial<RegisteredView> & {
  proposal: ProposalRecord;
  pendingDecision: null;
  decision: DecisionRecord | null;
  journalNext: "carry_out" | null;
};

/** Builds, registers and audits the envelope of `proposal`, checked and read as `task`. */
export async function registerEnvelope(
  deps: Deps,
  ctx: {
    threadId: string;
    runId: string | undefined;
    thread: ThreadRecord;
    previous: ActionRow | undefined;
    revision: number;
    proposal: ProposalRecord;
    operation: OperationName;
    task: Record<string, unknown>;
    /** The undo part this envelope deletes with, when it is one. */
    undoDeletes: boolean;
    notUndone: string[];
    /** What is left of a change set after a partial approval, when this envelope is that. */
    onlyOne: PlannedAction | undefined;
    /** The actions of the revision the approver decided, as it showed them. */
    decided: readonly ActionRow[];
  },
): Promise<RegisteredUpdate> {
  const { threadId, runId, thread, previous, revision, proposal, operation, task } = ctx;
  const prior = previous?.progress.decision;
  const escalatedTo = escalationOf(previous);
  // The same change again after an expiry (escalated) is still what its editor wrote: they may not approve it either.
  const editedBy =
    editorOf(proposal, prior) ?? (prior?.type === "expire" ? previous?.envelope.editedBy : undefined);
  const envelope = createEnvelope({
    portal: deps.portal,
    operation,
    taskId: proposal.taskId,
    params: proposal.fields,
    task,
    requestedBy: thread.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(thread),
    runContext: { threadId, ...(runId ? { runId } : {}) },
    policy: deps.policy,
    now: deps.clock(),
    revision,
    envelopeId: previous?.envelope.envelopeId ?? randomUUID(),
    ...(previous ? { previousEnvelopeHash: previous.envelopeHash } : {}),
    // Whoever wrote an edited revision may not also approve it.
    ...(editedBy ? { editedBy } : {}),
  });
  const envelopeHash = hashEnvelope(envelope);
  // Names of the people the card shows (responsible, creator, auditors, …), read by code after the
  // envelope is frozen: they change only the card, never the envelope, and a failed lookup shows
  // "name unavailable: why" instead of blocking the approval. Recorded with the card.
  const people = await lookupNames(deps.tools, userIdsOnCard(envelope), deps.clock);
  const rendered = renderCard(envelope, envelopeHash, "text", people ? { people: people.names } : {}).text;
  const undo = thread.compensates
    ? undoNote(thread.compensates.threadId, thread.compensates.envelopeHash, ctx.undoDeletes, ctx.notUndone)
    : "";
  // A partial approval covers the kept action as it was shown: if its object changed since, it is shown again.
  const partial = ctx.onlyOne ? prior?.setPlan : undefined;
  const moved = partial?.runWithoutReapproval
    ? movedSinceShown(ctx.decided, [{ actionId: ctx.onlyOne!.actionId, envelope }])
    : [];
  const notRun = moved.length ? partialNotRunNote(previous?.set?.setHash, prior!.approverId, moved) : "";
  const escalation = escalatedTo ? escalationNote(escalatedTo, previous?.envelopeHash) : "";
  const card = `${undo}${escalation}${notRun}${rendered}`;
  // Registering supersedes the previous revision and appends the approval_requested record in the same
  // transaction; keyed by hash, so a re-run of this node after a crash registers a second envelope
  // rather than altering the first.
  const action = await deps.journal.registerAction(
    {
      envelopeHash,
      threadId,
      revision,
      envelope,
      card,
      scope: thread.scope,
      policy: { id: deps.policy.id, version: deps.policy.version },
      escalatedTo,
      supersededHashes: previous ? [...previous.supersededHashes, previous.envelopeHash] : [],
      editedBy: editedBy ?? null,
      ...(people ? { people } : {}),
    },
    envelope.createdAt,
    [approvalRequestedEntry(envelope, envelopeHash, card, thread.request)],
  );
  // What is left of a change set after a partial approval the policy lets run at once: decided now.
  if (partial?.runWithoutReapproval && moved.length === 0) {
    const record = {
      ...decisionOf(previous)!,
      type: "approve" as const,
      envelopeHash,
      nonce: envelope.nonce,
      revision,
      message: `partial approval of change set ${previous?.set?.setHash}: ${partial.perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}; run without a second approval under policy partialExecution`,
    };
    const claim = await deps.journal.decideAction(
      envelopeHash,
      nonceClaim(threadId, record, record),
      record,
      [decisionAcceptedEntry(envelope, envelopeHash, record)],
    );
    // The claim and its decision_accepted record commit together, as for a human's decision.
    if (claim.claimed) return registeredUpdate(claim.row, proposal, { decision: record });
  }
  return registeredUpdate(action, proposal);
}

/**
 * The update for a registered row: its mirror and the proposal it was built from. `decidedAtOnce`: the
 * row was decided as it was registered (its decision as the journal holds it) and goes on to carry_out.
 */
export function registeredUpdate(
  row: ActionRow,
  proposal: ProposalRecord,
  decidedAtOnce?: { decision: DecisionRecord | null },
): RegisteredUpdate {
  return {
    ...viewOf({ action: row }).registered,
    proposal,
    pendingDecision: null,
    decision: decidedAtOnce?.decision ?? null,
    journalNext: decidedAtOnce ? "carry_out" : null,
  };
}
