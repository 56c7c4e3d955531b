/**
 * Due work for `worker`: the actions the journal says are due (src/store/due.ts) on threads the CLI
 * keeps (keeper "local", src/store/keeper.ts), claimed under a lease (journal.claimDue) in small batches, each thread then driven on the decision path: an expired
 * approval is expired or escalated as a system decision, a run a dead process left is recovered. A
 * thread that is not due costs nothing: no row of it is read and no checkpoint is loaded.
 *
 * Several workers share the due work: a claimed action is skipped by the others until its lease ends
 * (a worker that died mid-round), and each thread is still driven under the journal's thread lock.
 * The claim loop (`workDue`) is the same for `worker --api`, which drives the threads the LangGraph API
 * server keeps through its API (src/api/api-due-work.ts).
 */
import os from "node:os";
import { randomUUID } from "node:crypto";
import type { DueItem } from "../store/due.js";
import type { DueJournal } from "../store/journal.js";
import type { Keeper } from "../store/keeper.js";
import { DecisionNotAcceptedError, UsageError } from "../errors.js";
import { expireBound, recoverThread, type SweepResult } from "./threads.js";
import { approvalBinding } from "../hitl/approval-request.js";
import type { App } from "./open-app.js";
import { viewThread, type ThreadView } from "./view-thread.js";

export interface RecoveryResult {
  threadId: string;
  result: "recovered" | "busy" | "skipped";
  detail: string;
}

export interface DueRound {
  swept: SweepResult[];
  recovered: RecoveryResult[];
}

export interface DueWorkOptions {
  /** Who claims (kept with each claim); one per round by default. */
  owner?: string;
  /** Actions claimed at a time: small, so several workers share a burst of due work. */
  batch?: number;
  /** The most actions one round claims; what is left is due for the next round (or another worker). */
  maxPerRound?: number;
  /**
   * Threads of a claimed batch driven at once: their waits on the database and the portal overlap
   * (each still runs under its own thread lock, so a process with a PostgreSQL pool of P drives at
   * most ⌊P/2⌋ at a time whatever this says).
   */
  concurrency?: number;
  /** How long a claim holds against other workers: past it, a worker that died has its claims taken over. */
  leaseMs?: number;
  /** When a thread with nothing for a worker to do now (waiting for an answer, driven by a live process) is due again. */
  retryMs?: number;
}

const DUE_DEFAULTS = {
  batch: 20,
  maxPerRound: 1000,
  concurrency: 4,
  leaseMs: 120_000,
  retryMs: 60_000,
} as const;

/**
 * What a round does with one thread, given its claimed items; it may release them itself (with
 * another due time than the round's retry).
 */
export type ThreadWork = (
  threadId: string,
  round: DueRound,
  owner: string,
  items: DueItem[],
) => Promise<void>;

/**
 * One round over the due index for the threads `keeper` keeps: claims due actions batch by batch
 * until none is due (or maxPerRound), works each thread once, and releases what it did not move.
 */
export async function workDue(
  journal: DueJournal,
  clock: () => Date,
  keeper: Keeper,
  work: ThreadWork,
  opts: DueWorkOptions = {},
): Promise<DueRound> {
  const o = { ...DUE_DEFAULTS, ...opts };
  const owner = opts.owner ?? `${os.hostname()}:${process.pid}:${randomUUID()}`;
  const round: DueRound = { swept: [], recovered: [] };
  const done = new Set<string>();
  let claimed = 0;
  while (claimed < o.maxPerRound) {
    const items = await journal.claimDue(
      clock(),
      Math.min(o.batch, o.maxPerRound - claimed),
      owner,
      o.leaseMs,
      keeper,
    );
    if (items.length === 0) break;
    claimed += items.length;
    const threads = [...byThread(items)];
    // Each thread reports into its own round, merged in claim order, so the report does not depend on
    // which thread finished first; a thread that fails does not stop the others, and the round then
    // throws the first failure in claim order.
    const parts = threads.map((): DueRound => ({ swept: [], recovered: [] }));
    const failures = new Map<number, unknown>();
    const worked: string[] = [];
    let next = 0;
    const lane = async (): Promise<void> => {
      for (let i = next++; i < threads.length; i = next++) {
        const [threadId, ofThread] = threads[i]!;
        try {
          if (!done.has(threadId)) {
            done.add(threadId);
            await work(threadId, parts[i]!, owner, ofThread);
          }
          worked.push(...ofThread.map((item) => item.envelopeHash));
        } catch (e) {
          failures.set(i, e);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(Math.max(1, o.concurrency), threads.length) }, lane));
    // Whatever the batch's work did not move (moves end the claim) is due again only after a while, so
    // neither this round nor the next worker takes it up again at once; a failed thread keeps its claim.
    await journal.releaseDue(worked, owner, new Date(clock().getTime() + o.retryMs));
    for (const part of parts) {
      round.swept.push(...part.swept);
      round.recovered.push(...part.recovered);
    }
    if (failures.size > 0) throw failures.get(Math.min(...failures.keys()));
  }
  return round;
}

/** One round for the threads the CLI keeps (keeper "local"), each driven through the local decision path. */
export function runDueWork(app: App): Promise<DueRound> {
  return workDue(app.deps.journal, app.deps.clock, "local", (threadId, round, owner, items) =>
    workThread(app, threadId, round, owner, items, true),
  );
}

/**
 * `sweep`: one round of the due work that closes (or escalates) approvals past their expiry, found by
 * the due index as the worker finds them; a run stopped between steps is reported skipped and left to
 * `recover` or the worker.
 */
export async function sweepExpired(app: App): Promise<SweepResult[]> {
  const round = await workDue(
    app.deps.journal,
    app.deps.clock,
    "local",
    async (threadId, r, owner, items) => {
      if (items.some((i) => i.reason === "expiry")) await workThread(app, threadId, r, owner, items, false);
    },
  );
  return round.swept;
}

/** A recovered thread as a round reports it: its outcome when the run finished, else its status. */
export function recovered(threadId: string, after: ThreadView): RecoveryResult {
  return {
    threadId,
    result: "recovered",
    detail:
      after.status === "finished"
        ? `${after.state?.outcome} / ${after.state?.reasonCode}`
        : `now ${after.status}`,
  };
}

function byThread(items: DueItem[]): Map<string, DueItem[]> {
  const m = new Map<string, DueItem[]>();
  for (const item of items) m.set(item.threadId, [...(m.get(item.threadId) ?? []), item]);
  return m;
}

/**
 * The per-thread work: expire an approval past its expiry, recover a stopped run (or, without
 * `recover`, report it skipped when its approval is due); anything else waits.
 */
async function workThread(
  app: App,
  threadId: string,
  round: DueRound,
  owner: string,
  items: DueItem[],
  recover: boolean,
): Promise<void> {
  if (await expiredFromJournal(app, threadId, round, owner, items)) return;
  const view = await viewThread(app, threadId);
  if (view.status === "awaiting_approval" && view.approval) {
    const expiresAt = Date.parse(view.approval.expiresAt);
    if (expiresAt <= app.deps.clock().getTime()) {
      round.swept.push((await expireOrSkip(app, threadId, view.approval)).swept);
      return;
    }
    await dueAgainAt(app.deps.journal, owner, items, expiresAt);
    return;
  }
  if (view.status !== "interrupted_run") return;
  if (!recover) {
    const envelopeHash = items[0]!.envelopeHash;
    round.swept.push({ threadId, envelopeHash, result: "skipped", detail: `thread is ${view.status}` });
    return;
  }
  try {
    round.recovered.push(recovered(threadId, await recoverThread(app, threadId)));
  } catch (e) {
    if (e instanceof DecisionNotAcceptedError && e.code === "IN_PROGRESS") {
      round.recovered.push({ threadId, result: "busy", detail: "another live process is driving it" });
    } else if (e instanceof UsageError) {
      // Finished or resumed by someone else between the look and the lock.
      round.recovered.push({ threadId, result: "skipped", detail: e.message });
    } else throw e;
  }
}

/**
 * An approval due for its expiry, handled from the journal's rows alone while the journal says it
 * waits and no question is open: expired (or escalated) as a system decision, whose own checks (the
 * thread lock, the journal, the pause) stand as for any decision; put back until its expiry when not
 * yet past it. False when the rows say otherwise or the run is not paused to take the decision: the
 * thread's view decides then (a run stopped between steps is recovered).
 */
async function expiredFromJournal(
  app: App,
  threadId: string,
  round: DueRound,
  owner: string,
  items: DueItem[],
): Promise<boolean> {
  if (!items.every((i) => i.reason === "expiry")) return false;
  const { action, question } = await app.deps.journal.threadRows(threadId);
  if (!action?.macValid || action.phase !== "registered" || question?.status === "open") return false;
  if (!items.some((i) => i.envelopeHash === action.envelopeHash)) return false;
  const bound = approvalBinding(action);
  const expiresAt = Date.parse(bound.expiresAt);
  if (expiresAt > app.deps.clock().getTime()) {
    await dueAgainAt(app.deps.journal, owner, items, expiresAt);
    return true;
  }
  const { swept, notPaused } = await expireOrSkip(app, threadId, bound);
  if (notPaused) return false;
  round.swept.push(swept);
  return true;
}

/**
 * The expiry sent (expireBound); a refusal is reported skipped with its reason, and `notPaused` says
 * whether it was refused because the run is not paused to take a decision.
 */
async function expireOrSkip(
  app: App,
  threadId: string,
  bound: { envelopeHash: string; nonce: string },
): Promise<{ swept: SweepResult; notPaused: boolean }> {
  try {
    return { swept: await expireBound(app, threadId, bound), notPaused: false };
  } catch (e) {
    const notPaused = e instanceof DecisionNotAcceptedError && e.code === "NOT_AWAITING_APPROVAL";
    const detail = (e as Error).message;
    return { swept: { threadId, envelopeHash: bound.envelopeHash, result: "skipped", detail }, notPaused };
  }
}

/** Not yet expired (a post-approval step of an earlier action of the thread): due at the approval's expiry. */
export async function dueAgainAt(
  journal: DueJournal,
  owner: string,
  items: DueItem[],
  expiresAt: number,
): Promise<void> {
  if (!Number.isFinite(expiresAt)) return;
  await journal.releaseDue(
    items.map((i) => i.envelopeHash),
    owner,
    new Date(expiresAt),
  );
}
