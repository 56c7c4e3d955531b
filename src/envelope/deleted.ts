/**
 * A delete (delete_task_comment, delete_task), pure: which object it removes and how that object is
 * found in a read, the comparison right before the write and the verification after it. The nodes do
 * the reads (src/hitl/delete-reads.ts says which).
 *
 * The envelope's baseline holds the object as read when the undo was built, after the undo checked it
 * against what our run created (src/envelope/compensation.ts). Before the write the object must be
 * exactly that: every kept value equal and every other key unchanged (no "automatic" excuse here: a
 * comment posted under a task we would delete goes with it, so even COMMENTS_COUNT stops it). An object
 * that is already gone is not "changed": nothing is sent and the run says so. After the write only a
 * fresh read that shows the object gone counts, and only with the target's OK is it VERIFIED.
 */
import { fingerprint } from "./canonical.js";
import {
  checkField,
  describeMoves,
  has,
  movedOf,
  type CompareResult,
  type FieldCheck,
  type MovedField,
  type ObjectIdentity,
  type ReadResult,
} from "./compare.js";
import {
  MAY_STILL_LAND,
  describeAck,
  notYetApplied,
  outcomeUnknown,
  type Acknowledgement,
  type VerifyResult,
} from "./verify-outcome.js";
import { extractComments } from "./created.js";
import type { OperationName } from "./operations.js";
import { TARGETS, isRecord, jsonOf } from "./targets.js";
import { deleteSubjectOf, deletedIdOf } from "./delete-subjects.js";

export type SubjectRead =
  | { status: "present"; object: Record<string, unknown> }
  | { status: "gone"; reason: string }
  /** The answer arrived but says nothing usable about the object (or is about another one: otherId). */
  | { status: "unknown"; reason: string; otherId?: unknown }
  | { status: "failed"; reason: string };

/**
 * The object a delete removes, out of a read answer: a comment from the task's comment list (absent
 * from a list that was read = gone), a task from tasks.task.get (`result: []` = gone: Bitrix24 answers
 * so for a task that does not exist, and also for one the user may no longer see, which the reason says).
 */
export function locateDeleted(
  e: { operation: OperationName; object: { id: number }; params: Record<string, unknown> },
  read: ReadResult,
): SubjectRead {
  const subject = deleteSubjectOf(e.operation);
  if (!subject) throw new Error(`${e.operation} is not a delete`);
  const id = deletedIdOf(e);
  const what = subject.label(e.object.id, id);
  if (read.status === "failed") {
    // tasks.task.get's `result: []` reaches us as not_found (src/bitrix24/client.ts): the portal's own
    // answer that there is no such task for this user, not a failure to ask.
    if (subject.kind === "task" && read.error.kind === "not_found")
      return { status: "gone", reason: `${what} is not found or not accessible (${read.error.description})` };
    return {
      status: "failed",
      reason: `the read failed (${read.error.kind}${read.error.code !== undefined ? ` ${read.error.code}` : ""}: ${read.error.description})`,
    };
  }
  if (subject.kind === "task_comment") {
    const listed = extractComments(read.body);
    if (!listed.ok) return { status: "unknown", reason: listed.reason };
    const found = listed.comments.find((c) => c.id === String(id));
    return found
      ? { status: "present", object: found.raw }
      : {
          status: "gone",
          reason: `${what} is not in the task's comment list (${listed.comments.length} comment(s) listed)`,
        };
  }
  const body = jsonOf(read.body)?.value;
  if (isRecord(body) && Array.isArray(body["result"]) && body["result"].length === 0) {
    return {
      status: "gone",
      reason: `${what} is not found or not accessible (tasks.task.get answered result: [])`,
    };
  }
  const x = TARGETS.task.extract(read.body, id);
  if (!x.ok)
    return {
      status: "unknown",
      reason: x.reason,
      ...(x.otherId !== undefined ? { otherId: x.otherId } : {}),
    };
  return { status: "present", object: x.object };
}

/** A comparison whose object is already gone: nothing to delete (not a change by anyone we can name). */
export type GoneResult = Omit<CompareResult, "verdict"> & { verdict: "GONE" };

/**
 * Right before the delete: the object must be exactly as the envelope's baseline recorded it. MATCH
 * only then; any kept value or other key that differs (or a key that appeared or vanished) is MISMATCH,
 * naming each with before and now; GONE when it is not there any more; UNKNOWN when the answer is
 * unusable; ERROR when the read failed.
 */
export function compareBeforeDelete(
  e: Parameters<typeof locateDeleted>[0] & {
    baseline: { values: Record<string, unknown>; fingerprints: Record<string, string> };
    comparedFields: string[];
    invariantFields: string[];
  },
  read: ReadResult,
): CompareResult | GoneResult {
  const subject = deleteSubjectOf(e.operation)!;
  const id = deletedIdOf(e);
  const what = subject.label(e.object.id, id);
  const kept = [
    ...e.comparedFields.map((f) => [f, "compared"] as const),
    ...e.invariantFields.map((f) => [f, "invariant"] as const),
  ];
  const unknownFields = (note: string): FieldCheck[] =>
    kept.map(([f, role]) => ({
      field: f,
      taskKey: subject.keyOf(f),
      role,
      expected: e.baseline.values[f],
      status: "unknown",
      note,
    }));
  const located = locateDeleted(e, read);
  const noIdentity: ObjectIdentity = { expected: id, answered: null, status: "UNKNOWN" };
  switch (located.status) {
    case "failed":
      return {
        verdict: "ERROR",
        fields: unknownFields("read failed"),
        reason: `${what} could not be read: ${located.reason}`,
        moved: [],
        identity: noIdentity,
      };
    case "unknown": {
      const other = located.otherId !== undefined;
      return {
        verdict: other ? "MISMATCH" : "UNKNOWN",
        fields: unknownFields(located.reason),
        reason: other
          ? `identity mismatch: ${located.reason}; it says nothing about ${what}`
          : `cannot compare ${what}: ${located.reason}`,
        moved: [],
        identity: other ? { expected: id, answered: located.otherId, status: "MISMATCH" } : noIdentity,
      };
    }
    case "gone":
      return {
        verdict: "GONE",
        fields: [],
        reason: `${located.reason}: it is already gone, so there is nothing to delete`,
        moved: [],
        identity: { expected: id, answered: null, status: "UNKNOWN" },
      };
    case "present":
      break;
    default: {
      const never: never = located;
      throw new Error(`unknown read ${JSON.stringify(never)}`);
    }
  }
  const object = located.object;
  const identity: ObjectIdentity = { expected: id, answered: object[subject.idKey], status: "MATCH" };
  const fields: FieldCheck[] = kept.map(([field, role]) =>
    checkField(
      object,
      { field, taskKey: subject.keyOf(field), role, expected: e.baseline.values[field] },
      (equal) => (equal ? "match" : "mismatch"),
    ),
  );
  const moved: MovedField[] = fields
    .filter((f) => f.status === "mismatch" || f.status === "unknown")
    .map(movedOf);
  const keptKeys = new Set(kept.map(([f]) => subject.keyOf(f)));
  const keys = [...new Set([...Object.keys(e.baseline.fingerprints), ...Object.keys(object)])]
    .filter((k) => k !== subject.idKey && !keptKeys.has(k))
    .sort();
  for (const key of keys) {
    const digest = e.baseline.fingerprints[key];
    const now = has(object, key) && object[key] !== undefined ? fingerprint(object[key]) : undefined;
    if (digest === now) continue;
    moved.push({
      field: subject.fieldOf(key),
      taskKey: key,
      role: "other",
      ...(digest !== undefined ? { beforeFingerprint: digest } : { before: "(not there)" }),
      now: now === undefined ? "(not there)" : object[key],
    });
  }
  if (moved.length) {
    return {
      verdict: "MISMATCH",
      fields,
      moved,
      identity,
      reason: `${what} changed since the undo was built from what our run created, so deleting it would delete someone else's change: ${describeMoves(moved)}`,
    };
  }
  return {
    verdict: "MATCH",
    fields,
    moved,
    identity,
    reason: `${what} is exactly as the envelope recorded it (${kept.map(([f]) => f).join(", ")} and ${keys.length} other key(s))`,
  };
}

/**
 * After the delete, from a fresh read: gone with the target's OK → VERIFIED; gone without it (answer
 * lost or an error) → INCONCLUSIVE, as for any write whose answer is missing; still there →
 * VERIFICATION_FAILED (not applied, whatever the target said), except when the write's outcome is
 * unknown (answer lost, or outcomeUnknown): still there as of the read, the delete may still land →
 * INCONCLUSIVE; the read failed or unusable → INCONCLUSIVE.
 */
export function verifyDeleted(
  e: Parameters<typeof locateDeleted>[0],
  ack: Acknowledgement,
  read: ReadResult,
  readAt?: string,
): VerifyResult {
  const subject = deleteSubjectOf(e.operation)!;
  const id = deletedIdOf(e);
  const what = subject.label(e.object.id, id);
  const ackNote = describeAck(ack);
  const located = locateDeleted(e, read);
  const check = (status: FieldCheck["status"], note: string): FieldCheck => ({
    field: subject.idKey.toUpperCase(),
    taskKey: subject.idKey,
    role: "requested",
    expected: "(gone)",
    status,
    note,
  });
  switch (located.status) {
    case "failed":
    case "unknown":
      return {
        verdict: "INCONCLUSIVE",
        fields: [check("unknown", located.reason)],
        moved: [],
        identity:
          located.status === "unknown" && located.otherId !== undefined
            ? { expected: id, answered: located.otherId, status: "MISMATCH" }
            : { expected: id, answered: null, status: "UNKNOWN" },
        reason: `cannot tell whether ${what} is gone: ${located.reason}; ${ackNote}`,
      };
    case "present":
      if (outcomeUnknown(ack)) {
        // A delete whose answer is missing may still be carried out after this read: not yet, not never.
        return {
          verdict: "INCONCLUSIVE",
          fields: [
            {
              ...check("not_applied", `${what} is still there as of this read`),
              actual: located.object[subject.idKey],
            },
          ],
          moved: [],
          identity: { expected: id, answered: located.object[subject.idKey], status: "MATCH" },
          reason: `${notYetApplied(readAt, "the delete")}: ${what} is still there; ${ackNote}; ${MAY_STILL_LAND}`,
        };
      }
      return {
        verdict: "VERIFICATION_FAILED",
        fields: [
          { ...check("not_applied", `${what} is still there`), actual: located.object[subject.idKey] },
        ],
        moved: [],
        identity: { expected: id, answered: located.object[subject.idKey], status: "MATCH" },
        reason: `the delete was not applied: ${what} is still there, read after the write; ${ackNote}`,
      };
    case "gone":
      if (ack.status !== "OK") {
        return {
          verdict: "INCONCLUSIVE",
          fields: [check("applied", located.reason)],
          moved: [],
          identity: { expected: id, answered: null, status: "UNKNOWN" },
          reason: `${what} is gone (${located.reason}), but ${ackNote}, so it is not proven that this write removed it`,
        };
      }
      return {
        verdict: "VERIFIED",
        fields: [check("applied", located.reason)],
        moved: [],
        identity: { expected: id, answered: null, status: "UNKNOWN" },
        reason: `${what} is gone, read after the delete (${located.reason}); ${ackNote}`,
      };
    default: {
      const never: never = located;
      throw new Error(`unknown read ${JSON.stringify(never)}`);
    }
  }
}
