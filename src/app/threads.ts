/**
 * The decision path every local interface shares (CLI, main job, tests): start a run, show a waiting
 * approval, submit a decision, recover a run a crash interrupted. Decisions go through a per-thread
 * lease and a re-check that an approval is really pending, because LangGraph itself would accept a
 * resume for an ended thread as a silent no-op and lets two processes resume one thread at once.
 */
import { randomUUID } from "node:crypto";
import { Command } from "@langchain/langgraph";
import { closeCheckpointer, createCheckpointer, pausedAtInterrupt } from "../store/checkpointer.js";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { compileGraph, type CompileOptions } from "../graph/graph.js";
import type { State } from "../graph/state.js";
import type { ApprovalRequest, InputRequest, InterruptPayload } from "../hitl/contract.js";
import type { RequestScope } from "../envelope/records.js";
import type { Deps, StoreDeps } from "../runtime/deps.js";
import { depsConfigurable } from "../runtime/run-deps.js";
import { DecisionNotAcceptedError, UsageError } from "../errors.js";
import { approvalRequestFrom } from "../hitl/approval-request.js";
import { inputRequestOfRow, openAsked } from "../hitl/input-request.js";
import { refusalsRecorded } from "../evidence/bundle.js";
import { membersOf } from "../hitl/journal-gate.js";
import { actionOutcomeOf, flatView, viewOf, type RevisionHistory } from "../hitl/thread-view.js";
import { nextFromJournal, type ActionRow, type ThreadRecord } from "../store/action-machine.js";
import type { QuestionEntry } from "../store/journal.js";
import { listPending } from "./pending.js";

/**
 * What reading a thread needs: the stores and the graph over the checkpoints. `show` opens only this
 * (src/cli/session.ts, withReadOnlyApp), `pending` less still (src/app/stores-app.ts); an App is one too.
 */
export interface ReadApp {
  deps: StoreDeps;
  checkpointer: BaseCheckpointSaver;
  graph: ReturnType<typeof compileGraph>;
  close(): Promise<void>;
}

/** A ReadApp with the portal's tools and the model, which runs and decisions need. */
export interface App extends ReadApp {
  deps: Deps;
}

export {
  listPending,
  pendingPage,
  type PendingApproval,
  type PendingPage,
  type PendingQuery,
} from "./pending.js";

export interface RunInput {
  request: string;
  requestedBy: string;
  scope?: RequestScope;
  /** The requester's signature over the canonical request for this thread (src/envelope/signature.ts); needs opts.threadId. */
  requesterSignature?: string;
}

export type ThreadStatus =
  "awaiting_approval" | "awaiting_input" | "finished" | "interrupted_run" | "not_found";

export interface ThreadView {
  threadId: string;
  status: ThreadStatus;
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

type OpenOptions = Omit<CompileOptions, "checkpointer"> & { checkpointer?: BaseCheckpointSaver };

/** The graph over the checkpoints, for reading only: its runs carry no deps, so no node can run against them. */
export function openReadApp(deps: StoreDeps, opts: OpenOptions = {}): ReadApp {
  const checkpointer = opts.checkpointer ?? createCheckpointer(deps.config);
  const graph = compileGraph({ ...opts, checkpointer });
  return {
    deps,
    checkpointer,
    graph,
    async close() {
      await deps.close();
      await closeCheckpointer(checkpointer);
    },
  };
}

/** The graph with these deps bound to every run it starts (src/runtime/run-deps.ts). */
export function openApp(deps: Deps, opts: OpenOptions = {}): App {
  const read = openReadApp(deps, opts);
  return { ...read, deps, graph: read.graph.withConfig({ configurable: depsConfigurable(deps) }) };
}

/**
 * How our runs checkpoint: "sync", each step's checkpoint committed before the next node starts.
 * "async" was tried (2026-12-01) and gave nothing measurable, and it opened a window in which a
 * step's writes were committed but the checkpoint after it was not: LangGraph then reads the thread
 * as having no next step, so a reader (`npm start --inbox` polling, `show`) saw it finished, with no
 * outcome, while the run was still going.
 */
export const RUN_DURABILITY = "sync" as const;

const runConfig = (threadId: string) => ({
  configurable: { thread_id: threadId },
  durability: RUN_DURABILITY,
});

/** One node's state update, as it happens; the CLI shows each step from these. */
export type StepListener = (node: string, update: Partial<State>) => void;

/** How a run stopped: at an interrupt, or at the graph's end with these values (already checkpointed). */
type Driven = { paused: true } | { paused: false; values: State | undefined };

async function drive(app: App, input: unknown, threadId: string, onStep?: StepListener): Promise<Driven> {
  const stream = await app.graph.stream(input as never, {
    ...runConfig(threadId),
    streamMode: ["updates", "values"] as const,
  });
  let paused = false;
  let values: State | undefined;
  for await (const [mode, chunk] of stream as AsyncIterable<["updates" | "values", unknown]>) {
    if (mode === "values") {
      values = chunk as State;
      continue;
    }
    for (const [node, update] of Object.entries(chunk as Record<string, unknown>)) {
      if (node === "__interrupt__") paused = true;
      else onStep?.(node, (update ?? {}) as Partial<State>);
    }
  }
  return paused ? { paused } : { paused, values };
}

/**
 * The view after a run: a run that reached the graph's end (durability "sync": every checkpoint is
 * committed before the stream ends) is finished with the values it ended with, overlaid with the
 * journal as viewThread does, without loading the checkpoint again; anything else is read in full.
 */
async function viewAfter(app: App, threadId: string, driven: Driven): Promise<ThreadView> {
  if (driven.paused || !driven.values || Object.keys(driven.values).length === 0)
    return viewThread(app, threadId);
  const { values, thread, action } = await overlayJournal(app, threadId, driven.values);
  const ahead = checkpointAhead(thread, action);
  if (ahead) return { threadId, status: "interrupted_run", next: [ahead], state: values };
  return finishedView(app, threadId, values, action);
}

/**
 * A thread as the journal knows it, over the checkpoint: the approval card, envelope, evidence and
 * outcome come from the journal's rows (the authority); the checkpoint says only whether a run is
 * paused and where. An edited checkpoint therefore cannot change what `show` or `pending` prints.
 */
export async function viewThread(app: ReadApp, threadId: string): Promise<ThreadView> {
  const snapshot = await app.graph.getState({ configurable: { thread_id: threadId } });
  const checkpointValues = snapshot.values as State | undefined;
  if (!checkpointValues || Object.keys(checkpointValues).length === 0)
    return { threadId, status: "not_found" };
  const { values, thread, action, question, revisionHistory } = await overlayJournal(
    app,
    threadId,
    checkpointValues,
  );
  const pending = snapshot.tasks.flatMap((t) => t.interrupts ?? []);
  const first = pending[0];
  const behind = first
    ? await checkpointBehind(app, threadId, first.value as InterruptPayload, action)
    : undefined;
  if (behind) {
    if (behind === "finished") return finishedView(app, threadId, values, action);
    // The stale pause's id: recover resumes it (recoverThread).
    return {
      threadId,
      status: "interrupted_run",
      next: [behind],
      ...(first!.id ? { interruptId: first!.id } : {}),
      state: values,
    };
  }
  if (first) {
    const fromCheckpoint = first.value as InterruptPayload;
    const id = first.id ? { interruptId: first.id } : {};
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
    const history = revisionHistory ? { revisionHistory } : {};
    return {
      threadId,
      status: "awaiting_approval",
      approval: payload as ApprovalRequest,
      ...id,
      state: values,
      ...history,
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
function checkpointAhead(
  thread: ThreadRecord | undefined,
  action: ActionRow | undefined,
): NonNullable<ReturnType<typeof nextFromJournal>> | "agent" | undefined {
  if (!thread || thread.closed) return undefined;
  return nextFromJournal(thread, action) ?? "agent";
}

async function finishedView(
  app: ReadApp,
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
  app: ReadApp,
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
async function setOutcomeOf(app: ReadApp, action: ActionRow): Promise<ChangeSetOutcome | undefined> {
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
  app: ReadApp,
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

export async function startRun(
  app: App,
  input: RunInput,
  opts: { threadId?: string; onStep?: StepListener } = {},
): Promise<ThreadView> {
  const threadId = opts.threadId ?? randomUUID();
  if (!input.request.trim())
    throw new UsageError('the request is empty; say what should change, e.g. "rename task 4 to X"');
  const existing = await viewThread(app, threadId);
  if (existing.status !== "not_found")
    throw new UsageError(`thread ${threadId} already exists (${existing.status})`);
  await withThreadLock(app, threadId, async () => {
    await drive(
      app,
      {
        request: input.request,
        requestedBy: input.requestedBy,
        ...(input.scope ? { scope: input.scope } : {}),
        ...(input.requesterSignature ? { requesterSignature: input.requesterSignature } : {}),
      },
      threadId,
      opts.onStep,
    );
  });
  return viewThread(app, threadId);
}

/**
 * Submits one resume value. Refuses, without touching the thread, when nothing is pending: an ended
 * thread never restarts because a late decision arrived.
 */
export async function submitDecision(
  app: App,
  threadId: string,
  resume: unknown,
  onStep?: StepListener,
): Promise<ThreadView> {
  return withThreadLock(app, threadId, async () => {
    const journal = app.deps.journal;
    const [thread, action, question] = await Promise.all([
      journal.getThread(threadId),
      journal.currentAction(threadId),
      journal.getQuestion(threadId),
    ]);
    // The journal says whether a decision is awaited; the checkpoint only whether a run is paused to take it.
    const paused = await pausedAtInterrupt(app.checkpointer, threadId, async () =>
      (await app.graph.getState({ configurable: { thread_id: threadId } })).tasks.some(
        (t) => (t.interrupts ?? []).length > 0,
      ),
    );
    const refused = notWaiting(threadId, paused, thread, action, question);
    if (refused) throw refused;
    return viewAfter(app, threadId, await drive(app, new Command({ resume }), threadId, onStep));
  });
}

/**
 * Why a decision may not be sent to the thread, from its journal rows (the action and question only of a
 * paused run); undefined when it may. A thread waits for a decision while its action is open, for an
 * answer while its question is open. An approval the journal has decided but whose thread it has not closed
 * (a crash right after the claim) still takes the decision: it is not applied (await_approval's gate
 * sees the journal has moved on), and the decision the journal accepted first runs, once.
 */
function notWaiting(
  threadId: string,
  paused: boolean,
  thread: ThreadRecord | undefined,
  action: ActionRow | undefined,
  question: QuestionEntry | undefined,
): DecisionNotAcceptedError | undefined {
  if (!thread)
    return new DecisionNotAcceptedError(threadId, "NO_SUCH_THREAD", "no such thread; nothing was started");
  if (thread.closed)
    return new DecisionNotAcceptedError(
      threadId,
      "THREAD_ENDED",
      `the thread already ended ${thread.closed.outcome} / ${thread.closed.reasonCode}; the decision was not applied`,
    );
  if (
    paused &&
    (question?.status === "open" || (action && action.phase !== "closed" && action.phase !== "superseded"))
  )
    return undefined;
  return new DecisionNotAcceptedError(
    threadId,
    "NOT_AWAITING_APPROVAL",
    `the thread is not waiting for a decision (a run stopped before ${nextFromJournal(thread, action) ?? "agent"}); use "recover" to finish it`,
  );
}

/** What `recover` resumes a checkpoint that is behind the journal with: never a decision (await_approval's gate stops it first). */
const RESUME_FROM_JOURNAL = {
  recover: "the journal has moved past this approval; continue from where it says the thread is",
};

/** Continues a run that a crash stopped between nodes; the journal keeps it from writing twice. */
export async function recoverThread(app: App, threadId: string, onStep?: StepListener): Promise<ThreadView> {
  return withThreadLock(app, threadId, async () => {
    const view = await viewThread(app, threadId);
    if (view.status !== "interrupted_run") {
      throw new UsageError(`thread ${threadId} has nothing to recover (status ${view.status})`);
    }
    // A checkpoint still paused at an approval the journal has decided (checkpointBehind: the view names
    // the pause): it is resumed with a value that is not a decision; await_approval's gate sees the
    // journal has moved on, records that, and the run continues from the journal's step. Otherwise the
    // run continues as is.
    // A checkpoint at the graph's end that the journal has not closed (checkpointAhead) has no step to
    // continue: the run is sent to resync, which goes where the journal says.
    const atEnd =
      !view.interruptId &&
      (await app.graph.getState({ configurable: { thread_id: threadId } })).next.length === 0;
    const input = view.interruptId
      ? new Command({ resume: { [view.interruptId]: RESUME_FROM_JOURNAL } })
      : atEnd
        ? new Command({ goto: "resync" })
        : null;
    await drive(app, input, threadId, onStep);
    return viewThread(app, threadId);
  });
}

/** The audit events a thread's refusals are read from (refusalsRecorded): only these records are parsed. */
const REFUSAL_EVENTS = ["decision_refused", "answer_refused"] as const;

/** A thread's values overlaid with the journal, and the journal rows they were read from (for the view's status). */
async function overlayJournal(app: ReadApp, threadId: string, checkpointValues: State) {
  const journal = app.deps.journal;
  const [thread, action] = await Promise.all([journal.getThread(threadId), journal.currentAction(threadId)]);
  if (!thread && !action)
    return { values: checkpointValues, thread, action, question: await journal.getQuestion(threadId) };
  const previousHash = action?.envelope.previousEnvelopeHash;
  const [entry, records, question, turns, previous] = await Promise.all([
    action ? journal.findExecution(action.envelopeHash) : undefined,
    app.deps.audit.records({ threadId, events: REFUSAL_EVENTS }),
    journal.getQuestion(threadId),
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
  return { values, thread, action, question, revisionHistory: journalView.revisionHistory };
}

async function withThreadLock<T>(app: App, threadId: string, fn: () => Promise<T>): Promise<T> {
  const owner = `${process.pid}:${randomUUID()}`;
  const got = await app.deps.journal.acquireThreadLock(threadId, owner, 5 * 60_000);
  if (!got) {
    throw new DecisionNotAcceptedError(
      threadId,
      "IN_PROGRESS",
      "another process is working on this thread right now; try again when it has finished",
    );
  }
  try {
    return await fn();
  } finally {
    await app.deps.journal.releaseThreadLock(threadId, owner);
  }
}

export interface SweepResult {
  threadId: string;
  envelopeHash: string;
  /** What became of the thread: ended, or escalated to a fresh approval for another group. */
  result: "expired" | "escalated" | "skipped";
  detail: string;
}

/**
 * Closes waiting approvals past their expiry through the graph, as a system decision, so nothing
 * waits forever and each thread records why it ended (or to whom it was escalated).
 */
export async function sweepExpired(app: App, onStep?: StepListener): Promise<SweepResult[]> {
  const results: SweepResult[] = [];
  for (const row of await listPending(app)) {
    if (!row.expired) continue;
    const view = await viewThread(app, row.threadId);
    if (view.status !== "awaiting_approval" || view.approval?.envelopeHash !== row.envelopeHash) {
      // Waiting in the journal, but the run is not paused at this approval (a crash between steps): `recover` first.
      results.push({
        threadId: row.threadId,
        envelopeHash: row.envelopeHash,
        result: "skipped",
        detail: `thread is ${view.status}`,
      });
      continue;
    }
    try {
      const after = await submitDecision(
        app,
        row.threadId,
        {
          decisions: [
            {
              type: "expire",
              envelopeHash: row.envelopeHash,
              nonce: view.approval.nonce,
              by: { id: "system:sweep" },
            },
          ],
        },
        onStep,
      );
      results.push(
        after.status === "awaiting_approval"
          ? {
              threadId: row.threadId,
              envelopeHash: row.envelopeHash,
              result: "escalated",
              detail: `fresh envelope ${after.approval!.envelopeHash} for group ${after.approval!.escalatedTo}`,
            }
          : {
              threadId: row.threadId,
              envelopeHash: row.envelopeHash,
              result: "expired",
              detail: `${after.state?.outcome} / ${after.state?.reasonCode}`,
            },
      );
    } catch (e) {
      results.push({
        threadId: row.threadId,
        envelopeHash: row.envelopeHash,
        result: "skipped",
        detail: (e as Error).message,
      });
    }
  }
  return results;
}
