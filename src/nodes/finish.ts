import { AIMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps, type Deps } from "../runtime/deps.js";
import type { AcknowledgementRecord, Outcome, ReasonCode } from "../hitl/records.js";
import { runEndedEntry } from "../hitl/audit-records.js";
import type { ActionRow, ClosedRecord } from "../store/action-machine.js";
import { closedUpdate, decisionOf, ensureThread, mirrorOf, noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { invocationOf } from "./execute.js";

/** Reasons a run may give for ending before any envelope existed; nothing was sent in any of them. */
const PRE_ENVELOPE_CODES: ReadonlySet<ReasonCode> = new Set<ReasonCode>(["NO_PROPOSAL", "AGENT_STEP_LIMIT", "INVALID_PROPOSAL", "INVALID_INPUT", "DENIED_BY_POLICY", "BASELINE_READ_FAILED", "TOO_MANY_REFUSED_DECISIONS", "TOO_MANY_REVISIONS", "WRITE_ATTEMPT_REFUSED", "NO_CHANGE", "MODEL_AUTH_FAILED", "MODEL_RATE_LIMITED", "MODEL_UNREACHABLE", "MODEL_REQUEST_REJECTED", "MODEL_SERVER_ERROR", "MODEL_FAILED"]);

/**
 * The final record, derived from the journal alone: a closed action's outcome, or a verified one's
 * verdict (a target that refused and whose task shows no change is REJECTED_BY_TARGET). The thread is
 * closed in the journal (the first close wins) and the closing audit record is built from journal
 * rows, so no state field can make a run VERIFIED. Reached while the journal says the thread is
 * elsewhere (a goto, a waiting approval), it refuses and the run resumes where the journal says.
 */
export async function finish(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "finish", state);
  if (refused) return refused;
  await noteStateDrift(deps, gate, "finish", state);
  const thread = await ensureThread(deps, gate, state);
  const finishedAt = deps.clock().toISOString();
  let action = gate.action;

  let closing: ClosedRecord;
  if (thread.closed) closing = thread.closed;
  else if (action) {
    if (!action.progress.closed) {
      const c = closingOf(action, finishedAt);
      const moved = await deps.journal.moveAction(action.envelopeHash, "closed", { closed: c });
      if (moved.ok) action = moved.row;
      else action = (await deps.journal.getAction(action.envelopeHash)) ?? action;
    }
    closing = action.progress.closed ?? closingOf(action, finishedAt);
  } else {
    closing = preEnvelopeClosing(state, finishedAt);
    if (state.outcome && state.outcome !== "NOT_EXECUTED") {
      closing = { ...closing, reason: `${closing.reason} (state claimed ${state.outcome}, but no action was registered for this thread; nothing was sent)` };
    }
  }
  const closed = (await deps.journal.closeThread(gate.threadId, closing))?.closed ?? closing;

  const entry = action ? await deps.journal.findExecution(action.envelopeHash) : undefined;
  const evidence = {
    ...state,
    requestedBy: thread.requestedBy,
    envelope: action?.envelope ?? null,
    envelopeHash: action?.envelopeHash ?? null,
    decision: decisionOf(action),
    preRead: action?.progress.preRead ?? null,
    invocation: entry ? invocationOf(entry) : null,
    acknowledgement: action?.progress.acknowledgement ?? (entry?.acknowledgement as AcknowledgementRecord | undefined) ?? null,
    verification: action?.progress.verification ?? null,
    outcome: closed.outcome,
    reasonCode: closed.reasonCode,
    reason: closed.reason,
    finishedAt: closed.at,
  } satisfies State;
  // Every ending gets its closing audit record, keyed so a re-run of this node cannot add a second.
  await deps.audit.append(runEndedEntry(evidence, { threadId: gate.threadId, policy: deps.policy, at: closed.at }));
  return {
    ...(action ? mirrorOf(action) : {}),
    messages: chatReport(gate.threadId, evidence),
    decision: evidence.decision,
    preRead: evidence.preRead,
    invocation: evidence.invocation,
    acknowledgement: evidence.acknowledgement,
    verification: evidence.verification,
    ...closedUpdate(closed),
    finishedAt: closed.at,
    needsResync: false,
  };
}

/** The outcome of an action that reached the end of its run without being closed on the way. */
function closingOf(a: ActionRow, at: string): ClosedRecord {
  const v = a.progress.verification;
  const d = a.progress.decision;
  if (a.progress.closed) return a.progress.closed;
  if (v) {
    const ack = a.progress.acknowledgement;
    if (ack?.status === "ERROR" && v.verdict === "VERIFICATION_FAILED") {
      const e = ack.error;
      return { outcome: "REJECTED_BY_TARGET", reasonCode: "REJECTED_BY_TARGET", reason: `the target refused the write (${e?.code ?? e?.kind}: ${e?.description}); ${v.reason}`, at };
    }
    return { outcome: v.verdict, reasonCode: v.verdict, reason: v.reason, at };
  }
  if (a.phase === "intent" || a.phase === "acknowledged") {
    return { outcome: "INCONCLUSIVE", reasonCode: "INCONCLUSIVE", reason: "the write was sent but no verification was recorded; the task's state was not checked", at };
  }
  switch (d?.type) {
    case "reject":
      return { outcome: "NOT_EXECUTED", reasonCode: "REJECTED_BY_HUMAN", reason: `rejected by ${d.approverId}: ${d.message ?? ""}; the model proposed no revision`, at };
    case "cancel":
      return { outcome: "NOT_EXECUTED", reasonCode: "CANCELLED", reason: `cancelled by ${d.approverId}: ${d.message ?? ""}`, at };
    case "expire":
      return { outcome: "NOT_EXECUTED", reasonCode: "APPROVAL_EXPIRED", reason: `no decision before ${a.envelope.expiresAt}`, at };
    case "approve":
    case "edit":
    case undefined:
      return { outcome: "NOT_EXECUTED", reasonCode: "NO_PROPOSAL", reason: "the run ended before this action was executed", at };
    default: {
      const never: never = d!.type;
      throw new Error(`unknown decision ${String(never)}`);
    }
  }
}

/** A run that ended before any envelope: always NOT_EXECUTED, with the node's reason when it is one of those codes. */
function preEnvelopeClosing(state: State, at: string): ClosedRecord {
  const code = state.reasonCode && PRE_ENVELOPE_CODES.has(state.reasonCode) ? state.reasonCode : "NO_PROPOSAL";
  if (code === "NO_PROPOSAL" && state.reasonCode !== "NO_PROPOSAL") {
    const last = state.messages.at(-1);
    const said = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
    return { outcome: "NOT_EXECUTED" satisfies Outcome, reasonCode: code, reason: `the model ended without proposing a change: ${said.slice(0, 1000)}`, at };
  }
  return { outcome: "NOT_EXECUTED", reasonCode: code, reason: state.reason ?? "", at };
}


/**
 * The run told as a chat (Studio's chat view): one AI message per step that happened and one for the
 * outcome, all from the journal-derived evidence above. Their ids are fixed per thread and step, so
 * a second pass through `finish` replaces them rather than adding copies.
 */
export function chatReport(threadId: string, e: Pick<State, "envelope" | "envelopeHash" | "decision" | "preRead" | "invocation" | "acknowledgement" | "verification" | "outcome" | "reasonCode" | "reason">): AIMessage[] {
  const say = (step: string, text: string) => new AIMessage({ id: `action-envelope:${threadId}:${step}`, content: text, name: "action-envelope" });
  const out: AIMessage[] = [];
  if (e.envelope && e.envelopeHash) {
    out.push(say("proposal", `Proposed: update task ${e.envelope.object.id} with ${JSON.stringify(e.envelope.params)} (envelope ${e.envelopeHash}, revision ${e.envelope.revision}).`));
  }
  const d = e.decision;
  if (d) {
    const verb = { approve: "Approved", edit: "Edited", reject: "Rejected", cancel: "Cancelled", expire: "Expired" }[d.type];
    out.push(say("decision", `${verb} by ${d.approverId} (identity: ${d.verifiedBy}) at ${d.acceptedAt}${d.message ? `: ${d.message}` : ""}.`));
  }
  if (e.preRead) out.push(say("pre-read", `Pre-read before the write: ${e.preRead.verdict}. ${e.preRead.reason}`));
  if (e.invocation) {
    const ack = e.acknowledgement;
    out.push(say("write", `Sent update_task once for task ${e.invocation.args.taskId} with ${JSON.stringify(e.invocation.args.fields)}; the target answered ${ack ? ack.status : "nothing recorded"}.`));
  }
  if (e.verification) out.push(say("verification", `Fresh read after the write: ${e.verification.verdict}. ${e.verification.reason}`));
  out.push(say("outcome", `Outcome: ${e.outcome} (${e.reasonCode})${e.reason ? `: ${e.reason}` : ""}`));
  return out;
}
