/**
 * Reading a posted decision form: the per-action choices of a change set, an edit's values, and the refusal
 * of an edit that carries characters that cannot be seen.
 */
import type { App } from "../app/open-app.js";
import { OPERATIONS } from "../envelope/operations.js";
import type { ActionRow } from "../store/action-machine.js";
import { classify, marker } from "../text/escape.js";
import { lateResumeEntry } from "../api/late-resume.js";

export type FormBody = Record<string, string | File | Array<string | File>>;

const PER_ACTION_TYPES = ["approve", "reject", "edit"] as const;
export type PerActionType = (typeof PER_ACTION_TYPES)[number];

export interface PerActionForm {
  entries: Array<{ actionId: string; type: PerActionType }>;
}

/**
 * Reads a per-action form (`decision.<actionId>` = approve | reject | edit) and checks it before
 * anything is sent: every action of the set on screen named exactly once, no other action named, and
 * only those three choices. Without the set on screen (a stale tab, or a thread no longer waiting) only
 * the shape is checked; the driver then refuses the stale card with its reason.
 */
export function readPerActionForm(
  form: FormBody,
  members: ActionRow[] | undefined,
): { ok: true; form: PerActionForm } | { ok: false; reason: string } {
  const entries: PerActionForm["entries"] = [];
  const twice: string[] = [];
  const bad: string[] = [];
  for (const [key, value] of Object.entries(form)) {
    if (!key.startsWith("decision.")) continue;
    const actionId = key.slice("decision.".length);
    if (Array.isArray(value)) {
      twice.push(actionId);
      continue;
    }
    if (typeof value !== "string" || !(PER_ACTION_TYPES as readonly string[]).includes(value)) {
      bad.push(actionId);
      continue;
    }
    entries.push({ actionId, type: value as PerActionType });
  }
  const problems: string[] = [];
  if (twice.length) problems.push(`${twice.join(", ")} named more than once`);
  if (bad.length) problems.push(`${bad.join(", ")}: choose approve, reject or edit`);
  if (members) {
    const ids = members.map((m) => m.set?.actionId ?? "");
    const named = new Set([...entries.map((e) => e.actionId), ...twice, ...bad]);
    const missing = ids.filter((id) => !named.has(id));
    const unknown = [...named].filter((id) => !ids.includes(id));
    if (missing.length) problems.push(`no decision for ${missing.join(", ")}`);
    if (unknown.length) problems.push(`the change set has no action ${unknown.join(", ")}`);
    // In the set's order, whatever order the form sent them in.
    entries.sort((a, b) => ids.indexOf(a.actionId) - ids.indexOf(b.actionId));
    if (problems.length)
      return {
        ok: false,
        reason: `decide every action of the change set exactly once (${ids.join(", ")}): ${problems.join("; ")}.`,
      };
  } else if (problems.length || entries.length === 0) {
    return {
      ok: false,
      reason: `decide every action of the change set exactly once: ${problems.join("; ") || "no action was decided"}.`,
    };
  }
  return { ok: true, form: { entries } };
}

/**
 * The edited action of an edit of `row` (the waiting action, or the set's action it names): its operation on its
 * object under the operation's id argument. Without the row (a stale tab, a thread no longer waiting) it names
 * update_task on task 0; the driver then refuses the stale card.
 */
export function editedActionOf(
  row: ActionRow | undefined,
  fields: Record<string, unknown>,
): { name: string; args: Record<string, unknown> } {
  return {
    name: row?.envelope.operation ?? "update_task",
    args: {
      [row ? OPERATIONS[row.envelope.operation].idArg : "taskId"]: row?.envelope.object.id ?? 0,
      fields,
    },
  };
}

/**
 * An edit's values from `<prefix>field.<F>` (text) and `<prefix>json.<F>` (JSON) inputs, as the page and
 * its signature build them. Each value is taken whole (the request's size limit bounds it, the policy
 * judges it): an edit is sent as typed or not at all, so a value given twice or as a file is refused.
 */
export function editedFields(
  form: FormBody,
  prefix: string,
): { ok: true; fields: Record<string, unknown> } | { ok: false; reason: string } {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(form)) {
    if (!k.startsWith(prefix)) continue;
    const name = k.slice(prefix.length);
    if (!name.startsWith("field.") && !name.startsWith("json.")) continue;
    const field = name.slice(name.indexOf(".") + 1);
    const twice = Array.isArray(v) || Object.prototype.hasOwnProperty.call(fields, field);
    if (typeof v !== "string" || twice)
      return {
        ok: false,
        reason: `${field} ${twice ? "is given more than once" : "arrived as a file"}; an edit gives each field once, as text.`,
      };
    // A browser sends each line break of a text area as CR LF; the value the page showed, and the one its
    // signing script signs, has LF: that is the value typed.
    if (name.startsWith("field.")) fields[field] = v.replace(/\r\n/g, "\n");
    else {
      try {
        fields[field] = JSON.parse(v);
      } catch {
        return { ok: false, reason: `${field} must be JSON (as shown in the form).` };
      }
    }
  }
  return { ok: true, fields };
}

/** Characters an edited value may carry besides visible ones: line breaks and tabs (a browser's CR LF is read as LF). */
const LAYOUT = new Set(["\n", "\r", "\t"]);

/**
 * Why an edit's values are refused, or null: a value still shows a marker of a character that cannot
 * be seen (the form shows such characters as ⟨U+XXXX⟩, never raw), or carries such a character typed
 * or pasted in. An edit never keeps an invisible character silently: the approver deletes the markers.
 */
export function invisibleInEdit(fields: Record<string, unknown>): string | null {
  const found: string[] = [];
  const walk = (name: string, v: unknown): void => {
    if (typeof v === "string") {
      const marks = new Set(v.match(/⟨U\+[0-9A-F]{4,6}⟩/g) ?? []);
      for (const ch of v)
        if (!LAYOUT.has(ch) && classify(ch.codePointAt(0)!, ch)) marks.add(marker(ch.codePointAt(0)!));
      if (marks.size > 0) found.push(`${name} (${[...marks].join(" ")})`);
    } else if (Array.isArray(v)) v.forEach((x, i) => walk(`${name}[${i}]`, x));
    else if (v !== null && typeof v === "object")
      for (const [k, x] of Object.entries(v)) walk(`${name}.${k}`, x);
  };
  for (const [k, v] of Object.entries(fields)) walk(k, v);
  return found.length === 0
    ? null
    : `${found.join(", ")}: a character that cannot be seen is shown as a ⟨U+XXXX⟩ marker, and an edit never keeps one. Delete each marker (this drops the character) and submit again.`;
}

/**
 * Why an edit's values are refused for characters that cannot be seen (invisibleInEdit), or null; a
 * refusal is audited (nothing was sent to the graph).
 */
export async function refusedAsInvisible(
  app: App,
  threadId: string,
  action: ActionRow | undefined,
  fields: Record<string, unknown>,
): Promise<string | null> {
  const reason = invisibleInEdit(fields);
  if (reason === null) return null;
  const thread = await app.deps.journal.getThread(threadId);
  await app.deps.audit.append(
    lateResumeEntry(
      threadId,
      thread,
      action,
      { code: "INVISIBLE_CHARACTERS", reason },
      { editedFields: fields },
      app.deps.clock().toISOString(),
    ),
  );
  return reason;
}
