/**
 * Scope of a request: which tasks and fields it is about. Taken from the caller when given, otherwise
 * derived by code from the request text, in English or in Russian. The model's proposal never widens it.
 */
import { OPERATIONS, type OperationName } from "../envelope/operations.js";
import type { RequestScope } from "../envelope/records.js";
import type { Scope } from "../envelope/scope.js";

/** A Russian word starting here: no letter, digit or underscore just before it (`\b` knows only ASCII). */
const RU = "(?<![\\p{L}\\p{N}_])";
const ru = (stems: string): RegExp => new RegExp(`${RU}(?:${stems})`, "iu");

const FIELD_WORDS: Array<[RegExp, string]> = [
  [/\b(rename|title|name)\b/i, "TITLE"],
  [ru("переимен|заголов|назван"), "TITLE"],
  [/\bdeadline|due\b/i, "DEADLINE"],
  [ru("срок|дедлайн"), "DEADLINE"],
  [/\bpriorit(y|ies)\b/i, "PRIORITY"],
  [ru("приоритет"), "PRIORITY"],
  [/\bstatus\b/i, "STATUS"],
  [ru("статус"), "STATUS"],
  [/\b(responsible|assign(ee)?|owner)\b/i, "RESPONSIBLE_ID"],
  [ru("ответствен|назнач|исполнител"), "RESPONSIBLE_ID"],
  // A deal's (update_deal): "move deal 3 to WON", "set the amount of deal 3", "assign deal 3 to user 5".
  [/\b(stage|won|lost?|move)\b/i, "STAGE_ID"],
  [ru("стади|этап|выигр|проигр"), "STAGE_ID"],
  [/\b(amount|opportunity|sum)\b/i, "OPPORTUNITY"],
  [ru("сумм|бюджет"), "OPPORTUNITY"],
  [/\bcurrency\b/i, "CURRENCY_ID"],
  [ru("валют"), "CURRENCY_ID"],
  [/\b(responsible|assign(ee)?|owner)\b/i, "ASSIGNED_BY_ID"],
  [ru("ответствен|назнач"), "ASSIGNED_BY_ID"],
  [/\bclose ?date\b/i, "CLOSEDATE"],
  [ru("дат[а-яё]*\\s+закрыти"), "CLOSEDATE"],
  [/\bdescription\b/i, "DESCRIPTION"],
  [ru("описани"), "DESCRIPTION"],
  // A new task (add_task): "create a task …" is about the fields a new task is made with.
  ...(["TITLE", "RESPONSIBLE_ID", "DESCRIPTION", "DEADLINE", "PRIORITY", "GROUP_ID"] as const).flatMap(
    (f): Array<[RegExp, string]> => [
      [/\b(?:create|add|open|make)\s+(?:a\s+)?(?:new\s+)?task\b/i, f],
      // "создай задачу", "поставь новую задачу": a task in the accusative, with no id after it ("поставь
      // задаче 4 срок" is an update of task 4).
      [
        ru(
          "(?:созда|завед|заве[сд]|добав|постав)[а-яё]*\\s+(?:нов[а-яё]*\\s+)?задачу(?!\\s*(?:#|№)?\\s*\\d)",
        ),
        f,
      ],
    ],
  ),
  // A comment's text (add_task_comment): "comment on task 4", "tell the team", "post a note".
  [/\b(comment|tell|notify|post|note)\b/i, "POST_MESSAGE"],
  [ru("коммент|напиш|сообщ|уведом|замет"), "POST_MESSAGE"],
];

/**
 * A deal's own names for what a task calls otherwise: its text is COMMENTS (a task's DESCRIPTION, or a
 * comment's POST_MESSAGE) and its due date CLOSEDATE (a task's DEADLINE). Used only when the request
 * names a deal, so a request about a task gains no deal field.
 */
const DEAL_FIELD_WORDS: Array<[RegExp, string]> = [
  [/\b(comments?|description|notes?)\b/i, "COMMENTS"],
  [ru("коммент|описани|замет"), "COMMENTS"],
  [/\b(deadline|due|close ?date)\b/i, "CLOSEDATE"],
  [ru("срок|дедлайн|дат[а-яё]*\\s+закрыти"), "CLOSEDATE"],
];

/**
 * Text in double quotes or guillemets ("…", «…», “…”, „…“) is a value the request gives (a new title,
 * a comment's text), not a reference: the ids and field words inside it name nothing.
 */
const QUOTED = /"[^"]*"|«[^»]*»|“[^”]*”|„[^“”]*[“”]/gu;

/** The words for a task and for a deal, in every case form ("задачу", "задачи", "сделке", "сделок"). */
const TASK_WORD = "(?:\\btasks?|задач[а-яё]*)";
const DEAL_WORD = "(?:\\bdeals?|сдел(?:к[а-яё]*|ок))";
/** One id: digits, optionally marked ("#4", "№ 4", "no. 4", "id 4", "номер 4"). */
const ID = "(?:(?:#|№|no\\.?|id|номер)\\s*)?(\\d+)";
/** What joins the ids of a list ("4, 5 and 8", "4 и 5", "#4 & #5") or a range ("4-6", "4–6", "4..6"). */
const JOIN = "\\s*(?:,\\s*(?:and|и)?|&|and|or|и|или|[-–—]|\\.\\.)\\s*";
/** A range is spelled out up to this many ids; a longer one names its two ends only. */
const MAX_RANGE = 50;

/** Every id the request names after `word`: each of a list, and every id of a range. */
function idsAfter(text: string, word: string): number[] {
  const list = new RegExp(`${RU}${word}\\s*${ID}((?:${JOIN}${ID})*)`, "giu");
  const next = new RegExp(`(${JOIN})${ID}`, "giu");
  const ids: number[] = [];
  for (const m of text.matchAll(list)) {
    let last = Number(m[1]);
    ids.push(last);
    for (const n of (m[2] ?? "").matchAll(next)) {
      const id = Number(n[2]);
      if (/[-–—.]/.test(n[1]!) && id > last && id - last <= MAX_RANGE)
        for (let i = last + 1; i < id; i++) ids.push(i);
      ids.push(id);
      last = id;
    }
  }
  return ids;
}

/**
 * Words that ask for a new object ("create", "new", "add a task", "создай", "новую задачу"): a request
 * about existing objects without any of them reaches no create.
 */
const NEW_OBJECT_WORDS: RegExp[] = [
  /\b(?:create|new)\b/i,
  /\b(?:add|open|make)\s+(?:\w+\s+){0,2}tasks?\b/i,
  ru("созда|нов[а-яё]*\\s+задач|(?:завед|заве[сд]|добав|постав)[а-яё]*\\s+задачу(?!\\s*(?:#|№)?\\s*\\d)"),
];

export function deriveScope(request: string, given?: RequestScope): RequestScope {
  const scope: RequestScope = {};
  const words = request.replace(QUOTED, " ");
  const taskIds = given?.taskIds?.length ? given.taskIds : idsAfter(words, TASK_WORD);
  const dealIds = given?.dealIds?.length ? given.dealIds : idsAfter(words, DEAL_WORD);
  const known = dealIds.length ? [...FIELD_WORDS, ...DEAL_FIELD_WORDS] : FIELD_WORDS;
  const fields = given?.fields?.length
    ? given.fields.map((f) => f.toUpperCase())
    : known.filter(([re]) => re.test(words)).map(([, f]) => f);
  if (taskIds.length) scope.taskIds = [...new Set(taskIds)];
  if (dealIds.length) scope.dealIds = [...new Set(dealIds)];
  if (fields.length) scope.fields = [...new Set(fields)];
  return scope;
}

/**
 * The scope a proposal is checked against: the thread's recorded scope and, when it names existing
 * tasks or deals by id and the request asks for no new object ("rename task 4 and assign it to user
 * 5"), every operation but a create, however the request's fields read.
 */
export function proposalScope(request: string, scope: Scope): Scope {
  if (!scope.taskIds?.length && !scope.dealIds?.length) return scope;
  const words = request.replace(QUOTED, " ");
  if (NEW_OBJECT_WORDS.some((re) => re.test(words))) return scope;
  const operations = (Object.keys(OPERATIONS) as OperationName[]).filter(
    (op) => OPERATIONS[op].effect !== "create",
  );
  return { ...scope, operations };
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
