/**
 * `finish`'s work once its gate has let it through: the thread closed in the journal (the first close
 * wins) with its closing audit record, and the final record and chat report derived from journal rows.
 */
import { AIMessage } from "@langchain/core/messages";
import { outcomeTable } from "../envelope/index.js";
import { requesterVerificationOf } from "../envelope/envelope.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow, ClosedRecord } from "../store/action-machine.js";
import type { ExecutionEntry } from "../store/journal.js";
import { actionEvidenceOf, runEndedEntry } from "./audit-records.js";
import { chatReport } from "./chat-report.js";
import { closeSet, closingOf, noProposalClosing } from "./closing.js";
import { ensureThread, type Gate } from "./journal-gate.js";
import type { ThreadMirror } from "./thread-mirror.js";
import {
  evidenceChangedFrom,
  flatView,
  registeredFor,
  viewOf,
  type EndingView,
  type EvidenceView,
  type RegisteredView,
  type ThreadJournalView,
} from "./thread-view.js";

/** What finishing writes into state's mirror: the evidence, the ending and the chat report. */
export type FinishUpdate = Partial<RegisteredView> &
  Partial<EvidenceView> &
  EndingView & { messages: AIMessage[]; needsResync: false };

/**
 * `finish`'s work once its gate has let it through (the journal's next step is `finish`): also run by
 * `carry_out` right after the executor, with the rows the executor left (`gate`) and the action's
 * write-ahead entry when it read one (`written`, otherwise read here).
 */
export async function finishFromJournal(
  deps: Deps,
  gate: Gate,
  state: ThreadMirror,
  written?: ExecutionEntry,
): Promise<FinishUpdate> {
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
    ? written?.envelopeHash === action.envelopeHash
      ? written
      : await deps.journal.findExecution(action.envelopeHash)
    : undefined;
  const denied = action
    ? undefined
    : (await deps.audit.records({ threadId: gate.threadId, events: ["proposal_denied"] })).at(-1);
  const viewAt = (closed: ClosedRecord, a: ActionRow | undefined) =>
    viewOf({ thread: { ...thread, closed }, action: a, execution });
  // No action: nothing of an envelope in state is reported (any client can write state).
  const evidenceOf = (v: ThreadJournalView) =>
    ({ ...state, envelope: null, envelopeHash: null, ...flatView(v) }) satisfies ThreadMirror;
  // One durable transaction: the action's close, the thread's close (the first wins) and the closing
  // audit record built from the close that stands, keyed so a re-run of this node adds no second. Its
  // evidence is the view's: a part whose seal does not hold is withheld there, so it is never recorded.
  let view: ThreadJournalView | undefined;
  const closedThread = await deps.journal.closeThread(gate.threadId, closing, {
    ...(action && !action.set ? { action: action.envelopeHash } : {}),
    records: (closed, a) => {
      if (a) action = a;
      view = viewAt(closed, action);
      return [
        runEndedEntry(evidenceOf(view), {
          threadId: gate.threadId,
          policy: deps.policy,
          at: closed.at,
          request: thread.request,
          requesterVerifiedBy: requesterVerificationOf(thread),
          ...(action && !action.set ? { evidence: actionEvidenceOf(view) } : {}),
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
