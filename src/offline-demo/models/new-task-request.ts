/**
 * A request for a new task ("create a task \"Prepare the Q4 report\" for user 5") as the offline model reads it.
 */
import { normaliseValue } from "./fields.js";
import { stripWrappingQuotes } from "./intent.js";

export interface NewTaskIntent {
  title: string;
  responsibleId: string;
  deadline?: string;
}

/**
 * "create a task "Prepare the Q4 report" for user 5 [due 2026-12-20]": a new task with a title, a
 * responsible user and optionally a deadline. Undefined when the request does not ask for a new task.
 */
export function parseNewTaskRequest(
  text: string,
): { ok: true; intent: NewTaskIntent } | { ok: false; reason: string } | undefined {
  const m =
    /^\s*(?:please\s+)?(?:create|add|open|make)\s+(?:a\s+)?(?:new\s+)?task\s+(?:titled\s+|called\s+|named\s+)?(?<title>["“«'][\s\S]+?["”»']|[\s\S]+?)\s+for\s+(?:user\s*)?#?(?<user>\S+?)(?:\s+(?:due|by|with deadline)\s+(?<due>\S+))?[.!]?\s*$/i.exec(
      text,
    );
  if (!m?.groups) return undefined;
  const title = stripWrappingQuotes(m.groups["title"] ?? "");
  const user = (m.groups["user"] ?? "").replace(/[.,!]$/, "");
  if (title.trim() === "") return { ok: false, reason: "a new task needs a title" };
  if (!/^\d+$/.test(user) || Number(user) <= 0)
    return {
      ok: false,
      reason: `expected the responsible user's numeric id ("for user 5"), got ${JSON.stringify(user)}`,
    };
  const due = m.groups["due"];
  if (due !== undefined) {
    const d = normaliseValue("DEADLINE", due);
    if (!d.ok) return { ok: false, reason: `the deadline: ${d.reason}` };
    return { ok: true, intent: { title, responsibleId: user, deadline: d.value } };
  }
  return { ok: true, intent: { title, responsibleId: user } };
}
