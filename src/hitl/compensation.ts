/**
 * Undo of a verified action, read from the journal only: which action a thread's undo restores, and
 * the proposal that restores it (src/envelope/compensation.ts). Used by `undo <thread>` before it
 * starts anything, and again by build_envelope, which trusts only the journal's sealed rows.
 */
import { compensationOf, type CompensationPlan } from "../envelope/compensation.js";
import type { ActionRow } from "../store/action-machine.js";
import type { Journal } from "../store/journal.js";
import type { ProposalRecord, ReasonCode } from "./records.js";

export type UndoPlan =
  | { ok: true; original: ActionRow; plan: Extract<CompensationPlan, { ok: true }>; proposal: ProposalRecord }
  | { ok: false; code: "NO_SUCH_THREAD" | "NOT_UNDOABLE" | "INTEGRITY_CHECK_FAILED"; reason: string };

/** How a run that cannot undo ends: a record failing its seal is tampering; anything else is NOT_UNDOABLE. */
export function undoEndingCode(code: Extract<UndoPlan, { ok: false }>["code"]): ReasonCode {
  return code === "INTEGRITY_CHECK_FAILED" ? "ENVELOPE_TAMPERED" : "NOT_UNDOABLE";
}

/** The undo of thread `threadId`'s verified action, or why there is none. */
export async function undoPlanFor(journal: Pick<Journal, "getThread" | "currentAction" | "getAction">, threadId: string, envelopeHash?: string): Promise<UndoPlan> {
  const thread = await journal.getThread(threadId);
  if (!thread) return { ok: false, code: "NO_SUCH_THREAD", reason: `no thread ${threadId} in the journal` };
  const action = envelopeHash ? await journal.getAction(envelopeHash) : await journal.currentAction(threadId);
  if (!action || action.threadId !== threadId) return { ok: false, code: "NOT_UNDOABLE", reason: `thread ${threadId} has no action${envelopeHash ? ` ${envelopeHash}` : ""} to undo` };
  if (!action.macValid || !thread.macValid) {
    return { ok: false, code: "INTEGRITY_CHECK_FAILED", reason: `the journal's record of thread ${threadId} fails its seal; nothing is proposed from it` };
  }
  const closed = action.progress.closed;
  if (action.phase !== "closed" || closed?.outcome !== "VERIFIED") {
    const where = closed ? `ended ${closed.outcome} (${closed.reasonCode})` : `is ${action.phase}`;
    return { ok: false, code: "NOT_UNDOABLE", reason: `only a VERIFIED change can be undone; thread ${threadId} ${where}` };
  }
  const plan = compensationOf(action.envelope, action.progress.verification?.raw);
  if (!plan.ok) return { ok: false, code: "NOT_UNDOABLE", reason: `thread ${threadId}: ${plan.reason}` };
  return {
    ok: true,
    original: action,
    plan,
    proposal: { taskId: plan.taskId, fields: plan.fields, rationale: `undo of thread ${threadId} (envelope ${action.envelopeHash}): restore the values recorded before its write`, source: "compensation" },
  };
}

/**
 * A request that asks for an undo: `undo thread <id>` (also `undo <id>`), alone on its line. Any
 * interface that can start a run (CLI, API, Studio's chat) can ask for one this way; the thread id
 * is all it carries, and the proposal is still built by code from the journal.
 */
export function undoRequestOf(request: string): string | undefined {
  const m = /^\s*undo(?:\s+thread)?\s+([A-Za-z0-9][A-Za-z0-9._:-]{0,127})\s*$/i.exec(request);
  return m ? m[1] : undefined;
}

export const undoRequest = (threadId: string): string => `undo thread ${threadId}`;
