/**
 * `undo <thread>`: proposes the compensation of a VERIFIED change as a new thread of its own, with its
 * own envelope, card and approval. Never automatic: this only starts the run, which stops at the
 * approval like any other. The thread is registered in the journal first, sealed with the action it
 * undoes, so the graph builds the proposal from the journal and the model is never asked.
 */
import { randomUUID } from "node:crypto";
import { UsageError } from "../errors.js";
import { undoPlanFor } from "../hitl/compensation.js";
import { startRun, type App, type StepListener, type ThreadView } from "./threads.js";

export async function startUndo(app: App, threadId: string, requestedBy: string, opts: { onStep?: StepListener } = {}): Promise<ThreadView> {
  const undo = await undoPlanFor(app.deps.journal, threadId);
  if (!undo.ok) throw new UsageError(`${undo.code}: ${undo.reason}`);
  const { plan, original } = undo;
  const restore = Object.entries(plan.fields).map(([f, v]) => `${f}=${JSON.stringify(v)}`).join(", ");
  const request = `undo thread ${threadId}: on task ${plan.taskId} restore ${restore} (the values before envelope ${original.envelopeHash})`;
  const scope = { taskIds: [plan.taskId], fields: Object.keys(plan.fields) };
  const undoThread = randomUUID();
  await app.deps.journal.registerThread({
    threadId: undoThread,
    request,
    requestedBy,
    scope,
    createdAt: app.deps.clock().toISOString(),
    compensates: { threadId, envelopeHash: original.envelopeHash },
  });
  return startRun(app, { request, requestedBy, scope }, { threadId: undoThread, ...(opts.onStep ? { onStep: opts.onStep } : {}) });
}
