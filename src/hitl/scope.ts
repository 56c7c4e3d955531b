/**
 * Scope of a request: which tasks and fields it is about. Taken from the caller when given, otherwise
 * derived by code from the request text. The model's proposal never widens it.
 */
import type { RequestScope } from "../envelope/records.js";

const FIELD_WORDS: Array<[RegExp, string]> = [
  [/\b(rename|title|name)\b/i, "TITLE"],
  [/\bdeadline|due\b/i, "DEADLINE"],
  [/\bpriority\b/i, "PRIORITY"],
  [/\bstatus\b/i, "STATUS"],
  [/\b(responsible|assign(ee)?|owner)\b/i, "RESPONSIBLE_ID"],
  // A deal's (update_deal): "move deal 3 to WON", "set the amount of deal 3", "assign deal 3 to user 5".
  [/\b(stage|won|lost?|move)\b/i, "STAGE_ID"],
  [/\b(amount|opportunity|sum)\b/i, "OPPORTUNITY"],
  [/\bcurrency\b/i, "CURRENCY_ID"],
  [/\b(responsible|assign(ee)?|owner)\b/i, "ASSIGNED_BY_ID"],
  [/\bclose ?date\b/i, "CLOSEDATE"],
  [/\bdescription\b/i, "DESCRIPTION"],
  // A new task (add_task): "create a task …" is about the fields a new task is made with.
  ...(["TITLE", "RESPONSIBLE_ID", "DESCRIPTION", "DEADLINE", "PRIORITY", "GROUP_ID"] as const).map(
    (f): [RegExp, string] => [/\b(?:create|add|open|make)\s+(?:a\s+)?(?:new\s+)?task\b/i, f],
  ),
  // A comment's text (add_task_comment): "comment on task 4", "tell the team", "post a note".
  [/\b(comment|tell|notify|post|note)\b/i, "POST_MESSAGE"],
];

/**
 * A deal's own names for what a task calls otherwise: its text is COMMENTS (a task's DESCRIPTION, or a
 * comment's POST_MESSAGE) and its due date CLOSEDATE (a task's DEADLINE). Used only when the request
 * names a deal, so a request about a task gains no deal field.
 */
const DEAL_FIELD_WORDS: Array<[RegExp, string]> = [
  [/\b(comments?|description|notes?)\b/i, "COMMENTS"],
  [/\b(deadline|due|close ?date)\b/i, "CLOSEDATE"],
];

export function deriveScope(request: string, given?: RequestScope): RequestScope {
  const scope: RequestScope = {};
  const taskIds = given?.taskIds?.length
    ? given.taskIds
    : [...request.matchAll(/\btask\s*(?:#|no\.?|id)?\s*(\d+)\b/gi)].map((m) => Number(m[1]));
  const dealIds = given?.dealIds?.length
    ? given.dealIds
    : [...request.matchAll(/\bdeal\s*(?:#|no\.?|id)?\s*(\d+)\b/gi)].map((m) => Number(m[1]));
  const words = dealIds.length ? [...FIELD_WORDS, ...DEAL_FIELD_WORDS] : FIELD_WORDS;
  const fields = given?.fields?.length
    ? given.fields.map((f) => f.toUpperCase())
    : words.filter(([re]) => re.test(request)).map(([, f]) => f);
  if (taskIds.length) scope.taskIds = [...new Set(taskIds)];
  if (dealIds.length) scope.dealIds = [...new Set(dealIds)];
  if (fields.length) scope.fields = [...new Set(fields)];
  return scope;
}

/** A scope as the input schema describes it; anything else (input that failed validation) is not used. */
export function isRequestScope(v: unknown): v is RequestScope {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const { taskIds, dealIds, fields } = v as { taskIds?: unknown; dealIds?: unknown; fields?: unknown };
  const listOf = (xs: unknown, ok: (x: unknown) => boolean) =>
    xs === undefined || (Array.isArray(xs) && xs.every(ok));
  const ids = (x: unknown) => Number.isSafeInteger(x) && (x as number) > 0;
  return listOf(taskIds, ids) && listOf(dealIds, ids) && listOf(fields, (x) => typeof x === "string");
}
