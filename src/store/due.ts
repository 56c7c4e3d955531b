/**
 * When an open action is next due for a worker, and why: both journals keep this beside each action
 * row (`due_at`, `due_reason`), set in the transaction that moves the action, so workers find due
 * work through an index (src/app/due-work.ts) instead of reading every open thread's checkpoint.
 *
 * A waiting approval is due at its expiry (the escalated revision carries its own, so escalation is
 * the same deadline); an action in a post-approval phase is due a short grace after it entered that
 * phase, when a run that is still going would normally have moved it on; a final action is never due.
 */
import type { Phase, RegisteredAction } from "./action-machine.js";

export { DEFAULT_RESUME_GRACE_MS } from "../config/env.js";

export type DueReason = "expiry" | "resume";

/** A due time (ms since the epoch) and its reason; null: not due (the action has ended). */
export type DueMark = { at: number; reason: DueReason } | null;

/** A waiting approval's deadline: its change set's expiry, or its envelope's. */
export function dueOnRegister(a: Pick<RegisteredAction, "envelope" | "set">): DueMark {
  return { at: Date.parse(a.set?.set.expiresAt ?? a.envelope.expiresAt), reason: "expiry" };
}

/** What a move to `to` at `nowMs` makes the action due for. */
export function dueOnMove(to: Phase, nowMs: number, graceMs: number): DueMark {
  switch (to) {
    case "closed":
    case "superseded":
      return null;
    case "registered":
      throw new Error("an action becomes registered only by registration (dueOnRegister)");
    case "decided":
    case "pre_read":
    case "intent":
    case "acknowledged":
    case "verified":
      return { at: nowMs + graceMs, reason: "resume" };
    default: {
      const never: never = to;
      throw new Error(`unknown phase ${String(never)}`);
    }
  }
}

/** One action a worker claimed (journal.claimDue): its thread, when it fell due and why. */
export interface DueItem {
  envelopeHash: string;
  threadId: string;
  dueAt: number;
  reason: DueReason;
}

/** A due row as both journals select it (PostgreSQL returns BIGINT as a string). */
export interface DueRow {
  envelope_hash: string;
  thread_id: string;
  due_at: number | string;
  due_reason: DueReason;
}

export function toDueItem(r: DueRow): DueItem {
  return {
    envelopeHash: r.envelope_hash,
    threadId: r.thread_id,
    dueAt: Number(r.due_at),
    reason: r.due_reason,
  };
}
