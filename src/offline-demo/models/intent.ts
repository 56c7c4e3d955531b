/**
 * A single-change request as the offline model reads it: the phrasings it understands, the task named and
 * the field and value asked for. Pure functions: the offline model's behaviour has to be predictable from the
 * text alone, so every phrasing it understands is listed here and nowhere else.
 */
import { normaliseValue, type TaskField } from "./fields.js";

export type TaskTarget =
  | { kind: "id"; taskId: number }
  | { kind: "title"; fragment: string }
  /** "rename the task to X": which task is left open. */
  | { kind: "unspecified" };

export interface ChangeIntent {
  target: TaskTarget;
  field: TaskField;
  /** Normalised value for the proposal (Bitrix24 reports these fields as strings). */
  value: string;
  /** The value as the user wrote it, outer quotes removed. */
  rawValue: string;
}

export type ParsedRequest =
  | { ok: true; intent: ChangeIntent }
  | { ok: false; kind: "unsupported" }
  | { ok: false; kind: "invalid_value"; field: TaskField; rawValue: string; reason: string };

export const SUPPORTED_PHRASINGS: readonly string[] = [
  'rename task 4 to "New title"',
  "set title of task 4 to New title  (also: change the title of task 4 to ...)",
  "set description of task 4 to ...",
  "set deadline of task 4 to 2026-07-01T18:00:00+03:00  (ISO date or date-time)",
  "set priority of task 4 to low | medium | high | 0 | 1 | 2",
  "set status of task 4 to waiting | in progress | awaiting control | completed | deferred | 2..6",
  "change responsible for task 4 to user 7  (also: assign task 4 to user 7)",
  "comment on task 4: Moved to review, please check  (also: add a comment to task 4: ..., tell the team on task 4: ...)",
  'create a task "Prepare the Q4 report" for user 5 [due 2026-12-20T18:00:00+03:00]  (a new task: add_task)',
  "move deal 3 to WON | set the stage of deal 3 to final invoice | set the amount of deal 3 to 51000 | assign deal 3 to user 5 | rename deal 3 to ...",
  'instead of "task 4": "the Q3 report task", "task titled Q3 report"',
  'several changes in one request, run in the order written, clauses separated by ";", ", then" or "and then": ' +
    "set status of task 4 to awaiting control; assign it to user 5; comment on it: Ready for review  " +
    '("it" / "the task" = the previous clause\'s task; every other task by id; at most 5 actions; quote free text that contains ";" or "and then")',
];

const FIELD_WORDS: ReadonlyArray<[RegExp, TaskField]> = [
  [/^(?:title|name)$/i, "TITLE"],
  [/^description$/i, "DESCRIPTION"],
  [/^(?:deadline|due\s+date)$/i, "DEADLINE"],
  [/^priority$/i, "PRIORITY"],
  [/^status$/i, "STATUS"],
  [/^(?:responsible(?:\s+(?:person|user))?(?:\s+id)?|responsible_id|assignee)$/i, "RESPONSIBLE_ID"],
];
const FIELD_ALTERNATION = String.raw`title|name|description|deadline|due\s+date|priority|status|responsible(?:\s+(?:person|user))?(?:\s+id)?|responsible_id|assignee`;

// Named groups: id (numeric task id), titled / frag (title fragment), bare (no task named).
const TARGET_ID = String.raw`(?:the\s+)?task\s+(?:#|no\.?\s*|number\s+|id\s+)?(?<id>\d+)`;
const TARGET_TITLED = String.raw`(?:the\s+)?task\s+(?:titled|named|called)\s+(?<titled>.+?)`;
const TARGET_FRAG = String.raw`the\s+(?<frag>.+?)\s+task`;
const TARGET_BARE = String.raw`(?<bare>(?:the\s+)?task)`;
const TARGET = [TARGET_ID, TARGET_TITLED, TARGET_FRAG, TARGET_BARE].join("|");
/**
 * In a later clause of a multi-clause request the task may also be "it" / "the same task" (group
 * pronoun, before frag so "the same task" is not read as a title fragment). Like "the task", it
 * parses as an unspecified target; planRequest resolves it to the previous clause's task.
 */
const CLAUSE_TARGET = [
  TARGET_ID,
  TARGET_TITLED,
  String.raw`(?<pronoun>it|(?:the\s+)?same\s+task)`,
  TARGET_FRAG,
  TARGET_BARE,
].join("|");
const VALUE = String.raw`(?<value>[\s\S]+)`;

type Pattern = { re: RegExp; field?: TaskField };

const PATTERNS: readonly Pattern[] = patternsFor(TARGET);
export const CLAUSE_PATTERNS: readonly Pattern[] = patternsFor(CLAUSE_TARGET);

function patternsFor(target: string): Pattern[] {
  return [
    {
      re: new RegExp(String.raw`\b(?:rename|retitle)\s+(?:${target})\s+(?:to|as)\s+${VALUE}$`, "i"),
      field: "TITLE",
    },
    {
      re: new RegExp(
        String.raw`\b(?:set|change|update|make|move)\s+(?:the\s+)?(?<field>${FIELD_ALTERNATION})\s+(?:of|for|on)\s+(?:${target})\s+to\s+${VALUE}$`,
        "i",
      ),
    },
    {
      re: new RegExp(
        String.raw`\b(?:set|change|update)\s+(?:${target})(?:'s)?\s+(?<field>${FIELD_ALTERNATION})\s+to\s+${VALUE}$`,
        "i",
      ),
    },
    {
      re: new RegExp(String.raw`\b(?:assign|reassign)\s+(?:${target})\s+to\s+${VALUE}$`, "i"),
      field: "RESPONSIBLE_ID",
    },
    {
      re: new RegExp(
        String.raw`\b(?:(?:add|post|leave|write)\s+(?:a\s+)?comment|comment|tell\s+the\s+team)\s+(?:on|to|in|under)\s+(?:${target})\s*(?::|,|\s+saying|\s+that)\s*${VALUE}$`,
        "i",
      ),
      field: "POST_MESSAGE",
    },
  ];
}

const QUOTE_PAIRS: Record<string, string> = { '"': '"', "'": "'", "“": "”", "‘": "’", "`": "`", "«": "»" };

/** Removes one pair of quotes when they wrap the whole value; inner quotes stay. */
export function stripWrappingQuotes(value: string): string {
  const trimmed = value.trim();
  const open = trimmed[0];
  if (trimmed.length >= 2 && open !== undefined) {
    const close = QUOTE_PAIRS[open];
    if (close !== undefined && trimmed.endsWith(close)) {
      const inner = trimmed.slice(1, -1);
      // `"a" and "b"` is two quoted pieces, not one quoted value.
      if (!inner.includes(close)) return inner;
    }
  }
  return trimmed;
}

/** Parses the user's request (the first human message). */
export function parseRequest(text: string): ParsedRequest {
  return parseWith(PATTERNS, text);
}

export function parseWith(patterns: readonly Pattern[], text: string): ParsedRequest {
  const request = text.trim();
  for (const { re, field: fixedField } of patterns) {
    const m = re.exec(request);
    if (!m?.groups) continue;
    const g = m.groups;
    const field = fixedField ?? fieldFromWord(g.field ?? "");
    if (!field) continue;
    const target = targetFromGroups(g);
    const rawValue = stripWrappingQuotes(g.value ?? "");
    const normalised = normaliseValue(field, rawValue);
    if (!normalised.ok)
      return { ok: false, kind: "invalid_value", field, rawValue, reason: normalised.reason };
    return { ok: true, intent: { target, field, value: normalised.value, rawValue } };
  }
  return { ok: false, kind: "unsupported" };
}

function fieldFromWord(word: string): TaskField | undefined {
  const w = word.trim().replace(/\s+/g, " ");
  return FIELD_WORDS.find(([re]) => re.test(w))?.[1];
}

function targetFromGroups(g: Record<string, string | undefined>): TaskTarget {
  if (g.id !== undefined) return { kind: "id", taskId: Number(g.id) };
  const fragment = g.titled ?? g.frag;
  if (fragment !== undefined) return { kind: "title", fragment: stripWrappingQuotes(fragment) };
  return { kind: "unspecified" };
}
