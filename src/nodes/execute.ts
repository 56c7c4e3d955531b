import { createHash } from "node:crypto";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { getDeps, type Deps } from "../runtime/deps.js";
import type { AcknowledgementRecord, InvocationRecord } from "../hitl/records.js";
import type { ExecutionEntry } from "../store/journal.js";
import type { ActionRow } from "../store/action-machine.js";
import { closeAction, mirrorOf, noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";

/**
 * The only node holding the write handle. It acts only for an action the journal holds at
 * `pre_read` with a MATCH for that hash; the arguments are the journal's registered envelope alone;
 * the write-ahead entry is in the journal before the request leaves; the call is sent once and never
 * retried; the target's answer is kept as an acknowledgement, separate from verification.
 */
export async function execute(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = await getDeps();
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "execute", state);
  if (refused) return refused;
  const action = gate.action!;
  await noteStateDrift(deps, gate, "execute", state);
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  const mirror = mirrorOf(action);

  // Re-entry after a crash: the write was already sent once (or its entry recorded), so it is never sent again.
  const previous = await deps.journal.findExecution(envelopeHash);
  if (previous) return { ...mirror, ...(await reconcile(deps, action, previous)) };
  if (action.phase !== "pre_read" || action.progress.preRead?.verdict !== "MATCH") return { needsResync: true };

  const now = deps.clock();
  if (now.getTime() >= Date.parse(envelope.expiresAt)) {
    return { ...mirror, ...(await closeAction(deps, action, "NOT_EXECUTED", "APPROVAL_EXPIRED", `the approval expired at ${envelope.expiresAt}, before the write (now ${now.toISOString()})`)) };
  }
  if (envelope.portal !== deps.portal) {
    return { ...mirror, ...(await closeAction(deps, action, "NOT_EXECUTED", "WRONG_TARGET", `the envelope was approved for portal ${envelope.portal}, but this process is connected to ${deps.portal}`)) };
  }
  const args = { taskId: envelope.object.id, fields: envelope.params };
  const idempotencyKey = createHash("sha256").update(`${envelopeHash}\n${envelope.nonce}`).digest("hex").slice(0, 32);
  const sentAt = now.toISOString();
  const intent = await deps.journal.recordIntent({ envelopeHash, threadId: action.threadId, idempotencyKey, args }, sentAt);
  if (!intent.recorded) return { ...mirror, ...(await reconcile(deps, action, intent.existing)) };
  const moved = await deps.journal.moveAction(envelopeHash, "intent", {});
  if (!moved.ok) throw new Error(`the write-ahead entry for ${envelopeHash} was recorded but the action could not move to intent: ${moved.reason}`);
  const invocation: InvocationRecord = { tool: "update_task", args, idempotencyKey, envelopeHash, sentAt };

  const res = await deps.tools.writeHandle.updateTask(args.taskId, args.fields);
  const at = deps.clock().toISOString();
  const acknowledgement: AcknowledgementRecord = res.ok
    ? { status: "OK", body: res.body, at }
    : res.error.outcomeUnknown
      ? { status: "MISSING", error: res.error, reason: "no answer from the target; the write may or may not have been applied", at }
      : { status: "ERROR", error: res.error, at };
  await deps.journal.recordAcknowledgement(envelopeHash, acknowledgement, at);
  await deps.journal.moveAction(envelopeHash, "acknowledged", { acknowledgement });
  return { ...mirror, invocation, acknowledgement };
}

/** The invocation as the journal recorded it before sending. */
export function invocationOf(entry: ExecutionEntry): InvocationRecord {
  return {
    tool: "update_task",
    args: entry.args as InvocationRecord["args"],
    idempotencyKey: entry.idempotencyKey,
    envelopeHash: entry.envelopeHash,
    sentAt: entry.sentAt,
  };
}

/**
 * Brings the action up to what the write-ahead entry says happened, without sending anything: an
 * entry with no answer recorded means the process died after (or while) sending, so the
 * acknowledgement is MISSING and only verification can tell.
 */
async function reconcile(deps: Deps, action: ActionRow, entry: ExecutionEntry): Promise<Update> {
  const acknowledgement: AcknowledgementRecord = entry.acknowledgement
    ? (entry.acknowledgement as AcknowledgementRecord)
    : action.progress.acknowledgement ?? {
        status: "MISSING",
        reason: `the write was sent at ${entry.sentAt} by a process that ended before recording an answer; not re-sent`,
        at: deps.clock().toISOString(),
      };
  if (action.phase === "pre_read") await deps.journal.moveAction(action.envelopeHash, "intent", {});
  const now = await deps.journal.getAction(action.envelopeHash);
  if (now?.phase === "intent") await deps.journal.moveAction(action.envelopeHash, "acknowledged", { acknowledgement });
  return { invocation: invocationOf(entry), acknowledgement };
}
