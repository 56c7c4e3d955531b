import { AIMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import type { Deps } from "../runtime/deps.js";
import { depsOf } from "../runtime/run-deps.js";
import { actionEndedEntry, runEndedEntry } from "../hitl/audit-records.js";
import type { ActionRow, ClosedRecord } from "../store/action-machine.js";
import {
  ensureThread,
  noteStateDrift,
  openGate,
  refuseUnlessAllowed,
  rowAfter,
  type Gate,
} from "../hitl/journal-gate.js";
import type { ExecutionEntry } from "../store/journal.js";
import {
  actionOutcomeOf,
  evidenceChangedFrom,
  flatView,
  registeredFor,
  viewOf,
  type ThreadJournalView,
} from "../hitl/thread-view.js";
import { writeAttemptRefused } from "./propose.js";
import { chainOutcome, outcomeTable, type ActionOutcome } from "../envelope/index.js";
import { deletedLabelOf } from "../envelope/deleted.js";
import { objectNamed, operationSpec } from "../envelope/operations.js";
import { requesterVerificationOf, type Envelope } from "../envelope/envelope.js";

/**
 * The final record, derived from the journal alone: a closed action's outcome, or a verified one's
 * verdict (a target that refused and whose task shows no change is REJECTED_BY_TARGET). The thread is
 * closed in the journal (the first close wins) and the closing audit record is built from journal
 * rows, so no state field can make a run VERIFIED. Reached while the journal says the thread is
 * elsewhere (a goto, a waiting approval), it refuses and the run resumes where the journal says.
 */
export async function finish(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "finish", state);
  if (refused) return refused;
  await noteStateDrift(deps, gate, "finish", state);
  return finishFromJournal(deps, gate, state);
}

/**
 * `finish`'s work once its gate has let it through (the journal's next step is `finish`): also run by
 * `carry_out` right after the executor, with the rows the executor left (`gate`) and the action's
 * write-ahead entry when it read one (`execution`, otherwise read here).
 */
export async function finishFromJournal(
  deps: Deps,
  gate: Gate,
  state: State,
  known: { execution?: ExecutionEntry } = {},
): Promise<Update> {
  const thread = await ensureThread(deps, gate, state);
  const finishedAt = deps.clock().toISOString();
  let action = gate.action;

  let closing: ClosedRecord;
  let table: string | undefined;
  if (gate.members && action?.set) {
    // A change set: every action closed with its own outcome (chain rule), the set's derived from them.
    const set = await closeSet(deps, gate.members, finishedAt);
    table = outcomeTable(set.outcomes);
    action = (await deps.journal.getAction(action.envelopeHash)) ?? action;
    closing = thread.closed ?? set.closing;
  } else if (thread.closed) closing = thread.closed;
  else if (action) closing = action.progress.closed ?? closingOf(action, finishedAt);
  else closing = await noProposalClosing(deps, gate.threadId, finishedAt);

  const execution = action
    ? known.execution?.envelopeHash === action.envelopeHash
      ? known.execution
      : await deps.journal.findExecution(action.envelopeHash)
    : undefined;
  const denied = action
    ? undefined
    : (await deps.audit.records({ threadId: gate.threadId, events: ["proposal_denied"] })).at(-1);
  const viewAt = (closed: ClosedRecord, a: ActionRow | undefined) =>
    viewOf({ thread: { ...thread, closed }, action: a, execution });
  // No action: nothing of an envelope in state is reported (any client can write state).
  const evidenceOf = (v: ThreadJournalView) =>
    ({ ...state, envelope: null, envelopeHash: null, ...flatView(v) }) satisfies State;
  // One durable transaction: the action's close, the thread's close (the first wins) and the closing
  // audit record built from the close that stands, keyed so a re-run of this node adds no second.
  let view: ThreadJournalView | undefined;
  const closedThread = await deps.journal.closeThread(gate.threadId, closing, {
    ...(action && !action.set ? { action: action.envelopeHash } : {}),
    records: (closed, a) => {
      if (a) action = a;
      view = viewAt(closed, action);
      const { decision: _d, ...own } = view.evidence;
      return [
        runEndedEntry(evidenceOf(view), {
          threadId: gate.threadId,
          policy: deps.policy,
          at: closed.at,
          request: thread.request,
          requesterVerifiedBy: requesterVerificationOf(thread),
          ...(action && !action.set ? { evidence: own } : {}),
          ...(denied ? { denied } : {}),
        }),
      ];
    },
  });
  view ??= viewAt(closedThread?.closed ?? closing, action);
  const evidence = evidenceOf(view);
  // State's mirror: the evidence and the ending; the envelope and card only where state lost the journal's hash.
  return {
    ...registeredFor(view, state),
    messages: [
      ...chatReport(gate.threadId, evidence),
      ...(table
        ? [
            new AIMessage({
              id: `action-envelope:${gate.threadId}:set-outcomes`,
              content: `Change set, action by action:\n${table}`,
              name: "action-envelope",
            }),
          ]
        : []),
    ],
    ...evidenceChangedFrom(view.evidence, state),
    ...view.ending,
    needsResync: false,
  };
}

/**
 * Closes every action of a change set that is still open, in set order: a verified one with its
 * verdict; an approved one after the action where the chain stopped as NOT_EXECUTED (CHAIN_STOPPED,
 * naming that action); any other with its own ending (rejected, cancelled, expired). The set's
 * outcome is derived from the actions' (change-set.ts chainOutcome).
 */
async function closeSet(
  deps: Deps,
  members: ActionRow[],
  at: string,
): Promise<{ outcomes: ActionOutcome[]; closing: ClosedRecord }> {
  const outcomes: ActionOutcome[] = [];
  let stop: ActionOutcome | undefined;
  for (const m of members) {
    let row = m;
    const entry = await deps.journal.findExecution(row.envelopeHash);
    // Each action's own ending, with its evidence from the journal, in the hash-chained log (keyed:
    // once), appended by the close itself.
    const ended = (r: ActionRow) => [actionEndedEntry(r, entry)];
    let recorded = false;
    if (!row.progress.closed && row.phase !== "superseded") {
      const approvedNotRun =
        stop &&
        row.progress.decision?.type === "approve" &&
        (row.phase === "decided" || row.phase === "registered");
      const c: ClosedRecord = approvedNotRun
        ? {
            outcome: "NOT_EXECUTED",
            reasonCode: "CHAIN_STOPPED",
            reason: `not run: ${stop!.actionId} ended ${stop!.outcome} (${stop!.reasonCode}), and a change set stops at the first action that is not VERIFIED`,
            at,
          }
        : closingOf(row, at);
      const moved = await deps.journal.moveAction(row.envelopeHash, "closed", { closed: c }, ended);
      recorded = moved.ok;
      row = await rowAfter(deps, row, moved);
    }
    const closedRow = row.progress.closed
      ? row
      : { ...row, progress: { ...row.progress, closed: closingOf(row, at) } };
    if (!recorded) await deps.audit.append(actionEndedEntry(closedRow, entry));
    const o = actionOutcomeOf(closedRow, entry)!;
    outcomes.push(o);
    if (!stop && o.outcome !== "VERIFIED") stop = o;
  }
  const derived = chainOutcome(outcomes);
  return {
    outcomes,
    closing: {
      outcome: derived.outcome as ClosedRecord["outcome"],
      reasonCode: derived.reasonCode as ClosedRecord["reasonCode"],
      reason: derived.reason,
      at,
    },
  };
}

/** The outcome of an action that reached the end of its run without being closed on the way. */
function closingOf(a: ActionRow, at: string): ClosedRecord {
  const v = a.progress.verification;
  const d = a.progress.decision;
  if (a.progress.closed) return a.progress.closed;
  if (v) {
    const ack = a.progress.acknowledgement;
    if (
      ack?.status === "ERROR" &&
      ack.error?.outcomeUnknown !== true &&
      v.verdict === "VERIFICATION_FAILED"
    ) {
      const e = ack.error;
      // A connection that never opened did not reach the target; anything else is its answer.
      const what =
        e?.kind === "transport_timeout"
          ? `the write never reached the target (${e.description})`
          : `the target refused the write (${e?.code ?? e?.kind}: ${e?.description})`;
      return {
        outcome: "REJECTED_BY_TARGET",
        reasonCode: "REJECTED_BY_TARGET",
        reason: `${what}; ${v.reason}`,
        at,
      };
    }
    return { outcome: v.verdict, reasonCode: v.verdict, reason: v.reason, at };
  }
  if (a.phase === "intent" || a.phase === "acknowledged") {
    return {
      outcome: "INCONCLUSIVE",
      reasonCode: "INCONCLUSIVE",
      reason: `the write was sent but no verification was recorded; ${unchecked(a.envelope)} was not checked`,
      at,
    };
  }
  switch (d?.type) {
    case "reject":
      return {
        outcome: "NOT_EXECUTED",
        reasonCode: "REJECTED_BY_HUMAN",
        reason: `rejected by ${d.approverId}: ${d.message ?? ""}; the model proposed no revision`,
        at,
      };
    case "cancel":
      return {
        outcome: "NOT_EXECUTED",
        reasonCode: "CANCELLED",
        reason: `cancelled by ${d.approverId}: ${d.message ?? ""}`,
        at,
      };
    case "expire":
      return {
        outcome: "NOT_EXECUTED",
        reasonCode: "APPROVAL_EXPIRED",
        reason: `no decision before ${a.envelope.expiresAt}`,
        at,
      };
    case "approve":
    case "edit":
    case undefined:
      return {
        outcome: "NOT_EXECUTED",
        reasonCode: "NO_PROPOSAL",
        reason: "the run ended before this action was executed",
        at,
      };
    default: {
      const never: never = d!.type;
      throw new Error(`unknown decision ${String(never)}`);
    }
  }
}

/**
 * A run that reached its end with no action and no ending recorded in the journal: the model stopped
 * without a proposal. If it had tried tools it was not offered (boundary_refused in the audit log),
 * that is the reason; otherwise the model's last reply as the journal recorded it, labelled as such
 * (or no quote when the journal has none). Nothing here comes from a reason code or a message in
 * state, which any API client could have written.
 */
async function noProposalClosing(deps: Deps, threadId: string, at: string): Promise<ClosedRecord> {
  const boundary = (await deps.audit.records({ threadId, events: ["boundary_refused"] })).map(
    (r) => r.received as { tool: string; argumentsSha256: string },
  );
  if (boundary.length > 0)
    return {
      outcome: "NOT_EXECUTED",
      reasonCode: "WRITE_ATTEMPT_REFUSED",
      reason: writeAttemptRefused(boundary),
      at,
    };
  // The model's last reply as the agent recorded it in the journal, never state's last message.
  const said = (await deps.journal.getThreadTurns(threadId))?.lastReply;
  return {
    outcome: "NOT_EXECUTED",
    reasonCode: "NO_PROPOSAL",
    reason: `the model ended without proposing a change${said == null ? "" : `: ${said}`}`,
    at,
  };
}

/**
 * The run told as a chat (Studio's chat view): one AI message per step that happened and one for the
 * outcome, all from the journal-derived evidence above. Their ids are fixed per thread and step, so
 * a second pass through `finish` replaces them rather than adding copies.
 */
export function chatReport(
  threadId: string,
  e: Pick<
    State,
    | "envelope"
    | "envelopeHash"
    | "decision"
    | "preRead"
    | "invocation"
    | "acknowledgement"
    | "verification"
    | "outcome"
    | "reasonCode"
    | "reason"
  >,
): AIMessage[] {
  const say = (step: string, text: string) =>
    new AIMessage({ id: `action-envelope:${threadId}:${step}`, content: text, name: "action-envelope" });
  const out: AIMessage[] = [];
  if (e.envelope && e.envelopeHash) {
    out.push(
      say(
        "proposal",
        `Proposed: ${e.envelope.operation} ${proposedOn(e.envelope)} with ${JSON.stringify(e.envelope.params)} (envelope ${e.envelopeHash}, revision ${e.envelope.revision}).`,
      ),
    );
  }
  const d = e.decision;
  if (d) {
    const verb = {
      approve: "Approved",
      edit: "Edited",
      reject: "Rejected",
      cancel: "Cancelled",
      expire: "Expired",
    }[d.type];
    out.push(
      say(
        "decision",
        `${verb} by ${d.approverId} (identity: ${d.verifiedBy}) at ${d.acceptedAt}${d.message ? `: ${d.message}` : ""}.`,
      ),
    );
  }
  if (e.preRead)
    out.push(say("pre-read", `Pre-read before the write: ${e.preRead.verdict}. ${e.preRead.reason}`));
  if (e.invocation) {
    const ack = e.acknowledgement;
    const a = e.invocation.args;
    const spec = operationSpec(e.invocation.tool);
    // A create's arguments name no object: it is a new one, with the id the verification found when known.
    const createdId = e.verification?.created?.type === spec?.creates ? e.verification?.created?.id : null;
    const object =
      spec?.effect === "create"
        ? `${objectNamed(spec.name, 0)}${createdId ? ` (created: ${spec.target} ${createdId})` : ""}`
        : a.dealId !== undefined
          ? `deal ${a.dealId}`
          : a.commentId !== undefined
            ? `comment ${a.commentId} of task ${a.taskId}`
            : `task ${a.taskId}`;
    // A delete sends no fields: it names only what it removes.
    const sent = a.fields !== undefined ? ` with ${JSON.stringify(a.fields)}` : "";
    out.push(
      say(
        "write",
        `Sent ${e.invocation.tool} once for ${object}${sent}; the target answered ${ack ? ack.status : "nothing recorded"}.`,
      ),
    );
  }
  if (e.verification)
    out.push(
      say("verification", `Fresh read after the write: ${e.verification.verdict}. ${e.verification.reason}`),
    );
  out.push(say("outcome", `Outcome: ${e.outcome} (${e.reasonCode})${e.reason ? `: ${e.reason}` : ""}`));
  return out;
}

/** What a proposal acts on, by its effect: "on task 4", "making a new task", "removing comment 5 of task 4". */
function proposedOn(e: Pick<Envelope, "operation" | "object" | "params">): string {
  if (operationSpec(e.operation)?.effect === "create")
    return `making ${objectNamed(e.operation, e.object.id)}`;
  const deleted = deletedLabelOf(e);
  return deleted ? `removing ${deleted}` : `on ${objectNamed(e.operation, e.object.id)}`;
}

/** What a sent write left unchecked without its verification: the object's state, whether a new one was made, whether a deleted one is gone. */
function unchecked(e: Pick<Envelope, "operation" | "object" | "params">): string {
  if (operationSpec(e.operation)?.effect === "create")
    return `whether ${objectNamed(e.operation, e.object.id)} was made`;
  const deleted = deletedLabelOf(e);
  return deleted ? `whether ${deleted} is gone` : `the state of ${objectNamed(e.operation, e.object.id)}`;
}
