import { z } from "zod";

/**
 * Documented response shapes of the task methods we use. Objects are loose: the portal sends many more
 * keys than we check, and callers (and MCP clients) get the full body, not a trimmed copy.
 */

// Scalars in tasks.task.* are strings on the real portal; numbers are tolerated because SDK mocks send them.
const idLike = z.union([z.string(), z.number()]);

export const TimeSchema = z.looseObject({
  start: z.number().optional(),
  finish: z.number().optional(),
  duration: z.number().optional(),
  date_start: z.string().optional(),
  date_finish: z.string().optional(),
});

export const TaskSchema = z.looseObject({
  id: idLike,
  title: z.string().optional(),
  description: z.string().nullable().optional(),
  status: idLike.nullable().optional(),
  priority: idLike.nullable().optional(),
  responsibleId: idLike.nullable().optional(),
  groupId: idLike.nullable().optional(),
  deadline: z.string().nullable().optional(),
  changedDate: z.string().nullable().optional(),
  changedBy: idLike.nullable().optional(),
  auditors: z.array(idLike).optional(),
  accomplices: z.array(idLike).optional(),
  action: z.record(z.string(), z.unknown()).optional(),
});

/** Any successful answer: `result` is required, the rest is optional. */
export const EnvelopeSchema = z.looseObject({
  result: z.unknown(),
  total: z.number().optional(),
  next: z.number().optional(),
  time: TimeSchema.optional(),
});

/** tasks.task.get and tasks.task.update. */
export const TaskResultSchema = z.looseObject({ task: TaskSchema });
export type TaskResult = z.infer<typeof TaskResultSchema>;

/** tasks.task.get answers `result: []` for a task that is missing or not visible to the webhook user. */
export const EmptyResultSchema = z.array(z.unknown()).length(0);

/** tasks.task.list: `result.tasks`, with `total` and (when more rows exist) `next` at the top level. */
export const TaskListResultSchema = z.looseObject({ tasks: z.array(TaskSchema) });
export type TaskListResult = z.infer<typeof TaskListResultSchema>;

export const HistoryRowSchema = z.looseObject({
  id: idLike,
  createdDate: z.string(),
  field: z.string(),
  value: z.unknown().optional(),
  user: z.looseObject({ id: idLike }).nullable().optional(),
});

/** tasks.task.history.list. */
export const HistoryResultSchema = z.looseObject({ list: z.array(HistoryRowSchema) });
export type HistoryResult = z.infer<typeof HistoryResultSchema>;

/** user.current: UPPER_SNAKE keys, unlike the task methods. */
export const CurrentUserResultSchema = z.looseObject({ ID: idLike });
export type CurrentUserResult = z.infer<typeof CurrentUserResultSchema>;

/** user.get: a list of users in UPPER_SNAKE, `total` and (when more rows exist) `next` at the top level. */
export const UserSchema = z.looseObject({
  ID: idLike,
  ACTIVE: z.union([z.boolean(), z.string()]).optional(),
  NAME: z.string().nullable().optional(),
  LAST_NAME: z.string().nullable().optional(),
  SECOND_NAME: z.string().nullable().optional(),
});
export const UserListResultSchema = z.array(UserSchema);
export type UserListResult = z.infer<typeof UserListResultSchema>;

/** crm.deal.get's `result` and crm.deal.list's items: UPPER_SNAKE keys, string values (money as "5000.00"). */
export const DealSchema = z.looseObject({
  ID: idLike,
  TITLE: z.string().nullable().optional(),
  STAGE_ID: z.string().nullable().optional(),
  STAGE_SEMANTIC_ID: z.string().nullable().optional(),
  CLOSED: z.string().nullable().optional(),
  OPPORTUNITY: idLike.nullable().optional(),
  CURRENCY_ID: z.string().nullable().optional(),
  ASSIGNED_BY_ID: idLike.nullable().optional(),
  DATE_MODIFY: z.string().nullable().optional(),
  MODIFY_BY_ID: idLike.nullable().optional(),
});
export type Bitrix24Deal = z.infer<typeof DealSchema>;
/** crm.deal.list: `result` is the page of deals; `total` and `next` at the top level. */
export const DealListResultSchema = z.array(DealSchema);
export type DealListResult = z.infer<typeof DealListResultSchema>;

/** crm.deal.update, task.commentitem.delete: `result: true`. */
export const TrueResultSchema = z.literal(true);

/** task.commentitem.get / getlist items: UPPER_SNAKE keys, string values. */
export const TaskCommentSchema = z.looseObject({
  ID: idLike,
  AUTHOR_ID: idLike,
  AUTHOR_NAME: z.string().nullable().optional(),
  POST_DATE: z.string(),
  POST_MESSAGE: z.string(),
});
export type Bitrix24TaskComment = z.infer<typeof TaskCommentSchema>;
export const TaskCommentListSchema = z.array(TaskCommentSchema);
export type TaskCommentList = z.infer<typeof TaskCommentListSchema>;
/** task.commentitem.add: the new comment's id, a number (tolerated as a numeric string). */
export const NewCommentIdSchema = z.union([z.number().int().positive(), z.string().regex(/^\d+$/)]);

/** tasks.task.delete: `result: {task: true}`. */
export const TaskDeletedSchema = z.looseObject({ task: z.literal(true) });
export type TaskDeleted = z.infer<typeof TaskDeletedSchema>;

/** Error answer: `{"error": "<code>", "error_description": "<text>"}`; `error` may be a string or a number. */
export const ErrorBodySchema = z.looseObject({
  error: z.union([z.string(), z.number()]),
  error_description: z.string().optional(),
});
