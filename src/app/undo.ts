/**
 * `undo <thread>`: proposes the compensation of a VERIFIED change as a new thread of its own, with its
 * own envelope, card and approval: restores of updates, and deletes of what creates made where the
 * policy allows those deletes. Never automatic: this only starts the run, which stops at the
 * approval like any other. The run's request is `undo thread <id>`, the same request any interface can
 * send (API, Studio's chat): the agent registers the thread sealed with the action it restores, and the
 * proposal is built by code from the journal; the model is never asked.
 */
import { UsageError } from "../errors.js";
import { undoPlanFor, undoRequest } from "../hitl/compensation.js";
import { startRun, type StepListener } from "./threads.js";
import type { App } from "./open-app.js";
import type { ThreadView } from "./view-thread.js";

export async function startUndo(
  app: App,
  threadId: string,
  requestedBy: string,
  opts: { onStep?: StepListener } = {},
): Promise<ThreadView> {
  // Checked first so the command line says why at once, without starting a thread that would only end NOT_UNDOABLE.
  const undo = await undoPlanFor(app.deps.journal, threadId, undefined, app.deps.policy);
  if (!undo.ok) throw new UsageError(`${undo.code}: ${undo.reason}`);
  return startRun(
    app,
    { request: undoRequest(threadId), requestedBy },
    opts.onStep ? { onStep: opts.onStep } : {},
  );
}
