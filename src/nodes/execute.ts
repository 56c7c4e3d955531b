import { createHash } from "node:crypto";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { approvedEnvelopeProblem } from "../hitl/approved-envelope.js";
import type { AcknowledgementRecord, InvocationRecord } from "../hitl/records.js";
import type { ExecutionEntry } from "../store/journal.js";
import { endRun } from "./finish-with.js";

/**
 * The only node holding the write handle. The arguments come from the approved envelope alone; the
 * write-ahead entry is in the journal before the request leaves; the call is sent once and never
 * retried; the target's answer is kept as an acknowledgement, separate from verification.
 */
export async function execute(state: State): Promise<Update> {
  const deps = await getDeps();
  const envelope = state.envelope!;
  const problem = await approvedEnvelopeProblem(envelope, deps.journal);
  if (problem) return endRun("NOT_EXECUTED", "ENVELOPE_TAMPERED", problem);
  if (envelope.portal !== deps.portal) {
    return endRun("NOT_EXECUTED", "WRONG_TARGET", `the envelope was approved for portal ${envelope.portal}, but this process is connected to ${deps.portal}`);
  }
  const envelopeHash = (await deps.journal.findClaim(envelope.nonce))!.envelopeHash;

  const previous = await deps.journal.findExecution(envelopeHash);
  if (previous) return reconcile(previous);

  const now = deps.clock();
  if (now.getTime() >= Date.parse(envelope.expiresAt)) {
    return endRun("NOT_EXECUTED", "APPROVAL_EXPIRED", `the approval expired at ${envelope.expiresAt}, before the write (now ${now.toISOString()})`);
  }
  const args = { taskId: envelope.object.id, fields: envelope.params };
  const idempotencyKey = createHash("sha256").update(`${envelopeHash}\n${envelope.nonce}`).digest("hex").slice(0, 32);
  const sentAt = now.toISOString();
  const intent = await deps.journal.recordIntent({ envelopeHash, threadId: envelope.runContext.threadId, idempotencyKey, args }, sentAt);
  if (!intent.recorded) return reconcile(intent.existing);
  const invocation: InvocationRecord = { tool: "update_task", args, idempotencyKey, envelopeHash, sentAt };

  const res = await deps.tools.writeHandle.updateTask(args.taskId, args.fields);
  const at = deps.clock().toISOString();
  const acknowledgement: AcknowledgementRecord = res.ok
    ? { status: "OK", body: res.body, at }
    : res.error.outcomeUnknown
      ? { status: "MISSING", error: res.error, reason: "no answer from the target; the write may or may not have been applied", at }
      : { status: "ERROR", error: res.error, at };
  await deps.journal.recordAcknowledgement(envelopeHash, acknowledgement, at);
  return { invocation, acknowledgement };
}

/** Re-entry after a crash: the write was already sent once, so it is never sent again. */
function reconcile(entry: ExecutionEntry): Update {
  const invocation: InvocationRecord = {
    tool: "update_task",
    args: entry.args as InvocationRecord["args"],
    idempotencyKey: entry.idempotencyKey,
    envelopeHash: entry.envelopeHash,
    sentAt: entry.sentAt,
  };
  const acknowledgement: AcknowledgementRecord = entry.acknowledgement
    ? (entry.acknowledgement as AcknowledgementRecord)
    : {
        status: "MISSING",
        reason: `the write was sent at ${entry.sentAt} by a process that ended before recording an answer; not re-sent`,
        at: new Date().toISOString(),
      };
  return { invocation, acknowledgement };
}
