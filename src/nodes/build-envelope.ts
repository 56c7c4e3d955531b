import { randomUUID } from "node:crypto";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { checkProposal, createEnvelope, hashEnvelope, renderCard } from "../envelope/index.js";
import { deriveScope } from "../hitl/scope.js";
import { rawOf, taskFrom } from "../hitl/reads.js";
import { approvalRequestedEntry, proposalDeniedEntry } from "../hitl/audit-records.js";
import { endRun } from "./finish-with.js";

/**
 * Policy and scope first (a denied proposal is never shown for approval), then a baseline read by
 * code — not the model's account of the task — and the frozen, hashed envelope.
 */
export async function buildEnvelope(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const proposal = state.proposal;
  if (!proposal) return endRun("NOT_EXECUTED", "NO_PROPOSAL", "no proposal to build an envelope from");
  const revision = (state.envelope?.revision ?? 0) + 1;
  if (revision > deps.config.limits.maxRevisions + 1) {
    return endRun("NOT_EXECUTED", "TOO_MANY_REVISIONS", `revision ${revision} exceeds the limit of ${deps.config.limits.maxRevisions} revisions`);
  }

  const threadId = String(config.configurable?.thread_id ?? "unknown");
  const scope = deriveScope(state.request, state.scope);
  const verdict = checkProposal(deps.policy, scope, { operation: "update_task", taskId: proposal.taskId, fields: proposal.fields });
  if (!verdict.allowed) {
    const at = deps.clock().toISOString();
    await deps.audit.append(proposalDeniedEntry(state, { threadId, revision, policy: deps.policy, at, code: verdict.code, reasons: verdict.reasons }));
    return endRun("NOT_EXECUTED", "DENIED_BY_POLICY", `${verdict.code}: ${verdict.reasons.join("; ")}`);
  }

  const read = await deps.tools.read("getTask", { taskId: proposal.taskId });
  const task = read.ok ? taskFrom(read.body) : null;
  if (!task) {
    return endRun(
      "NOT_EXECUTED",
      "BASELINE_READ_FAILED",
      `could not read task ${proposal.taskId} to record its baseline: ${JSON.stringify(rawOf(read)).slice(0, 2000)}`,
    );
  }

  const runId = config.runId ?? config.configurable?.run_id;
  const envelope = createEnvelope({
    portal: deps.portal,
    taskId: proposal.taskId,
    params: proposal.fields,
    task,
    requestedBy: state.requestedBy,
    runContext: { threadId, ...(runId ? { runId: String(runId) } : {}) },
    policy: deps.policy,
    now: deps.clock(),
    revision,
    envelopeId: state.envelope?.envelopeId ?? randomUUID(),
    ...(state.envelopeHash ? { previousEnvelopeHash: state.envelopeHash } : {}),
    // Whoever wrote an edited revision may not also approve it.
    ...(proposal.source === "human_edit" && state.decision?.type === "edit" ? { editedBy: state.decision.approverId } : {}),
  });
  const envelopeHash = hashEnvelope(envelope);
  // Keyed by hash, so a re-run of this node cannot register twice.
  if (state.envelopeHash) await deps.journal.setApprovalStatus(state.envelopeHash, state.decision?.type === "expire" ? "expired" : "superseded");
  await deps.journal.registerApproval({
    envelopeHash,
    threadId,
    revision,
    requestedBy: state.requestedBy,
    createdAt: envelope.createdAt,
    expiresAt: envelope.expiresAt,
  });
  const rendered = renderCard(envelope, envelopeHash, "text").text;
  const card = state.escalatedTo
    ? `ESCALATED to group ${state.escalatedTo}: the approval for ${state.envelopeHash} expired unanswered; only members of ${state.escalatedTo} may approve this fresh envelope.\n${rendered}`
    : rendered;
  await deps.audit.append(approvalRequestedEntry(envelope, envelopeHash, card));
  return {
    envelope,
    envelopeHash,
    card,
    supersededHashes: state.envelopeHash ? [...state.supersededHashes, state.envelopeHash] : state.supersededHashes,
    pendingDecision: null,
    decision: null,
  };
}
