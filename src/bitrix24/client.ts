/**
 * The Bitrix24 REST client: one typed method per REST method the agent reads or writes, each answer checked
 * against its schema. Pacing, retries and reading answers are the transport's (src/bitrix24/transport.ts).
 */
import { Bitrix24Error } from "./errors.js";
import {
  CurrentUserResultSchema,
  DealListResultSchema,
  DealSchema,
  EmptyResultSchema,
  NewCommentIdSchema,
  TaskCommentListSchema,
  TaskCommentSchema,
  TaskDeletedSchema,
  TrueResultSchema,
  HistoryResultSchema,
  TaskListResultSchema,
  TaskResultSchema,
  UserListResultSchema,
  type Bitrix24TaskComment,
  type CurrentUserResult,
  type DealListResult,
  type Bitrix24Deal,
  type HistoryResult,
  type TaskCommentList,
  type TaskDeleted,
  type TaskListResult,
  type TaskResult,
  type UserListResult,
} from "./schemas.js";
import { Bitrix24Transport, type Bitrix24Response } from "./transport.js";

/** tasks.task.list and crm.deal.list parameters. */
interface ListArgs {
  /** UPPER_SNAKE keys with the documented prefixes, e.g. {"STAGE_ID": "NEW", ">OPPORTUNITY": 10000}. */
  filter?: Record<string, unknown>;
  select?: string[];
  order?: Record<string, unknown>;
  start?: number;
}

export interface GetUsersArgs {
  /** user.get filter, UPPER_SNAKE keys with the documented prefixes, e.g. {"@ID": [5, 7]}, {"NAME_SEARCH": "Bob", "ACTIVE": true}. */
  filter?: Record<string, unknown>;
  start?: number;
}

/** task.commentitem.add FIELDS. */
export interface TaskCommentFields {
  POST_MESSAGE: string;
  AUTHOR_ID?: number;
  [key: string]: unknown;
}

export interface WriteOptions {
  /** Sent as REST 3.0's Idempotency-Key header (see updateTask). */
  idempotencyKey?: string;
}

/** The agent's Bitrix24 portal: tasks, task comments, deals and users. */
export class Bitrix24Client extends Bitrix24Transport {
  /** One write attempt; an `idempotencyKey` goes out as the REST 3.0 Idempotency-Key header (see updateTask). */
  private write(method: string, params: Record<string, unknown>, opts: WriteOptions) {
    const headers: Record<string, string> = opts.idempotencyKey
      ? { "idempotency-key": opts.idempotencyKey }
      : {};
    return this.call(method, params, "write", headers);
  }

  async getTask(taskId: number, select?: string[]): Promise<Bitrix24Response<TaskResult>> {
    assertPositive(taskId, "taskId", "tasks.task.get");
    const params: Record<string, unknown> = { taskId };
    if (select !== undefined) params.select = select;
    const body = await this.call("tasks.task.get", params, "read");
    if (EmptyResultSchema.safeParse(body.result).success) {
      throw new Bitrix24Error({
        kind: "not_found",
        method: "tasks.task.get",
        httpStatus: 200,
        description: `task ${taskId} does not exist or is not visible to the webhook user (result: [])`,
      });
    }
    return this.expectShape(body, TaskResultSchema, "tasks.task.get", "result.task");
  }

  async listTasks(args: ListArgs = {}): Promise<Bitrix24Response<TaskListResult>> {
    const body = await this.call("tasks.task.list", listParams(args), "read");
    return this.expectShape(body, TaskListResultSchema, "tasks.task.list", "result.tasks[]");
  }

  async getTaskHistory(taskId: number): Promise<Bitrix24Response<HistoryResult>> {
    assertPositive(taskId, "taskId", "tasks.task.history.list");
    const body = await this.call("tasks.task.history.list", { taskId }, "read");
    return this.expectShape(body, HistoryResultSchema, "tasks.task.history.list", "result.list[]");
  }

  /**
   * Exactly one attempt unless the portal refused it with QUERY_LIMIT_EXCEEDED (not applied). With an
   * `idempotencyKey` the REST 3.0 `Idempotency-Key` header is sent: a portal that supports it answers a
   * repeat of the same key with the first answer (see wasReplayed) and refuses the key with another
   * body (HTTP 422, invalid_request); one that does not ignores the header (REST 2 behaviour).
   */
  async updateTask(
    taskId: number,
    fields: Record<string, unknown>,
    opts: WriteOptions = {},
  ): Promise<Bitrix24Response<TaskResult>> {
    assertPositive(taskId, "taskId", "tasks.task.update");
    const body = await this.write("tasks.task.update", { taskId, fields }, opts);
    return this.expectShape(body, TaskResultSchema, "tasks.task.update", "result.task");
  }

  /** tasks.task.add: `{fields}` -> the full new task, in tasks.task.get's shape. Exactly one attempt, like updateTask. */
  async addTask(
    fields: Record<string, unknown>,
    opts: WriteOptions = {},
  ): Promise<Bitrix24Response<TaskResult>> {
    const body = await this.write("tasks.task.add", { fields }, opts);
    return this.expectShape(body, TaskResultSchema, "tasks.task.add", "result.task");
  }

  /** tasks.task.delete: `{taskId}` -> `result: {task: true}`. A missing task is "No access to delete the task" (access_denied). */
  async deleteTask(taskId: number, opts: WriteOptions = {}): Promise<Bitrix24Response<TaskDeleted>> {
    assertPositive(taskId, "taskId", "tasks.task.delete");
    const body = await this.write("tasks.task.delete", { taskId }, opts);
    return this.expectShape(body, TaskDeletedSchema, "tasks.task.delete", "result.task = true");
  }

  /**
   * task.commentitem.add. Its parameters are positional on the portal, so TASKID goes before FIELDS. `result` is the
   * new comment's id. Missing or unreadable task: access_denied ("Insufficient permissions to add a comment.").
   */
  async addTaskComment(
    taskId: number,
    fields: TaskCommentFields,
    opts: WriteOptions = {},
  ): Promise<Bitrix24Response<number | string>> {
    assertPositive(taskId, "taskId", "task.commentitem.add");
    const body = await this.write("task.commentitem.add", { TASKID: taskId, FIELDS: fields }, opts);
    return this.expectShape(body, NewCommentIdSchema, "task.commentitem.add", "result = the new comment id");
  }

  /** task.commentitem.get (TASKID, ITEMID): a missing comment, task or access is not_found. */
  async getTaskComment(taskId: number, commentId: number): Promise<Bitrix24Response<Bitrix24TaskComment>> {
    assertPositive(taskId, "taskId", "task.commentitem.get");
    assertPositive(commentId, "commentId", "task.commentitem.get");
    const body = await this.call("task.commentitem.get", { TASKID: taskId, ITEMID: commentId }, "read");
    return this.expectShape(
      body,
      TaskCommentSchema,
      "task.commentitem.get",
      "result {ID, AUTHOR_ID, POST_DATE, POST_MESSAGE}",
    );
  }

  /** task.commentitem.getlist (TASKID, ORDER, FILTER, in that order): every comment, newest first. */
  async listTaskComments(taskId: number): Promise<Bitrix24Response<TaskCommentList>> {
    assertPositive(taskId, "taskId", "task.commentitem.getlist");
    const body = await this.call("task.commentitem.getlist", { TASKID: taskId, ORDER: {} }, "read");
    return this.expectShape(body, TaskCommentListSchema, "task.commentitem.getlist", "result[] of comments");
  }

  /** task.commentitem.delete (TASKID, ITEMID) -> `result: true`; refused (access_denied) for a missing comment too. */
  async deleteTaskComment(
    taskId: number,
    commentId: number,
    opts: WriteOptions = {},
  ): Promise<Bitrix24Response<true>> {
    assertPositive(taskId, "taskId", "task.commentitem.delete");
    assertPositive(commentId, "commentId", "task.commentitem.delete");
    const body = await this.write("task.commentitem.delete", { TASKID: taskId, ITEMID: commentId }, opts);
    return this.expectShape(body, TrueResultSchema, "task.commentitem.delete", "result = true");
  }

  /** crm.deal.get (scope crm): the deal is `result`, UPPER_SNAKE. A missing deal is not_found (HTTP 400, empty code). */
  async getDeal(dealId: number): Promise<Bitrix24Response<Bitrix24Deal>> {
    assertPositive(dealId, "dealId", "crm.deal.get");
    const body = await this.call("crm.deal.get", { id: dealId }, "read");
    return this.expectShape(body, DealSchema, "crm.deal.get", "result {ID, ...}");
  }

  /** crm.deal.list (scope crm): 50 deals per page, `total` and `next` at the top level. */
  async listDeals(args: ListArgs = {}): Promise<Bitrix24Response<DealListResult>> {
    const body = await this.call("crm.deal.list", listParams(args), "read");
    return this.expectShape(body, DealListResultSchema, "crm.deal.list", "result[] of deals");
  }

  /** crm.deal.update (scope crm): `{id, fields}` -> `result: true` (re-read to see the deal). Unknown fields are ignored by the portal. */
  async updateDeal(
    dealId: number,
    fields: Record<string, unknown>,
    opts: WriteOptions = {},
  ): Promise<Bitrix24Response<true>> {
    assertPositive(dealId, "dealId", "crm.deal.update");
    const body = await this.write("crm.deal.update", { id: dealId, fields }, opts);
    return this.expectShape(body, TrueResultSchema, "crm.deal.update", "result = true");
  }

  /** user.get (scope user, user_brief or user_basic): 50 users per page, `total` and `next` at the top level. */
  async getUsers(args: GetUsersArgs = {}): Promise<Bitrix24Response<UserListResult>> {
    const params: Record<string, unknown> = {};
    if (args.filter !== undefined) params.FILTER = args.filter;
    if (args.start !== undefined) params.start = args.start;
    const body = await this.call("user.get", params, "read");
    return this.expectShape(body, UserListResultSchema, "user.get", "result[] of users with ID");
  }

  async currentUser(): Promise<Bitrix24Response<CurrentUserResult>> {
    const body = await this.call("user.current", {}, "read");
    return this.expectShape(body, CurrentUserResultSchema, "user.current", "result.ID");
  }
}

function assertPositive(id: number, name: string, method: string): void {
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new Bitrix24Error({
      kind: "invalid_request",
      method,
      description: `expected ${name} to be a positive integer, got ${JSON.stringify(id)}`,
    });
  }
}

/** A list method's parameters (tasks.task.list, crm.deal.list): only those given, in this order. */
function listParams(args: ListArgs): Record<string, unknown> {
  const params: Record<string, unknown> = {};
  if (args.filter !== undefined) params.filter = args.filter;
  if (args.select !== undefined) params.select = args.select;
  if (args.order !== undefined) params.order = args.order;
  if (args.start !== undefined) params.start = args.start;
  return params;
}
