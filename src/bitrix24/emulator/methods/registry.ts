import type { MethodHandler } from "./context.js";
import { makeBatch } from "./batch.js";
import { listHistory } from "./history.js";
import { addTask, getTask, listTasks, updateTask } from "./tasks.js";
import { currentUser, getUsers } from "./user.js";

const DIRECT: Record<string, MethodHandler> = {
  "tasks.task.get": getTask,
  "tasks.task.update": updateTask,
  "tasks.task.list": listTasks,
  "tasks.task.add": addTask,
  "tasks.task.history.list": listHistory,
  "user.current": currentUser,
  "user.get": getUsers,
  // The webhook's scopes, as Bitrix24's `scope` method lists them.
  scope: (_params, ctx) => ({ result: [...(ctx.scopes ?? ["task", "user"])] }),
};

const ALL: Record<string, MethodHandler> = { ...DIRECT, batch: makeBatch((m) => DIRECT[m]) };

/** Method names arrive lower-cased (the portal lower-cases them too). */
export function findMethod(method: string): MethodHandler | undefined {
  return Object.hasOwn(ALL, method) ? ALL[method] : undefined;
}

export const METHOD_NAMES = Object.keys(ALL);
