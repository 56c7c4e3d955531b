import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { allowedApprovers, validateDecision, type Envelope } from "../envelope/index.js";
import { ResumeSchema, SystemDecisionSchema, type SystemDecision } from "../hitl/contract.js";
import { HumanMessage } from "@langchain/core/messages";
import { deriveScope } from "../hitl/scope.js";
import type { DecisionRecord, Refusal } from "../hitl/records.js";
import { decisionAcceptedEntry, decisionRefusedEntry } from "../hitl/audit-records.js";
import { DecisionNotAcceptedError } from "../errors.js";
import type { DecisionClaim } from "../store/journal.js";
import { endRun } from "./finish-with.js";

/**
 * Deterministic validation of the human's answer: exact hash, nonce, approver, expiry, single use,
 * signature when required. The nonce is consumed in the journal (outside graph state) before anything
 * else happens, so a replayed or forked checkpoint can never spend the same approval twice.
 */
export async function checkDecision(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const envelope = state.envelope!;
  const envelopeHash = state.envelopeHash!;
  const now = deps.clock();
  const raw = state.pendingDecision;
  const refuse = async (code: string, reason: string): Promise<Update> => {
    const refusal: Refusal = { code, reason, at: now.toISOString(), envelopeHash, raw };
    await deps.audit.append(decisionRefusedEntry(envelope, envelopeHash, refusal, state.refusals.length + 1));
    const forThis = state.refusals.filter((r) => r.envelopeHash === envelopeHash).length + 1;
    if (code === "EXPIRED") {
      return { refusals: [refusal], pendingDecision: null, ...endRun("NOT_EXECUTED", "APPROVAL_EXPIRED", reason) };
    }
    if (code === "ALREADY_CONSUMED") {
      // Only a replayed or forked checkpoint gets here: this envelope's nonce is spent for good.
      return { refusals: [refusal], pendingDecision: null, ...endRun("NOT_EXECUTED", "APPROVAL_ALREADY_USED", reason) };
    }
    if (forThis >= deps.config.limits.maxRefusedDecisions) {
      return {
        refusals: [refusal],
        pendingDecision: null,
        ...endRun("NOT_EXECUTED", "TOO_MANY_REFUSED_DECISIONS", `${forThis} decisions refused for this envelope; last: ${code}: ${reason}`),
      };
    }
    return { refusals: [refusal], pendingDecision: null, decision: null };
  };

  const outer = ResumeSchema.safeParse(raw);
  if (!outer.success) {
    return refuse("MALFORMED", `expected {"decisions":[<one decision>]}; got ${JSON.stringify(raw)?.slice(0, 500)}: ${outer.error.issues[0]?.message}`);
  }
  const candidate = outer.data.decisions[0];
  const system = SystemDecisionSchema.safeParse(candidate);
  if (system.success) return systemDecision(state, system.data, refuse);
  const nonce = (candidate as { nonce?: unknown } | null)?.nonce;
  const consumed = typeof nonce === "string" ? await deps.journal.findClaim(nonce) : undefined;
  // This node may have claimed the nonce and died before its checkpoint was written; the thread still
  // shows the approval waiting and the approver decides again. Their own claim is recognised (same
  // approver, same kind of decision, same envelope) only while nothing was sent, so a replayed
  // checkpoint after execution still gets ALREADY_CONSUMED, and the journal's write-ahead entry keeps
  // any path to a second send closed.
  const ownEarlierClaim =
    consumed !== undefined && sameDecision(consumed, candidate, envelope, envelopeHash) && !(await deps.journal.findExecution(envelopeHash));
  const authUser = (config.configurable?.["langgraph_auth_user"] as { identity?: string } | undefined)?.identity;
  const result = validateDecision(envelope, candidate, {
    now,
    policy: deps.policy,
    threadId: envelope.runContext.threadId,
    envelopeHash,
    nonceConsumed: consumed !== undefined && !ownEarlierClaim,
    supersededHashes: state.supersededHashes,
    publicKeys: deps.publicKeys,
    scope: deriveScope(state.request, state.scope),
    ...(authUser ? { authenticatedUser: authUser } : {}),
  });
  if (!result.ok) return refuse(result.code, result.reason);
  if (state.escalatedTo && result.decision.type === "approve") {
    const members = deps.policy.approvers.groups[state.escalatedTo] ?? [];
    if (!members.includes(result.identity.approverId)) {
      return refuse(
        "APPROVER_NOT_ALLOWED",
        `this approval was escalated to group ${state.escalatedTo} (${members.join(", ") || "no members"}); ${result.identity.approverId} is not in it`,
      );
    }
  }

  const d = result.decision;
  const decidedAt = ("decidedAt" in d && d.decidedAt) || now.toISOString();
  const claim = ownEarlierClaim
    ? ({ claimed: true } as const)
    : await deps.journal.claimDecision({
        threadId: envelope.runContext.threadId,
        envelopeHash,
        nonce: envelope.nonce,
        revision: envelope.revision,
        decisionType: d.type,
        approverId: result.identity.approverId,
        decidedAt,
      });
  if (!claim.claimed) {
    // Lost a race with another process that consumed this nonce a moment ago. Throwing leaves this
    // run's checkpoint untouched, so the winner's record is the only one.
    throw new DecisionNotAcceptedError(
      envelope.runContext.threadId,
      "IN_PROGRESS",
      `ALREADY_CONSUMED: the approval nonce was consumed by a ${claim.existing.decisionType} from ${claim.existing.approverId} at ${claim.existing.decidedAt}`,
    );
  }

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
  await deps.audit.append(decisionAcceptedEntry(envelope, envelopeHash, record));
  switch (d.type) {
    case "approve":
      return { decision: record, pendingDecision: null };
    case "reject":
      if (d.message && state.rejections < deps.config.limits.maxRevisions) {
        // Feedback goes back to the model; whatever it proposes next is a new envelope with its own approval.
        return {
          decision: record,
          pendingDecision: null,
          proposal: null,
          rejections: state.rejections + 1,
          messages: [new HumanMessage(`The reviewer rejected the proposal: ${d.message}. Propose a revised change or stop.`)],
        };
      }
      return {
        decision: record,
        pendingDecision: null,
        ...endRun(
          "NOT_EXECUTED",
          "REJECTED_BY_HUMAN",
          `rejected by ${record.approverId}${d.message ? `: ${d.message}` : " (no message)"}${d.message ? ` (revision limit of ${deps.config.limits.maxRevisions} reached)` : ""}`,
        ),
      };
    case "edit": {
      const edit = result.edit!.proposal;
      return {
        decision: record,
        pendingDecision: null,
        proposal: { taskId: edit.taskId, fields: edit.fields, rationale: `edited by ${record.approverId}`, source: "human_edit" },
      };
    }
    default: {
      const never: never = d;
      throw new Error(`unhandled decision ${JSON.stringify(never)}`);
    }
  }
}

/** The same approver making the same kind of decision on the same envelope of the same thread. */
function sameDecision(claim: DecisionClaim, candidate: unknown, envelope: Envelope, envelopeHash: string): boolean {
  const c = candidate as { type?: unknown; approver?: { id?: unknown } } | null;
  return (
    claim.threadId === envelope.runContext.threadId &&
    claim.envelopeHash === envelopeHash &&
    claim.decisionType === c?.type &&
    claim.approverId === c?.approver?.id
  );
}

/**
 * Cancel and expiry: decisions made by the requester or the system rather than an approver, bound to
 * the envelope like any other. They consume the nonce, so the approval can never be used afterwards.
 */
async function systemDecision(
  state: State,
  d: SystemDecision,
  refuse: (code: string, reason: string) => Promise<Update>,
): Promise<Update> {
  const deps = await getDeps();
  const envelope = state.envelope!;
  const envelopeHash = state.envelopeHash!;
  const now = deps.clock();
  if (d.envelopeHash !== envelopeHash) return refuse("HASH_MISMATCH", `expected envelopeHash ${envelopeHash}; the ${d.type} names ${d.envelopeHash}`);
  if (d.nonce !== envelope.nonce) return refuse("NONCE_MISMATCH", `expected the nonce of revision ${envelope.revision}; the ${d.type} carries another`);
  if (d.type === "expire" && now.getTime() < Date.parse(envelope.expiresAt)) {
    return refuse("NOT_EXPIRED", `the envelope expires at ${envelope.expiresAt}; it is ${now.toISOString()}`);
  }
  if (d.type === "cancel" && d.by.id !== state.requestedBy && !allowedApprovers(deps.policy, envelope.operation).has(d.by.id)) {
    return refuse("APPROVER_NOT_ALLOWED", `only the requester (${state.requestedBy}) or an allowed approver may cancel; got ${d.by.id}`);
  }
  const claim = await deps.journal.claimDecision({
    threadId: envelope.runContext.threadId,
    envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    decisionType: d.type,
    approverId: d.by.id,
    decidedAt: now.toISOString(),
  });
  if (!claim.claimed) {
    throw new DecisionNotAcceptedError(envelope.runContext.threadId, "IN_PROGRESS", `the nonce was already consumed by a ${claim.existing.decisionType} from ${claim.existing.approverId}`);
  }
  const record: DecisionRecord = {
    type: d.type,
    envelopeHash,
    nonce: envelope.nonce,
    revision: envelope.revision,
    approverId: d.by.id,
    verifiedBy: "self_declared",
    decidedAt: now.toISOString(),
    acceptedAt: now.toISOString(),
    ...(d.type === "cancel" ? { message: d.reason } : {}),
    raw: state.pendingDecision,
  };
  await deps.audit.append(decisionAcceptedEntry(envelope, envelopeHash, record));
  if (d.type === "cancel") {
    return { decision: record, pendingDecision: null, ...endRun("NOT_EXECUTED", "CANCELLED", `cancelled by ${d.by.id}: ${d.reason}`) };
  }
  const group = deps.policy.escalationGroup;
  if (group && !state.escalatedTo) {
    return { decision: record, pendingDecision: null, escalatedTo: group };
  }
  return {
    decision: record,
    pendingDecision: null,
    ...endRun("NOT_EXECUTED", "APPROVAL_EXPIRED", `no decision before ${envelope.expiresAt}; closed by ${d.by.id}${state.escalatedTo ? ` after escalation to ${state.escalatedTo}` : ""}`),
  };
}
