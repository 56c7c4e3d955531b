/** The input schemas of the Bitrix24 MCP tools: strict objects, so a crafted extra argument is refused. */
import { z } from "zod";

const taskId = z.number().int().positive().describe("Bitrix24 task id, a positive integer, e.g. 4");
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const fieldValue = z.union([scalar, z.array(z.union([z.string(), z.number()]))]);
/** A list tool's row offset (tasks.task.list also takes -1: no count). */
const pageStart = (rows: string, min = 0) =>
  z
    .number()
    .int()
    .min(min)
    .optional()
    .describe(`Row offset; pages hold 50 ${rows} (use \`next\` of the previous page)`);

/** The tools that take one task id: get_task_by_id, get_task_history, list_task_comments. */
export const taskIdInput = z.strictObject({ taskId });
export const listTasksInput = z.strictObject({
  filter: z
    .record(z.string().regex(/^[!<>=%]{0,2}[A-Za-z][A-Za-z0-9_]*$/), fieldValue)
    .optional()
    .describe(
      'tasks.task.list filter with UPPER_SNAKE keys and optional operator prefix, e.g. {"RESPONSIBLE_ID": 5, "%TITLE": "LAB"}',
    ),
  start: pageStart("tasks", -1),
  order: z
    .record(z.string().regex(/^[A-Za-z][A-Za-z0-9_]*$/), z.enum(["asc", "desc", "ASC", "DESC"]))
    .optional()
    .describe('tasks.task.list order, e.g. {"ID": "desc"} (the newest first)'),
});
export const usersInput = z.strictObject({
  filter: z
    .record(
      z.string().regex(/^(!=%|!%=|!@|!%|!=|=%|%=|>=|<=|@|%|>|<|=|!)?[A-Za-z][A-Za-z0-9_]*$/),
      fieldValue,
    )
    .optional()
    .describe(
      'user.get filter with UPPER_SNAKE keys and optional prefix, e.g. {"@ID": [5, 7]} or {"NAME_SEARCH": "Bob Smith", "ACTIVE": true}',
    ),
  start: pageStart("users"),
});
const idempotencyKey = z
  .string()
  .regex(/^[A-Za-z0-9_-]{8,128}$/)
  .optional()
  .describe(
    "Sent as the REST 3.0 Idempotency-Key header; a repeat with the same key gets the first answer back",
  );
/** A write's fields: UPPER_SNAKE keys, scalar or list values. */
const upperFields = (description: string) =>
  z.record(z.string().regex(/^[A-Z][A-Z0-9_]*$/), fieldValue).describe(description);
export const updateTaskInput = z.strictObject({
  taskId,
  fields: upperFields(
    'Only the fields to change, UPPER_SNAKE keys, e.g. {"DEADLINE": "2026-06-01T18:00:00+03:00"}',
  ),
  idempotencyKey,
});

const dealId = z.number().int().positive().describe("Bitrix24 CRM deal id, a positive integer, e.g. 3");
const commentId = z
  .number()
  .int()
  .positive()
  .describe("Task comment id (task.commentitem), a positive integer");

export const getDealInput = z.strictObject({ dealId });
export const searchDealsInput = z.strictObject({
  filter: z
    .record(z.string().regex(/^(!@|!=|=%|%=|>=|<=|@|%|>|<|=|!)?[A-Za-z][A-Za-z0-9_]*$/), fieldValue)
    .optional()
    .describe(
      'crm.deal.list filter with UPPER_SNAKE keys and optional prefix, e.g. {"STAGE_ID": "NEW", ">OPPORTUNITY": 10000, "%TITLE": "licence"}',
    ),
  start: pageStart("deals"),
});
export const taskCommentInput = z.strictObject({ taskId, commentId });
export const addTaskCommentInput = z.strictObject({
  taskId,
  fields: z
    .strictObject({
      POST_MESSAGE: z.string().min(1).describe("The comment text"),
      AUTHOR_ID: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Post as this user; default the webhook user"),
    })
    .describe('task.commentitem.add FIELDS, e.g. {"POST_MESSAGE": "Checked, looks good"}'),
  idempotencyKey,
});
export const addTaskInput = z.strictObject({
  fields: upperFields("tasks.task.add fields, UPPER_SNAKE keys; TITLE and RESPONSIBLE_ID are required"),
  idempotencyKey,
});
export const updateDealInput = z.strictObject({
  dealId,
  fields: upperFields("Only the deal fields to change, UPPER_SNAKE keys; the portal ignores unknown keys"),
  idempotencyKey,
});
export const deleteTaskCommentInput = z.strictObject({ taskId, commentId, idempotencyKey });
export const deleteTaskInput = z.strictObject({ taskId, idempotencyKey });
