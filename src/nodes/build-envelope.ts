import { randomUUID } from "node:crypto";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import {
  checkProposal,
  createEnvelope,
  hashEnvelope,
  renderCard,
  requesterNotVerified,
  requesterVerificationOf,
  userIdsOnCard,
} from "../envelope/index.js";
import { lookupNames } from "../hitl/people.js";
import { approvalRequestedEntry, decisionAcceptedEntry, proposalDeniedEntry } from "../hitl/audit-records.js";
import {
  endRunInJournal,
  ensureThread,
  openGate,
  refuseUnlessAllowed,
  type Gate,
} from "../hitl/journal-gate.js";
import { decisionOf, viewOf } from "../hitl/thread-view.js";
import {
  baselineKeyOf,
  buildChangeSet,
  noChangeOf,
  readBaseline,
  withActionIds,
  type PlannedAction,
} from "../hitl/change-sets.js";
import type { Deps } from "../runtime/deps.js";
import type { ThreadRecord } from "../store/action-machine.js";
import type { ProposalRecord, ReasonCode } from "../envelope/records.js";
import {
  isDeletePart,
  readUndoPart,
  undoEndingCode,
  undoPlanFor,
  type UndoPart,
} from "../hitl/compensation.js";

/**
 * Policy and scope first (a denied proposal is never shown for approval), then a baseline read by
 * code — not the model's account of the task — and the frozen, hashed envelope, registered in the
 * journal with the card exactly as rendered. Request, scope, revision, escalation and an edit's
 * content all come from the journal; only a model proposal comes from state, and it is checked
 * against the journal's scope like any proposal.
 */
export async function buildEnvelope(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "build_envelope", state);
  if (refused) return refused;
  const thread = await ensureThread(deps, gate, state);
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const end = (code: ReasonCode, reason: string): Promise<Update> =>
    endRunInJournal(deps, gate, state, code, reason);

  // A change set: proposed by the model, the next revision of a set decided action by action, or the
  // same set again after an escalation. Built and registered as one (src/hitl/change-sets.ts).
  const members = gate.members ?? (previous ? [previous] : []);
  const setActions: PlannedAction[] | null =
    gate.next === "build_envelope" && prior?.setPlan
      ? prior.setPlan.actions.map(({ names: _n, ...a }) => a)
      : gate.next === "build_envelope" && previous?.set && prior?.type !== "edit"
        ? members.map((m) => ({
            actionId: m.set!.actionId,
            operation: m.envelope.operation,
            taskId: m.envelope.object.id,
            fields: m.envelope.params,
          }))
        : gate.next !== "build_envelope" &&
            !thread.compensates &&
            state.proposal?.actions &&
            state.proposal.actions.length > 1
          ? withActionIds(state.proposal.actions)
          : null;
  if (setActions && setActions.length > 1) return buildSet(deps, gate, state, thread, setActions, config);

  // An undo thread's first proposal is the journal's restore of the action it compensates.
  const undo =
    thread.compensates && !previous
      ? await undoPlanFor(
          deps.journal,
          thread.compensates.threadId,
          thread.compensates.envelopeHash,
          deps.policy,
        )
      : null;
  if (undo && !undo.ok) return end(undoEndingCode(undo.code), undo.reason);
  // Every part of an undo read fresh and checked: a restore expects its object exactly as our write
  // left it, a delete expects what it removes exactly as our run created it (anyone's later change ends
  // the undo STALE_STATE before anything is shown). What a delete would remove that is already gone is
  // left out of a set and named; a single undo of it ends NO_CHANGE.
  const undoParts: Array<{ plan: UndoPart; proposal: ProposalRecord; object: Record<string, unknown> }> = [];
  const gone: string[] = [];
  for (const part of undo?.ok ? undo.parts : []) {
    const read = await readUndoPart(deps.tools, part.plan);
    if (read.ok) undoParts.push({ ...part, object: read.object });
    else if (read.code === "NO_CHANGE" && undo!.ok && undo!.parts.length > 1) gone.push(read.reason);
    else return end(read.code, read.reason);
  }
  const notUndone = [...(undo?.ok ? undo.skipped : []), ...gone];
  if (undo?.ok && undoParts.length > 1) {
    // The undo of a change set that changed several objects: a change set of restores (and deletes,
    // after them), each expecting its object exactly as checked above.
    const note = `UNDO of thread ${thread.compensates!.threadId} (change set ${undo.original.set?.setHash}): restores the values recorded before that set${undoParts.some((p) => isDeletePart(p.plan)) ? " and deletes what it created" : ""}; proposed by code, not by the model.${notUndone.length ? ` Not undone: ${notUndone.join("; ")}.` : ""}\n`;
    const reads = new Map(
      undoParts.map(
        (p) =>
          [
            baselineKeyOf({ operation: p.plan.operation, taskId: p.plan.taskId, fields: p.plan.fields }),
            p.object,
          ] as const,
      ),
    );
    return buildSet(
      deps,
      gate,
      state,
      thread,
      withActionIds(
        undoParts.map((p) => ({ operation: p.plan.operation, taskId: p.plan.taskId, fields: p.plan.fields })),
      ),
      config,
      note,
      reads,
    );
  }
  if (undo?.ok && undoParts.length === 0)
    return end("NOT_UNDOABLE", `nothing left to undo: ${notUndone.join("; ")}`);
  const undoPart = undoParts[0];
  // An edit's content is the decision the journal accepted; any other proposal is the model's.
  const onlyOne = setActions?.length === 1 ? setActions[0]! : undefined;
  const proposal: ProposalRecord | null = undoPart
    ? undoPart.proposal
    : onlyOne
      ? {
          operation: onlyOne.operation,
          taskId: onlyOne.taskId,
          fields: onlyOne.fields,
          rationale: `the part of change set ${previous?.set?.setHash} that ${prior?.approverId} ${prior?.setPlan?.perAction.some((p) => p.type === "edit") ? "approved or edited" : "approved (the rest rejected)"}`,
          source: "human_edit",
        }
      : gate.next === "build_envelope" && prior?.type === "edit" && prior.edit
        ? {
            operation: previous!.envelope.operation,
            taskId: prior.edit.taskId,
            fields: prior.edit.fields,
            rationale: `edited by ${prior.approverId}`,
            source: "human_edit",
          }
        : gate.next === "build_envelope"
          ? previous
            ? {
                operation: previous.envelope.operation,
                taskId: previous.envelope.object.id,
                fields: previous.envelope.params,
                rationale: "the same change, for a fresh approval",
                source: "model",
              }
            : null
          : thread.compensates
            ? null
            : state.proposal;
  if (!proposal) return end("NO_PROPOSAL", "no proposal to build an envelope from");
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return end(
      "TOO_MANY_REVISIONS",
      `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`,
    );
  }

  const threadId = gate.threadId;
  const scope = thread.scope;
  const operation = proposal.operation ?? "update_task";
  const verdict = checkProposal(deps.policy, scope, {
    operation,
    taskId: proposal.taskId,
    fields: proposal.fields,
  });
  if (!verdict.allowed) {
    const at = deps.clock().toISOString();
    await deps.audit.append(
      proposalDeniedEntry(
        { ...state, proposal, requestedBy: thread.requestedBy },
        { threadId, revision, policy: deps.policy, at, code: verdict.code, reasons: verdict.reasons },
      ),
    );
    return end("DENIED_BY_POLICY", `${verdict.code}: ${verdict.reasons.join("; ")}`);
  }
  // A change the policy lets only a verified requester ask for ends here, audited, before anything is
  // read or anyone is asked; the verification is the journal's thread record, never state.
  const unverified = requesterNotVerified(
    deps.policy,
    verdict.risk.level,
    thread.requestedBy,
    requesterVerificationOf(thread),
  );
  if (unverified) {
    const at = deps.clock().toISOString();
    await deps.audit.append(
      proposalDeniedEntry(
        { ...state, proposal, requestedBy: thread.requestedBy },
        {
          threadId,
          revision,
          policy: deps.policy,
          at,
          code: "REQUESTER_NOT_VERIFIED",
          reasons: [unverified],
        },
      ),
    );
    return end("REQUESTER_NOT_VERIFIED", unverified);
  }

  // An undo's object was read and checked above (the state our write left, or what our run created);
  // that very read is the baseline. A delete is built again (an escalation) only from the same delete,
  // unchanged: the previous single envelope, or the member of the set it was part of (a set's undo
  // approved only in its delete is shown again on its own).
  const earlier = [...(gate.members ?? []), ...(previous ? [previous] : [])].map((m) => m.envelope);
  const baseline = undoPart
    ? { ok: true as const, object: undoPart.object }
    : await readBaseline(
        deps.tools,
        { operation, taskId: proposal.taskId, fields: proposal.fields },
        earlier,
      );
  if (!baseline.ok) {
    // A write the envelope-time read already proves will be refused ends here, audited, and no one is asked.
    if (baseline.code === "NOT_PERMITTED" || baseline.code === "TARGET_NOT_FOUND") {
      const at = deps.clock().toISOString();
      await deps.audit.append(
        proposalDeniedEntry(
          { ...state, proposal, requestedBy: thread.requestedBy },
          { threadId, revision, policy: deps.policy, at, code: baseline.code, reasons: [baseline.reason] },
        ),
      );
    }
    return end(baseline.code, baseline.reason);
  }
  const task = baseline.object;

  // A change that changes nothing is not put in front of an approver (a comment always adds one).
  const same = noChangeOf({ operation, fields: proposal.fields }, task);
  if (same) {
    const at = deps.clock().toISOString();
    await deps.audit.append(
      proposalDeniedEntry(
        { ...state, proposal, requestedBy: thread.requestedBy },
        { threadId, revision, policy: deps.policy, at, code: "NO_CHANGE", reasons: [same] },
      ),
    );
    return end("NO_CHANGE", same);
  }

  const runId = config.runId ?? config.configurable?.run_id;
  // Escalation: set by the expiry that led here, and kept for later revisions of the same approval.
  const escalatedTo =
    (prior?.type === "expire" ? prior.escalateTo : undefined) ?? previous?.escalatedTo ?? null;
  // Removing rejected actions of a set is not an edit: only a plan with an edited action names an editor.
  const planEdited = prior?.setPlan ? prior.setPlan.perAction.some((p) => p.type === "edit") : true;
  const editedBy =
    proposal.source === "human_edit" &&
    prior?.type === "edit" &&
    planEdited &&
    !prior.setPlan?.runWithoutReapproval
      ? prior.approverId
      : undefined;
  const envelope = createEnvelope({
    portal: deps.portal,
    operation,
    taskId: proposal.taskId,
    params: proposal.fields,
    task,
    requestedBy: thread.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(thread),
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
    ? `UNDO of thread ${thread.compensates.threadId} (envelope ${thread.compensates.envelopeHash}): ${undoPart && isDeletePart(undoPart.plan) ? "deletes what that write created" : "restores the values recorded before that write"}; proposed by code, not by the model.${notUndone.length ? ` Not undone: ${notUndone.join("; ")}.` : ""}\n`
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
  await deps.audit.append(approvalRequestedEntry(envelope, envelopeHash, card, thread.request));
  // What is left of a change set after a partial approval the policy lets run at once: decided now.
  if (onlyOne && prior?.setPlan?.runWithoutReapproval) {
    const record = {
      ...decisionOf(previous)!,
      type: "approve" as const,
      envelopeHash,
      nonce: envelope.nonce,
      revision,
      message: `partial approval of change set ${previous?.set?.setHash}: ${prior.setPlan.perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}; run without a second approval under policy partialExecution`,
    };
    const claim = await deps.journal.decideAction(
      envelopeHash,
      {
        threadId,
        envelopeHash,
        nonce: envelope.nonce,
        revision,
        decisionType: "approve",
        approverId: record.approverId,
        decidedAt: record.decidedAt,
      },
      record,
      [decisionAcceptedEntry(envelope, envelopeHash, record)],
    );
    // The claim and its decision_accepted record commit together, as for a human's decision.
    if (claim.claimed) {
      return {
        ...viewOf({ action: claim.row }).registered,
        proposal,
        pendingDecision: null,
        decision: record,
        journalNext: "carry_out",
      };
    }
  }
  return {
    ...viewOf({ action }).registered,
    proposal,
    pendingDecision: null,
    decision: null,
    journalNext: null,
  };
}

/** build_envelope for a change set: built, registered (and, for an allowed partial approval, decided) as one. */
async function buildSet(
  deps: Deps,
  gate: Gate,
  state: State,
  thread: ThreadRecord,
  actions: PlannedAction[],
  config: LangGraphRunnableConfig,
  note?: string,
  reads?: ReadonlyMap<string, Record<string, unknown>>,
): Promise<Update> {
  const previous = gate.action;
  const prior = previous?.progress.decision;
  const revision = (previous?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return endRunInJournal(
      deps,
      gate,
      state,
      "TOO_MANY_REVISIONS",
      `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`,
    );
  }
  const runId = config.runId ?? config.configurable?.run_id;
  const plan = gate.next === "build_envelope" ? prior?.setPlan : undefined;
  const escalatedTo =
    (prior?.type === "expire" ? prior.escalateTo : undefined) ?? previous?.escalatedTo ?? null;
  const built = await buildChangeSet(
    deps,
    {
      threadId: gate.threadId,
      ...(runId ? { runId: String(runId) } : {}),
      requestedBy: thread.requestedBy,
      requesterVerifiedBy: requesterVerificationOf(thread),
      scope: thread.scope,
      previous,
      previousMembers: gate.members ?? (previous ? [previous] : []),
      escalatedTo,
      ...(note ? { note } : {}),
      ...(reads ? { reads } : {}),
      ...(plan && !plan.runWithoutReapproval && plan.perAction.some((p) => p.type === "edit") && prior
        ? { editedBy: prior.approverId }
        : {}),
      ...(plan?.runWithoutReapproval && prior
        ? { runWithoutReapproval: { plan, decision: decisionOf(previous)!, request: thread.request } }
        : {}),
    },
    actions,
  );
  const proposal: ProposalRecord = {
    operation: actions[0]!.operation,
    taskId: actions[0]!.taskId,
    fields: actions[0]!.fields,
    actions: actions.map(({ actionId: _id, ...a }) => a),
    rationale: plan
      ? `revision of change set ${previous?.set?.setHash} decided action by action by ${prior?.approverId}`
      : note
        ? note.trim()
        : (state.proposal?.rationale ?? ""),
    source: plan ? "human_edit" : note ? "compensation" : "model",
  };
  if (!built.ok) {
    if (built.denied) {
      const at = deps.clock().toISOString();
      await deps.audit.append(
        proposalDeniedEntry(
          { ...state, proposal, requestedBy: thread.requestedBy },
          {
            threadId: gate.threadId,
            revision,
            policy: deps.policy,
            at,
            code: built.denied.code,
            reasons: built.denied.reasons,
          },
        ),
      );
    }
    return endRunInJournal(deps, gate, state, built.code, built.reason);
  }
  const first = built.rows[0]!;
  // Decided now: the approval_requested and decision_accepted records committed with the claim.
  if (built.autoApproved)
    return {
      ...viewOf({ action: first }).registered,
      proposal,
      pendingDecision: null,
      decision: decisionOf(first),
      journalNext: "carry_out",
    };
  for (const r of built.rows)
    await deps.audit.append(approvalRequestedEntry(r.envelope, r.envelopeHash, r.card, thread.request));
  return {
    ...viewOf({ action: first }).registered,
    proposal,
    pendingDecision: null,
    decision: null,
    journalNext: null,
  };
}
