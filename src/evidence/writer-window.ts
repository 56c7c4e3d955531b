/**
 * The concurrent-writer window of a write: what a post-write read cannot see, since Bitrix24 has no
 * conditional writes.
 */
import { operationSpec } from "../envelope/operations.js";
import type { AcknowledgementRecord, InvocationRecord, PreReadRecord } from "../envelope/records.js";

/**
 * What the verification cannot see: Bitrix24's update methods (tasks.task.update, crm.deal.update)
 * have no conditional form (no version, no If-Match), so a change someone else makes between our pre-read and our write, to a field our
 * write then overwrites, leaves no trace in the post-write read. Changes to other fields are seen.
 */
export interface WriterWindow {
  preReadAt: string | null;
  writeSentAt: string;
  acknowledgedAt: string | null;
  /** Milliseconds between the pre-read and the write being sent, when both are known. */
  uncoveredMs: number | null;
  fieldsOverwritten: string[];
  statement: string;
}

export function writerWindow(
  preRead: PreReadRecord | null,
  invocation: InvocationRecord | null,
  ack: AcknowledgementRecord | null,
): WriterWindow | null {
  if (!invocation) return null;
  const spec = operationSpec(invocation.tool);
  const effect = spec?.effect;
  // Only an update overwrites fields: a delete sends none, and a create (a new task, or a comment under
  // a task) writes no existing object.
  const creates = effect === "create" || effect === "create_child";
  const fields = creates ? [] : Object.keys(invocation.args.fields ?? {});
  const from = preRead?.at ?? null;
  // The method the write called, from the operation table (a write tool is named as its operation).
  const method = spec?.method ?? invocation.tool;
  const ms = from !== null ? Date.parse(invocation.sentAt) - Date.parse(from) : NaN;
  const between = `between the pre-read${from ? ` at ${from}` : ""} and the write sent at ${invocation.sentAt}`;
  return {
    preReadAt: from,
    writeSentAt: invocation.sentAt,
    acknowledgedAt: ack?.at ?? null,
    uncoveredMs: Number.isFinite(ms) ? ms : null,
    fieldsOverwritten: fields,
    statement:
      effect === "create"
        ? `A create writes no existing object, so nothing anyone else changed can be overwritten. A task with the same title made by someone else ${between} ` +
          `cannot be told from this one when the answer is lost: the verification then reports INCONCLUSIVE, or more than was approved (INVARIANT_VIOLATION) if this write also landed.`
        : effect === "create_child"
          ? `A comment is added under the task; no existing field is written, so nothing anyone else changed can be overwritten. A comment with the same text posted by someone else ${between} ` +
            `cannot be told from this one when the answer is lost: the verification then reports INCONCLUSIVE, or more than was approved (INVARIANT_VIOLATION) if this write also landed.`
          : invocation.tool.startsWith("delete_")
            ? `Bitrix24 offers no conditional delete, so a change made by someone else to the deleted object between the pre-read${from ? ` at ${from}` : ""} ` +
              `and the delete sent at ${invocation.sentAt} would have been deleted with it and cannot be seen by the verification. ` +
              `Other approved actions of this system on the same object cannot land in the window: they wait for this action's object lease.`
            : `Bitrix24 offers no conditional write (${method} takes no version or If-Match), so a change made by someone else ` +
              `between the pre-read${from ? ` at ${from}` : ""} and the write sent at ${invocation.sentAt} to ${fields.join(", ")} would have been overwritten ` +
              `by this write and cannot be seen by the verification; a change to any other field in that window would be. ` +
              `Other approved actions of this system on the same object cannot land in the window: they wait for this action's object lease.`,
  };
}
