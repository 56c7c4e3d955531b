/**
 * The decision path every local interface shares (CLI, main job, tests): start a run, submit a
 * decision, recover a run a crash interrupted, close expired approvals. Decisions go through a per-thread
 * lease and a re-check that an approval is really pending, because LangGraph itself would accept a
 * resume for an ended thread as a silent no-op and lets two processes resume one thread at once.
 */
import { randomUUID } from "node:crypto";
import { Command, INTERRUPT } from "@langchain/langgraph";
import { pausedAtInterrupt } from "../store/checkpointer.js";
import type { State } from "../graph/state.js";
import type { RequestScope } from "../envelope/records.js";
import { DecisionNotAcceptedError, UsageError } from "../errors.js";
import { nextFromJournal, type ActionRow, type ThreadRecord } from "../store/action-machine.js";
import type { QuestionEntry } from "../store/journal.js";
import type { App } from "./open-app.js";
import type { Deps } from "../runtime/deps.js";
import { viewOfCheckpoint, viewThread, type ThreadSource, type ThreadView } from "./view-thread.js";
import { runConfigurable } from "../runtime/run-deps.js";

export interface RunInput {
  request: string;
  requestedBy: string;
  scope?: RequestScope;
  /** The requester's signature over the canonical request for this thread (src/envelope/signature.ts); needs opts.threadId. */
  requesterSignature?: string;
}

/**
 * How our runs checkpoint: "sync", each step's checkpoint committed before the next node starts.
 * Not "async": it gains nothing measurable here, and it opens a window in which a step's writes are
 * committed but the checkpoint after it is not: LangGraph then reads the thread as having no next
 * step, so a reader (`npm start --inbox` polling, `show`) sees it finished, with no outcome, while
 * the run is still going.
 */
export const RUN_DURABILITY = "sync" as const;

/** One node's state update, as it happens; the CLI shows each step from these. */
export type StepListener = (node: string, update: Partial<State>) => void;

/**
 * How a run stopped: the values it stopped with (already checkpointed) and the interrupts it paused
 * at (none at the graph's end).
 */
interface Driven {
  values: State | undefined;
  interrupts: Array<{ id?: string; value?: unknown }>;
}

async function drive(
  app: App,
  input: unknown,
  threadId: string,
  onStep?: StepListener,
  continued = false,
): Promise<Driven> {
  const stream = await app.graph.stream(input as never, {
    // The run's origin: `continued` for recover's run, with no input of its own; the Command's resume value.
    configurable: {
      thread_id: threadId,
      ...runConfigurable(continued, input instanceof Command ? input.resume : undefined),
    },
    durability: RUN_DURABILITY,
    streamMode: ["updates", "values"] as const,
  });
  const driven: Driven = { values: undefined, interrupts: [] };
  for await (const [mode, chunk] of stream as AsyncIterable<["updates" | "values", unknown]>) {
    // At a pause the values stream carries only the interrupts; the state is the chunk before it.
    if (mode === "values") {
      if (!(INTERRUPT in (chunk as object))) driven.values = chunk as State;
      continue;
    }
    for (const [node, update] of Object.entries(chunk as Record<string, unknown>)) {
      if (node !== INTERRUPT) onStep?.(node, (update ?? {}) as Partial<State>);
      else if ((update as Driven["interrupts"]).length > 0)
        driven.interrupts.push(...(update as Driven["interrupts"]));
      // A pause without an interrupt (interruptBefore/After) stops where only the checkpoint says.
      else driven.values = undefined;
    }
  }
  return driven;
}

/**
 * The view after a run, from the values and interrupts it stopped with (durability "sync": every
 * checkpoint is committed before the stream ends), overlaid with the journal as viewThread does,
 * without loading the checkpoint again; a run that emitted no values is read in full.
 */
async function viewAfter(app: App, threadId: string, driven: Driven): Promise<ThreadView> {
  if (!driven.values || Object.keys(driven.values).length === 0) return viewThread(app, threadId);
  return viewOfCheckpoint(app, threadId, { ...driven, next: [] });
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
  const driven = await withThreadLock(app, threadId, () =>
    drive(
      app,
      {
        request: input.request,
        requestedBy: input.requestedBy,
        ...(input.scope ? { scope: input.scope } : {}),
        ...(input.requesterSignature ? { requesterSignature: input.requesterSignature } : {}),
      },
      threadId,
      opts.onStep,
    ),
  );
  return viewAfter(app, threadId, driven);
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
    const { thread, action, question } = await journal.threadRows(threadId);
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

/**
 * What continues a run a crash stopped between nodes, decided from the journal over the checkpoint
 * (the same for `recover`, the worker and a recovery run on the API server, src/api/guard.ts); the
 * thread's view with it, or with no input when the view is not an interrupted run.
 */
export async function recoveryInput(
  app: ThreadSource,
  threadId: string,
): Promise<{ view: ThreadView; input?: Command | null }> {
  const view = await viewThread(app, threadId);
  if (view.status !== "interrupted_run") return { view };
  // A checkpoint still paused at an approval the journal has decided (checkpointBehind: the view names
  // the pause): it is resumed with a value that is not a decision; await_approval's gate sees the
  // journal has moved on, records that, and the run continues from the journal's step. Otherwise the
  // run continues as is.
  // A checkpoint at the graph's end that the journal has not closed (checkpointAhead) has no step to
  // continue: the run is sent to resync, which goes where the journal says.
  if (view.interruptId)
    return { view, input: new Command({ resume: { [view.interruptId]: RESUME_FROM_JOURNAL } }) };
  const atEnd = (await app.graph.getState({ configurable: { thread_id: threadId } })).next.length === 0;
  return { view, input: atEnd ? new Command({ goto: "resync" }) : null };
}

/** Continues a run that a crash stopped between nodes; the journal keeps it from writing twice. */
export async function recoverThread(app: App, threadId: string, onStep?: StepListener): Promise<ThreadView> {
  return withThreadLock(app, threadId, async () => {
    const { view, input } = await recoveryInput(app, threadId);
    if (input === undefined) {
      throw new UsageError(`thread ${threadId} has nothing to recover (status ${view.status})`);
    }
    return viewAfter(app, threadId, await drive(app, input, threadId, onStep, true));
  });
}

/**
 * Takes the journal's lease on the thread for its owner's label `by` and returns its release;
 * IN_PROGRESS while another process (or the inbox, or an API run) holds it.
 *
 * The lease is renewed every third of its term while held, so that a run outlasting the term (a slow
 * or rate-limited portal) keeps the thread to itself, but for `maxHoldMs` at most: a holder that never
 * releases (a stream nobody reads to its end) then lets the thread go, and says so. A renewal that
 * finds the lease taken by another owner (this process stalled past the term) stops renewing and says
 * so too; the journal's compare-and-set moves still keep a second executor from repeating a step.
 */
export async function takeThreadLock(
  deps: Pick<Deps, "journal">,
  threadId: string,
  by = "",
  { leaseMs = THREAD_LEASE_MS, maxHoldMs = THREAD_HOLD_MAX_MS, log = warn }: LockTerms = {},
): Promise<() => Promise<void>> {
  const owner = `${process.pid}:${by}${randomUUID()}`;
  const journal = deps.journal;
  if (!(await journal.acquireThreadLock(threadId, owner, leaseMs))) {
    throw new DecisionNotAcceptedError(
      threadId,
      "IN_PROGRESS",
      "another process is working on this thread right now; try again when it has finished",
    );
  }
  const until = Date.now() + maxHoldMs;
  const stop = (why: string) => {
    clearInterval(renew);
    log(`action-envelope: the lock on thread ${threadId} (${owner}) ${why}`);
  };
  const renew = setInterval(() => {
    if (Date.now() >= until) {
      stop(`was held for ${maxHoldMs} ms, the most a run may hold it; it is released`);
      void journal.releaseThreadLock(threadId, owner);
      return;
    }
    journal.acquireThreadLock(threadId, owner, leaseMs).then(
      (held) => {
        if (!held) stop("was taken by another owner after its term ran out; it is no longer renewed");
      },
      (e: Error) => log(`action-envelope: could not renew the lock on thread ${threadId}: ${e.message}`),
    );
  }, leaseMs / 3);
  renew.unref();
  return async () => {
    clearInterval(renew);
    await journal.releaseThreadLock(threadId, owner);
  };
}

/** How long a thread's lease lasts unrenewed, how long one holder may keep renewing it, and where that is said. */
export interface LockTerms {
  leaseMs?: number;
  maxHoldMs?: number;
  log?: (line: string) => void;
}

/** How long a thread's lease lasts unrenewed: a holder that died on another host keeps it no longer. */
const THREAD_LEASE_MS = 5 * 60_000;
/** The longest one run holds a thread: far past any run's portal calls, even rate-limited ones. */
const THREAD_HOLD_MAX_MS = 60 * 60_000;
const warn = (line: string) => process.stderr.write(`${line}\n`);

/** Runs `fn` under the journal's lease on the thread (takeThreadLock). */
export async function withThreadLock<T>(
  app: Pick<App, "deps">,
  threadId: string,
  fn: () => Promise<T>,
  by = "",
): Promise<T> {
  const release = await takeThreadLock(app.deps, threadId, by);
  try {
    return await fn();
  } finally {
    await release();
  }
}

export interface SweepResult {
  threadId: string;
  envelopeHash: string;
  /** What became of the thread: ended, or escalated to a fresh approval for another group. */
  result: "expired" | "escalated" | "skipped";
  detail: string;
}

/** Who a system expiry names where no caller is authenticated (the sweep and the workers). */
export const SWEEP_ID = "system:sweep";

/**
 * The expiry of the approval bound to this hash and nonce (an envelope's, or a change set's), sent as
 * a system decision through the graph: the thread ends, or is escalated as the policy says. Refused
 * as any decision is (DecisionNotAcceptedError) when the thread does not wait for one.
 */
export async function expireBound(
  app: App,
  threadId: string,
  bound: { envelopeHash: string; nonce: string },
  onStep?: StepListener,
): Promise<SweepResult> {
  const { envelopeHash, nonce } = bound;
  const after = await submitDecision(
    app,
    threadId,
    { decisions: [{ type: "expire", envelopeHash, nonce, by: { id: SWEEP_ID } }] },
    onStep,
  );
  const escalated = after.status === "awaiting_approval";
  return {
    threadId,
    envelopeHash,
    result: escalated ? "escalated" : "expired",
    detail: escalated
      ? `fresh envelope ${after.approval!.envelopeHash} for group ${after.approval!.escalatedTo}`
      : `${after.state?.outcome} / ${after.state?.reasonCode}`,
  };
}
