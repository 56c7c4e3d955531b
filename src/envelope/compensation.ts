/**
 * Compensation ("undo") of a verified update, pure: the proposal that restores the before-values the
 * envelope recorded, and the check that the task still shows exactly the state our write left. The
 * undo is a new proposal with its own envelope, card and approval; nothing here writes or decides.
 */
import { compareValues } from "./normalise.js";
import { TARGETS, type TargetType } from "./targets.js";
import { canonicalJson } from "./canonical.js";
import { extractOf } from "./compare.js";
import { OPERATIONS, type OperationName } from "./operations.js";
import type { Envelope } from "./envelope.js";

export type CompensationPlan =
  | {
      ok: true;
      /** The operation that restores (the one that wrote) and the kind of object it restores. */
      operation: OperationName;
      type: TargetType;
      /** The object's id (a task, or a deal). */
      taskId: number;
      /** The restore: each field we wrote, back to the value the envelope recorded before the write. */
      fields: Record<string, unknown>;
      /** What our write set (the approved params), which the task must still show. */
      wrote: Record<string, unknown>;
      /** The whole task as our verification read it right after the write (null if that read is not usable). */
      afterWrite: Record<string, unknown> | null;
    }
  | { ok: false; code: "NOT_REVERSIBLE" | "NO_BEFORE_VALUE"; reason: string };

/**
 * The restore for a verified envelope. Refused for an irreversible change, and when the envelope did
 * not keep a field's before-value in full (only fingerprinted fields cannot be restored).
 */
export function compensationOf(e: Envelope, verifiedRead: unknown): CompensationPlan {
  if (e.risk.reversibility === "irreversible" || e.risk.reversibility === "read_only") {
    return { ok: false, code: "NOT_REVERSIBLE", reason: `the change was classed ${e.risk.reversibility} by policy ${e.policy.id}; it cannot be undone by another update` };
  }
  if (OPERATIONS[e.operation].effect !== "update") {
    // Deleting the comment would be the undo, but people may already have read it (and been notified):
    // not something to propose as a restore; nor does this project offer a delete operation.
    return {
      ok: false,
      code: "NOT_REVERSIBLE",
      reason: `${e.operation} created a new ${OPERATIONS[e.operation].creates === "task" ? "task" : "comment"}; undo restores field values only, and deleting what was created is not offered (people may already have been notified of it and acted on it)`,
    };
  }
  const fields: Record<string, unknown> = {};
  for (const f of Object.keys(e.params)) {
    if (!Object.prototype.hasOwnProperty.call(e.baseline.values, f)) {
      return { ok: false, code: "NO_BEFORE_VALUE", reason: `the envelope kept no before-value of ${f} (only a fingerprint), so it cannot be restored` };
    }
    fields[f] = e.baseline.values[f];
  }
  const after = extractOf(e.object.type, verifiedRead, e.object.id);
  return { ok: true, operation: e.operation, type: e.object.type, taskId: e.object.id, fields, wrote: { ...e.params }, afterWrite: after.ok ? after.task : null };
}

export interface ChangedSinceWrite {
  field: string;
  /** What our write left (for CHANGED_DATE: its value at our verification read). */
  ours: unknown;
  now: unknown;
}

/**
 * Every way the task differs from the state our write left: a field we wrote that now holds another
 * value (compared under the normalisation rules), then any other part of the task that differs from
 * our verification read (the change marker alone is not enough: it has one-second resolution, so a
 * change in the same second as our read would not move it). Empty means the undo may be proposed.
 */
export function changedSinceWrite(plan: Extract<CompensationPlan, { ok: true }>, task: Record<string, unknown>): ChangedSinceWrite[] {
  const t = TARGETS[plan.type];
  const fieldToTaskKey = t.keyOf;
  const taskKeyToField = t.fieldOf;
  const CHANGE_MARKER_FIELD = t.changeMarker;
  const out: ChangedSinceWrite[] = [];
  const named = new Set<string>();
  for (const [field, value] of Object.entries(plan.wrote)) {
    const key = fieldToTaskKey(field);
    named.add(key);
    const now = task[key];
    if (!compareValues(field, value, now).equal) out.push({ field, ours: value, now });
  }
  if (plan.afterWrite) {
    const keys = [...new Set([...Object.keys(plan.afterWrite), ...Object.keys(task)])].filter((k) => !named.has(k)).sort();
    for (const key of keys) {
      const ours = plan.afterWrite[key];
      const now = task[key];
      if (canonicalJson(ours ?? null) !== canonicalJson(now ?? null)) out.push({ field: taskKeyToField(key), ours, now });
    }
  }
  // The change marker first: it is what a person looks at to see that the task was edited.
  return out.sort((a, b) => Number(b.field === CHANGE_MARKER_FIELD) - Number(a.field === CHANGE_MARKER_FIELD));
}
