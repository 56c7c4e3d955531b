import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import type { Outcome, ReasonCode } from "../hitl/records.js";
import { runEndedEntry } from "../hitl/audit-records.js";

/**
 * The final record. Early ends already carry their outcome; after a write the outcome comes from
 * verification, with one refinement: a target that refused and whose task shows no change is
 * REJECTED_BY_TARGET rather than a failed verification.
 */
export async function finish(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const finishedAt = deps.clock().toISOString();
  const threadId = state.envelope?.runContext.threadId;
  if (threadId) await deps.journal.closeThreadApprovals(threadId, closingStatus(state));
  const update = finalOutcome(state, finishedAt);
  // Every ending gets its closing audit record, keyed so a re-run of this node cannot add a second.
  const closing = runEndedEntry({ ...state, ...update } as State, {
    threadId: threadId ?? String(config.configurable?.thread_id ?? "unknown"),
    policy: deps.policy,
    at: finishedAt,
  });
  await deps.audit.append(closing);
  return update;
}

function finalOutcome(state: State, finishedAt: string): Update {
  if (state.outcome) return { finishedAt };
  const v = state.verification;
  if (!v && state.decision?.type === "reject") {
    return { outcome: "NOT_EXECUTED", reasonCode: "REJECTED_BY_HUMAN", reason: `rejected by ${state.decision.approverId}: ${state.decision.message ?? ""}; the model proposed no revision`, finishedAt };
  }
  if (!v) {
    const last = state.messages.at(-1);
    const said = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
    return { outcome: "NOT_EXECUTED", reasonCode: "NO_PROPOSAL", reason: `the model ended without proposing a change: ${said.slice(0, 1000)}`, finishedAt };
  }
  let outcome: Outcome = v.verdict;
  let reasonCode: ReasonCode = v.verdict;
  let reason = v.reason;
  if (state.acknowledgement?.status === "ERROR" && v.verdict === "VERIFICATION_FAILED") {
    outcome = "REJECTED_BY_TARGET";
    reasonCode = "REJECTED_BY_TARGET";
    const e = state.acknowledgement.error;
    reason = `the target refused the write (${e?.code ?? e?.kind}: ${e?.description}); ${v.reason}`;
  }
  return { outcome, reasonCode, reason, finishedAt };
}

function closingStatus(state: State) {
  switch (state.reasonCode) {
    case "REJECTED_BY_HUMAN":
      return "rejected" as const;
    case "APPROVAL_EXPIRED":
      return "expired" as const;
    case "CANCELLED":
      return "cancelled" as const;
    default:
      return state.decision?.type === "approve" ? ("approved" as const) : ("closed" as const);
  }
}
