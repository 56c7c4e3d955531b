import { randomUUID } from "node:crypto";
import { errors, RestError } from "../errors.js";
import { canEdit, canRead, deniedChange, renderTask } from "../shapes.js";
import type { TaskRecord } from "../types.js";
import { requireTaskId, type MethodContext, type MethodHandler, type Params } from "./context.js";
import { selectParam } from "./select.js";
import { applyTaskChanges, fieldsParam, parseTaskFields } from "./task-fields.js";

export { listTasks } from "./task-list.js";

function single(ctx: MethodContext, task: TaskRecord, select: Set<string> | null = null) {
  return {
    result: {
      task: renderTask(ctx.store, task, { select, mode: "single", userId: ctx.userId, nowSec: ctx.nowSec }),
    },
  };
}

/** Missing or unreadable tasks answer HTTP 200 with `result: []`, exactly like the portal. */
export const getTask: MethodHandler = (params, ctx) => {
  const id = requireTaskId(params);
  const select = selectParam(params);
  const task = ctx.store.getTask(id);
  if (!task || !canRead(task, ctx.userId)) return { result: [] };
  return single(ctx, task, select);
};

export const updateTask: MethodHandler = (params, ctx) => {
  const id = requireTaskId(params);
  const fields = fieldsParam(params);
  const task = ctx.store.getTask(id);
  // The portal does not tell "missing" from "forbidden" here: both are the same access error.
  if (!task || !canEdit(task, ctx.userId)) throw errors.actionNotAllowed();
  const changes = parseTaskFields(ctx.store, fields);
  if (deniedChange(task, changes)) throw errors.actionNotAllowed();
  const updated = applyTaskChanges(ctx.store, task, changes, ctx.userId, ctx.nowSec);
  return single(ctx, updated);
};

export const addTask: MethodHandler = (params: Params, ctx) => {
  const fields = fieldsParam(params);
  const changes = parseTaskFields(ctx.store, fields);
  const problems: string[] = [];
  if (changes.title === undefined) problems.push("Task title is not specified");
  if (changes.responsibleId === undefined)
    problems.push('The user specified in the "Assignee" field is not found');
  if (problems.length > 0) throw errors.core(problems);
  const now = Math.floor(ctx.nowSec);
  const status = changes.status ?? 2;
  const task: TaskRecord = {
    id: ctx.store.nextTaskId(),
    parentId: null,
    title: changes.title!,
    description: changes.description ?? "",
    priority: changes.priority ?? 1,
    status,
    createdBy: ctx.userId,
    createdDate: now,
    responsibleId: changes.responsibleId!,
    changedBy: ctx.userId,
    changedDate: now,
    statusChangedBy: null,
    statusChangedDate: now,
    closedBy: status === 5 ? ctx.userId : null,
    closedDate: status === 5 ? now : null,
    activityDate: now,
    dateStart: status === 3 ? now : null,
    deadline: changes.deadline ?? null,
    guid: `{${randomUUID()}}`,
    groupId: changes.groupId ?? 0,
    auditors: changes.auditors ?? [],
    accomplices: changes.accomplices ?? [],
    readableBy: null,
    editableBy: null,
  };
  ctx.store.putTask(task);
  ctx.store.addHistory({
    taskId: task.id,
    createdDate: now,
    field: "NEW",
    from: null,
    to: null,
    userId: ctx.userId,
  });
  return single(ctx, task);
};

/**
 * `{taskId}` -> `result: {task: true}`. Only a user who may edit the task and created it may delete it (the
 * `remove` action); a missing task answers the same "No access to delete the task" (code 1048582). The task's
 * history and comments go with it, so a later tasks.task.get answers `result: []`.
 */
export const deleteTask: MethodHandler = (params, ctx) => {
  const id = requireTaskId(params);
  const task = ctx.store.getTask(id);
  if (!task || !canEdit(task, ctx.userId) || task.createdBy !== ctx.userId) throw errors.noDeleteAccess();
  ctx.store.deleteTask(id);
  return { result: { task: true } };
};

/** Runs an update as another user, bypassing access checks: what an automation rule on the portal does. */
export function applySideEffect(
  ctx: MethodContext,
  taskId: number,
  field: string,
  value: unknown,
  asUser: number,
): void {
  const task = ctx.store.getTask(taskId);
  if (!task)
    throw new RestError(500, "INTERNAL_SERVER_ERROR", `side_effect fault: task ${taskId} does not exist`);
  const changes = parseTaskFields(ctx.store, { [field]: value });
  applyTaskChanges(ctx.store, task, changes, asUser, ctx.nowSec);
}
