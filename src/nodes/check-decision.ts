import { HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import { getDeps, type Deps } from "../runtime/deps.js";
import { allowedApprovers, DecisionSchema, typedNamesIn, validateDecision, type NameResolution } from "../envelope/index.js";
import { ResumeSchema, SystemDecisionSchema, type SystemDecision } from "../hitl/contract.js";
import type { DecisionRecord, Refusal } from "../hitl/records.js";
import { decisionAcceptedEntry, decisionRefusedEntry } from "../hitl/audit-records.js";
import { DecisionNotAcceptedError } from "../errors.js";
import type { ActionProgress, ActionRow } from "../store/action-machine.js";
import { closeAction, mirrorOf, noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { boundedForEvidence, checkBounds, isOutOfBounds } from "../hitl/bounds.js";
import { resolveNames } from "../hitl/people.js";

/**
 * Deterministic validation of the human's answer against the action the journal registered — its
 * envelope, hash, nonce, scope, escalation group — never against graph state: exact hash, nonce,
 * entitled approver, expiry by this server's clock, single use, signature when required. The nonce is
 * consumed and the action moved to `decided` in one journal transaction, so a replayed or forked
 * checkpoint can never spend the same approval twice.
 *
 * A decision from someone who may not decide this approval is refused and audited, but it never
 * ends, expires or uses up the approval: only entitled callers' refusals count toward the budget.
 */
export async function checkDecision(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
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
    const base: Update = { refusals: [refusal], pendingDecision: null, decision: null, ...mirrorOf(row) };
    // Only an entitled caller can close the approval by a refused decision; anyone else is ignored.
    if (counted && code === "EXPIRED") return { ...base, ...(await closeAction(deps, row, "NOT_EXECUTED", "APPROVAL_EXPIRED", reason)) };
    if (counted && row.progress.refusalsCounted >= deps.config.limits.maxRefusedDecisions) {
      return {
        ...base,
        ...(await closeAction(deps, row, "NOT_EXECUTED", "TOO_MANY_REFUSED_DECISIONS", `${row.progress.refusalsCounted} decisions refused for this envelope; last: ${code}: ${reason}`)),
      };
    }
    return base;
  };

  if (!bounds.ok) return refuse("MALFORMED", `the resume value was not read: ${bounds.reason}`, false);
  const outer = ResumeSchema.safeParse(incoming);
  if (!outer.success) {
    return refuse("MALFORMED", `expected {"decisions":[<one decision>]}; got ${JSON.stringify(incoming)?.slice(0, 500)}: ${outer.error.issues[0]?.message}`, false);
  }
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
  const result = validateDecision(envelope, candidate, {
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
  });
  if (!result.ok) {
    // Malformed in shape, or bound to another envelope: said as that. Anything else from a caller
    // who may not decide is, first of all, not theirs to decide.
    if (notEntitled && !BINDING_CODES.has(result.code) && DecisionSchema.safeParse(candidate).success) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);
    return refuse(result.code, result.reason, notEntitled === null);
  }
  if (notEntitled) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);

  const d = result.decision;
  const decidedAt = ("decidedAt" in d && d.decidedAt) || now.toISOString();
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
  const decided = await decide(deps, action, journalDecision);
  if ("update" in decided) return decided.update;
  await deps.audit.append(decisionAcceptedEntry(envelope, envelopeHash, record, people));
  const base: Update = { decision: record, pendingDecision: null, ...mirrorOf(decided.row) };
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

/** Refusals about which envelope a decision answers; reported as such whoever sent the decision. */
const BINDING_CODES: ReadonlySet<string> = new Set(["HASH_MISMATCH", "STALE_REVISION", "NONCE_MISMATCH"]);

/**
 * Whether this caller may decide this approval at all. Returns why not, or null. Escalation limits
 * approving to the group's members; an authenticated caller may only speak for themselves.
 */
function entitlementProblem(deps: Deps, action: ActionRow, approverId: string, type: unknown, authUser: string | undefined): string | null {
  if (authUser !== undefined && authUser !== approverId) {
    return `the request is authenticated as ${authUser}, but the decision names approver ${approverId}`;
  }
  const allowed = allowedApprovers(deps.policy, action.envelope.operation);
  if (!allowed.has(approverId)) {
    return `${approverId} may not decide ${action.envelope.operation} under policy ${deps.policy.id}@${deps.policy.version}; allowed: ${[...allowed].join(", ") || "nobody"}`;
  }
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
async function decide(deps: Deps, action: ActionRow, decision: NonNullable<ActionProgress["decision"]>): Promise<{ row: ActionRow } | { update: Update }> {
  const claim = await deps.journal.decideAction(action.envelopeHash, {
    threadId: action.threadId,
    envelopeHash: action.envelopeHash,
    nonce: action.envelope.nonce,
    revision: action.revision,
    decisionType: decision.type,
    approverId: decision.approverId,
    decidedAt: decision.decidedAt,
  }, decision);
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
 * and is refused unsigned when the policy requires signatures; an expiry is honoured only when this
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
): Promise<Update> {
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  const now = deps.clock();
  if (d.type === "cancel") {
    const allowed = allowedApprovers(deps.policy, envelope.operation);
    if (authUser !== undefined && authUser !== d.by.id) return refuse("APPROVER_NOT_ALLOWED", `the request is authenticated as ${authUser}, but the cancel names ${d.by.id}`, false);
    if (d.by.id !== envelope.requestedBy && !allowed.has(d.by.id)) {
      return refuse("APPROVER_NOT_ALLOWED", `${d.by.id} may not cancel this approval: only the requester (${envelope.requestedBy}) or an approver may`, false);
    }
    if (deps.policy.requireSignature && authUser === undefined) {
      return refuse("SIGNATURE_REQUIRED", `policy ${deps.policy.id}@${deps.policy.version} requires signed decisions; an unsigned cancel is refused (cancel from an authenticated connection)`, true);
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
  const escalate = d.type === "expire" && !!group && !action.escalatedTo;
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
  const decided = await decide(deps, action, { ...record, ...(escalate ? { escalateTo: group! } : {}) });
  if ("update" in decided) return decided.update;
  await deps.audit.append(decisionAcceptedEntry(envelope, envelopeHash, record));
  const base: Update = { decision: record, pendingDecision: null, ...mirrorOf(decided.row) };
  if (d.type === "cancel") return { ...base, ...(await closeAction(deps, decided.row, "NOT_EXECUTED", "CANCELLED", `cancelled by ${d.by.id}: ${d.reason}`)) };
  if (escalate) return { ...base, escalatedTo: group! };
  return {
    ...base,
    ...(await closeAction(
      deps,
      decided.row,
      "NOT_EXECUTED",
      "APPROVAL_EXPIRED",
      `no decision before ${envelope.expiresAt}; closed by ${d.by.id}${action.escalatedTo ? ` after escalation to ${action.escalatedTo}` : ""}`,
    )),
    rejections: state.rejections,
  };
}
