/**
 * How a decision on a registered approval is judged, with no I/O: who may decide it, which refusals
 * count toward the budget, what a cancel or expiry needs, and the record an accepted decision leaves.
 * The check_decision node's handlers (src/hitl/{single-decision,set-decision,system-decision}.ts) feed
 * it the journal's row, this server's clock and keys, and do the claiming, auditing and closing around
 * it (src/hitl/decision-claim.ts, src/hitl/decision-refusal.ts).
 */
import {
  validateDecisionFor,
  type DecisionContext,
  type DecisionValidation,
  type VerifiedBy,
} from "./decision.js";
import { identityEstablished } from "./decision-identity.js";
import { DecisionSchema, type Decision } from "./decision-schema.js";
import { subjectOfSet } from "./decision-subject.js";
import { partialApprovalForecast, type ChangeSet } from "./change-set.js";
import type { Envelope } from "./envelope.js";
import type { OperationName } from "./operations.js";
import type { NameResolution } from "./people.js";
import { approverNotAllowed, escalationApprovers, type Policy } from "./policy.js";
import type { DecisionRecord, RequestScope } from "./records.js";

/** A refusal of a decision; `counted` refusals use up the approval's budget. */
export interface DecisionRefusal {
  refused: { code: string; reason: string; counted: boolean };
}

export const refusal = (code: string, reason: string, counted: boolean): DecisionRefusal => ({
  refused: { code, reason, counted },
});

/** The registered approval a decision answers, as the journal's row holds it. */
export interface Answered {
  threadId: string;
  envelope: Envelope;
  envelopeHash: string;
  supersededHashes: string[];
  scope: RequestScope;
  escalatedTo?: string | null;
}

/** This server's side of a decision: its policy, keys and clock, and the authenticated caller if any. */
export interface Judge {
  policy: Policy;
  publicKeys: DecisionContext["publicKeys"];
  now: Date;
  authUser: string | undefined;
}

/** Refusals about which envelope a decision answers; reported as such whoever sent the decision. */
export const BINDING_CODES: ReadonlySet<string> = new Set([
  "HASH_MISMATCH",
  "STALE_REVISION",
  "NONCE_MISMATCH",
]);

/** What a decision is validated against: the journal's row (its scope, earlier revisions), this server's clock and keys. */
export function decisionContext(
  a: Answered,
  hash: string,
  judge: Judge,
  people: NameResolution[],
): DecisionContext {
  return {
    now: judge.now,
    policy: judge.policy,
    threadId: a.threadId,
    envelopeHash: hash,
    // The action is `registered` (the gate checked), so its nonce has not been spent.
    nonceConsumed: false,
    supersededHashes: a.supersededHashes,
    publicKeys: judge.publicKeys,
    scope: a.scope,
    ...(judge.authUser ? { authenticatedUser: judge.authUser } : {}),
    people,
  };
}

/** The approver a decision claims to come from, or undefined. */
export const claimedApprover = (d: unknown): unknown =>
  (d as { approver?: { id?: unknown } } | null)?.approver?.id;

/**
 * Whether this caller may decide this approval at all. Returns why not, or null. Escalation limits
 * approving to the group's members; an authenticated caller may only speak for themselves.
 */
export function entitlementProblem(
  a: Pick<Answered, "envelope" | "escalatedTo">,
  judge: Pick<Judge, "policy" | "authUser">,
  approverId: unknown,
  type: unknown,
  operations: string[] = [a.envelope.operation],
): string | null {
  if (typeof approverId !== "string" || approverId === "")
    return 'a decision names its approver as {"approver": {"id": "…"}}';
  if (judge.authUser !== undefined && judge.authUser !== approverId) {
    return `the request is authenticated as ${judge.authUser}, but the decision names approver ${approverId}`;
  }
  const notAllowed = approverNotAllowed(judge.policy, approverId, operations);
  if (notAllowed) return notAllowed;
  if (a.escalatedTo && type === "approve") {
    const members = judge.policy.approvers.groups[a.escalatedTo] ?? [];
    if (!members.includes(approverId)) {
      return `this approval was escalated to group ${a.escalatedTo} (${members.join(", ") || "no members"}); ${approverId} is not in it`;
    }
  }
  return null;
}

/**
 * The refusal for a decision that did not validate. Malformed in shape, or bound to another envelope:
 * said as that. Anything else from a caller who may not decide is, first of all, not theirs to decide.
 * Counted only when the claimed approver is who they say (an expiry is judged by this server's clock,
 * whoever noticed it), and never for a caller who may not decide.
 */
export function refusalOf(
  failed: Extract<DecisionValidation, { ok: false }>,
  wellFormed: boolean,
  notEntitled: string | null,
  identityShown: () => boolean,
  prefix = "",
): DecisionRefusal {
  if (notEntitled && !BINDING_CODES.has(failed.code) && wellFormed)
    return refusal("APPROVER_NOT_ALLOWED", notEntitled, false);
  return refusal(
    failed.code,
    `${prefix}${failed.reason}`,
    notEntitled === null && (failed.code === "EXPIRED" || identityShown()),
  );
}

/** Whether every decision's claimed approver is who they say (signature, authentication, or accepted self-declaration). */
export function identitiesShown(
  decisions: readonly unknown[],
  a: Pick<Answered, "threadId">,
  judge: Judge,
): boolean {
  const ctx = {
    policy: judge.policy,
    publicKeys: judge.publicKeys,
    threadId: a.threadId,
    authenticatedUser: judge.authUser,
  };
  return decisions.every((d) => identityEstablished(d, ctx));
}

/** The record an accepted approve, reject or edit of one envelope leaves. */
export function acceptedRecord(
  a: Answered,
  ok: Extract<DecisionValidation, { ok: true }>,
  judge: Judge,
  raw: unknown,
): DecisionRecord {
  const d: Decision = ok.decision;
  return {
    type: d.type,
    envelopeHash: a.envelopeHash,
    nonce: a.envelope.nonce,
    revision: a.envelope.revision,
    approverId: ok.identity.approverId,
    verifiedBy: ok.identity.verifiedBy,
    // Signed: the time the signature covers; otherwise this server's time (validateDecision decides which).
    decidedAt: ok.decidedAt,
    acceptedAt: judge.now.toISOString(),
    ...(d.type === "reject" && d.message ? { message: d.message } : {}),
    ...(ok.override ? { override: ok.override } : {}),
    raw,
  };
}

/** A cancel or an expiry, as sent (src/hitl/contract.ts, SystemDecisionSchema). */
export type SystemDecisionSent =
  | { type: "cancel"; envelopeHash: string; nonce: string; by: { id: string }; reason: string }
  | { type: "expire"; envelopeHash: string; nonce: string; by: { id: string } };

/** An accepted cancel or expiry: its record, and the group an expiry escalates to (or why it does not). */
export interface SystemJudgement {
  record: DecisionRecord;
  escalateTo?: string;
  /** For an expiry that could have escalated but did not: why, as a suffix of the closing reason. */
  notEscalated: string;
}

/**
 * Cancel and expiry: decisions made by the requester or the system rather than an approver, bound to
 * the envelope like any other. A cancel comes from the requester or an approver (never anyone else),
 * and is refused from an unauthenticated caller when the policy requires signatures or does not
 * accept self-declared ids; an expiry is honoured only when this server's clock says the approval has
 * expired. `operations` are every operation the approval covers (each action's, for a change set).
 */
export function judgeSystemDecision(
  a: Answered,
  d: SystemDecisionSent,
  judge: Judge,
  operations: string[],
  raw: unknown,
): DecisionRefusal | SystemJudgement {
  const { envelope, envelopeHash } = a;
  const { policy, authUser, now } = judge;
  // Who ends it is recorded as verified by authentication when a caller is authenticated, so it must be that caller.
  if (authUser !== undefined && authUser !== d.by.id)
    return refusal(
      "APPROVER_NOT_ALLOWED",
      `the request is authenticated as ${authUser}, but the ${d.type} names ${d.by.id}`,
      false,
    );
  if (d.type === "cancel") {
    // An approver of the whole approval (as for an approval), or the requester.
    const notAllowed =
      d.by.id === envelope.requestedBy ? undefined : approverNotAllowed(policy, d.by.id, operations);
    if (notAllowed) {
      return refusal(
        "APPROVER_NOT_ALLOWED",
        `${d.by.id} may not cancel this approval: only the requester (${envelope.requestedBy}) or an approver may (${notAllowed})`,
        false,
      );
    }
    // A cancel carries no signature: unless the policy accepts self-declared ids, it must come from an
    // authenticated caller. Refused without counting: the id it names is only a claim.
    if (policy.requireSignature && authUser === undefined) {
      return refusal(
        "SIGNATURE_REQUIRED",
        `policy ${policy.id}@${policy.version} requires signed decisions; an unsigned cancel is refused (cancel from an authenticated connection)`,
        false,
      );
    }
    if (!policy.approvers.allowUnauthenticated && authUser === undefined) {
      return refusal(
        "SIGNATURE_REQUIRED",
        `policy ${policy.id}@${policy.version} does not accept self-declared ids; an unauthenticated cancel naming ${d.by.id} is refused (cancel from an authenticated connection)`,
        false,
      );
    }
  }
  if (d.envelopeHash !== envelopeHash) {
    const stale = a.supersededHashes.includes(d.envelopeHash);
    return refusal(
      stale ? "STALE_REVISION" : "HASH_MISMATCH",
      `expected envelopeHash ${envelopeHash}; the ${d.type} names ${d.envelopeHash}`,
      d.type === "cancel",
    );
  }
  if (d.nonce !== envelope.nonce)
    return refusal(
      "NONCE_MISMATCH",
      `expected the nonce of revision ${envelope.revision}; the ${d.type} carries another`,
      d.type === "cancel",
    );
  if (d.type === "expire" && now.getTime() < Date.parse(envelope.expiresAt)) {
    return refusal(
      "NOT_EXPIRED",
      `the approval is open until ${envelope.expiresAt}; it is now ${now.toISOString()}`,
      false,
    );
  }
  const group = policy.escalationGroup;
  const escalatable = d.type === "expire" && !!group && !a.escalatedTo;
  // Escalated only to a group with someone in it who may decide every operation here.
  const escalate = escalatable && escalationApprovers(policy, group!, operations).length > 0;
  const notEscalated =
    escalatable && !escalate
      ? `; not escalated to ${group}: none of its members may decide ${[...new Set(operations)].join(", ")} under policy ${policy.id}@${policy.version}`
      : "";
  const record: DecisionRecord = {
    type: d.type,
    envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    approverId: d.by.id,
    verifiedBy: authUser !== undefined ? "authentication" : "self_declared",
    decidedAt: now.toISOString(),
    acceptedAt: now.toISOString(),
    ...(d.type === "cancel" ? { message: d.reason } : {}),
    raw,
  };
  return { record, ...(escalate ? { escalateTo: group! } : {}), notEscalated };
}

/** How much a decision's identity shows, weakest first. */
const IDENTITY_STRENGTH: Record<VerifiedBy, number> = { self_declared: 0, authentication: 1, signature: 2 };

/** A change set's approval as the journal holds it: the set, its hash, each member's envelope in order. */
export interface SetAnswered {
  set: ChangeSet;
  setHash: string;
  members: Array<{ actionId: string; envelope: Envelope }>;
}

/** The next revision of a change set decided in part: kept actions, each choice, whether it runs at once. */
export interface SetPlanDraft {
  actions: Array<{
    actionId: string;
    operation: OperationName;
    taskId: number;
    fields: Record<string, unknown>;
    names?: NameResolution[];
  }>;
  perAction: Array<{ actionId: string; type: "approve" | "reject" | "edit"; message?: string }>;
  runWithoutReapproval: boolean;
}

/** An accepted decision on a change set: all approved, all rejected (with feedback), or in part (an edit). */
export interface SetJudgement {
  type: "approve" | "reject" | "edit";
  record: DecisionRecord;
  /** Each rejection's feedback, prefixed with its action's id when decided action by action. */
  messages: string[];
  setPlan?: SetPlanDraft;
}

/**
 * The shape every change-set decision must have before anything else is judged: one approver for all
 * of them, and either one decision for the whole set or one per action, each naming its action once.
 */
export function setShapeProblem(
  decisions: readonly unknown[],
  setIds: readonly string[],
): DecisionRefusal | null {
  const approverIds = decisions.map(claimedApprover);
  if (approverIds.some((id) => id !== approverIds[0]))
    return refusal(
      "MALFORMED",
      `every decision of one change set comes from one approver; got ${approverIds.map((id) => JSON.stringify(id)).join(", ")}`,
      false,
    );
  const ids = decisions.map((d) => (d as { actionId?: unknown } | null)?.actionId);
  if (decisions.length > 1 || ids[0] !== undefined) {
    const named = ids.filter((id): id is string => typeof id === "string");
    const complete =
      named.length === decisions.length &&
      new Set(named).size === named.length &&
      named.length === setIds.length &&
      setIds.every((id) => named.includes(id));
    if (!complete) {
      return refusal(
        "MALFORMED",
        `decide a change set as a whole (one decision without actionId) or every action by its id, each once (${setIds.join(", ")}); got ${ids.map((id) => (id === undefined ? "(no actionId)" : JSON.stringify(id))).join(", ")}`,
        false,
      );
    }
  }
  return null;
}

/** Whether a caller may decide this change set (every operation it covers): why not, or null. */
export function setEntitlementProblem(
  a: Answered,
  s: SetAnswered,
  judge: Judge,
  decisions: readonly unknown[],
): string | null {
  const types = decisions.map((d) => (d as { type?: unknown } | null)?.type);
  const operations = [...new Set(s.members.map((x) => x.envelope.operation))];
  return entitlementProblem(
    a,
    judge,
    claimedApprover(decisions[0]),
    types.includes("approve") ? "approve" : types[0],
    operations,
  );
}

/**
 * A change set's decisions, each validated against the set (its hash, nonce, and the action it names);
 * the first that fails is the refusal. Accepted: the record, and for a set decided in part the plan
 * of its next revision, which runs at once only when nothing was edited and the policy lets every
 * approved action's class run after a partial approval (partialApprovalForecast).
 */
export function judgeSetDecisions(
  a: Answered,
  s: SetAnswered,
  decisions: readonly unknown[],
  judge: Judge,
  notEntitled: string | null,
  people: NameResolution[],
  raw: unknown,
): DecisionRefusal | SetJudgement {
  const { set, setHash } = s;
  const setIds = set.actions.map((x) => x.actionId);
  const subject = subjectOfSet(
    set,
    s.members.map((x) => x.envelope),
  );
  const ctx = decisionContext(a, setHash, judge, people);
  const results: Array<Extract<DecisionValidation, { ok: true }>> = [];
  for (const d of decisions) {
    const r = validateDecisionFor(subject, d, ctx);
    if (!r.ok) {
      const which = (d as { actionId?: unknown } | null)?.actionId;
      // As for one envelope: only an established identity's refusals count (every decision of the set from it).
      return refusalOf(
        r,
        DecisionSchema.safeParse(d).success,
        notEntitled,
        () => identitiesShown(decisions, a, judge),
        typeof which === "string" ? `${which}: ` : "",
      );
    }
    results.push(r);
  }
  if (notEntitled) return refusal("APPROVER_NOT_ALLOWED", notEntitled, false);

  const head = results[0]!;
  const perAction = results.map((r, i) => ({
    actionId: r.decision.actionId ?? set.actions[i]!.actionId,
    type: r.decision.type,
    ...(r.decision.type === "reject" && r.decision.message ? { message: r.decision.message } : {}),
  }));
  const whole = results.length === 1 && head.decision.actionId === undefined;
  const allOf = (t: string) => results.every((r) => r.decision.type === t);
  const messages = results
    .map((r) =>
      r.decision.type === "reject" && r.decision.message
        ? `${r.decision.actionId ? `${r.decision.actionId}: ` : ""}${r.decision.message}`
        : "",
    )
    .filter(Boolean);
  const type = allOf("approve") ? "approve" : allOf("reject") ? "reject" : "edit";
  // An override is applied to an approval, which need not be the first decision (a1 rejected, a2 approved).
  const override = results.find((r) => r.override)?.override;
  // The record claims only what every decision shows: a signed a1 does not make an unsigned a2 signed.
  const weakest = results.reduce((w, r) =>
    IDENTITY_STRENGTH[r.identity.verifiedBy] < IDENTITY_STRENGTH[w.identity.verifiedBy] ? r : w,
  );
  const record: DecisionRecord = {
    type,
    envelopeHash: setHash,
    nonce: set.nonce,
    revision: set.revision,
    approverId: head.identity.approverId,
    verifiedBy: weakest.identity.verifiedBy,
    // Every decision signed: the time the first signature covers; otherwise this server's time. Never an unsigned claim.
    decidedAt: weakest.decidedAt,
    acceptedAt: judge.now.toISOString(),
    ...(whole
      ? {}
      : {
          message: `decided action by action: ${perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}${messages.length ? `; ${messages.join("; ")}` : ""}`,
        }),
    ...(whole && messages.length ? { message: messages.join("; ") } : {}),
    ...(override ? { override } : {}),
    raw,
  };
  if (type !== "edit") return { type, record, messages };
  const kept = results.flatMap((r, i) => {
    const id = r.decision.actionId ?? s.members[i]!.actionId;
    const own = s.members.find((x) => x.actionId === id)!;
    if (r.decision.type !== "approve" && r.decision.type !== "edit") return [];
    const edited = r.decision.type === "edit" ? r.edit!.proposal : undefined;
    return [
      {
        actionId: id,
        operation: own.envelope.operation,
        taskId: edited ? edited.taskId : own.envelope.object.id,
        fields: edited ? edited.fields : own.envelope.params,
        ...(edited && people.length ? { names: people } : {}),
      },
    ];
  });
  // Keep the set's order whatever order the decisions came in.
  kept.sort((x, y) => setIds.indexOf(x.actionId) - setIds.indexOf(y.actionId));
  // Removing rejected actions is not an edit: the kept approvals stand and run at once unless an edit,
  // a dependency on a rejected action (chain rule) or the policy says otherwise (partialApprovalForecast).
  const byId = Object.fromEntries(perAction.map((p) => [p.actionId, p.type]));
  const forecast = partialApprovalForecast(s.members, byId, judge.policy.partialExecution);
  return {
    type,
    record,
    messages,
    setPlan: { actions: kept, perAction, runWithoutReapproval: forecast.runsAtOnce },
  };
}
