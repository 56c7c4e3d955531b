import { parsePortalDate } from "../dates.js";
import { errors, RestError } from "../errors.js";
import type { Store } from "../store.js";
import type { TaskRecord } from "../types.js";
import { intLike, isRecord, listLike } from "./context.js";

export type TaskChanges = Partial<
  Pick<
    TaskRecord,
    | "title"
    | "description"
    | "responsibleId"
    | "deadline"
    | "priority"
    | "status"
    | "groupId"
    | "auditors"
    | "accomplices"
  >
>;

type Parsed = { ok: true; value: unknown } | { ok: false; message: string };

interface FieldSpec {
  prop: keyof TaskChanges;
  parse(value: unknown, store: Store): Parsed;
  /** How the portal writes the value into a history row (`value.from` / `value.to`). */
  history(value: unknown): string | null;
}

const ok = (value: unknown): Parsed => ({ ok: true, value });
const fail = (message: string): Parsed => ({ ok: false, message });

function userList(label: string) {
  return (value: unknown, store: Store): Parsed => {
    if (value === "" || value === null || value === undefined) return ok([]);
    const single = intLike(value);
    const items = single !== undefined ? [single] : listLike(value);
    if (!items) return fail(`The user specified in the "${label}" field is not found`);
    const ids: number[] = [];
    for (const item of items) {
      const id = intLike(item);
      if (id === undefined || !store.getUser(id))
        return fail(`The user specified in the "${label}" field is not found`);
      if (!ids.includes(id)) ids.push(id);
    }
    return ok(ids);
  };
}

const text = (v: unknown): string | undefined =>
  typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined;

/** The fields this emulator models for add/update, by the UPPER_SNAKE input name. */
export const TASK_FIELDS: Record<string, FieldSpec> = {
  TITLE: {
    prop: "title",
    parse: (v) => {
      const t = text(v);
      return t === undefined || t.trim() === "" ? fail("Task title is not specified") : ok(t.trim());
    },
    history: (v) => String(v),
  },
  DESCRIPTION: {
    prop: "description",
    parse: (v) => {
      if (v === null) return ok("");
      const t = text(v);
      return t === undefined ? fail('Invalid value in the "Description" field') : ok(t);
    },
    history: (v) => String(v),
  },
  RESPONSIBLE_ID: {
    prop: "responsibleId",
    parse: (v, store) => {
      const id = intLike(v);
      return id === undefined || !store.getUser(id)
        ? fail('The user specified in the "Assignee" field is not found')
        : ok(id);
    },
    history: (v) => String(v),
  },
  DEADLINE: {
    prop: "deadline",
    parse: (v) => {
      if (v === null || v === "") return ok(null);
      const t = typeof v === "string" ? parsePortalDate(v) : undefined;
      return t === undefined ? fail('Invalid value in the "Deadline" field') : ok(t);
    },
    // The portal stores date changes as unix seconds in history.
    history: (v) => (v === null ? "" : String(Math.floor(v as number))),
  },
  PRIORITY: {
    prop: "priority",
    parse: (v) => {
      const p = intLike(v);
      return p === undefined || p < 0 || p > 2 ? fail("Invalid priority") : ok(p);
    },
    history: (v) => String(v),
  },
  STATUS: {
    prop: "status",
    parse: (v) => {
      const s = intLike(v);
      return s === undefined || s < 1 || s > 7 ? fail("Invalid status") : ok(s);
    },
    history: (v) => String(v),
  },
  GROUP_ID: {
    prop: "groupId",
    parse: (v, store) => {
      if (v === "" || v === null) return ok(0);
      const g = intLike(v);
      if (g === 0) return ok(0);
      return g === undefined || g < 0 || !store.getGroup(g)
        ? fail('The project specified in the "Project" field is not found')
        : ok(g);
    },
    history: (v) => String(v),
  },
  AUDITORS: { prop: "auditors", parse: userList("Observers"), history: (v) => (v as number[]).join(",") },
  ACCOMPLICES: {
    prop: "accomplices",
    parse: userList("Participants"),
    history: (v) => (v as number[]).join(","),
  },
};

/**
 * Validates `fields` for add/update. Unknown keys are rejected by name (the real portal silently ignores
 * them, which hides typos such as camelCase keys); a leading `~` is stripped as the portal does.
 * Every value problem is reported at once, one `<br>`-terminated line each, as ERROR_CORE.
 */
export function parseTaskFields(store: Store, fields: Record<string, unknown>): TaskChanges {
  const unknown = Object.keys(fields).filter((k) => !(k.replace(/^~/, "") in TASK_FIELDS));
  if (unknown.length > 0) {
    throw new RestError(
      400,
      "ERROR_ARGUMENT",
      `Unknown task field(s): ${unknown.join(", ")}. Fields the emulator accepts: ${Object.keys(TASK_FIELDS).join(", ")}`,
      { argument: "fields" },
    );
  }
  const changes: TaskChanges = {};
  const problems: string[] = [];
  for (const [rawKey, value] of Object.entries(fields)) {
    const spec = TASK_FIELDS[rawKey.replace(/^~/, "")]!;
    const parsed = spec.parse(value, store);
    if (parsed.ok) (changes as Record<string, unknown>)[spec.prop] = parsed.value;
    else if (!problems.includes(parsed.message)) problems.push(parsed.message);
  }
  if (problems.length > 0) throw errors.core(problems);
  return changes;
}

const sameValue = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Applies parsed changes as `userId`: only the given keys change (lists replace the whole set),
 * changed fields get history rows, and changedDate/changedBy always move.
 */
export function applyTaskChanges(
  store: Store,
  task: TaskRecord,
  changes: TaskChanges,
  userId: number,
  nowSec: number,
): TaskRecord {
  const next: TaskRecord = { ...task };
  const now = Math.floor(nowSec);
  for (const [field, spec] of Object.entries(TASK_FIELDS)) {
    if (!(spec.prop in changes)) continue;
    const before = task[spec.prop];
    const after = changes[spec.prop];
    if (sameValue(before, after)) continue;
    (next as unknown as Record<string, unknown>)[spec.prop] = after;
    store.addHistory({
      taskId: task.id,
      createdDate: now,
      field,
      from: spec.history(before),
      to: spec.history(after),
      userId,
    });
  }
  if (next.status !== task.status) {
    next.statusChangedBy = userId;
    next.statusChangedDate = now;
    next.closedBy = next.status === 5 ? userId : null;
    next.closedDate = next.status === 5 ? now : null;
    if (next.status === 3 && next.dateStart === null) next.dateStart = now;
  }
  next.changedBy = userId;
  next.changedDate = now;
  next.activityDate = now;
  store.putTask(next);
  return next;
}

export function fieldsParam(params: Record<string, unknown>): Record<string, unknown> {
  const fields = params.fields;
  if (
    fields === undefined ||
    fields === null ||
    fields === "" ||
    (Array.isArray(fields) && fields.length === 0)
  ) {
    throw errors.missingParam("fields");
  }
  if (isRecord(fields)) {
    if (Object.keys(fields).length === 0) throw errors.missingParam("fields");
    return fields;
  }
  if (Array.isArray(fields)) return Object.fromEntries(fields.map((v, i) => [String(i), v]));
  throw errors.notArray("fields", fields);
}
