/**
 * Late resumes over the LangGraph API. A `command.resume` sent to a thread that is not waiting (it
 * ended, or never asked anything) runs no node at all in LangGraph: the server would answer 200 with a
 * "success" run and nothing would be recorded. Here such a resume is refused visibly instead: the run
 * fails with a `LateResumeRefused` error whose message starts with the code (THREAD_ENDED, or
 * NOT_WAITING for a thread that has not ended but asks nothing), and a `decision_refused` record with
 * that code goes to the audit log. Nothing else changes: the journal's outcome stands.
 * `refuseLateResume` is called by src/api/guard.ts around the graph the API server serves, when the
 * run starts (after the server accepted it).
 */
import { isCommand, type CompiledStateGraph } from "@langchain/langgraph";
import type { Deps } from "../runtime/deps.js";
import { jsonSafe } from "../hitl/audit-records.js";
import { boundedForEvidence, checkBounds } from "../hitl/bounds.js";
import { sha256Hex } from "../auth/tokens.js";
import type { AuditEntry } from "../store/audit.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";

export type LateResumeCode = "THREAD_ENDED" | "NOT_WAITING";

/**
 * The error a refused late resume fails its run with; the API reports `{error: name, message}`. A
 * `command: {resume: null}` to a waiting thread fails as ResumeMissing (RESUME_MISSING): nothing was
 * resumed, and the thread keeps waiting.
 */
export class LateResumeRefusedError extends Error {
  constructor(
    readonly threadId: string,
    readonly code: LateResumeCode | "RESUME_MISSING",
    readonly reason: string,
  ) {
    super(`${code}: ${reason}`);
    this.name = code === "RESUME_MISSING" ? "ResumeMissing" : "LateResumeRefused";
  }
}

/** Pure: the refusal of a null resume to a thread waiting for an approval or an answer, naming what to send. */
export function missingResume(waitingFor: "approval" | "input"): { code: "RESUME_MISSING"; reason: string } {
  return {
    code: "RESUME_MISSING",
    reason:
      waitingFor === "approval"
        ? 'command.resume is null, so nothing was decided; this thread still waits for an approval: resume with {"decisions":[{"type":"approve","envelopeHash":"…","nonce":"…"}]} (or type reject, edit, cancel), as the approval\'s exampleResume shows'
        : "command.resume is null, so nothing was answered; this thread still waits for an answer to its question: resume with an object of the fields the question asks for",
  };
}

/** Pure: why a resume to this thread, whose addressed checkpoint has no task to run, is refused. */
function classifyLateResume(thread: ThreadRecord | undefined): { code: LateResumeCode; reason: string } {
  if (thread?.closed) {
    const c = thread.closed;
    return {
      code: "THREAD_ENDED",
      reason: `this thread ended at ${c.at} with ${c.outcome} (${c.reasonCode}); it is waiting for no decision, so this one was not applied and changed nothing`,
    };
  }
  return {
    code: "NOT_WAITING",
    reason: thread
      ? "this thread is not waiting for a decision or an answer (no approval or question is pending); the resume was not applied and changed nothing"
      : 'this thread has no request yet, so nothing is waiting for a decision; start it with input {"request": …}',
  };
}

/** The audit record of a refused late (or missing) resume: one per received value and time. */
export function lateResumeEntry(
  threadId: string,
  thread: ThreadRecord | undefined,
  action: ActionRow | undefined,
  refusal: { code: string; reason: string },
  received: unknown,
  at: string,
): AuditEntry {
  const bounds = checkBounds(received);
  const kept = boundedForEvidence(received, bounds);
  const e = action?.envelope;
  const digest = sha256Hex(`${at}\n${JSON.stringify(jsonSafe(kept))}`).slice(0, 16);
  const claimed = (received as { decisions?: Array<{ type?: unknown; approver?: { id?: unknown } }> } | null)
    ?.decisions?.[0];
  return jsonSafe({
    threadId,
    revision: action?.revision ?? 0,
    event: "decision_refused",
    discriminator: `${refusal.code}:${digest}`,
    at,
    requestedBy: e?.requestedBy ?? thread?.requestedBy ?? "",
    risk: e ? { level: e.risk.level, reversibility: e.risk.reversibility } : null,
    what: e
      ? {
          operation: e.operation,
          taskId: e.object.id,
          params: e.params,
          envelopeHash: action!.envelopeHash,
          envelope: e,
        }
      : { operation: "update_task", taskId: null, params: null, envelopeHash: null, envelope: null },
    approver: {
      id: typeof claimed?.approver?.id === "string" ? claimed.approver.id : null,
      verifiedBy: "unverified",
      decision: typeof claimed?.type === "string" ? claimed.type : null,
      decidedAt: null,
    },
    override: null,
    policy: e ? { id: e.policy.id, version: e.policy.version } : { id: "", version: "" },
    refusal: { code: refusal.code, reason: refusal.reason },
    outcome: null,
    received: kept,
  }) as AuditEntry;
}

/**
 * Checks a run's input before the graph sees it; throws LateResumeRefusedError (after auditing) for a
 * resume that would run nothing: the addressed checkpoint (the latest, or the one the run names) has
 * no task left to run. Anything that would run a node (a pending interrupt, a task left by a state
 * update, a fork of a waiting checkpoint) passes: the nodes' journal checks decide those.
 */
export async function refuseLateResume(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any compiled graph's getState
  graph: Pick<CompiledStateGraph<any, any, any>, "getState">,
  input: unknown,
  options: { configurable?: Record<string, unknown> } | undefined,
  deps: Deps,
): Promise<void> {
  if (!isCommand(input) || input.resume === undefined) return;
  const configurable = options?.configurable ?? {};
  const threadId = configurable["thread_id"];
  if (typeof threadId !== "string" || threadId === "") return;
  const addressed: Record<string, unknown> = { thread_id: threadId };
  for (const key of ["checkpoint_id", "checkpoint_ns"] as const)
    if (typeof configurable[key] === "string") addressed[key] = configurable[key];
  const snapshot = await graph.getState({ configurable: addressed });
  const waiting = snapshot.next.length > 0 || snapshot.tasks.some((t) => (t.interrupts?.length ?? 0) > 0);
  if (waiting && input.resume !== null) return;
  const thread = await deps.journal.getThread(threadId);
  const action = await deps.journal.currentAction(threadId);
  // Waiting with a null resume: LangGraph writes no resume value for null, so the pending node would
  // just ask again, and the run would end "success" with nothing said or recorded.
  const kinds = snapshot.tasks.flatMap((t) =>
    (t.interrupts ?? []).map((i) => (i.value as { kind?: unknown } | undefined)?.kind),
  );
  const refusal = waiting
    ? missingResume(kinds.includes("input") && !kinds.includes("approval") ? "input" : "approval")
    : classifyLateResume(thread);
  await deps.audit.append(
    lateResumeEntry(threadId, thread, action, refusal, input.resume, deps.clock().toISOString()),
  );
  throw new LateResumeRefusedError(threadId, refusal.code, refusal.reason);
}
