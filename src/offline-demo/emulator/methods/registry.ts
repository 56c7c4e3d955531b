import type { MethodHandler } from "./context.js";
import { makeBatch } from "./batch.js";
import { listHistory } from "./history.js";
import { addComment, deleteComment, getComment, listComments, updateComment } from "./comments.js";
import { getDeal, listDeals, updateDeal } from "./deals.js";
import { addTask, deleteTask, getTask, listTasks, updateTask } from "./tasks.js";
import { DEFAULT_SCOPES } from "../types.js";
import { currentUser, getUsers } from "./user.js";

const DIRECT: Record<string, MethodHandler> = {
  "tasks.task.get": getTask,
  "tasks.task.update": updateTask,
  "tasks.task.list": listTasks,
  "tasks.task.add": addTask,
  "tasks.task.delete": deleteTask,
  "tasks.task.history.list": listHistory,
  "task.commentitem.add": addComment,
  "task.commentitem.get": getComment,
  "task.commentitem.getlist": listComments,
  "task.commentitem.update": updateComment,
  "task.commentitem.delete": deleteComment,
  "crm.deal.get": getDeal,
  "crm.deal.list": listDeals,
  "crm.deal.update": updateDeal,
  "user.current": currentUser,
  "user.get": getUsers,
  // The webhook's scopes, as Bitrix24's `scope` method lists them.
  scope: (_params, ctx) => ({ result: [...(ctx.scopes ?? DEFAULT_SCOPES)] }),
};

const ALL: Record<string, MethodHandler> = { ...DIRECT, batch: makeBatch((m) => DIRECT[m]) };

/** Method names arrive lower-cased (the portal lower-cases them too). */
export function findMethod(method: string): MethodHandler | undefined {
  return Object.hasOwn(ALL, method) ? ALL[method] : undefined;
}
