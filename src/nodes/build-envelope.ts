import { randomUUID } from "node:crypto";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { OPERATIONS, checkProposal, createEnvelope, hashEnvelope, noChangeReason, renderCard, userIdsOnCard } from "../envelope/index.js";
import { rawOf, readObject } from "../hitl/reads.js";
import { lookupNames } from "../hitl/people.js";
import { approvalRequestedEntry, decisionAcceptedEntry, proposalDeniedEntry } from "../hitl/audit-records.js";
import { decisionOf, endRunInJournal, ensureThread, mirrorOf, openGate, refuseUnlessAllowed, type Gate } from "../hitl/journal-gate.js";
import { buildChangeSet, withActionIds, type PlannedAction } from "../hitl/change-sets.js";
import type { Deps } from "../runtime/deps.js";
import type { ThreadRecord } from "../store/action-machine.js";
import type { ProposalRecord, ReasonCode } from "../hitl/records.js";
import { undoEndingCode, undoPlanFor } from "../hitl/compensation.js";
import { changedSinceWrite } from "../envelope/compensation.js";

/**
 * Policy and scope first (a denied proposal is never shown for approval), then a baseline read by
 * code — not the model's account of the task — and the frozen, hashed envelope, registered in the
 * journal with the card exactly as rendered. Request, scope, revision, escalation and an edit's
 * content all come from the journal; only a model proposal comes from state, and it is checked
 * against the journal's scope like any proposal.
 */
export async function buildEnvelope(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "build_envelope", state);
  if (refused) return refused;
  const thread = await ensureThread(deps, gate, state);
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const end = (code: ReasonCode, reason: string): Promise<Update> => endRunInJournal(deps, gate, state, code, reason);

  // A change set: proposed by the model, the next revision of a set decided action by action, or the
  // same set again after an escalation. Built and registered as one (src/hitl/change-sets.ts).
  const members = gate.members ?? (previous ? [previous] : []);
  const setActions: PlannedAction[] | null =
    gate.next === "build_envelope" && prior?.setPlan
      ? prior.setPlan.actions.map(({ names: _n, ...a }) => a)
      : gate.next === "build_envelope" && previous?.set && prior?.type !== "edit"
        ? members.map((m) => ({ actionId: m.set!.actionId, operation: m.envelope.operation, taskId: m.envelope.object.id, fields: m.envelope.params }))
        : gate.next !== "build_envelope" && !thread.compensates && state.proposal?.actions && state.proposal.actions.length > 1
          ? withActionIds(state.proposal.actions)
          : null;
  if (setActions && setActions.length > 1) return buildSet(deps, gate, state, thread, setActions, config);

  // An undo thread's first proposal is the journal's restore of the action it compensates.
  const undo = thread.compensates && !previous ? await undoPlanFor(deps.journal, thread.compensates.threadId, thread.compensates.envelopeHash) : null;
  if (undo && !undo.ok) return end(undoEndingCode(undo.code), undo.reason);
  if (undo?.ok && undo.parts.length > 1) {
    // The undo of a change set that changed several tasks: a change set of restores, each expecting
    // its task exactly as the set left it.
    for (const part of undo.parts) {
      const { res: read, object: task } = await readObject(deps.tools, part.plan.type, part.plan.taskId);
      if (!task) return end("BASELINE_READ_FAILED", `could not read ${part.plan.type} ${part.plan.taskId} to record its baseline: ${JSON.stringify(rawOf(read)).slice(0, 2000)}`);
      const changed = changedSinceWrite(part.plan, task);
      if (changed.length > 0) return end("STALE_STATE", staleUndoReason(changed, part.plan.taskId));
    }
    const note = `UNDO of thread ${thread.compensates!.threadId} (change set ${undo.original.set?.setHash}): restores the values recorded before that set; proposed by code, not by the model.${undo.skipped.length ? ` Not undone: ${undo.skipped.join("; ")}.` : ""}\n`;
    return buildSet(deps, gate, state, thread, withActionIds(undo.parts.map((p) => ({ operation: p.plan.operation, taskId: p.plan.taskId, fields: p.plan.fields }))), config, note);
  }
  // An edit's content is the decision the journal accepted; any other proposal is the model's.
  const onlyOne = setActions?.length === 1 ? setActions[0]! : undefined;
  const proposal: ProposalRecord | null = undo?.ok
    ? undo.proposal
    : onlyOne
      ? { operation: onlyOne.operation, taskId: onlyOne.taskId, fields: onlyOne.fields, rationale: `the part of change set ${previous?.set?.setHash} that ${prior?.approverId} approved or edited`, source: "human_edit" }
      : gate.next === "build_envelope" && prior?.type === "edit" && prior.edit
      ? { operation: previous!.envelope.operation, taskId: prior.edit.taskId, fields: prior.edit.fields, rationale: `edited by ${prior.approverId}`, source: "human_edit" }
      : gate.next === "build_envelope"
        ? previous
          ? { operation: previous.envelope.operation, taskId: previous.envelope.object.id, fields: previous.envelope.params, rationale: "the same change, for a fresh approval", source: "model" }
          : null
        : thread.compensates
          ? null
          : state.proposal;
  if (!proposal) return end("NO_PROPOSAL", "no proposal to build an envelope from");
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return end("TOO_MANY_REVISIONS", `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`);
  }

  const threadId = gate.threadId;
  const scope = thread.scope;
  const operation = proposal.operation ?? "update_task";
  const verdict = checkProposal(deps.policy, scope, { operation, taskId: proposal.taskId, fields: proposal.fields });
  if (!verdict.allowed) {
    const at = deps.clock().toISOString();
    await deps.audit.append(proposalDeniedEntry({ ...state, proposal, requestedBy: thread.requestedBy }, { threadId, revision, policy: deps.policy, at, code: verdict.code, reasons: verdict.reasons }));
    return end("DENIED_BY_POLICY", `${verdict.code}: ${verdict.reasons.join("; ")}`);
  }

  const targetType = OPERATIONS[operation].target;
  // A create has no object to read yet: its baseline is empty.
  const { res: read, object: task } = OPERATIONS[operation].effect === "create" ? { res: null, object: {} } : await readObject(deps.tools, targetType, proposal.taskId);
  if (!task) {
    return end("BASELINE_READ_FAILED", `could not read ${targetType} ${proposal.taskId} to record its baseline: ${JSON.stringify(read ? rawOf(read) : null).slice(0, 2000)}`);
  }

  // An undo restores only the state our write left: if anyone changed the task since (a field we wrote,
  // or anything at all by the change marker), restoring would overwrite their change. Not proposed.
  if (undo?.ok) {
    const changed = changedSinceWrite(undo.plan, task);
    if (changed.length > 0) return end("STALE_STATE", staleUndoReason(changed));
  }

  // A change that changes nothing is not put in front of an approver (a comment always adds one).
  const same = OPERATIONS[operation].effect === "update" ? noChangeReason(proposal.fields, task, targetType) : undefined;
  if (same) {
    const at = deps.clock().toISOString();
    await deps.audit.append(proposalDeniedEntry({ ...state, proposal, requestedBy: thread.requestedBy }, { threadId, revision, policy: deps.policy, at, code: "NO_CHANGE", reasons: [same] }));
    return end("NO_CHANGE", same);
  }

  const runId = config.runId ?? config.configurable?.run_id;
  // Escalation: set by the expiry that led here, and kept for later revisions of the same approval.
  const escalatedTo = (prior?.type === "expire" ? prior.escalateTo : undefined) ?? previous?.escalatedTo ?? null;
  const editedBy = proposal.source === "human_edit" && prior?.type === "edit" && !(prior.setPlan?.runWithoutReapproval) ? prior.approverId : undefined;
  const envelope = createEnvelope({
    portal: deps.portal,
    operation,
    taskId: proposal.taskId,
    params: proposal.fields,
    task,
    requestedBy: thread.requestedBy,
    runContext: { threadId, ...(runId ? { runId: String(runId) } : {}) },
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
  const undoNote = thread.compensates
    ? `UNDO of thread ${thread.compensates.threadId} (envelope ${thread.compensates.envelopeHash}): restores the values recorded before that write; proposed by code, not by the model.${undo?.ok && undo.skipped.length ? ` Not undone: ${undo.skipped.join("; ")}.` : ""}\n`
    : "";
  const card = escalatedTo
    ? `${undoNote}ESCALATED to group ${escalatedTo}: the approval for ${previous?.envelopeHash} expired unanswered; only members of ${escalatedTo} may approve this fresh envelope.\n${rendered}`
    : `${undoNote}${rendered}`;
  // Registering supersedes the previous revision in the same transaction; keyed by hash, so a re-run
  // of this node after a crash registers a second envelope rather than altering the first.
  const action = await deps.journal.registerAction(
    {
      envelopeHash,
      threadId,
      revision,
      envelope,
      card,
      scope,
      policy: { id: deps.policy.id, version: deps.policy.version },
      escalatedTo,
      supersededHashes: previous ? [...previous.supersededHashes, previous.envelopeHash] : [],
      editedBy: editedBy ?? null,
      ...(people ? { people } : {}),
    },
    envelope.createdAt,
  );
  await deps.audit.append(approvalRequestedEntry(envelope, envelopeHash, card));
  // What is left of a change set after a partial approval the policy lets run at once: decided now.
  if (onlyOne && prior?.setPlan?.runWithoutReapproval) {
    const record = { ...decisionOf(previous)!, type: "approve" as const, envelopeHash, nonce: envelope.nonce, revision, message: `partial approval of change set ${previous?.set?.setHash}: ${prior.setPlan.perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}; run without a second approval under policy partialExecution` };
    const claim = await deps.journal.decideAction(envelopeHash, { threadId, envelopeHash, nonce: envelope.nonce, revision, decisionType: "approve", approverId: record.approverId, decidedAt: record.decidedAt }, record);
    if (claim.claimed) {
      await deps.audit.append(decisionAcceptedEntry(envelope, envelopeHash, record));
      return { ...mirrorOf(claim.row), proposal, pendingDecision: null, decision: record, journalNext: "pre_read" };
    }
  }
  return { ...mirrorOf(action), proposal, pendingDecision: null, decision: null, journalNext: null };
}

/** build_envelope for a change set: built, registered (and, for an allowed partial approval, decided) as one. */
function staleUndoReason(changed: ReturnType<typeof changedSinceWrite>, taskId?: number): string {
  return `${taskId !== undefined ? `task ${taskId}` : "the task"} changed after the write being undone, so restoring it would overwrite someone else's change: ${changed.map((c) => `${c.field} (${c.field === "CHANGED_DATE" ? "at our verification" : "we wrote"} ${JSON.stringify(c.ours)}, now ${JSON.stringify(c.now)})`).join("; ")}`;
}

async function buildSet(deps: Deps, gate: Gate, state: State, thread: ThreadRecord, actions: PlannedAction[], config: LangGraphRunnableConfig, note?: string): Promise<Update> {
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return endRunInJournal(deps, gate, state, "TOO_MANY_REVISIONS", `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`);
  }
  const runId = config.runId ?? config.configurable?.run_id;
  const plan = gate.next === "build_envelope" ? prior?.setPlan : undefined;
  const escalatedTo = (prior?.type === "expire" ? prior.escalateTo : undefined) ?? previous?.escalatedTo ?? null;
  const built = await buildChangeSet(
    deps,
    {
      threadId: gate.threadId,
      ...(runId ? { runId: String(runId) } : {}),
      requestedBy: thread.requestedBy,
      scope: thread.scope,
      previous,
      previousMembers: gate.members ?? (previous ? [previous] : []),
      escalatedTo,
      ...(note ? { note } : {}),
      ...(plan && !plan.runWithoutReapproval && prior ? { editedBy: prior.approverId } : {}),
      ...(plan?.runWithoutReapproval && prior ? { runWithoutReapproval: { plan, decision: decisionOf(previous)! } } : {}),
    },
    actions,
  );
  const proposal: ProposalRecord = {
    operation: actions[0]!.operation,
    taskId: actions[0]!.taskId,
    fields: actions[0]!.fields,
    actions: actions.map(({ actionId: _id, ...a }) => a),
    rationale: plan ? `revision of change set ${previous?.set?.setHash} decided action by action by ${prior?.approverId}` : note ? note.trim() : state.proposal?.rationale ?? "",
    source: plan ? "human_edit" : note ? "compensation" : "model",
  };
  if (!built.ok) {
    if (built.denied) {
      const at = deps.clock().toISOString();
      await deps.audit.append(proposalDeniedEntry({ ...state, proposal, requestedBy: thread.requestedBy }, { threadId: gate.threadId, revision, policy: deps.policy, at, code: built.denied.code, reasons: built.denied.reasons }));
    }
    return endRunInJournal(deps, gate, state, built.code, built.reason);
  }
  const first = built.rows[0]!;
  for (const r of built.rows) await deps.audit.append(approvalRequestedEntry(r.envelope, r.envelopeHash, r.card));
  if (built.autoApproved) {
    const d = first.progress.decision;
    if (d) await deps.audit.append(decisionAcceptedEntry(first.envelope, built.setHash, decisionOf(first)!));
    return { ...mirrorOf(first), proposal, pendingDecision: null, decision: decisionOf(first), journalNext: "pre_read" };
  }
  return { ...mirrorOf(first), proposal, pendingDecision: null, decision: null, journalNext: null };
}
