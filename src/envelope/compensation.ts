/**
 * Compensation ("undo") of a verified action, pure. For an update: the proposal that restores the
 * before-values the envelope recorded, and the check that the task still shows exactly the state our
 * write left. For a create (a comment, a task): the delete of what it created, only where the policy
 * allows that delete (with an approval), and the check that the object is still exactly as our run
 * created it. The undo is a new proposal with its own envelope, card and approval; nothing here writes
 * or decides.
 */
import { compareValues } from "./normalise.js";
import { TARGETS, isRecord, jsonOf, type TargetType } from "./targets.js";
import { canonicalJson } from "./canonical.js";
import { OPERATIONS, type OperationName } from "./operations.js";
import type { Envelope } from "./envelope.js";
import type { Policy } from "./policy.js";
import { COMMENT_COMPARED_FIELDS, DELETE_SUBJECTS } from "./delete-subjects.js";
import { fieldToTaskKey, normaliseId } from "./fields.js";

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
    return {
      ok: false,
      code: "NOT_REVERSIBLE",
      reason: `the change was classed ${e.risk.reversibility} by policy ${e.policy.id}; it cannot be undone by another update`,
    };
  }
  if (OPERATIONS[e.operation].effect !== "update") {
    // A create is not undone by another update: its undo is a delete of what it created, which
    // deletionOf proposes where the policy allows it (people may already have been notified of it).
    return {
      ok: false,
      code: "NOT_REVERSIBLE",
      reason: `${e.operation} created a new ${OPERATIONS[e.operation].creates === "task" ? "task" : "comment"}; a restore writes field values only (deleting what was created is a separate operation, see deletionOf)`,
    };
  }
  const fields: Record<string, unknown> = {};
  for (const f of Object.keys(e.params)) {
    if (!Object.prototype.hasOwnProperty.call(e.baseline.values, f)) {
      return {
        ok: false,
        code: "NO_BEFORE_VALUE",
        reason: `the envelope kept no before-value of ${f} (only a fingerprint), so it cannot be restored`,
      };
    }
    fields[f] = e.baseline.values[f];
  }
  const after = TARGETS[e.object.type].extract(verifiedRead, e.object.id);
  return {
    ok: true,
    operation: e.operation,
    type: e.object.type,
    taskId: e.object.id,
    fields,
    wrote: { ...e.params },
    afterWrite: after.ok ? after.object : null,
  };
}

export interface ChangedSinceWrite {
  field: string;
  /** What our write left (for the change marker: its value at our verification read). */
  ours: unknown;
  now: unknown;
  /** The field is the object's change marker (targets.ts `changeMarker`): its `ours` is what our verification read. */
  marker?: true;
  /** The field is one our write set (its `ours` is what we wrote); any other's `ours` is what our verification read. */
  written?: true;
}

/**
 * Every way the task differs from the state our write left: a field we wrote that now holds another
 * value (compared under the normalisation rules), then any other part of the task that differs from
 * our verification read (the change marker alone is not enough: it has one-second resolution, so a
 * change in the same second as our read would not move it). Empty means the undo may be proposed.
 */
export function changedSinceWrite(
  plan: Extract<CompensationPlan, { ok: true }>,
  task: Record<string, unknown>,
): ChangedSinceWrite[] {
  const changed = changesFrom(TARGETS[plan.type], plan.wrote, true, plan.afterWrite, task, (read) => [
    ...new Set([...Object.keys(read), ...Object.keys(task)]),
  ]);
  // The change marker first: it is what a person looks at to see that the task was edited.
  return changed.sort((a, b) => Number(b.marker === true) - Number(a.marker === true));
}

/**
 * How `object` differs from what our run left: each field of `expected` under the normalisation rules,
 * then each other key `otherKeys` picks from our own read of it (`read`) whose JSON is not the same now.
 */
function changesFrom(
  kind: { keyOf(field: string): string; fieldOf(key: string): string; changeMarker?: string | undefined },
  expected: Record<string, unknown>,
  written: boolean,
  read: Record<string, unknown> | null,
  object: Record<string, unknown>,
  otherKeys: (read: Record<string, unknown>) => string[],
): ChangedSinceWrite[] {
  const out: ChangedSinceWrite[] = [];
  const named = new Set(Object.keys(expected).map(kind.keyOf));
  for (const [field, ours] of Object.entries(expected)) {
    const now = object[kind.keyOf(field)];
    if (!compareValues(field, ours, now).equal)
      out.push({ field, ours, now, ...(written ? { written } : {}) });
  }
  const others = read ? otherKeys(read).filter((k) => !named.has(k)) : [];
  for (const key of others.sort()) {
    const ours = read?.[key];
    const now = object[key];
    const field = kind.fieldOf(key);
    if (canonicalJson(ours ?? null) !== canonicalJson(now ?? null))
      out.push({ field, ours, now, ...(field === kind.changeMarker ? { marker: true as const } : {}) });
  }
  return out;
}

// ── Undo of a create: delete what it created ───────────────────────────────────────────────────────

/** The delete that undoes a verified create, with what the object must still be. */
export interface DeletePlan {
  ok: true;
  /** delete_task_comment for a posted comment, delete_task for a created task. */
  operation: Extract<OperationName, "delete_task_comment" | "delete_task">;
  type: TargetType;
  /** The envelope's object: the task the comment is under, or the created task. */
  taskId: number;
  /** The delete's params: {COMMENT_ID} for a comment, none for a task. */
  fields: Record<string, unknown>;
  /** The id of what is deleted (the comment's, or the task's). */
  deletedId: string;
  /**
   * What our run created, as its verification recorded it, which the object must still show: a
   * comment's AUTHOR_ID and POST_MESSAGE; a task's approved values and, when that read had it, its
   * CHANGED_DATE. Field names as the delete's subject answers them (src/envelope/deleted.ts).
   */
  expected: Record<string, unknown>;
  /**
   * The object as the creating action's verification listed it (keys as the read answers them): every
   * key the fresh read also carries must still hold that value, so a change to a field nobody approved
   * is seen too. Keys only one of the two answers carries (the list's subStatus) are not compared.
   */
  createdRead: Record<string, unknown> | null;
}

export type DeletionPlan = DeletePlan | { ok: false; code: "DENIED_BY_POLICY" | "NOT_TIED"; reason: string };

/** The delete operation that undoes a create (add_task_comment → delete_task_comment, add_task → delete_task). */
export function deleteOperationFor(operation: OperationName): DeletePlan["operation"] | undefined {
  const creates = OPERATIONS[operation].creates;
  return creates === "task_comment" ? "delete_task_comment" : creates === "task" ? "delete_task" : undefined;
}

/**
 * The undo of a VERIFIED create: the delete of the object it made, where the policy allows that
 * delete with an approval (an undo always needs its own; a delete the policy lets run without one is
 * not proposed either). The object is the one the verification tied to this write (by the id the
 * target acknowledged), expected with the values that verification read.
 */
export function deletionOf(
  e: Envelope,
  verification: { raw?: unknown; created?: { id: string | null; via: string; raw?: unknown } } | undefined,
  policy: Policy,
): DeletionPlan {
  const operation = deleteOperationFor(e.operation);
  if (!operation) throw new Error(`${e.operation} creates nothing`);
  const what = OPERATIONS[e.operation].creates === "task" ? "task" : "comment";
  const rule = policy.operations[operation];
  const named = `${policy.id}@${policy.version}`;
  if (!rule || !rule.allowed) {
    return {
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: `${e.operation} created a new ${what}; deleting it (${operation}) is ${rule ? "denied" : "not allowed (no entry)"} by policy ${named}${rule?.reason ? `: ${rule.reason}` : ""}`,
    };
  }
  if (!rule.requiresApproval) {
    return {
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: `${e.operation} created a new ${what}; policy ${named} allows ${operation} without an approval, and an undo is never run without one`,
    };
  }
  const created = verification?.created;
  const id = created?.via === "acknowledgement" ? normaliseId(created.id) : undefined;
  if (id === undefined)
    return {
      ok: false,
      code: "NOT_TIED",
      reason: `the ${what} ${e.operation} created was not tied to this run's write by an acknowledged id, so it is not known which one to delete`,
    };
  const item = listedItem(created?.raw, what === "comment" ? "ID" : "id", id);
  if (what === "comment") {
    if (!item)
      return {
        ok: false,
        code: "NOT_TIED",
        reason: `comment ${id} is not in the comment list the verification read, so what it held is not known`,
      };
    const expected = Object.fromEntries(COMMENT_COMPARED_FIELDS.map((f) => [f, item[f]]));
    return {
      ok: true,
      operation,
      type: "task",
      taskId: e.object.id,
      fields: { COMMENT_ID: Number(id) },
      deletedId: id,
      expected,
      createdRead: item,
    };
  }
  const expected: Record<string, unknown> = { ...e.params };
  const marker = TARGETS.task.changeMarker;
  if (item && Object.prototype.hasOwnProperty.call(item, fieldToTaskKey(marker)))
    expected[marker] = item[fieldToTaskKey(marker)];
  return {
    ok: true,
    operation,
    type: "task",
    taskId: Number(id),
    fields: {},
    deletedId: id,
    expected,
    createdRead: item ?? null,
  };
}

/**
 * Every way the object differs from what our run created (empty: the delete may be proposed). A
 * field the object no longer carries counts as a difference.
 */
export function changedSinceCreated(plan: DeletePlan, object: Record<string, unknown>): ChangedSinceWrite[] {
  const subject = DELETE_SUBJECTS[OPERATIONS[plan.operation].deletes!];
  return changesFrom(subject, plan.expected, false, plan.createdRead, object, (read) =>
    Object.keys(read).filter((k) => Object.prototype.hasOwnProperty.call(object, k)),
  );
}

/** The row with id `id` out of a list answer (`result: [...]` of comments, or `result.tasks: [...]`). */
function listedItem(raw: unknown, idKey: string, id: string): Record<string, unknown> | undefined {
  const value = jsonOf(raw)?.value;
  const result = isRecord(value) ? value["result"] : undefined;
  const rows = Array.isArray(result)
    ? result
    : isRecord(result) && Array.isArray(result["tasks"])
      ? result["tasks"]
      : [];
  return rows.find((r): r is Record<string, unknown> => isRecord(r) && normaliseId(r[idKey]) === id);
}
