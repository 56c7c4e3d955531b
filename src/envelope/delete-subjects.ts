/**
 * What a delete removes (delete_task_comment, delete_task): the subject table that says how the removed object is
 * keyed in a read answer, and its id and label. The envelope reads it to build a delete; src/envelope/deleted.ts
 * compares and verifies with it.
 */
import { fieldToTaskKey, normaliseId, taskKeyToField } from "./fields.js";
import { OPERATIONS, operationSpec, type OperationName } from "./operations.js";
import { TARGETS } from "./targets.js";

export type DeletedKind = "task_comment" | "task";

/** How the object a delete removes is keyed in its read answer. */
export interface DeleteSubject {
  kind: DeletedKind;
  /** Its id key in the read answer. */
  idKey: string;
  keyOf(field: string): string;
  fieldOf(key: string): string;
  /** For messages: "comment 12 of task 4", "task 9". */
  label(taskId: number, id: number): string;
  /** The field that moves on every change of the object, when it has one (a comment has none). */
  changeMarker?: string;
}

export const DELETE_SUBJECTS: Readonly<Record<DeletedKind, DeleteSubject>> = {
  // A comment as task.commentitem.getlist lists it: UPPER_SNAKE keys, so a field's name is its key.
  task_comment: {
    kind: "task_comment",
    idKey: "ID",
    keyOf: (f) => f,
    fieldOf: (k) => k,
    label: (taskId, id) => `comment ${id} of task ${taskId}`,
  },
  task: {
    kind: "task",
    idKey: "id",
    keyOf: fieldToTaskKey,
    fieldOf: taskKeyToField,
    label: (_taskId, id) => `task ${id}`,
    changeMarker: TARGETS.task.changeMarker,
  },
};

/** The fields a comment delete compares: who wrote the comment and what it says. */
export const COMMENT_COMPARED_FIELDS = ["AUTHOR_ID", "POST_MESSAGE"] as const;

/** The subject table of a delete operation; undefined for any other operation. */
export function deleteSubjectOf(operation: OperationName): DeleteSubject | undefined {
  const kind = OPERATIONS[operation].deletes;
  return OPERATIONS[operation].effect === "delete" && kind ? DELETE_SUBJECTS[kind] : undefined;
}

/**
 * What a delete removes, for a person ("comment 5 of task 4", "task 9"); undefined for an operation
 * that is not a delete (or a name that is no operation).
 */
export function deletedLabelOf(e: {
  operation: string;
  object: { id: number };
  params: Record<string, unknown>;
}): string | undefined {
  const spec = operationSpec(e.operation);
  const subject = spec ? deleteSubjectOf(spec.name) : undefined;
  return subject ? subject.label(e.object.id, deletedIdOf({ ...e, operation: spec!.name })) : undefined;
}

/** The id of what a delete removes: the comment's (its COMMENT_ID param) or the task's (the object). */
export function deletedIdOf(e: {
  operation: OperationName;
  object: { id: number };
  params: Record<string, unknown>;
}): number {
  return OPERATIONS[e.operation].deletes === "task_comment"
    ? Number(normaliseId(e.params["COMMENT_ID"]) ?? Number.NaN)
    : e.object.id;
}
