/**
 * The pending resume value (state's `pendingDecision`) and how a node clears it. A node that has taken
 * the value (judged it, or found nothing to judge) clears that value only: its write names the value it
 * saw. LangGraph replays the writes of a finished task when it resumes an interrupted step, and a goto
 * sent while an approval waits runs its node beside the waiting `await_approval`, in that step. Its
 * replayed clear must not clear the value the resume has just written, or no decision would reach
 * `check_decision` again.
 */
import { createHash } from "node:crypto";

/** The write that clears the pending value `seen`, and nothing written after it. */
export interface TakenPending {
  takenPending: string;
}

/** The channel's reducer: a clear clears only the value it names; any other write is the new value. */
export function afterPendingWrite(current: unknown, next: unknown): unknown {
  const taken =
    typeof next === "object" && next !== null && !Array.isArray(next) && Object.keys(next).length === 1
      ? (next as Partial<TakenPending>).takenPending
      : undefined;
  if (typeof taken !== "string") return next;
  return taken === digestOf(current) ? null : current;
}

/** A node's update with its clear of the pending value (`pendingDecision: null`) naming the value it saw. */
export function settledPending<U extends { pendingDecision?: unknown }>(update: U, seen: unknown): U {
  if (!("pendingDecision" in update) || update.pendingDecision !== null) return update;
  return { ...update, pendingDecision: { takenPending: digestOf(seen) } satisfies TakenPending };
}

const digestOf = (value: unknown): string =>
  createHash("sha256")
    .update(JSON.stringify(value ?? null) ?? "null")
    .digest("hex");
