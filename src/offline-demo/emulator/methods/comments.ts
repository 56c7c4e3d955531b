/**
 * task.commentitem.add / get / getlist / update / delete, as b24restdocs api-reference/tasks/comment-item/ documents them.
 * These are the old `task.*` methods: their parameters are POSITIONAL (the docs: "pass parameters in the order of the
 * table"), so the names in the body do not matter, only their order: add (TASKID, FIELDS), get and delete (TASKID,
 * ITEMID), getlist (TASKID, ORDER, FILTER). An array body `[13, {...}]` works the same. Items are UPPER_SNAKE with
 * string values; every error is HTTP 400 ERROR_CORE with the product's TASKS_ERROR_EXCEPTION text and a `<br>`.
 */
import { formatPortalDate, parsePortalDate } from "../dates.js";
import { errors } from "../errors.js";
import { canRead } from "../shapes.js";
import type { CommentRecord, TaskRecord } from "../types.js";
import {
  intLike,
  isRecord,
  listLike,
  type MethodContext,
  type MethodHandler,
  type Params,
} from "./context.js";

type Method = "add" | "get" | "getlist" | "update" | "delete";

const core = (message: string) => errors.core([message]);
const wrongArgs = (detail: string) => core(`TASKS_ERROR_EXCEPTION_#256; ${detail}; 256/TE/WRONG_ARGUMENTS.`);
const notGiven = (n: number, name: string, m: Method) =>
  wrongArgs(`Param #${n} (${name}) expected by method ctaskcommentitem::${m}(), but not given.`);
const wrongType = (n: number, name: string, m: Method, type: string) =>
  wrongArgs(
    `Param #${n} (${name}) for method ctaskcommentitem::${m}() expected to be of type "${type}", but given something else.`,
  );
const mustNotContain = (n: number, name: string, m: Method, key: string) =>
  wrongArgs(`Param #${n} (${name}) for method ctaskcommentitem::${m}() must not contain key "${key}".`);
const itemNotFound = () =>
  core(
    "TASKS_ERROR_EXCEPTION_#512; Check listitem not found or not accessible; 512/TE/ITEM_NOT_FOUND_OR_NOT_ACCESSIBLE.",
  );
const actionFailed = () =>
  core("TASKS_ERROR_EXCEPTION_#8; Action failed; 8/TE/ACTION_FAILED_TO_BE_PROCESSED.");
const notAllowed = () => core("TASKS_ERROR_EXCEPTION_#4; Action is not allowed; 4/TE/ACTION_NOT_ALLOWED.");

/** The call's arguments by position, as the portal binds `task.*` methods (the `auth` parameter is not one). */
function positional(params: Params): unknown[] {
  return Object.entries(params)
    .filter(([k]) => k.toLowerCase() !== "auth")
    .map(([, v]) => v);
}

/** Argument n is absent, null or empty: the portal's "expected ..., but not given". */
function notPassed(args: unknown[], n: number): boolean {
  return args.length <= n || args[n] === undefined || args[n] === null || args[n] === "";
}

function intArg(args: unknown[], n: number, name: string, m: Method): number {
  if (notPassed(args, n)) throw notGiven(n, name, m);
  const id = intLike(args[n]);
  if (id === undefined) throw wrongType(n, name, m, "integer");
  return id;
}

function renderComment(ctx: MethodContext, c: CommentRecord): Record<string, unknown> {
  const u = ctx.store.getUser(c.authorId);
  return {
    POST_MESSAGE_HTML: null,
    ID: String(c.id),
    AUTHOR_ID: String(c.authorId),
    AUTHOR_NAME: u ? [u.name, u.lastName].filter(Boolean).join(" ") : "",
    AUTHOR_EMAIL: "",
    POST_DATE: formatPortalDate(c.postDate),
    POST_MESSAGE: c.message,
    ATTACHED_OBJECTS: {},
  };
}

function readableTask(ctx: MethodContext, taskId: number): TaskRecord | undefined {
  const task = ctx.store.getTask(taskId);
  return task && canRead(task, ctx.userId) ? task : undefined;
}

const ADD_FIELDS = new Set([
  "POST_MESSAGE",
  "AUTHOR_ID",
  "POST_DATE",
  "UF_FORUM_MESSAGE_DOC",
  "AUTHOR_NAME",
  "AUTHOR_EMAIL",
  "USE_SMILES",
]);

/**
 * (TASKID, FIELDS {POST_MESSAGE, AUTHOR_ID?, POST_DATE?}) -> `result: <new id>` (a number). Needs read access to
 * the task. AUTHOR_ID defaults to the webhook user (any user may post as another, as documented). The task gets a
 * COMMENT history row and its COMMENTS_COUNT goes up; changedDate does not move.
 */
export const addComment: MethodHandler = (params, ctx) => {
  const args = positional(params);
  const taskId = intArg(args, 0, "taskId", "add");
  if (notPassed(args, 1)) throw notGiven(1, "arFields", "add");
  const fields = args[1];
  if (!isRecord(fields)) throw wrongType(1, "arFields", "add", "array");
  for (const key of Object.keys(fields))
    if (!ADD_FIELDS.has(key)) throw mustNotContain(1, "arFields", "add", key);
  const task = readableTask(ctx, taskId);
  if (!task) throw core("Insufficient permissions to add a comment.");
  const message =
    typeof fields.POST_MESSAGE === "string"
      ? fields.POST_MESSAGE
      : typeof fields.POST_MESSAGE === "number"
        ? String(fields.POST_MESSAGE)
        : "";
  if (message.trim() === "") throw core("Comment text not specified");
  const files = listLike(fields.UF_FORUM_MESSAGE_DOC);
  if (files && files.length > 0) throw core("File not found"); // the emulated portal has no Drive
  let authorId = ctx.userId;
  if (fields.AUTHOR_ID !== undefined && fields.AUTHOR_ID !== null && fields.AUTHOR_ID !== "") {
    const id = intLike(fields.AUTHOR_ID);
    if (id === undefined || !ctx.store.getUser(id)) throw core("User not found");
    authorId = id;
  }
  let postDate = Math.floor(ctx.nowSec);
  if (typeof fields.POST_DATE === "string" && fields.POST_DATE.trim() !== "") {
    const t = parsePortalDate(fields.POST_DATE);
    if (t === undefined) throw core("Invalid value in the POST_DATE field");
    postDate = t;
  }
  const id = ctx.store.addComment({ taskId, authorId, postDate, message });
  ctx.store.putTask({ ...task, commentsCount: (task.commentsCount ?? 0) + 1 });
  ctx.store.addHistory({
    taskId,
    createdDate: Math.floor(ctx.nowSec),
    field: "COMMENT",
    from: null,
    to: String(id),
    userId: ctx.userId,
  });
  return { result: id };
};

/** (TASKID, ITEMID) -> the comment; a missing task, comment or access is the one documented 512 error. */
export const getComment: MethodHandler = (params, ctx) => {
  const args = positional(params);
  const taskId = intArg(args, 0, "taskId", "get");
  const itemId = intArg(args, 1, "itemId", "get");
  const comment = ctx.store.getComment(itemId);
  if (!readableTask(ctx, taskId) || !comment || comment.taskId !== taskId) throw itemNotFound();
  return { result: renderComment(ctx, comment) };
};

const ORDER_KEYS = new Set(["ID", "AUTHOR_ID", "AUTHOR_NAME", "AUTHOR_EMAIL", "POST_DATE"]);
const FILTER_KEYS = new Set(["ID", "AUTHOR_ID", "AUTHOR_NAME", "POST_DATE"]);

function sortValue(ctx: MethodContext, c: CommentRecord, key: string): string | number {
  switch (key) {
    case "ID":
      return c.id;
    case "AUTHOR_ID":
      return c.authorId;
    case "POST_DATE":
      return c.postDate;
    case "AUTHOR_NAME":
      return String(renderComment(ctx, c).AUTHOR_NAME);
    default:
      return "";
  }
}

function filterTest(ctx: MethodContext, rawKey: string, raw: unknown): (c: CommentRecord) => boolean {
  const m = /^(!|<=|<|>=|>)?(.*)$/.exec(rawKey.trim())!;
  const op = m[1] ?? "=";
  const field = m[2] ?? "";
  if (!FILTER_KEYS.has(field)) throw mustNotContain(2, "arFilter", "getlist", rawKey);
  const expected = (listLike(raw) ?? [raw]).map((v) =>
    field === "POST_DATE" && typeof v === "string"
      ? (parsePortalDate(v) ?? v)
      : field === "AUTHOR_NAME"
        ? String(v ?? "")
        : (intLike(v) ?? v),
  );
  return (c) => {
    const actual = sortValue(ctx, c, field);
    const eq = (e: unknown) =>
      typeof actual === "string" ? actual.toLowerCase() === String(e).toLowerCase() : actual === e;
    if (op === "=") return expected.some(eq);
    if (op === "!") return expected.every((e) => !eq(e));
    const e = expected[0];
    if (typeof actual !== typeof e) return false;
    const d = typeof actual === "number" ? actual - (e as number) : actual.localeCompare(String(e));
    return op === "<" ? d < 0 : op === "<=" ? d <= 0 : op === ">" ? d > 0 : d >= 0;
  };
}

/** An optional array argument: absent, null, empty, an object, or an empty JSON list (PHP's empty array). */
function optionalArray(v: unknown): boolean {
  return v === undefined || v === null || v === "" || isRecord(v) || (Array.isArray(v) && v.length === 0);
}

/** (TASKID, ORDER?, FILTER?) -> `result: [...]`, newest (highest ID) first by default; no paging. */
export const listComments: MethodHandler = (params, ctx) => {
  const args = positional(params);
  const taskId = intArg(args, 0, "taskId", "getlist");
  const order = args[1];
  const filter = args[2];
  if (!optionalArray(order)) throw wrongType(1, "arOrder", "getlist", "array");
  if (!optionalArray(filter)) throw wrongType(2, "arFilter", "getlist", "array");
  const sorts: [string, number][] = [];
  for (const [key, dir] of Object.entries(isRecord(order) ? order : {})) {
    if (!ORDER_KEYS.has(key)) throw mustNotContain(1, "arOrder", "getlist", key);
    sorts.push([key, String(dir).toLowerCase() === "desc" ? -1 : 1]);
  }
  if (sorts.length === 0) sorts.push(["ID", -1]);
  const tests = Object.entries(isRecord(filter) ? filter : {}).map(([k, v]) => filterTest(ctx, k, v));
  if (!readableTask(ctx, taskId)) throw actionFailed();
  const rows = ctx.store
    .comments(taskId)
    .filter((c) => tests.every((t) => t(c)))
    .sort((a, b) => {
      for (const [key, sign] of sorts) {
        const x = sortValue(ctx, a, key);
        const y = sortValue(ctx, b, key);
        const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        if (c !== 0) return c * sign;
      }
      return b.id - a.id;
    });
  return { result: rows.map((c) => renderComment(ctx, c)) };
};

/**
 * The task of a comment the webhook user may change or delete: its author's, or any for a portal administrator
 * (seed `admin`). A missing task or comment, no access, or someone else's comment all answer the same error.
 */
function changeableComment(ctx: MethodContext, taskId: number, itemId: number): TaskRecord {
  const task = readableTask(ctx, taskId);
  const comment = ctx.store.getComment(itemId);
  if (!task || !comment || comment.taskId !== taskId) throw notAllowed();
  const isAdmin = ctx.store.getUser(ctx.userId)?.admin === true;
  if (comment.authorId !== ctx.userId && !isAdmin) throw notAllowed();
  return task;
}

/**
 * (TASKID, ITEMID) -> `result: true`. Only the comment's author or a portal administrator (seed `admin`) may delete
 * it; a missing task or comment, no access, or someone else's comment all answer the same documented error.
 * The task's COMMENTS_COUNT goes down; no history row is written.
 */
export const deleteComment: MethodHandler = (params, ctx) => {
  const args = positional(params);
  const taskId = intArg(args, 0, "taskId", "delete");
  const itemId = intArg(args, 1, "itemId", "delete");
  const task = changeableComment(ctx, taskId, itemId);
  ctx.store.deleteComment(itemId);
  ctx.store.putTask({ ...task, commentsCount: Math.max(0, (task.commentsCount ?? 1) - 1) });
  return { result: true };
};

/**
 * (TASKID, ITEMID, FIELDS {POST_MESSAGE}) -> `result: true`. Like delete, only the comment's author or a portal
 * administrator may change it; a missing task or comment answers the same documented error. No history row.
 */
export const updateComment: MethodHandler = (params, ctx) => {
  const args = positional(params);
  const taskId = intArg(args, 0, "taskId", "update");
  const itemId = intArg(args, 1, "itemId", "update");
  if (notPassed(args, 2)) throw notGiven(2, "arFields", "update");
  const fields = args[2];
  if (!isRecord(fields)) throw wrongType(2, "arFields", "update", "array");
  for (const key of Object.keys(fields))
    if (key !== "POST_MESSAGE") throw mustNotContain(2, "arFields", "update", key);
  changeableComment(ctx, taskId, itemId);
  const message = typeof fields.POST_MESSAGE === "string" ? fields.POST_MESSAGE : "";
  if (message.trim() === "") throw core("Comment text not specified");
  ctx.store.updateCommentMessage(itemId, message);
  return { result: true };
};
