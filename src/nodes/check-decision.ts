import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import type { Deps } from "../runtime/deps.js";
import { depsOf } from "../runtime/run-deps.js";
import { approverNotAllowed, DecisionSchema, partialApprovalForecast, escalationApprovers, subjectOfSet, typedNamesIn, validateDecision, validateDecisionFor, type DecisionContext, type NameResolution } from "../envelope/index.js";
import { ResumeSchema, SystemDecisionSchema, type SystemDecision } from "../hitl/contract.js";
import type { DecisionRecord, Refusal } from "../envelope/records.js";
import { decisionAcceptedEntry, decisionRefusedEntry } from "../hitl/audit-records.js";
import type { AuditEntry } from "../store/audit.js";
import { DecisionNotAcceptedError } from "../errors.js";
import type { ActionProgress, ActionRow, SetPlan } from "../store/action-machine.js";
import { closeAction, noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { registeredFor, viewOf } from "../hitl/thread-view.js";
import { boundedForEvidence, checkBounds, isOutOfBounds } from "../hitl/bounds.js";
import { resolveNames } from "../hitl/people.js";
import { identityEstablished } from "../envelope/decision.js";
import { decisionFromClient, howToDecide } from "../hitl/text-decision.js";

/**
 * Deterministic validation of the human's answer against the action the journal registered — its
 * envelope, hash, nonce, scope, escalation group — never against graph state: exact hash, nonce,
 * entitled approver, expiry by this server's clock, single use, signature when required. The nonce is
 * consumed and the action moved to `decided` in one journal transaction, so a replayed or forked
 * checkpoint can never spend the same approval twice.
 *
 * A decision from someone who may not decide this approval is refused and audited, but it never
 * ends, expires or uses up the approval: only refusals of entitled callers whose identity is
 * established (authenticated, a valid signature, or self-declared where the policy accepts that)
 * count toward the budget. A decision that merely names an entitled approver counts for nothing.
 */
export async function checkDecision(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "check_decision", state);
  if (refused) return { ...refused, pendingDecision: null };
  const action = gate.action!;
  await noteStateDrift(deps, gate, "check_decision", state);
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  const now = deps.clock();
  const authUser = authenticatedIdentity(config.configurable);
  const incoming: unknown = state.pendingDecision;
  // await_approval admitted only a summary of a value past the bounds; anything else is checked here too.
  const bounds = isOutOfBounds(incoming) ? { ok: false as const, reason: incoming.outOfBounds } : checkBounds(incoming);
  const raw = isOutOfBounds(incoming) ? incoming.evidence : boundedForEvidence(incoming, bounds);

  // Names an edit typed for user fields (RESPONSIBLE_ID "Bob Smith") and what user.get resolved them to.
  let people: NameResolution[] = [];
  const refuse = async (code: string, reason: string, counted: boolean): Promise<Update> => {
    const at = now.toISOString();
    const row = (await deps.journal.noteRefusal(envelopeHash, { code, reason, at }, counted)) ?? action;
    const refusal: Refusal = { code, reason, at, envelopeHash, raw };
    await deps.audit.append(decisionRefusedEntry(envelope, envelopeHash, refusal, row.progress.refusalsSeen, people));
    // Every refusal is answered in the conversation too: chat clients show no interrupt field, and a
    // button's refusal would otherwise be a passing toast. It names exactly what would decide.
    const answer = (ended: string | undefined) =>
      new AIMessage(`Decision refused (${code}): ${reason}. ${ended ?? `Nothing was approved or written; the approval is still waiting. ${howToDecide(bound.hash, bound.nonce, authUser)}`}`);
    const base: Update = { refusals: [refusal], pendingDecision: null, decision: null, ...registeredFor(viewOf({ action: row }), state) };
    // Only an entitled caller can close the approval by a refused decision; anyone else is ignored.
    if (counted && code === "EXPIRED") return { ...base, messages: [answer("The approval has expired and the run ended; nothing was written.")], ...(await closeAction(deps, row, "NOT_EXECUTED", "APPROVAL_EXPIRED", reason)) };
    if (counted && row.progress.refusalsCounted >= deps.config.limits.maxRefusedDecisions) {
      return {
        ...base,
        messages: [answer(`Refused decisions for this approval reached the limit (${row.progress.refusalsCounted}): the run ended and nothing was written.`)],
        ...(await closeAction(deps, row, "NOT_EXECUTED", "TOO_MANY_REFUSED_DECISIONS", `${row.progress.refusalsCounted} decisions refused for this envelope; last: ${code}: ${reason}`)),
      };
    }
    return { ...base, messages: [answer(undefined)] };
  };
  // What a decision for this pause names: a change set's hash and nonce, or the envelope's.
  const bound = action.set && gate.members ? { hash: action.set.setHash, nonce: action.set.set.nonce } : { hash: envelopeHash, nonce: envelope.nonce };

  if (!bounds.ok) return refuse("MALFORMED", `the resume value was not read: ${bounds.reason}`, false);
  // A chat message or an Agent Inbox response is read as the decision its text holds (src/hitl/text-decision.ts).
  const fromClient = decisionFromClient(incoming, authUser);
  if ("refused" in fromClient) return refuse(fromClient.refused.code, fromClient.refused.reason, false);
  const outer = ResumeSchema.safeParse(fromClient.value);
  if (!outer.success) {
    return refuse("MALFORMED", `expected {"decisions":[<one decision>]}; got ${JSON.stringify(fromClient.value)?.slice(0, 500)}: ${outer.error.issues[0]?.message}`, false);
  }
  if (action.set && gate.members) return setDecision(deps, state, action, gate.members, outer.data.decisions, authUser, raw, refuse);
  if (outer.data.decisions.length !== 1) return refuse("MALFORMED", `exactly one decision per approval request; got ${outer.data.decisions.length}`, false);
  const candidate = outer.data.decisions[0];
  const system = SystemDecisionSchema.safeParse(candidate);
  if (system.success) return systemDecision(deps, state, action, system.data, authUser, raw, refuse);

  // Who may decide this approval at all. The binding is still checked first (a decision for the wrong
  // envelope is refused as that, whoever sent it), but nothing a non-entitled caller sends counts
  // toward the refusal budget or can end the approval (not even a claim that it expired, which is
  // judged by this server's clock anyway).
  const claimedId = (candidate as { approver?: { id?: unknown } } | null)?.approver?.id;
  const type = (candidate as { type?: unknown } | null)?.type;
  const notEntitled = typeof claimedId === "string" && claimedId !== "" ? entitlementProblem(deps, action, claimedId, type, authUser) : 'a decision names its approver as {"approver": {"id": "…"}}';
  // A person named in an edit is looked up by code (user.get), only for a well-formed edit of this
  // very envelope from someone entitled to decide it; validateDecision then takes the id it resolved to
  // (exactly one active user) or refuses the edit, naming what was searched and the candidates.
  const parsed = DecisionSchema.safeParse(candidate);
  if (notEntitled === null && parsed.success && parsed.data.type === "edit" && parsed.data.envelopeHash === envelopeHash && parsed.data.nonce === envelope.nonce) {
    const typed = typedNamesIn(parsed.data.editedAction.args.fields);
    if (typed.length > 0) people = await resolveNames(deps.tools, typed);
  }
  const result = validateDecision(envelope, candidate, decisionContext(deps, action, envelopeHash, now, authUser, people));
  if (!result.ok) {
    // Malformed in shape, or bound to another envelope: said as that. Anything else from a caller
    // who may not decide is, first of all, not theirs to decide.
    if (notEntitled && !BINDING_CODES.has(result.code) && DecisionSchema.safeParse(candidate).success) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);
    // Counted only when the claimed approver is who they say (an expiry is judged by this server's clock, whoever noticed it).
    const verified = identityEstablished(candidate, { policy: deps.policy, publicKeys: deps.publicKeys, threadId: action.threadId, authenticatedUser: authUser });
    return refuse(result.code, result.reason, notEntitled === null && (verified || result.code === "EXPIRED"));
  }
  if (notEntitled) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);

  const d = result.decision;
  // Signed: the time the signature covers; otherwise this server's time (validateDecision decides which).
  const decidedAt = result.decidedAt;
  const record: DecisionRecord = {
    type: d.type,
    envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    approverId: result.identity.approverId,
    verifiedBy: result.identity.verifiedBy,
    decidedAt,
    acceptedAt: now.toISOString(),
    ...(d.type === "reject" && d.message ? { message: d.message } : {}),
    ...(result.override ? { override: result.override } : {}),
    raw,
  };
  const revise = d.type === "reject" && !!d.message && action.revision <= deps.config.limits.maxRevisions;
  const journalDecision: NonNullable<ActionProgress["decision"]> = {
    ...record,
    ...(d.type === "edit" ? { edit: { taskId: result.edit!.proposal.taskId, fields: result.edit!.proposal.fields, ...(people.length ? { names: people } : {}) } } : {}),
    ...(d.type === "reject" ? { revise } : {}),
  };
  const decided = await decide(deps, action, journalDecision, [decisionAcceptedEntry(envelope, envelopeHash, record, people)]);
  if ("update" in decided) return decided.update;
  const base: Update = { decision: record, pendingDecision: null, ...registeredFor(viewOf({ action: decided.row }), state) };
  switch (d.type) {
    case "approve":
      return base;
    case "reject":
      if (revise) {
        // Feedback goes back to the model; whatever it proposes next is a new envelope with its own approval.
        return { ...base, proposal: null, rejections: state.rejections + 1, messages: [new HumanMessage(`The reviewer rejected the proposal: ${d.message}. Propose a revised change or stop.`)] };
      }
      return {
        ...base,
        ...(await closeAction(
          deps,
          decided.row,
          "NOT_EXECUTED",
          "REJECTED_BY_HUMAN",
          `rejected by ${record.approverId}${d.message ? `: ${d.message} (revision limit of ${deps.config.limits.maxRevisions} reached)` : " (no message)"}`,
        )),
      };
    case "edit":
      return { ...base, proposal: { ...journalDecision.edit!, rationale: `edited by ${record.approverId}`, source: "human_edit" } };
    default: {
      const never: never = d;
      throw new Error(`unhandled decision ${JSON.stringify(never)}`);
    }
  }
}

type Refuse = (code: string, reason: string, counted: boolean) => Promise<Update>;

/** What a decision is validated against: the journal's row (its scope, earlier revisions), this server's clock and keys. */
function decisionContext(deps: Deps, action: ActionRow, envelopeHash: string, now: Date, authUser: string | undefined, people: NameResolution[]): DecisionContext {
  return {
    now,
    policy: deps.policy,
    threadId: action.threadId,
    envelopeHash,
    // The action is `registered` (the gate checked), so its nonce has not been spent.
    nonceConsumed: false,
    supersededHashes: action.supersededHashes,
    publicKeys: deps.publicKeys,
    scope: action.scope,
    ...(authUser ? { authenticatedUser: authUser } : {}),
    people,
  };
}

/**
 * A decision on a change set: one for the whole set (approve or reject; cancel and expire too), or one
 * per action, each naming its action by id, all from one approver and all bound to the set's hash and
 * nonce. All approved: every action is decided in one journal transaction and the chain runs. All
 * rejected: the set ends (or goes back to the model with the feedback). Otherwise the approved and
 * edited actions become the next revision (build_envelope), which runs at once only when nothing was
 * edited and the policy lets every approved action's class run after a partial approval; else it is
 * shown again.
 */
async function setDecision(
  deps: Deps,
  state: State,
  action: ActionRow,
  members: ActionRow[],
  decisions: unknown[],
  authUser: string | undefined,
  raw: unknown,
  refuse: Refuse,
): Promise<Update> {
  const m = action.set!;
  const set = m.set;
  const setHash = m.setHash;
  const now = deps.clock();
  // The set as one approval: its hash and nonce, its earliest expiry, every operation it covers.
  const asOne: ActionRow = { ...action, envelopeHash: setHash, revision: set.revision, envelope: { ...action.envelope, nonce: set.nonce, expiresAt: set.expiresAt, revision: set.revision } };
  const operations = [...new Set(members.map((x) => x.envelope.operation))];
  const first = decisions[0];
  const system = decisions.length === 1 ? SystemDecisionSchema.safeParse(first) : undefined;
  if (system?.success) return systemDecision(deps, state, asOne, system.data, authUser, raw, refuse, members);

  const approverIds = decisions.map((d) => (d as { approver?: { id?: unknown } } | null)?.approver?.id);
  const claimedId = approverIds[0];
  if (approverIds.some((id) => id !== claimedId)) return refuse("MALFORMED", `every decision of one change set comes from one approver; got ${approverIds.map((id) => JSON.stringify(id)).join(", ")}`, false);
  const types = decisions.map((d) => (d as { type?: unknown } | null)?.type);
  const notEntitled = typeof claimedId === "string" && claimedId !== "" ? entitlementProblem(deps, action, claimedId, types.includes("approve") ? "approve" : types[0], authUser, operations) : 'a decision names its approver as {"approver": {"id": "…"}}';

  const ids = decisions.map((d) => (d as { actionId?: unknown } | null)?.actionId);
  const setIds = set.actions.map((a) => a.actionId);
  if (decisions.length > 1 || ids[0] !== undefined) {
    const named = ids.filter((id): id is string => typeof id === "string");
    const complete = named.length === decisions.length && new Set(named).size === named.length && named.length === setIds.length && setIds.every((id) => named.includes(id));
    if (!complete) {
      return refuse("MALFORMED", `decide a change set as a whole (one decision without actionId) or every action by its id, each once (${setIds.join(", ")}); got ${ids.map((id) => (id === undefined ? "(no actionId)" : JSON.stringify(id))).join(", ")}`, false);
    }
  }

  // Names typed in edits (RESPONSIBLE_ID "Bob Smith"), looked up only for an entitled approver's edits of this very set.
  let people: NameResolution[] = [];
  if (notEntitled === null) {
    const typed = decisions.flatMap((d) => {
      const p = DecisionSchema.safeParse(d);
      return p.success && p.data.type === "edit" && p.data.envelopeHash === setHash && p.data.nonce === set.nonce ? typedNamesIn(p.data.editedAction.args.fields) : [];
    });
    if (typed.length > 0) people = await resolveNames(deps.tools, typed);
  }
  const subject = subjectOfSet(set, members.map((x) => x.envelope));
  const ctx = decisionContext(deps, action, setHash, now, authUser, people);
  const results: Array<Extract<ReturnType<typeof validateDecisionFor>, { ok: true }>> = [];
  // As for one envelope: only an established identity's refusals count (every decision of the set from
  // it). Judged only for a refusal: it verifies the signatures again, which an accepted set need not.
  const verified = () => decisions.every((d) => identityEstablished(d, { policy: deps.policy, publicKeys: deps.publicKeys, threadId: action.threadId, authenticatedUser: authUser }));
  for (const d of decisions) {
    const r = validateDecisionFor(subject, d, ctx);
    if (!r.ok) {
      if (notEntitled && !BINDING_CODES.has(r.code) && DecisionSchema.safeParse(d).success) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);
      const which = (d as { actionId?: unknown } | null)?.actionId;
      return refuse(r.code, `${typeof which === "string" ? `${which}: ` : ""}${r.reason}`, notEntitled === null && (r.code === "EXPIRED" || verified()));
    }
    results.push(r);
  }
  if (notEntitled) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);

  const head = results[0]!;
  const perAction = results.map((r, i) => ({
    actionId: r.decision.actionId ?? set.actions[i]!.actionId,
    type: r.decision.type,
    ...(r.decision.type === "reject" && r.decision.message ? { message: r.decision.message } : {}),
  }));
  const whole = results.length === 1 && head.decision.actionId === undefined;
  const allOf = (t: string) => results.every((r) => r.decision.type === t);
  // Signed: the time the (first) signature covers; otherwise this server's time. Never an unsigned claim.
  const decidedAt = head.decidedAt;
  const messages = results.map((r) => (r.decision.type === "reject" && r.decision.message ? `${r.decision.actionId ? `${r.decision.actionId}: ` : ""}${r.decision.message}` : "")).filter(Boolean);
  const type = allOf("approve") ? "approve" : allOf("reject") ? "reject" : "edit";
  const record: DecisionRecord = {
    type,
    envelopeHash: setHash,
    nonce: set.nonce,
    revision: set.revision,
    approverId: head.identity.approverId,
    verifiedBy: head.identity.verifiedBy,
    decidedAt,
    acceptedAt: now.toISOString(),
    ...(whole ? {} : { message: `decided action by action: ${perAction.map((p) => `${p.actionId} ${p.type}`).join(", ")}${messages.length ? `; ${messages.join("; ")}` : ""}` }),
    ...(whole && messages.length ? { message: messages.join("; ") } : {}),
    ...(head.override ? { override: head.override } : {}),
    raw,
  };
  const revise = type === "reject" && messages.length > 0 && action.revision <= deps.config.limits.maxRevisions;
  let setPlan: SetPlan | undefined;
  if (type === "edit") {
    const kept = results.flatMap((r, i) => {
      const member = members[i]!;
      const id = r.decision.actionId ?? member.set!.actionId;
      const own = members.find((x) => x.set?.actionId === id)!;
      if (r.decision.type === "approve") return [{ actionId: id, operation: own.envelope.operation, taskId: own.envelope.object.id, fields: own.envelope.params }];
      if (r.decision.type === "edit") return [{ actionId: id, operation: own.envelope.operation, taskId: r.edit!.proposal.taskId, fields: r.edit!.proposal.fields, ...(people.length ? { names: people } : {}) }];
      return [];
    });
    // Keep the set's order whatever order the decisions came in.
    kept.sort((a, b) => setIds.indexOf(a.actionId) - setIds.indexOf(b.actionId));
    // Removing rejected actions is not an edit: the kept approvals stand and run at once unless an edit,
    // a dependency on a rejected action (chain rule) or the policy says otherwise (partialApprovalForecast).
    const byId = Object.fromEntries(perAction.map((p) => [p.actionId, p.type]));
    const forecast = partialApprovalForecast(members.map((x) => ({ actionId: x.set!.actionId, envelope: x.envelope })), byId, deps.policy.partialExecution);
    setPlan = { actions: kept, perAction, runWithoutReapproval: forecast.runsAtOnce };
  }
  const journalDecision: NonNullable<ActionProgress["decision"]> = { ...record, ...(type === "reject" ? { revise } : {}), ...(setPlan ? { setPlan } : {}) };
  const decided = await decide(deps, asOne, journalDecision, [decisionAcceptedEntry(action.envelope, setHash, record, people)], members);
  if ("update" in decided) return decided.update;
  const base: Update = { decision: record, pendingDecision: null, ...registeredFor(viewOf({ action: decided.row }), state) };
  if (type === "approve" || type === "edit") return base;
  if (revise) {
    return { ...base, proposal: null, rejections: state.rejections + 1, messages: [new HumanMessage(`The reviewer rejected the change set: ${messages.join("; ")}. Propose a revised change or stop.`)] };
  }
  return { ...base, ...(await closeAction(deps, decided.row, "NOT_EXECUTED", "REJECTED_BY_HUMAN", `change set rejected by ${record.approverId}${messages.length ? `: ${messages.join("; ")}` : " (no message)"}`)) };
}

/** Refusals about which envelope a decision answers; reported as such whoever sent the decision. */
const BINDING_CODES: ReadonlySet<string> = new Set(["HASH_MISMATCH", "STALE_REVISION", "NONCE_MISMATCH"]);

/**
 * Whether this caller may decide this approval at all. Returns why not, or null. Escalation limits
 * approving to the group's members; an authenticated caller may only speak for themselves.
 */
function entitlementProblem(deps: Deps, action: ActionRow, approverId: string, type: unknown, authUser: string | undefined, operations: string[] = [action.envelope.operation]): string | null {
  if (authUser !== undefined && authUser !== approverId) {
    return `the request is authenticated as ${authUser}, but the decision names approver ${approverId}`;
  }
  const notAllowed = approverNotAllowed(deps.policy, approverId, operations);
  if (notAllowed) return notAllowed;
  if (action.escalatedTo && type === "approve") {
    const members = deps.policy.approvers.groups[action.escalatedTo] ?? [];
    if (!members.includes(approverId)) {
      return `this approval was escalated to group ${action.escalatedTo} (${members.join(", ") || "no members"}); ${approverId} is not in it`;
    }
  }
  return null;
}

/**
 * Claims the nonce and moves the action to `decided`. Losing a race to another process throws, which
 * leaves this run's checkpoint untouched so the winner's record is the only one; an action that moved
 * meanwhile sends this run to `resync`.
 */
/** Claims the decision and appends its audit records (`records`) in the same transaction. */
async function decide(deps: Deps, action: ActionRow, decision: NonNullable<ActionProgress["decision"]>, records: AuditEntry[], members?: ActionRow[]): Promise<{ row: ActionRow } | { update: Update }> {
  const claimOf = {
    threadId: action.threadId,
    envelopeHash: action.envelopeHash,
    nonce: action.envelope.nonce,
    revision: action.revision,
    decisionType: decision.type,
    approverId: decision.approverId,
    decidedAt: decision.decidedAt,
  };
  // A change set: `action` stands for the set (its hash and nonce); every member is decided at once.
  const claim = members
    ? await deps.journal.decideActions(members.map((x) => ({ envelopeHash: x.envelopeHash, decision })), claimOf, records)
    : await deps.journal.decideAction(action.envelopeHash, claimOf, decision, records);
  if (claim.claimed) return { row: claim.row };
  if ("existing" in claim) {
    throw new DecisionNotAcceptedError(
      action.threadId,
      "IN_PROGRESS",
      `ALREADY_CONSUMED: the approval nonce was consumed by a ${claim.existing.decisionType} from ${claim.existing.approverId} at ${claim.existing.decidedAt}`,
    );
  }
  return { update: { needsResync: true, pendingDecision: null } };
}

/**
 * Cancel and expiry: decisions made by the requester or the system rather than an approver, bound to
 * the envelope like any other. A cancel comes from the requester or an approver (never anyone else),
 * and is refused from an unauthenticated caller when the policy requires signatures or does not
 * accept self-declared ids; an expiry is honoured only when this
 * server's clock says the approval has expired. Both consume the nonce.
 */
async function systemDecision(
  deps: Deps,
  state: State,
  action: ActionRow,
  d: SystemDecision,
  authUser: string | undefined,
  raw: unknown,
  refuse: (code: string, reason: string, counted: boolean) => Promise<Update>,
  members?: ActionRow[],
): Promise<Update> {
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  const now = deps.clock();
  // Every operation the approval covers: for a change set, each of its actions'.
  const operations = members ? members.map((m) => m.envelope.operation) : [envelope.operation];
  // Who ends it is recorded as verified by authentication when a caller is authenticated, so it must be that caller.
  if (authUser !== undefined && authUser !== d.by.id) return refuse("APPROVER_NOT_ALLOWED", `the request is authenticated as ${authUser}, but the ${d.type} names ${d.by.id}`, false);
  if (d.type === "cancel") {
    // An approver of the whole approval (as for an approval), or the requester.
    const notAllowed = d.by.id === envelope.requestedBy ? undefined : approverNotAllowed(deps.policy, d.by.id, operations);
    if (notAllowed) {
      return refuse("APPROVER_NOT_ALLOWED", `${d.by.id} may not cancel this approval: only the requester (${envelope.requestedBy}) or an approver may (${notAllowed})`, false);
    }
    // A cancel carries no signature: unless the policy accepts self-declared ids, it must come from an
    // authenticated caller. Refused without counting: the id it names is only a claim.
    if (deps.policy.requireSignature && authUser === undefined) {
      return refuse("SIGNATURE_REQUIRED", `policy ${deps.policy.id}@${deps.policy.version} requires signed decisions; an unsigned cancel is refused (cancel from an authenticated connection)`, false);
    }
    if (!deps.policy.approvers.allowUnauthenticated && authUser === undefined) {
      return refuse("SIGNATURE_REQUIRED", `policy ${deps.policy.id}@${deps.policy.version} does not accept self-declared ids; an unauthenticated cancel naming ${d.by.id} is refused (cancel from an authenticated connection)`, false);
    }
  }
  if (d.envelopeHash !== envelopeHash) {
    const stale = action.supersededHashes.includes(d.envelopeHash);
    return refuse(stale ? "STALE_REVISION" : "HASH_MISMATCH", `expected envelopeHash ${envelopeHash}; the ${d.type} names ${d.envelopeHash}`, d.type === "cancel");
  }
  if (d.nonce !== envelope.nonce) return refuse("NONCE_MISMATCH", `expected the nonce of revision ${envelope.revision}; the ${d.type} carries another`, d.type === "cancel");
  if (d.type === "expire" && now.getTime() < Date.parse(envelope.expiresAt)) {
    return refuse("NOT_EXPIRED", `the approval is open until ${envelope.expiresAt}; it is now ${now.toISOString()}`, false);
  }
  const group = deps.policy.escalationGroup;
  const escalatable = d.type === "expire" && !!group && !action.escalatedTo;
  // Escalated only to a group with someone in it who may decide every operation here.
  const escalate = escalatable && escalationApprovers(deps.policy, group!, operations).length > 0;
  const notEscalated = escalatable && !escalate ? `; not escalated to ${group}: none of its members may decide ${[...new Set(operations)].join(", ")} under policy ${deps.policy.id}@${deps.policy.version}` : "";
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
  const decided = await decide(deps, action, { ...record, ...(escalate ? { escalateTo: group! } : {}) }, [decisionAcceptedEntry(envelope, envelopeHash, record)], members);
  if ("update" in decided) return decided.update;
  const base: Update = { decision: record, pendingDecision: null, ...registeredFor(viewOf({ action: decided.row }), state) };
  if (d.type === "cancel") return { ...base, ...(await closeAction(deps, decided.row, "NOT_EXECUTED", "CANCELLED", `cancelled by ${d.by.id}: ${d.reason}`)) };
  if (escalate) return { ...base, escalatedTo: group! };
  return {
    ...base,
    ...(await closeAction(
      deps,
      decided.row,
      "NOT_EXECUTED",
      "APPROVAL_EXPIRED",
      `no decision before ${envelope.expiresAt}; closed by ${d.by.id}${action.escalatedTo ? ` after escalation to ${action.escalatedTo}` : ""}${notEscalated}`,
    )),
    rejections: state.rejections,
  };
}
