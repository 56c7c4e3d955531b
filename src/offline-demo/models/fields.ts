/**
 * The task fields the offline model can propose, and the values it accepts for each: pure functions.
 */

/**
 * Task fields the offline model can propose, as Bitrix24 `tasks.task.update` keys, and POST_MESSAGE:
 * the text of a comment on the task (operation add_task_comment, task.commentitem.add).
 */
export type TaskField =
  "TITLE" | "DESCRIPTION" | "DEADLINE" | "PRIORITY" | "STATUS" | "RESPONSIBLE_ID" | "POST_MESSAGE";

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

const PRIORITIES: Record<string, string> = {
  low: "0",
  medium: "1",
  normal: "1",
  high: "2",
  "0": "0",
  "1": "1",
  "2": "2",
};
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
  const value =
    field === "TITLE" || field === "DESCRIPTION"
      ? raw.trim()
      : raw
          .trim()
          .replace(/[.!]+$/, "")
          .trim();
  switch (field) {
    case "TITLE":
      return value === "" ? { ok: false, reason: "a title cannot be empty" } : { ok: true, value: raw };
    case "DESCRIPTION":
      return { ok: true, value: raw };
    case "POST_MESSAGE":
      return value === ""
        ? { ok: false, reason: "a comment cannot be empty" }
        : { ok: true, value: raw.trim() };
    case "DEADLINE":
      return ISO_DATE.test(value) && !Number.isNaN(Date.parse(value))
        ? { ok: true, value }
        : { ok: false, reason: "expected an ISO date such as 2026-07-01 or 2026-07-01T18:00:00+03:00" };
    case "PRIORITY": {
      const p = PRIORITIES[value.toLowerCase()];
      return p !== undefined
        ? { ok: true, value: p }
        : { ok: false, reason: "expected low, medium, high, 0, 1 or 2" };
    }
    case "STATUS": {
      const s = STATUSES[value.toLowerCase().replace(/[_-]+/g, " ").replace(/\s+/g, " ")];
      return s !== undefined
        ? { ok: true, value: s }
        : {
            ok: false,
            reason: "expected waiting, in progress, awaiting control, completed, deferred or a number 2..6",
          };
    }
    case "RESPONSIBLE_ID": {
      const id = value.replace(/^(?:the\s+)?(?:user\s*)?(?:id\s*)?#?/i, "");
      return /^\d+$/.test(id) && Number(id) > 0
        ? { ok: true, value: id }
        : { ok: false, reason: "expected a numeric Bitrix24 user id, e.g. user 7" };
    }
  }
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
    const name = {
      "2": "waiting",
      "3": "in progress",
      "4": "awaiting control",
      "5": "completed",
      "6": "deferred",
    }[text];
    return name ? `"${text}" (${name})` : `"${text}"`;
  }
  return `"${text}"`;
}
