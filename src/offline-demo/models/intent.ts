/**
 * Request and feedback parsing for the offline model. Pure functions: the offline model's
 * behaviour has to be predictable from the text alone, so every phrasing it understands is
 * listed here and nowhere else.
 */

/**
 * Task fields the offline model can propose, as Bitrix24 `tasks.task.update` keys, and POST_MESSAGE:
 * the text of a comment on the task (operation add_task_comment, task.commentitem.add).
 */
export type TaskField = "TITLE" | "DESCRIPTION" | "DEADLINE" | "PRIORITY" | "STATUS" | "RESPONSIBLE_ID" | "POST_MESSAGE";

/** camelCase key under which `tasks.task.get` reports each field. */
export const TASK_FIELD_KEYS: Record<TaskField, string> = {
  TITLE: "title",
  DESCRIPTION: "description",
  DEADLINE: "deadline",
  PRIORITY: "priority",
  STATUS: "status",
  RESPONSIBLE_ID: "responsibleId",
  // Not a task key: a comment is a new object; the task shows only how many it has.
  POST_MESSAGE: "commentsCount",
};

/** The operation a field's change is: a comment is posted, every other field is updated. */
export function operationFor(field: TaskField): "update_task" | "add_task_comment" {
  return field === "POST_MESSAGE" ? "add_task_comment" : "update_task";
}

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
const FIELD_ALTERNATION =
  String.raw`title|name|description|deadline|due\s+date|priority|status|responsible(?:\s+(?:person|user))?(?:\s+id)?|responsible_id|assignee`;

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
const CLAUSE_TARGET = [TARGET_ID, TARGET_TITLED, String.raw`(?<pronoun>it|(?:the\s+)?same\s+task)`, TARGET_FRAG, TARGET_BARE].join("|");
const VALUE = String.raw`(?<value>[\s\S]+)`;

type Pattern = { re: RegExp; field?: TaskField };

const PATTERNS: readonly Pattern[] = patternsFor(TARGET);
const CLAUSE_PATTERNS: readonly Pattern[] = patternsFor(CLAUSE_TARGET);

function patternsFor(target: string): Pattern[] {
  return [
    { re: new RegExp(String.raw`\b(?:rename|retitle)\s+(?:${target})\s+(?:to|as)\s+${VALUE}$`, "i"), field: "TITLE" },
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
    { re: new RegExp(String.raw`\b(?:assign|reassign)\s+(?:${target})\s+to\s+${VALUE}$`, "i"), field: "RESPONSIBLE_ID" },
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

function parseWith(patterns: readonly Pattern[], text: string): ParsedRequest {
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
    if (!normalised.ok) return { ok: false, kind: "invalid_value", field, rawValue, reason: normalised.reason };
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

/**
 * Most actions one change set may hold; the same limit as the propose_change_set tool
 * (src/tools/proposal-tools.ts MAX_SET_ACTIONS), checked here so the model refuses in words.
 */
export const MAX_CHANGE_SET_ACTIONS = 5;

/** One action of a planned change set: what propose_change_set carries for it. */
export interface PlannedAction {
  operation: "update_task" | "add_task_comment";
  taskId: number;
  /** Fields in clause order (one field unless consecutive update clauses were merged). */
  fields: Partial<Record<TaskField, string>>;
  /** 1-based numbers of the clauses this action came from. */
  clauses: number[];
}

/** One clause of a multi-clause request, its task resolved to an id. */
export interface PlannedClause {
  /** 1-based position in the request. */
  index: number;
  text: string;
  intent: ChangeIntent;
  taskId: number;
  /** The clause said "it" / "the task": its task is the previous clause's. */
  refersBack: boolean;
}

export type RequestPlan =
  /** One clause: exactly what parseRequest says about the whole text. */
  | { kind: "single"; parsed: ParsedRequest }
  | { kind: "multi"; clauses: PlannedClause[]; actions: PlannedAction[] }
  /** A multi-clause request the model will not act on; message says why, naming the clause. */
  | { kind: "refused"; message: string };

// A separator ends a clause only when the text after it starts like a clause (optionally after
// "and", "then", "also", "please", "finally") and it stands outside double quotes.
const CLAUSE_SEPARATOR = /\s*;\s*|\s*,\s*(?:and\s+)?then\s+|\s+and\s+then\s+/gi;
const CLAUSE_FILLER = /^(?:(?:and|then|also|please|finally)\b[\s,]*)+/i;
const CLAUSE_VERB = /^(?:rename|retitle|set|change|update|make|move|assign|reassign|add|post|leave|write|comment|tell)\b/i;

/**
 * Splits a request into clauses at ";", ", then", ", and then" and " and then". A separator
 * inside a double-quoted span ("..." or “...”) or not followed by a clause verb (set, change,
 * rename, assign, comment, ...) is part of the text, so `set description of task 4 to build; ship`
 * stays one clause. Leading fillers ("then", "also", "please") are dropped from each clause.
 */
export function splitClauses(text: string): string[] {
  const request = text.trim();
  const quoted = quotedPositions(request);
  const pieces: string[] = [];
  let from = 0;
  for (const m of request.matchAll(CLAUSE_SEPARATOR)) {
    const at = m.index ?? 0;
    if (quoted[at] || at < from) continue;
    const rest = request.slice(at + m[0].length).replace(CLAUSE_FILLER, "");
    if (!CLAUSE_VERB.test(rest)) continue;
    pieces.push(request.slice(from, at));
    from = at + m[0].length;
  }
  pieces.push(request.slice(from));
  return pieces.map((p) => p.trim().replace(CLAUSE_FILLER, "").trim()).filter((p) => p !== "");
}

/** quoted[i] is true when position i lies inside a "..." or “...” span. */
function quotedPositions(text: string): boolean[] {
  const inside: boolean[] = [];
  let open: string | undefined;
  for (const ch of text) {
    const wasOpen = open !== undefined;
    if (open === undefined && (ch === '"' || ch === "“")) open = ch === '"' ? '"' : "”";
    else if (open !== undefined && ch === open) open = undefined;
    // Surrogate pairs take two code units; mark both so indexes match String#matchAll.
    for (let k = 0; k < ch.length; k++) inside.push(wasOpen && open !== undefined);
  }
  return inside;
}

/**
 * Plans a request. One clause: `{kind: "single"}` with parseRequest's answer for the whole text,
 * so a one-change request behaves exactly as before. Several clauses: each is parsed like a
 * request; a clause naming its task as "it", "the same task" or "the task" (or naming none)
 * acts on the previous clause's task; every other task must be named by id. Consecutive
 * update clauses on the same task merge into one update_task action (a field set twice there is
 * refused); a comment is always its own action. The actions keep the request's order.
 */
export function planRequest(text: string): RequestPlan {
  const pieces = splitClauses(text);
  if (pieces.length <= 1) return { kind: "single", parsed: parseRequest(text) };
  const clauses: PlannedClause[] = [];
  for (const [i, piece] of pieces.entries()) {
    const index = i + 1;
    const label = `clause ${index} ("${clipClause(piece)}")`;
    const parsed = parseWith(CLAUSE_PATTERNS, piece);
    if (!parsed.ok) {
      if (parsed.kind === "invalid_value") {
        return {
          kind: "refused",
          message: `In ${label} I understood a change of ${parsed.field}, but "${parsed.rawValue}" is not a value I can propose: ${parsed.reason}.`,
        };
      }
      return {
        kind: "refused",
        message: `I did not recognise ${label} as a supported change. Supported phrasings:\n- ${SUPPORTED_PHRASINGS.join("\n- ")}`,
      };
    }
    const target = parsed.intent.target;
    const previous = clauses.at(-1);
    if (target.kind === "title") {
      return {
        kind: "refused",
        message: `${capitalise(label)} names its task by title ("${target.fragment}"). A request with several changes must name each task by id (e.g. "task 12"), or "it" for the previous clause's task.`,
      };
    }
    if (target.kind === "unspecified" && previous === undefined) {
      return {
        kind: "refused",
        message: `${capitalise(label)} does not name a task by id. A request with several changes must name its first task by id (e.g. "task 4"); later clauses may say "it" for the previous clause's task.`,
      };
    }
    const taskId = target.kind === "id" ? target.taskId : (previous as PlannedClause).taskId;
    clauses.push({ index, text: piece, intent: parsed.intent, taskId, refersBack: target.kind === "unspecified" });
  }
  const actions: PlannedAction[] = [];
  for (const c of clauses) {
    const operation = operationFor(c.intent.field);
    const last = actions.at(-1);
    if (operation === "update_task" && last?.operation === "update_task" && last.taskId === c.taskId) {
      if (last.fields[c.intent.field] !== undefined) {
        return {
          kind: "refused",
          message: `Clauses ${last.clauses.join(", ")} and ${c.index} both set ${c.intent.field} of task ${c.taskId}; say which value you mean in one clause.`,
        };
      }
      last.fields[c.intent.field] = c.intent.value;
      last.clauses.push(c.index);
      continue;
    }
    actions.push({ operation, taskId: c.taskId, fields: { [c.intent.field]: c.intent.value }, clauses: [c.index] });
  }
  if (actions.length > MAX_CHANGE_SET_ACTIONS) {
    return {
      kind: "refused",
      message: `The request asks for ${actions.length} separate changes; one change set holds at most ${MAX_CHANGE_SET_ACTIONS}. Please split it into smaller requests.`,
    };
  }
  return { kind: "multi", clauses, actions };
}

function clipClause(s: string, max = 80): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max)}…` : one;
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

const PRIORITIES: Record<string, string> = { low: "0", medium: "1", normal: "1", high: "2", "0": "0", "1": "1", "2": "2" };
const STATUSES: Record<string, string> = {
  waiting: "2",
  pending: "2",
  "in progress": "3",
  "awaiting control": "4",
  completed: "5",
  done: "5",
  deferred: "6",
  "2": "2",
  "3": "3",
  "4": "4",
  "5": "5",
  "6": "6",
};
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Turns a user-written value into the string the proposal carries, or says why it cannot. */
export function normaliseValue(
  field: TaskField,
  raw: string,
): { ok: true; value: string } | { ok: false; reason: string } {
  // A sentence's closing period belongs to the sentence, except in free text.
  const value = field === "TITLE" || field === "DESCRIPTION" ? raw.trim() : raw.trim().replace(/[.!]+$/, "").trim();
  switch (field) {
    case "TITLE":
      return value === "" ? { ok: false, reason: "a title cannot be empty" } : { ok: true, value: raw };
    case "DESCRIPTION":
      return { ok: true, value: raw };
    case "POST_MESSAGE":
      return value === "" ? { ok: false, reason: "a comment cannot be empty" } : { ok: true, value: raw.trim() };
    case "DEADLINE":
      return ISO_DATE.test(value) && !Number.isNaN(Date.parse(value))
        ? { ok: true, value }
        : { ok: false, reason: "expected an ISO date such as 2026-07-01 or 2026-07-01T18:00:00+03:00" };
    case "PRIORITY": {
      const p = PRIORITIES[value.toLowerCase()];
      return p !== undefined ? { ok: true, value: p } : { ok: false, reason: "expected low, medium, high, 0, 1 or 2" };
    }
    case "STATUS": {
      const s = STATUSES[value.toLowerCase().replace(/[_-]+/g, " ").replace(/\s+/g, " ")];
      return s !== undefined
        ? { ok: true, value: s }
        : { ok: false, reason: "expected waiting, in progress, awaiting control, completed, deferred or a number 2..6" };
    }
    case "RESPONSIBLE_ID": {
      const id = value.replace(/^(?:the\s+)?(?:user\s*)?(?:id\s*)?#?/i, "");
      return /^\d+$/.test(id) && Number(id) > 0
        ? { ok: true, value: id }
        : { ok: false, reason: "expected a numeric Bitrix24 user id, e.g. user 7" };
    }
  }
}

const FEEDBACK_PREFIX = /^[\s\S]*?rejected the (?:proposal|change set):\s*/i;
const FEEDBACK_SUFFIX = /\.?\s*Propose a revised change or stop\.?\s*$/i;
const DOUBLE_QUOTED = /["“«`]([^"”»`]+)["”»`]/;
const SINGLE_QUOTED = /(?:^|\s)['‘]([^'’]+)['’](?=$|[\s.,;:!?])/;
const USE_INSTEAD = /\buse\s+([\s\S]+?)\s+instead\b/i;
const INSTEAD_USE = /\binstead,?\s+use\s+([\s\S]+?)(?:\.(?:\s|$)|$)/i;

/** The reviewer's own words out of the feedback message the graph sends, clipped for a reply. */
export function feedbackMessage(text: string): string {
  const message = text.replace(FEEDBACK_PREFIX, "").replace(FEEDBACK_SUFFIX, "").replace(/\s+/g, " ").trim();
  if (message === "") return "no reason given";
  return message.length > 200 ? `"${message.slice(0, 200)}…"` : `"${message}"`;
}

/**
 * Extracts the value a reviewer asked for: a quoted value, "use X instead" or "instead use X".
 * Returns undefined when the feedback names no replacement value.
 */
export function parseFeedbackValue(text: string): string | undefined {
  const message = text.replace(FEEDBACK_PREFIX, "").replace(FEEDBACK_SUFFIX, "").trim();
  const quoted = DOUBLE_QUOTED.exec(message)?.[1] ?? SINGLE_QUOTED.exec(message)?.[1];
  if (quoted !== undefined && quoted.trim() !== "") return quoted;
  const phrase = USE_INSTEAD.exec(message)?.[1] ?? INSTEAD_USE.exec(message)?.[1];
  if (phrase === undefined) return undefined;
  const value = phrase.trim().replace(/[.!]$/, "").trim();
  return value === "" ? undefined : value;
}

/** Human-readable label of a field value, for rationales and messages. */
export function describeValue(field: TaskField, value: unknown): string {
  if (value === null || value === undefined || value === "") return "(empty)";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (field === "PRIORITY") {
    const name = { "0": "low", "1": "medium", "2": "high" }[text];
    return name ? `"${text}" (${name})` : `"${text}"`;
  }
  if (field === "STATUS") {
    const name = { "2": "waiting", "3": "in progress", "4": "awaiting control", "5": "completed", "6": "deferred" }[text];
    return name ? `"${text}" (${name})` : `"${text}"`;
  }
  return `"${text}"`;
}

// ── CRM deals (update_deal) ─────────────────────────────────────────────────────────────────────────

export type DealField = "TITLE" | "STAGE_ID" | "OPPORTUNITY" | "ASSIGNED_BY_ID";

export interface DealIntent {
  dealId: number;
  field: DealField;
  value: string;
}

export type ParsedDealRequest = { ok: true; intent: DealIntent } | { ok: false; field: DealField; rawValue: string; reason: string } | undefined;

const DEAL_STAGE_NAMES: Record<string, string> = {
  new: "NEW", preparation: "PREPARATION", "prepayment invoice": "PREPAYMENT_INVOICE", executing: "EXECUTING", "in progress": "EXECUTING",
  "final invoice": "FINAL_INVOICE", won: "WON", lose: "LOSE", lost: "LOSE", apology: "APOLOGY",
};

const DEAL_PATTERNS: ReadonlyArray<{ re: RegExp; field: DealField }> = [
  { re: /\b(?:move|set)\s+(?:the\s+)?deal\s+#?(?<id>\d+)\s+to\s+(?:stage\s+)?(?<value>[\s\S]+)$/i, field: "STAGE_ID" },
  { re: /\b(?:set|change|update)\s+(?:the\s+)?stage\s+(?:of|for)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "STAGE_ID" },
  { re: /\b(?:set|change|update)\s+(?:the\s+)?(?:amount|opportunity|sum)\s+(?:of|for)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "OPPORTUNITY" },
  { re: /\b(?:assign|reassign)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "ASSIGNED_BY_ID" },
  { re: /\b(?:rename|retitle)\s+deal\s+#?(?<id>\d+)\s+to\s+(?<value>[\s\S]+)$/i, field: "TITLE" },
];

/** A request about a CRM deal ("move deal 3 to WON"), or undefined when it names no deal. */
export function parseDealRequest(text: string): ParsedDealRequest {
  const request = text.trim();
  for (const { re, field } of DEAL_PATTERNS) {
    const m = re.exec(request);
    if (!m?.groups) continue;
    const rawValue = stripWrappingQuotes(m.groups["value"] ?? "");
    const dealId = Number(m.groups["id"]);
    const v = rawValue.replace(/[.!]+$/, "").trim();
    switch (field) {
      case "STAGE_ID": {
        const code = DEAL_STAGE_NAMES[v.toLowerCase().replace(/[_-]+/g, " ")] ?? (/^[A-Z_]+$/.test(v) ? v : undefined);
        if (!code) return { ok: false, field, rawValue, reason: `expected a stage: ${Object.values(DEAL_STAGE_NAMES).filter((x, i, a) => a.indexOf(x) === i).join(", ")}` };
        return { ok: true, intent: { dealId, field, value: code } };
      }
      case "OPPORTUNITY": {
        const amount = v.replace(/\s+(?:rub|usd|eur|₽)$/i, "").replace(/[\s,]/g, "");
        if (!/^\d+(?:\.\d{1,2})?$/.test(amount)) return { ok: false, field, rawValue, reason: "expected an amount such as 51000 or 51000.50" };
        return { ok: true, intent: { dealId, field, value: amount } };
      }
      case "ASSIGNED_BY_ID": {
        const id = v.replace(/^(?:the\s+)?(?:user\s*)?(?:id\s*)?#?/i, "");
        if (!/^\d+$/.test(id) || Number(id) <= 0) return { ok: false, field, rawValue, reason: "expected a numeric Bitrix24 user id, e.g. user 7" };
        return { ok: true, intent: { dealId, field, value: id } };
      }
      case "TITLE":
        if (rawValue.trim() === "") return { ok: false, field, rawValue, reason: "a title cannot be empty" };
        return { ok: true, intent: { dealId, field, value: rawValue } };
    }
  }
  return undefined;
}

// ── A new task (add_task) ──────────────────────────────────────────────────────────────────────────────

export interface NewTaskIntent {
  title: string;
  responsibleId: string;
  deadline?: string;
}

/**
 * "create a task "Prepare the Q4 report" for user 5 [due 2026-12-20]": a new task with a title, a
 * responsible user and optionally a deadline. Undefined when the request does not ask for a new task.
 */
export function parseNewTaskRequest(text: string): { ok: true; intent: NewTaskIntent } | { ok: false; reason: string } | undefined {
  const m = /^\s*(?:please\s+)?(?:create|add|open|make)\s+(?:a\s+)?(?:new\s+)?task\s+(?:titled\s+|called\s+|named\s+)?(?<title>["“«'][\s\S]+?["”»']|[\s\S]+?)\s+for\s+(?:user\s*)?#?(?<user>\S+?)(?:\s+(?:due|by|with deadline)\s+(?<due>\S+))?[.!]?\s*$/i.exec(text);
  if (!m?.groups) return undefined;
  const title = stripWrappingQuotes(m.groups["title"] ?? "");
  const user = (m.groups["user"] ?? "").replace(/[.,!]$/, "");
  if (title.trim() === "") return { ok: false, reason: "a new task needs a title" };
  if (!/^\d+$/.test(user) || Number(user) <= 0) return { ok: false, reason: `expected the responsible user's numeric id ("for user 5"), got ${JSON.stringify(user)}` };
  const due = m.groups["due"];
  if (due !== undefined) {
    const d = normaliseValue("DEADLINE", due);
    if (!d.ok) return { ok: false, reason: `the deadline: ${d.reason}` };
    return { ok: true, intent: { title, responsibleId: user, deadline: d.value } };
  }
  return { ok: true, intent: { title, responsibleId: user } };
}
