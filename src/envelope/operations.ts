/**
 * Operations as data. An operation is a Bitrix24 method with a target, the fields it takes, and what
 * its effect on the target is; the envelope, the proposal gate, the nodes and the card read this table
 * instead of branching on an operation's name. Adding an operation means adding a row here, a policy
 * entry, and the write tool that serves its `writeRole` — not a new path through the graph.
 *
 * Two effects exist:
 *  - `update`: the params are written onto the target's own fields. The pre-read compares the written
 *    fields and the change marker with the baseline; verification reads the target and expects the
 *    params as approved, everything watched unchanged.
 *  - `create_child`: the params make a new object under the target (a comment on a task). The pre-read
 *    compares the target's change marker and watched fields (the approver saw the target in that state);
 *    verification reads the created object back (by the id the target acknowledged, or by looking for
 *    it when the acknowledgement is lost) and re-reads the target, whose watched fields must not move.
 */
import { COMMENT_FIELDS, DEAL_FIELDS, TASK_FIELDS, type FieldSpec } from "./fields.js";
import type { TargetType } from "./targets.js";

export const OPERATION_NAMES = ["update_task", "add_task_comment", "update_deal", "add_task"] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];

export type OperationEffect = "update" | "create_child" | "create";

export interface OperationSpec {
  name: OperationName;
  /** The Bitrix24 method the write tool calls. */
  method: string;
  /** The role of the write tool that serves it (src/tools/bitrix24-tools.ts). */
  writeRole: "updateTask" | "addTaskComment" | "updateDeal" | "addTask";
  /** The tool name recorded in the invocation (our MCP server's tool for that role). */
  tool: "update_task" | "add_task_comment" | "update_deal" | "add_task";
  effect: OperationEffect;
  /** The kind of object the envelope names and the pre-read reads (src/envelope/targets.ts). */
  target: TargetType;
  /** The name of the object's id in the write tool's arguments (and in a proposal or an edit). */
  idArg: "taskId" | "dealId";
  /** What a create makes, for messages and the card. */
  creates?: "task_comment" | "task";
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
};

/** Fields a create must name (Bitrix24 refuses a task without them). */
export const REQUIRED_ON_CREATE: Readonly<Partial<Record<OperationName, readonly string[]>>> = { add_task: ["TITLE", "RESPONSIBLE_ID"] };

/** The write tool's arguments for an operation on an object: {taskId|dealId, fields}. */
export function writeArgsOf(operation: OperationName, objectId: number, fields: Record<string, unknown>): Record<string, unknown> {
  // A create names no object: the target makes one.
  return OPERATIONS[operation].effect === "create" ? { fields } : { [OPERATIONS[operation].idArg]: objectId, fields };
}

export function isOperationName(name: unknown): name is OperationName {
  return typeof name === "string" && (OPERATION_NAMES as readonly string[]).includes(name);
}

/** The spec of a known operation; undefined for a name the table does not hold. */
export function operationSpec(name: string): OperationSpec | undefined {
  return isOperationName(name) ? OPERATIONS[name] : undefined;
}

/** The field table an operation's params are checked against: its own, or the task's for names the table does not hold (add_task, delete_task in a policy). */
export function fieldsOf(operation: string): Readonly<Record<string, FieldSpec>> {
  return operationSpec(operation)?.fields ?? TASK_FIELDS;
}
