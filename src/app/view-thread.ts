/**
 * A thread as the journal knows it, over the checkpoint: the view every interface shows (waiting for
 * approval or an answer, interrupted, finished), with a change set's per-action outcomes.
 */
import type { State } from "../graph/state.js";
import type { ApprovalRequest, InputRequest, InterruptPayload } from "../hitl/contract.js";
import { approvalRequestFrom } from "../hitl/approval-request.js";
import { inputRequestOfRow, openAsked } from "../hitl/input-request.js";
import { refusalsRecorded } from "../evidence/recorded.js";
import { membersOf } from "../hitl/journal-gate.js";
import {
  actionOutcomeOf,
  flatView,
  viewOf,
  type RevisionHistory,
  type WithheldParts,
} from "../hitl/thread-view.js";
import { nextFromJournal, type ActionRow, type ThreadRecord } from "../store/action-machine.js";
import type { ReadApp } from "./open-app.js";

/** What a view reads: the journal (and the stores beside it) and the graph's checkpoints; a ReadApp, or the API server's graph with its deps. */
export type ThreadSource = Pick<ReadApp, "deps"> & { graph: Pick<ReadApp["graph"], "getState"> };

export interface ThreadView {
  threadId: string;
  status: "awaiting_approval" | "awaiting_input" | "finished" | "interrupted_run" | "not_found";
  /** Present while waiting: exactly what the approver is asked. */
  approval?: ApprovalRequest;
  /** Present while a structured question waits for an answer. */
  input?: InputRequest;
  interruptId?: string;
  /** Nodes that would run next for a run a crash interrupted. */
  next?: string[];
  state?: State;
  /** For a finished change set: how each action ended, in the set's order (the journal's rows). */
  changeSetOutcome?: ChangeSetOutcome;
  /** While a single action's revision 2 or later waits: what it replaced (the projection's, src/hitl/thread-view.ts). */
  revisionHistory?: RevisionHistory;
  /**
   * The evidence parts the projection withholds (src/hitl/thread-view.ts), each with why: absent from
   * `state`, and printed in their place. Absent when every recorded part is reported.
   */
  withheld?: WithheldParts;
}

/** One action of a finished change set. */
export interface SetActionOutcome {
  actionId: string;
  /** Known from the journal; absent when read back from the server's outcome table (`--api`). */
  envelopeHash?: string;
  operation: string;
  taskId: number;
  outcome: string;
  reasonCode: string;
  reason?: string;
  /** Whether a write was sent for it (an entry in the write-ahead log). */
  sent: boolean;
}

export interface ChangeSetOutcome {
  /** Absent when read back from the server's outcome table (`--api`). */
  setHash?: string;
  actions: SetActionOutcome[];
}

/**
 * A thread as the journal knows it, over the checkpoint: the approval card, envelope, evidence and
 * outcome come from the journal's rows (the authority); the checkpoint says only whether a run is
 * paused and where. An edited checkpoint therefore cannot change what `show` or `pending` prints.
 */
export async function viewThread(app: ThreadSource, threadId: string): Promise<ThreadView> {
  const snapshot = await app.graph.getState({ configurable: { thread_id: threadId } });
  return viewOfCheckpoint(app, threadId, {
    values: snapshot.values as State | undefined,
    interrupts: snapshot.tasks.flatMap((t) => t.interrupts ?? []),
    next: snapshot.next,
  });
}

/** Where a thread's newest checkpoint stands, as getState reports it (or a run that just stopped there). */
export interface CheckpointStand {
  values: State | undefined;
  /** The interrupts its tasks carry, in task order. */
  interrupts: ReadonlyArray<{ id?: string; value?: unknown }>;
  /** The nodes that would run next. */
  next: readonly string[];
}

/** viewThread's view from a checkpoint already read (or the values and interrupts a run stopped with). */
export async function viewOfCheckpoint(
  app: ThreadSource,
  threadId: string,
  snapshot: CheckpointStand,
): Promise<ThreadView> {
  const checkpointValues = snapshot.values;
  if (!checkpointValues || Object.keys(checkpointValues).length === 0)
    return { threadId, status: "not_found" };
  const overlaid = await overlayJournal(app, threadId, checkpointValues);
  const view = await viewOfOverlay(app, threadId, snapshot, overlaid);
  return overlaid.withheld ? { ...view, withheld: overlaid.withheld } : view;
}

/** The view of a checkpoint overlaid with the journal (overlayJournal), by where the checkpoint stands. */
async function viewOfOverlay(
  app: ThreadSource,
  threadId: string,
  snapshot: CheckpointStand,
  { values, thread, action, question, revisionHistory }: Awaited<ReturnType<typeof overlayJournal>>,
): Promise<ThreadView> {
  const first = snapshot.interrupts[0];
  const id = first?.id ? { interruptId: first.id } : {};
  const behind = first
    ? await checkpointBehind(app, threadId, first.value as InterruptPayload, action)
    : undefined;
  if (behind) {
    if (behind === "finished") return finishedView(app, threadId, values, action);
    // The stale pause's id: recover resumes it (recoverThread).
    return { threadId, status: "interrupted_run", next: [behind], ...id, state: values };
  }
  if (first) {
    const fromCheckpoint = first.value as InterruptPayload;
    if (fromCheckpoint.kind === "input") {
      // The question is the journal's; a pause at a question the journal has not open was written
      // into the checkpoint: the thread is where the journal says, and recover resumes the pause
      // (check_input drops the question and the run goes there).
      if (question?.status !== "open")
        return {
          threadId,
          status: "interrupted_run",
          next: [checkpointAhead(thread, action) ?? "agent"],
          ...id,
          state: values,
        };
      return {
        threadId,
        status: "awaiting_input",
        input: inputRequestOfRow(question, threadId),
        ...id,
        state: values,
      };
    }
    const payload: InterruptPayload =
      fromCheckpoint.kind === "approval" && action && action.macValid && action.phase === "registered"
        ? approvalRequestFrom(
            action,
            action.set
              ? {
                  members: await membersOf(app.deps, action),
                  partialExecution: app.deps.policy.partialExecution,
                }
              : {},
          )
        : fromCheckpoint;
    return {
      threadId,
      status: "awaiting_approval",
      approval: payload as ApprovalRequest,
      ...id,
      state: values,
      ...(revisionHistory ? { revisionHistory } : {}),
    };
  }
  if (snapshot.next.length > 0)
    return { threadId, status: "interrupted_run", next: [...snapshot.next], state: values };
  const ahead = checkpointAhead(thread, action);
  if (ahead) return { threadId, status: "interrupted_run", next: [ahead], state: values };
  return finishedView(app, threadId, values, action);
}

/**
 * A checkpoint at the graph's end for a thread the journal has not closed: the ending was written
 * into the checkpoint (updateState as the last node, an edited file), since finish closes the thread
 * in the journal before its checkpoint. The thread is where the journal says; `recover` continues it
 * from there (through resync). Undefined for a thread the journal closed or does not know.
 */
export function checkpointAhead(
  thread: ThreadRecord | undefined,
  action: ActionRow | undefined,
): NonNullable<ReturnType<typeof nextFromJournal>> | "agent" | undefined {
  if (!thread || thread.closed) return undefined;
  return nextFromJournal(thread, action) ?? "agent";
}

export async function finishedView(
  app: ThreadSource,
  threadId: string,
  values: State,
  action: ActionRow | undefined,
): Promise<ThreadView> {
  const changeSetOutcome = action?.macValid ? await setOutcomeOf(app, action) : undefined;
  return { threadId, status: "finished", state: values, ...(changeSetOutcome ? { changeSetOutcome } : {}) };
}

/**
 * A checkpoint paused at the approval while the journal says the approval was already decided: the
 * checkpoint is behind (a copy put back, an old checkpoint forked, or steps a crash or power loss kept
 * off the disk). The journal is where the thread is: "finished" when it closed the thread, else the
 * step it says comes next, which `recover` (and the worker) continue from. Undefined when the
 * checkpoint and the journal agree that a decision is awaited (or the row fails its seal: the gate
 * refuses that one on resume).
 */
async function checkpointBehind(
  app: ThreadSource,
  threadId: string,
  payload: InterruptPayload | undefined,
  action: ActionRow | undefined,
): Promise<"finished" | NonNullable<ReturnType<typeof nextFromJournal>> | undefined> {
  if (payload?.kind !== "approval" || !action?.macValid || action.phase === "registered") return undefined;
  const thread = await app.deps.journal.getThread(threadId);
  if (thread?.closed) return "finished";
  return nextFromJournal(thread, action) ?? undefined;
}

/** Each action of the thread's change set as the journal closed it, in set order (not yet closed: omitted). */
async function setOutcomeOf(app: ThreadSource, action: ActionRow): Promise<ChangeSetOutcome | undefined> {
  // Actions an approver rejected in an earlier revision of the set (approve a1, reject a2) stay in the
  // table as REJECTED with their reason; what was kept ran as the later revision.
  const rejected = await rejectedInEarlierRevisions(app, action);
  if (!action.set && rejected.rows.length === 0) return undefined;
  const members = action.set ? await membersOf(app.deps, action) : [action];
  const actions: SetActionOutcome[] = [...rejected.rows];
  for (const m of members) {
    const outcome = actionOutcomeOf(
      m,
      await app.deps.journal.findExecution(m.envelopeHash),
      m.set?.actionId ?? rejected.keptId,
    );
    if (!outcome) continue;
    const { createdId: _c, ...row } = outcome;
    actions.push(row);
  }
  actions.sort((a, b) => Number(a.actionId.slice(1)) - Number(b.actionId.slice(1)));
  const setHash = action.set?.setHash ?? rejected.setHash;
  return actions.length > 0 && setHash ? { setHash, actions } : undefined;
}

/** The actions rejected per action in earlier revisions of this thread's change set, from the journal's superseded rows. */
async function rejectedInEarlierRevisions(
  app: ThreadSource,
  action: ActionRow,
): Promise<{ rows: SetActionOutcome[]; keptId?: string; setHash?: string }> {
  const rows: SetActionOutcome[] = [];
  let keptId: string | undefined;
  let setHash: string | undefined;
  const seen = new Set<string>();
  for (const hash of [...action.supersededHashes].reverse()) {
    const row = await app.deps.journal.getAction(hash);
    const plan = row?.macValid ? row.progress.decision?.setPlan : undefined;
    if (!row?.set || !plan) continue;
    setHash ??= row.set.setHash;
    if (!action.set && plan.actions.length === 1) keptId ??= plan.actions[0]!.actionId;
    const members = await membersOf(app.deps, row);
    for (const p of plan.perAction) {
      if (p.type !== "reject" || seen.has(p.actionId)) continue;
      seen.add(p.actionId);
      const m = members.find((x) => x.set?.actionId === p.actionId);
      if (!m) continue;
      rows.push({
        actionId: p.actionId,
        envelopeHash: m.envelopeHash,
        operation: m.envelope.operation,
        taskId: m.envelope.object.id,
        outcome: "REJECTED",
        reasonCode: "REJECTED_BY_HUMAN",
        reason: `rejected by ${row.progress.decision!.approverId} in revision ${row.set.set.revision}${p.message ? `: ${p.message}` : " (no reason given)"}`,
        sent: false,
      });
    }
  }
  return { rows, ...(keptId ? { keptId } : {}), ...(setHash ? { setHash } : {}) };
}

/** The audit events a thread's refusals are read from (refusalsRecorded): only these records are parsed. */
const REFUSAL_EVENTS = ["decision_refused", "answer_refused"] as const;

/** A thread's values overlaid with the journal, and the journal rows they were read from (for the view's status). */
export async function overlayJournal(app: ThreadSource, threadId: string, checkpointValues: State) {
  const journal = app.deps.journal;
  const { thread, action, question } = await journal.threadRows(threadId);
  if (!thread && !action) return { values: checkpointValues, thread, action, question };
  const previousHash = action?.envelope.previousEnvelopeHash;
  const [entry, records, turns, previous] = await Promise.all([
    action ? journal.findExecution(action.envelopeHash) : undefined,
    app.deps.audit.records({ threadId, events: REFUSAL_EVENTS }),
    thread ? journal.getThreadTurns(threadId) : undefined,
    previousHash ? journal.getAction(previousHash) : undefined,
  ]);
  // Refused decisions and answers as the audit log recorded them; never state's list, which any client can write.
  const refusals = refusalsRecorded(records);
  const journalView = viewOf({
    thread,
    action,
    execution: entry,
    previous: previous?.macValid ? previous : undefined,
  });
  // Everything else is the thread view of the journal's rows; the ending is the journal's, or none while
  // the journal has not closed the thread: an outcome written into state is never shown as one.
  const values: State = {
    ...checkpointValues,
    refusals,
    ...(turns ? { agentSteps: turns.agentSteps, invalidProposals: turns.invalidProposals } : {}),
    inputRequest: openAsked(question),
    ...flatView(journalView),
  };
  return {
    values,
    thread,
    action,
    question,
    revisionHistory: journalView.revisionHistory,
    withheld: journalView.withheld,
  };
}
