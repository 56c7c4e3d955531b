import { parsePortalDate } from "../dates.js";
import { errors } from "../errors.js";
import { canRead, renderTask, subStatus } from "../shapes.js";
import type { TaskRecord } from "../types.js";
import {
  intLike,
  isRecord,
  likePattern,
  listLike,
  PAGE_SIZE,
  paged,
  pageStart,
  type MethodHandler,
} from "./context.js";
import { selectParam } from "./select.js";

type Value = string | number | null;
type Getter = (t: TaskRecord, nowSec: number) => Value | number[];

// Filterable and sortable fields the emulator models; values compare as numbers when both sides are numeric.
const FIELDS: Record<string, Getter> = {
  ID: (t) => t.id,
  PARENT_ID: (t) => t.parentId,
  TITLE: (t) => t.title,
  REAL_STATUS: (t) => t.status,
  STATUS: (t) => t.status,
  PRIORITY: (t) => t.priority,
  RESPONSIBLE_ID: (t) => t.responsibleId,
  CREATED_BY: (t) => t.createdBy,
  CHANGED_BY: (t) => t.changedBy,
  GROUP_ID: (t) => t.groupId,
  DEADLINE: (t) => t.deadline,
  CREATED_DATE: (t) => t.createdDate,
  CHANGED_DATE: (t) => t.changedDate,
  CLOSED_DATE: (t) => t.closedDate,
  ACTIVITY_DATE: (t) => t.activityDate,
  DATE_START: (t) => t.dateStart,
  AUDITOR: (t) => t.auditors,
  ACCOMPLICE: (t) => t.accomplices,
};
const DATE_FIELDS = new Set([
  "DEADLINE",
  "CREATED_DATE",
  "CHANGED_DATE",
  "CLOSED_DATE",
  "ACTIVITY_DATE",
  "DATE_START",
]);
// Sort keys the portal accepts but the emulator holds constant values for.
const CONSTANT_SORT_KEYS = new Set([
  "TIME_SPENT_IN_LOGS",
  "START_DATE_PLAN",
  "END_DATE_PLAN",
  "STATUS_COMPLETE",
  "MARK",
  "CREATED_BY_LAST_NAME",
  "RESPONSIBLE_LAST_NAME",
  "TIME_ESTIMATE",
  "ALLOW_CHANGE_DEADLINE",
  "ALLOW_TIME_TRACKING",
  "MATCH_WORK_TIME",
  "FAVORITE",
  "SORTING",
  "IS_PINNED",
  "IS_PINNED_IN_GROUP",
]);
const SORT_KEYS = new Set([
  "ID",
  "TITLE",
  "DATE_START",
  "CREATED_DATE",
  "CHANGED_DATE",
  "CLOSED_DATE",
  "ACTIVITY_DATE",
  "DEADLINE",
  "REAL_STATUS",
  "STATUS",
  "PRIORITY",
  "GROUP_ID",
  "RESPONSIBLE_ID",
  "CREATED_BY",
]);

type Op = "=" | "!" | "<" | "<=" | ">" | ">=" | "%" | "!%";

function splitKey(key: string): { op: Op; field: string } {
  const m = /^(!%|!=|!|<=|>=|<|>|%|=)?(.*)$/.exec(key.trim())!;
  const rawOp = m[1] ?? "=";
  const op = (rawOp === "!=" ? "!" : rawOp) as Op;
  return { op, field: (m[2] ?? "").toUpperCase() };
}

function normalise(field: string, v: unknown): Value {
  if (v === null || v === undefined || v === "") return null;
  if (DATE_FIELDS.has(field) && typeof v === "string") return parsePortalDate(v) ?? v;
  const n = intLike(v);
  if (n !== undefined) return n;
  if (typeof v === "number") return v;
  return String(v);
}

function compare(a: Value, b: Value): number {
  if (a === null && b === null) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function matchOne(field: string, op: Op, actual: Value, expected: Value): boolean {
  switch (op) {
    case "%":
    case "!%": {
      const hit = String(actual ?? "")
        .toLowerCase()
        .includes(String(expected ?? "").toLowerCase());
      return op === "%" ? hit : !hit;
    }
    case "=":
    case "!": {
      let hit: boolean;
      if (field === "TITLE" && typeof expected === "string" && /[%_]/.test(expected))
        hit = likePattern(expected).test(String(actual));
      else if (typeof actual === "string" && typeof expected === "string")
        hit = actual.toLowerCase() === expected.toLowerCase();
      else hit = compare(actual, expected) === 0 && (actual === null) === (expected === null);
      return op === "=" ? hit : !hit;
    }
    default: {
      if (actual === null || expected === null) return false;
      const c = compare(actual, expected);
      return op === "<" ? c < 0 : op === "<=" ? c <= 0 : op === ">" ? c > 0 : c >= 0;
    }
  }
}

/** STATUS filters on the meta-status: -1 overdue, -3 almost overdue, -2 unviewed (never, here); positive = real status. */
function statusValue(t: TaskRecord, expected: Value, nowSec: number): Value {
  if (typeof expected === "number" && expected < 0) {
    const s = subStatus(t, nowSec);
    return s < 0 ? s : t.status;
  }
  return t.status;
}

function buildFilter(filter: unknown, nowSec: number): (t: TaskRecord) => boolean {
  if (!isRecord(filter)) return () => true;
  const tests: ((t: TaskRecord) => boolean)[] = [];
  for (const [key, raw] of Object.entries(filter)) {
    const { op, field } = splitKey(key);
    const getter = FIELDS[field];
    if (!getter) continue; // the portal drops filter keys it does not know
    const expectedList = (listLike(raw) ?? [raw]).map((v) => normalise(field, v));
    tests.push((t) => {
      const actualRaw = getter(t, nowSec);
      const positive = op !== "!" && op !== "!%";
      const test = (expected: Value) => {
        if (Array.isArray(actualRaw)) {
          const any = actualRaw.some((a) => matchOne(field, positive ? op : "=", a, expected));
          return positive ? any : !any;
        }
        const actual = field === "STATUS" ? statusValue(t, expected, nowSec) : actualRaw;
        return matchOne(field, op, actual, expected);
      };
      // A list of values means "any of" (IN); negated, "none of" (NOT IN).
      return positive ? expectedList.some(test) : expectedList.every(test);
    });
  }
  return (t) => tests.every((test) => test(t));
}

function buildOrder(order: unknown, nowSec: number): (a: TaskRecord, b: TaskRecord) => number {
  const keys: [Getter | null, number][] = [];
  if (isRecord(order)) {
    for (const [rawKey, dir] of Object.entries(order)) {
      const key = rawKey.toUpperCase();
      if (!SORT_KEYS.has(key) && !CONSTANT_SORT_KEYS.has(key)) throw errors.invalidSortKey();
      const sign = String(dir).toLowerCase() === "desc" ? -1 : 1;
      keys.push([FIELDS[key] ?? null, sign]);
    }
  }
  // The portal's default order is ID descending.
  if (keys.length === 0) keys.push([FIELDS.ID!, -1]);
  return (a, b) => {
    for (const [get, sign] of keys) {
      if (!get) continue;
      const c = compare(get(a, nowSec) as Value, get(b, nowSec) as Value);
      if (c !== 0) return c * sign;
    }
    return a.id - b.id;
  };
}

/** Fixed pages of 50; `start=-1` skips counting, so no `total`/`next` come back. */
export const listTasks: MethodHandler = (params, ctx) => {
  const select = selectParam(params);
  const skipCount = intLike(params.start) === -1;
  const start = pageStart(params.start);
  const rows = ctx.store
    .allTasks()
    .filter((t) => canRead(t, ctx.userId))
    .filter(buildFilter(params.filter, ctx.nowSec))
    .sort(buildOrder(params.order, ctx.nowSec));
  const page = rows.slice(start, start + PAGE_SIZE);
  const tasks = page.map((t) =>
    renderTask(ctx.store, t, { select, mode: "list", userId: ctx.userId, nowSec: ctx.nowSec }),
  );
  return skipCount ? { result: { tasks } } : paged({ tasks }, rows.length, start);
};
