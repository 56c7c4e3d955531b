/**
 * Building and registering a change set (src/envelope/change-set.ts), for build_envelope: every
 * action checked by policy and scope (the chain rule: one refused action refuses the set), one
 * baseline read per task, an envelope per action, the sealed set over them, and all rows registered in
 * one journal transaction with the set's card. A partial approval the policy lets run at once is
 * decided here, in the journal, against the new set's own nonce.
 */
import { randomUUID } from "node:crypto";
import {
  MAX_SET_ACTIONS,
  OPERATIONS,
  canonicalJson,
  checkPlan,
  createChangeSet,
  createEnvelope,
  hashChangeSet,
  hashEnvelope,
  noChangeReason,
  renderCard,
  requesterNotVerified,
  setCardHeader,
  userIdsOnCard,
  type Envelope,
  type OperationName,
  type RequesterVerification,
} from "../envelope/index.js";
import type { Deps } from "../runtime/deps.js";
import {
  objectKeyOf,
  verifiedInJournal,
  type ActionRow,
  type RegisteredAction,
} from "../store/action-machine.js";
import type { SetPlanDraft } from "../envelope/decision-judgement.js";
import type { DecisionRecord, ReasonCode } from "../envelope/records.js";
import { canEditFrom, deniedFieldRights, readObject, unreadBaseline, type BaselineRead } from "./reads.js";
import { TARGETS, jsonOf } from "../envelope/targets.js";
import { lookupNames } from "./people.js";
import { partialNotRunNote } from "../envelope/card-notes.js";
import { objectNamed } from "../envelope/operations.js";
import { deleteBaselineFrom } from "./delete-reads.js";
import { proposalScope } from "./scope.js";
import { approvalRequestedEntry, decisionAcceptedEntry } from "./audit-records.js";
import { nonceClaim } from "./decision-claim.js";

/** One action of a change set to build: a plan's action, without the names its edit typed. */
export type PlannedAction = Omit<SetPlanDraft["actions"][number], "names">;

/**
 * The key of the object an action's baseline is read from: its task or deal, or for a delete what it
 * removes (a comment is its own object, apart from the task it is under).
 */
export function baselineKeyOf(a: {
  operation: OperationName;
  taskId: number;
  fields: Record<string, unknown>;
}): string {
  const base = `${OPERATIONS[a.operation].target}:${a.taskId}`;
  return OPERATIONS[a.operation].effect === "delete"
    ? `${base}:${a.operation}:${String(a.fields["COMMENT_ID"] ?? "")}`
    : base;
}

/**
 * Each built action whose fresh baseline holds a value other than the revision an approver decided
 * (`decided`, matched by action id) showed for it, as "a1 task 4: TITLE": the fields that card compared
 * and the ones it said must stay unchanged. A partial approval runs at once only while there are none,
 * as a whole approval writes only when its pre-read finds the object as it was shown.
 */
export function movedSinceShown(
  decided: readonly ActionRow[],
  built: ReadonlyArray<{ actionId: string; envelope: Envelope }>,
): string[] {
  const text = (values: Record<string, unknown>, f: string) =>
    Object.prototype.hasOwnProperty.call(values, f) ? canonicalJson(values[f]) : undefined;
  return built.flatMap(({ actionId, envelope }) => {
    const shown = decided.find((m) => m.set?.actionId === actionId)?.envelope;
    const fields = shown
      ? [...new Set([...shown.comparedFields, ...shown.invariantFields])].filter(
          (f) => text(shown.baseline.values, f) !== text(envelope.baseline.values, f),
        )
      : ["(not in the decided revision)"];
    return fields.length
      ? [`${actionId} ${objectNamed(envelope.operation, envelope.object.id)}: ${fields.join(", ")}`]
      : [];
  });
}

/**
 * The baseline an action's envelope records, read by code before it is frozen: empty for a create
 * (there is no object yet); for a delete, what it removes, only as an earlier revision in `earlier`
 * recorded it (deleteBaselineFrom); else the object's fresh read.
 */
export async function readBaseline(
  tools: Deps["tools"],
  a: { operation: OperationName; taskId: number; fields: Record<string, unknown> },
  earlier: readonly Envelope[],
): Promise<BaselineRead> {
  const { effect, target } = OPERATIONS[a.operation];
  if (effect === "create") return { ok: true, object: {} };
  if (effect === "delete") return deleteBaselineFrom(tools, earlier, a);
  const { res, object } = await readObject(tools, target, a.taskId);
  if (!object) {
    const missing = missingObjectOf(res, target, a.taskId);
    if (missing) return { ok: false, code: "TARGET_NOT_FOUND", reason: missing };
    return unreadBaseline(`${target} ${a.taskId}`, res);
  }
  if (target !== "task" || effect !== "update") return { ok: true, object };
  // The task answer carries the acting user's rights: a write it already refuses is not put in front of an approver.
  const body = res.ok ? res.body : null;
  if (canEditFrom(body) === false) {
    return {
      ok: false,
      code: "NOT_PERMITTED",
      reason: `the portal reports that the acting user may not edit task ${a.taskId} (action.edit=false); the write would be refused, so no approval is asked`,
    };
  }
  // A field guarded by a narrower right (DEADLINE by changeDeadline, …) that the same answer reports as false.
  const denied = deniedFieldRights(body, Object.keys(a.fields));
  if (denied.length === 0) return { ok: true, object };
  const which = denied.map((d) => `${d.field} needs action.${d.right}, which is false`).join("; ");
  const reason =
    `the portal reports that the acting user may not change this on task ${a.taskId}: ${which}; ` +
    "the write would be refused, so no approval is asked";
  return { ok: false, code: "NOT_PERMITTED", reason };
}

/** Why a read proves the object does not exist (or is not visible to the acting user), or null when it does not prove it. */
function missingObjectOf(
  res: Awaited<ReturnType<typeof readObject>>["res"],
  target: string,
  id: number,
): string | null {
  if (res.ok) {
    const body = jsonOf(res.body)?.value;
    const result = (body as { result?: unknown } | null)?.result;
    return target === "task" && Array.isArray(result) && result.length === 0
      ? `${target} ${id} does not exist or the acting user cannot see it (the portal answered result: []); nothing to approve`
      : null;
  }
  return res.error.kind === "not_found"
    ? `${target} ${id} does not exist or the acting user cannot see it (${res.error.description}); nothing to approve`
    : null;
}

/** Why an update would change nothing on its baseline; a create, comment or delete always changes something. */
export function noChangeOf(
  a: { operation: OperationName; fields: Record<string, unknown> },
  baseline: Record<string, unknown>,
): string | undefined {
  return OPERATIONS[a.operation].effect === "update"
    ? noChangeReason(a.fields, baseline, OPERATIONS[a.operation].target)
    : undefined;
}

/** a1, a2, … for a model's proposal (ids are kept across later revisions of the same set). */
export function withActionIds(
  actions: Array<{ operation: OperationName; taskId: number; fields: Record<string, unknown> }>,
): PlannedAction[] {
  return actions.map((a, i) => ({ actionId: `a${i + 1}`, ...a }));
}

export async function buildChangeSet(
  deps: Deps,
  ctx: {
    threadId: string;
    runId?: string;
    requestedBy: string;
    /** How requestedBy was established (the journal's thread record). */
    requesterVerifiedBy: RequesterVerification;
    scope: Parameters<typeof checkPlan>[1];
    previous: ActionRow | undefined;
    previousMembers: ActionRow[];
    editedBy?: string;
    /** The group an expired approval was escalated to (only its members may approve). */
    escalatedTo: string | null;
    /** A line put above the card (an undo says what it restores). */
    note?: string;
    /** The thread's request as the journal recorded it, for each action's approval_requested record. */
    request: string;
    /** A partial approval of the previous revision that the policy lets run without a second approval. */
    runWithoutReapproval?: { plan: SetPlanDraft; decision: DecisionRecord };
    /**
     * Objects already read by the caller and checked (an undo's parts, by baselineKeyOf): used as the
     * baseline as they are, so what was checked is exactly what the envelope records.
     */
    reads?: ReadonlyMap<string, Record<string, unknown>>;
  },
  actions: PlannedAction[],
): Promise<
  /** autoApproved: decided now, its approval_requested and decision_accepted records committed with the claim. */
  | { ok: true; rows: ActionRow[]; autoApproved: boolean }
  | { ok: false; code: ReasonCode; reason: string; denied?: { code: string; reasons: string[] } }
> {
  const { previous } = ctx;
  const revision = (previous?.revision ?? 0) + 1;
  // The proposal tool holds a set to MAX_SET_ACTIONS actions on tasks; a proposal that reached here
  // otherwise (written into graph state) ends the run with that reason instead of failing the set's
  // schema mid-build.
  if (actions.length > MAX_SET_ACTIONS)
    return {
      ok: false,
      code: "INVALID_PROPOSAL",
      reason: `a change set holds at most ${MAX_SET_ACTIONS} actions; the proposal has ${actions.length}`,
    };
  const notTask = actions.filter((a) => OPERATIONS[a.operation].target !== "task");
  if (notTask.length > 0)
    return {
      ok: false,
      code: "INVALID_PROPOSAL",
      reason: `a change set acts on tasks only; ${notTask.map((a) => `${a.actionId} (${a.operation})`).join(", ")} acts on another kind of object`,
    };
  const check = checkPlan(
    deps.policy,
    proposalScope(ctx.request, ctx.scope),
    actions.map((a) => ({ operation: a.operation, taskId: a.taskId, fields: a.fields })),
  );
  if (!check.allowed) {
    return {
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: `${check.code}: ${check.reasons.join("; ")}`,
      denied: { code: check.code, reasons: check.reasons },
    };
  }
  const unverified = requesterNotVerified(
    deps.policy,
    check.risk.level,
    ctx.requestedBy,
    ctx.requesterVerifiedBy,
  );
  if (unverified)
    return {
      ok: false,
      code: "REQUESTER_NOT_VERIFIED",
      reason: unverified,
      denied: { code: "REQUESTER_NOT_VERIFIED", reasons: [unverified] },
    };

  // One baseline read per object (task or deal, or what a delete removes), all before any envelope is frozen.
  const tasks = new Map<string, Record<string, unknown>>();
  for (const a of actions) {
    const key = baselineKeyOf(a);
    if (tasks.has(key)) continue;
    const given = ctx.reads?.get(key);
    if (given) {
      tasks.set(key, given);
      continue;
    }
    // A delete not checked by an undo just now: only the same delete of an earlier revision (an
    // escalation) may be built again, and only while what it removes is exactly as that revision recorded it.
    const earlier = ctx.previousMembers.filter((m) => m.set?.actionId === a.actionId).map((m) => m.envelope);
    const base = await readBaseline(deps.tools, a, earlier);
    if (!base.ok) {
      // A write the portal already refuses (no edit right, no such object) refuses the set before anyone is asked: audited like a denial.
      const doomed = base.code === "NOT_PERMITTED" || base.code === "TARGET_NOT_FOUND";
      const reason =
        OPERATIONS[a.operation].effect === "delete" || doomed ? `${a.actionId}: ${base.reason}` : base.reason;
      return {
        ok: false,
        code: base.code,
        reason,
        ...(doomed ? { denied: { code: base.code, reasons: [reason] } } : {}),
      };
    }
    tasks.set(key, base.object);
  }
  for (const a of actions) {
    const same = noChangeOf(a, tasks.get(baselineKeyOf(a))!);
    if (same)
      return {
        ok: false,
        code: "NO_CHANGE",
        reason: `${a.actionId}: ${same}`,
        denied: { code: "NO_CHANGE", reasons: [`${a.actionId}: ${same}`] },
      };
  }

  const now = deps.clock();
  const setId = previous?.set?.set.setId ?? randomUUID();
  const before = new Map(ctx.previousMembers.map((m) => [m.set?.actionId ?? "", m.envelopeHash] as const));
  const previousHash = previous ? (previous.set?.setHash ?? previous.envelopeHash) : undefined;
  const envelopes: Array<{ actionId: string; envelope: Envelope }> = actions.map((a) => ({
    actionId: a.actionId,
    envelope: createEnvelope({
      portal: deps.portal,
      operation: a.operation,
      taskId: a.taskId,
      params: a.fields,
      task: tasks.get(baselineKeyOf(a))!,
      requestedBy: ctx.requestedBy,
      requesterVerifiedBy: ctx.requesterVerifiedBy,
      runContext: { threadId: ctx.threadId, ...(ctx.runId ? { runId: ctx.runId } : {}) },
      policy: deps.policy,
      now,
      revision,
      envelopeId: `${setId}/${a.actionId}`,
      ...(previousHash ? { previousEnvelopeHash: before.get(a.actionId) ?? previousHash } : {}),
      ...(ctx.editedBy ? { editedBy: ctx.editedBy } : {}),
    }),
  }));
  const set = createChangeSet({
    actions: envelopes,
    threadId: ctx.threadId,
    requestedBy: ctx.requestedBy,
    requesterVerifiedBy: ctx.requesterVerifiedBy,
    ...(ctx.editedBy ? { editedBy: ctx.editedBy } : {}),
    policy: { id: deps.policy.id, version: deps.policy.version },
    now,
    revision,
    setId,
    ...(previousHash ? { previousSetHash: previousHash } : {}),
  });
  const setHash = hashChangeSet(set);

  // Each action's card (names read by code after freezing, as for a single envelope), under the set's header.
  const sections: string[] = [];
  const people: Array<Awaited<ReturnType<typeof lookupNames>>> = [];
  for (const [i, { actionId, envelope }] of envelopes.entries()) {
    const names = await lookupNames(deps.tools, userIdsOnCard(envelope), deps.clock);
    people.push(names);
    const card = renderCard(
      envelope,
      hashEnvelope(envelope),
      "text",
      names ? { people: names.names } : {},
    ).text;
    sections.push(`──── ACTION ${i + 1} of ${envelopes.length}: ${actionId} ────\n${card}`);
  }
  // A partial approval covers the approved actions as they were shown: an object that changed since is shown again.
  const moved = ctx.runWithoutReapproval ? movedSinceShown(ctx.previousMembers, envelopes) : [];
  const runAtOnce = moved.length === 0 ? ctx.runWithoutReapproval : undefined;
  const partialNote = moved.length
    ? partialNotRunNote(previousHash, ctx.runWithoutReapproval!.decision.approverId, moved)
    : runAtOnce
      ? `PARTIAL APPROVAL of ${previousHash} by ${runAtOnce.decision.approverId}: ${runAtOnce.plan.perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}; the approved actions run without being shown again (policy partialExecution allows their classes).\n`
      : "";
  const escalation = ctx.escalatedTo
    ? `ESCALATED to group ${ctx.escalatedTo}: the approval for ${previousHash} expired unanswered; only members of ${ctx.escalatedTo} may approve this fresh change set.\n`
    : "";
  const card = `${ctx.note ?? ""}${escalation}${partialNote}${setCardHeader(set, setHash)}\n\n${sections.join("\n\n")}`;

  const superseded = previous
    ? [
        ...previous.supersededHashes,
        ...(previousHash ? [previousHash] : []),
        ...ctx.previousMembers.map((m) => m.envelopeHash),
      ]
    : [];
  const rows: RegisteredAction[] = envelopes.map(({ actionId, envelope }, index) => ({
    envelopeHash: hashEnvelope(envelope),
    threadId: ctx.threadId,
    revision,
    envelope,
    card,
    scope: ctx.scope,
    policy: { id: deps.policy.id, version: deps.policy.version },
    escalatedTo: ctx.escalatedTo,
    supersededHashes: [...new Set(superseded)],
    editedBy: ctx.editedBy ?? null,
    ...(people[index] ? { people: people[index] } : {}),
    set: { setHash, set, actionId, index },
  }));
  // Each action's approval_requested record commits with the registration.
  let registered = await deps.journal.registerActions(
    rows,
    set.createdAt,
    rows.map((r) => approvalRequestedEntry(r.envelope, r.envelopeHash, r.card, ctx.request)),
  );

  if (runAtOnce) {
    // The approver approved these very actions (by id) in the previous revision, and the policy lets
    // their classes run without a second look: the new set's nonce is spent on that approval now.
    const { decision } = runAtOnce;
    const record: DecisionRecord = {
      ...decision,
      type: "approve",
      envelopeHash: setHash,
      nonce: set.nonce,
      revision,
      message: `partial approval of ${previousHash} (${runAtOnce.plan.perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}), run without a second approval under policy partialExecution`,
    };
    // The claim commits with its decision_accepted record, as a human's decision does.
    const claim = await deps.journal.decideActions(
      registered.map((r) => ({ envelopeHash: r.envelopeHash, decision: record })),
      nonceClaim(ctx.threadId, record, record),
      [decisionAcceptedEntry(registered[0]!.envelope, setHash, record)],
    );
    if (claim.claimed)
      registered = await Promise.all(
        registered.map(async (r) => (await deps.journal.getAction(r.envelopeHash)) ?? r),
      );
    return { ok: true, rows: registered, autoApproved: claim.claimed };
  }
  return { ok: true, rows: registered, autoApproved: false };
}

/**
 * The envelope as the pre-read and verification of a later action of a change set compare it: an
 * earlier action of the same set on the same object that VERIFIED has moved that object, so the
 * values it wrote and the change marker its verification read are what this action may expect there
 * (everything else still as at envelope time). Never hashed or stored; the registered envelope is
 * unchanged. Anyone else's change in between still differs, and stops the write.
 */
export function expectedEnvelope(action: ActionRow, members: readonly ActionRow[]): Envelope {
  const index = action.set?.index;
  if (index === undefined || index === 0) return action.envelope;
  const key = objectKeyOf(action.envelope);
  const values: Record<string, unknown> = { ...action.envelope.baseline.values };
  let carried = false;
  for (const m of members) {
    if ((m.set?.index ?? Infinity) >= index || objectKeyOf(m.envelope) !== key) continue;
    const verification = m.progress.verification;
    if (!verification || !verifiedInJournal(m)) continue;
    if (OPERATIONS[m.envelope.operation].effect === "update") {
      for (const [field, value] of Object.entries(m.envelope.params))
        if (field in values) values[field] = value;
    }
    const t = TARGETS[m.envelope.object.type];
    const x = t.extract(verification.raw, m.envelope.object.id);
    const marker = t.changeMarker;
    if (x.ok && marker in values && t.keyOf(marker) in x.object) values[marker] = x.object[t.keyOf(marker)];
    carried = true;
  }
  return carried
    ? ({ ...action.envelope, baseline: { ...action.envelope.baseline, values } } as Envelope)
    : action.envelope;
}
