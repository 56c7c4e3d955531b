/**
 * Operations as data. An operation is a Bitrix24 method with a target, the fields it takes, and what
 * its effect on the target is; the envelope, the proposal gate, the nodes and the card read this table
 * instead of branching on an operation's name. Adding an operation means adding a row here, a policy
 * entry, and the write tool that serves its `writeRole` — not a new path through the graph.
 *
 * Four effects exist:
 *  - `update`: the params are written onto the target's own fields. The pre-read compares the written
 *    fields and the change marker with the baseline; verification reads the target and expects the
 *    params as approved, everything watched unchanged.
 *  - `create_child`: the params make a new object under the target (a comment on a task). The pre-read
 *    compares the target's change marker and watched fields (the approver saw the target in that state);
 *    verification reads the created object back (by the id the target acknowledged, or by looking for
 *    it when the acknowledgement is lost) and re-reads the target, whose watched fields must not move.
 *  - `create`: the params make a new object that names no existing one (a new task, object id 0).
 *  - `delete`: the object a run of ours created is removed (a comment under the task, or the task). Only
 *    an undo proposes one (never the model: PROPOSABLE_OPERATIONS): the envelope's baseline holds the
 *    object as read when the undo was built, which must equal what our run created; the pre-read expects
 *    exactly that (any difference stops it, an object already gone ends it with nothing sent) and
 *    verification reads it again and expects it gone (src/envelope/deleted.ts).
 */
import { COMMENT_FIELDS, DEAL_FIELDS, DELETE_COMMENT_FIELDS, TASK_FIELDS, type FieldSpec } from "./fields.js";
import type { TargetType } from "./targets.js";

export const OPERATION_NAMES = [
  "update_task",
  "add_task_comment",
  "update_deal",
  "add_task",
  "delete_task_comment",
  "delete_task",
] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];

/**
 * What the model may propose. A delete is proposed only by code, as the undo of something a run of ours
 * created (src/hitl/compensation.ts): it names exactly that object, so the model is never offered it.
 */
export const PROPOSABLE_OPERATIONS = [
  "update_task",
  "add_task_comment",
  "update_deal",
  "add_task",
] as const satisfies readonly OperationName[];

export type OperationEffect = "update" | "create_child" | "create" | "delete";

export interface OperationSpec {
  name: OperationName;
  /** The Bitrix24 method the write tool calls. */
  method: string;
  /** The role of the write tool that serves it (src/tools/tool-roles.ts). */
  writeRole: "updateTask" | "addTaskComment" | "updateDeal" | "addTask" | "deleteTaskComment" | "deleteTask";
  /** The tool name recorded in the invocation (our MCP server's tool for that role). */
  tool:
    "update_task" | "add_task_comment" | "update_deal" | "add_task" | "delete_task_comment" | "delete_task";
  effect: OperationEffect;
  /** The kind of object the envelope names and the pre-read reads (src/envelope/targets.ts). */
  target: TargetType;
  /** The name of the object's id in the write tool's arguments (and in a proposal or an edit). */
  idArg: "taskId" | "dealId";
  /** What a create makes, for messages and the card. */
  creates?: "task_comment" | "task";
  /** What a delete removes: a comment under the envelope's task (named by COMMENT_ID), or the task itself. */
  deletes?: "task_comment" | "task";
  /** The fields its params may hold (UPPER_SNAKE), with their kinds. */
  fields: Readonly<Record<string, FieldSpec>>;
  /** A short human label for the card and listings. */
  label: string;
}

export const OPERATIONS: Readonly<Record<OperationName, OperationSpec>> = {
  update_task: {
    name: "update_task",
    method: "tasks.task.update",
    writeRole: "updateTask",
    tool: "update_task",
    effect: "update",
    target: "task",
    idArg: "taskId",
    fields: TASK_FIELDS,
    label: "update task",
  },
  add_task_comment: {
    name: "add_task_comment",
    method: "task.commentitem.add",
    writeRole: "addTaskComment",
    tool: "add_task_comment",
    effect: "create_child",
    target: "task",
    idArg: "taskId",
    creates: "task_comment",
    fields: COMMENT_FIELDS,
    label: "comment on task",
  },
  update_deal: {
    name: "update_deal",
    method: "crm.deal.update",
    writeRole: "updateDeal",
    tool: "update_deal",
    effect: "update",
    target: "deal",
    idArg: "dealId",
    fields: DEAL_FIELDS,
    label: "update deal",
  },
  add_task: {
    name: "add_task",
    method: "tasks.task.add",
    writeRole: "addTask",
    tool: "add_task",
    effect: "create",
    // A new task: the envelope names no existing object (object.id is 0) and nothing is read before it.
    target: "task",
    idArg: "taskId",
    creates: "task",
    fields: TASK_FIELDS,
    label: "create task",
  },
  delete_task_comment: {
    name: "delete_task_comment",
    method: "task.commentitem.delete",
    writeRole: "deleteTaskComment",
    tool: "delete_task_comment",
    effect: "delete",
    // The envelope's object is the task the comment is under (scope and the object lease are the task's);
    // the comment is named by its id in the params.
    target: "task",
    idArg: "taskId",
    deletes: "task_comment",
    fields: DELETE_COMMENT_FIELDS,
    label: "delete comment of task",
  },
  delete_task: {
    name: "delete_task",
    method: "tasks.task.delete",
    writeRole: "deleteTask",
    tool: "delete_task",
    effect: "delete",
    target: "task",
    idArg: "taskId",
    deletes: "task",
    // Nothing but the task's id is sent: the params are empty.
    fields: {},
    label: "delete task",
  },
};

/** Fields a create must name (Bitrix24 refuses a task without them). */
export const REQUIRED_ON_CREATE: Readonly<Partial<Record<OperationName, readonly string[]>>> = {
  add_task: ["TITLE", "RESPONSIBLE_ID"],
};

/** Params a delete must name: the comment's id (the task is the envelope's object); a task delete names none. */
export const REQUIRED_ON_DELETE: Readonly<Partial<Record<OperationName, readonly string[]>>> = {
  delete_task_comment: ["COMMENT_ID"],
  delete_task: [],
};

/**
 * The write tool's arguments for an operation on an object: {taskId|dealId, fields} for an update or a
 * comment, {fields} for a create, {taskId, commentId} or {taskId} for a delete (nothing else is sent).
 */
export function writeArgsOf(
  operation: OperationName,
  objectId: number,
  fields: Record<string, unknown>,
): Record<string, unknown> {
  const spec = OPERATIONS[operation];
  switch (spec.effect) {
    case "update":
    case "create_child":
      return { [spec.idArg]: objectId, fields };
    case "create":
      // A create names no object: the target makes one.
      return { fields };
    case "delete":
      return spec.deletes === "task_comment"
        ? { taskId: objectId, commentId: Number(fields["COMMENT_ID"]) }
        : { taskId: objectId };
    default: {
      const never: never = spec.effect;
      throw new Error(`unknown effect ${String(never)}`);
    }
  }
}

export function isOperationName(name: unknown): name is OperationName {
  return typeof name === "string" && (OPERATION_NAMES as readonly string[]).includes(name);
}

/** The spec of a known operation; undefined for a name the table does not hold. */
export function operationSpec(name: string): OperationSpec | undefined {
  return isOperationName(name) ? OPERATIONS[name] : undefined;
}

/** What an operation acts on, for a person: "task 4", "deal 3", or "a new task" (a create names no object yet). */
export function objectNamed(operation: string, id: number): string {
  const spec = operationSpec(operation);
  if (!spec) return `object ${id}`;
  return spec.effect === "create" ? `a new ${spec.target}` : `${spec.target} ${id}`;
}

/** The field table an operation's params are checked against: its own, or the task's for names the table does not hold (add_task, delete_task in a policy). */
export function fieldsOf(operation: string): Readonly<Record<string, FieldSpec>> {
  return operationSpec(operation)?.fields ?? TASK_FIELDS;
}
