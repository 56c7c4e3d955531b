import { formatPortalDate } from "../dates.js";
import { errors } from "../errors.js";
import { DEFAULT_SCOPES, type SeedUser } from "../types.js";
import {
  intLike,
  isRecord,
  likePattern,
  listLike,
  PAGE_SIZE,
  paged,
  pageStart,
  type MethodContext,
  type MethodHandler,
  type Params,
} from "./context.js";

const REGISTERED = Date.parse("2026-01-12T09:00:00+03:00") / 1000;

/** Scopes that open user.get (the docs: user, user_brief, user_basic); only `user` shows contact data. */
const USER_SCOPES = ["user", "user_brief", "user_basic"];

/** One user in the UPPER_SNAKE shape of user.current and user.get. */
function renderUser(
  u: SeedUser | undefined,
  id: number,
  ctx: MethodContext,
  full: boolean,
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    ID: String(id),
    XML_ID: null,
    ACTIVE: u?.active ?? true,
    NAME: u?.name ?? "",
    LAST_NAME: u?.lastName ?? "",
    SECOND_NAME: u?.secondName ?? "",
  };
  if (full) out.EMAIL = u?.email ?? "";
  Object.assign(out, {
    LAST_LOGIN: formatPortalDate(ctx.nowSec),
    DATE_REGISTER: formatPortalDate(REGISTERED),
    TIME_ZONE: "",
    IS_ONLINE: id === ctx.userId ? "Y" : "N",
    TIMESTAMP_X: formatPortalDate(REGISTERED),
    LAST_ACTIVITY_DATE: formatPortalDate(ctx.nowSec),
    PERSONAL_GENDER: "",
    PERSONAL_BIRTHDAY: "",
    WORK_POSITION: u?.workPosition ?? "",
    UF_EMPLOYMENT_DATE: "",
    UF_DEPARTMENT: [1],
    USER_TYPE: "employee",
  });
  return out;
}

/** The webhook user, in `user.current`'s UPPER_SNAKE shape. */
export const currentUser: MethodHandler = (_params, ctx) => ({
  result: { ...renderUser(ctx.store.getUser(ctx.userId), ctx.userId, ctx, true), IS_ONLINE: "Y" },
});

// ── user.get ─────────────────────────────────────────────────────────────────────────────────────

type Scalar = string | number | boolean | null;

/** Filterable and sortable fields the emulator models. */
const FIELDS: Record<string, (u: SeedUser) => Scalar> = {
  ID: (u) => u.id,
  ACTIVE: (u) => u.active !== false,
  NAME: (u) => u.name,
  LAST_NAME: (u) => u.lastName,
  SECOND_NAME: (u) => u.secondName,
  EMAIL: (u) => u.email,
  LOGIN: (u) => u.login,
  WORK_POSITION: (u) => u.workPosition,
  USER_TYPE: () => "employee",
};

/** Top-level parameters that are not filter keys. */
const CONTROL_PARAMS = new Set(["FILTER", "SORT", "ORDER", "START", "ADMIN_MODE", "AUTH"]);

type Op = "=" | "!" | "@" | "!@" | "%" | "!%" | "like" | "!like" | "<" | "<=" | ">" | ">=";

/** The documented prefixes: >= > <= < @ !@ % =% %= !% !=% !%= = != !. */
function splitKey(key: string): { op: Op; field: string } {
  const m = /^(!=%|!%=|!@|!%|!=|=%|%=|>=|<=|@|%|>|<|=|!)?(.*)$/.exec(key.trim())!;
  const raw = m[1] ?? "=";
  const op: Op =
    raw === "!="
      ? "!"
      : raw === "=%" || raw === "%="
        ? "like"
        : raw === "!=%" || raw === "!%="
          ? "!like"
          : (raw as Op);
  return { op, field: (m[2] ?? "").toUpperCase() };
}

function truthy(v: unknown): boolean | undefined {
  if (v === true || v === 1 || v === "Y" || v === "y" || v === "true" || v === "1") return true;
  if (v === false || v === 0 || v === "N" || v === "n" || v === "false" || v === "0" || v === "")
    return false;
  return undefined;
}

function equal(field: string, actual: Scalar, expected: unknown): boolean {
  if (field === "ACTIVE") return truthy(expected) === actual;
  if (typeof actual === "number") return intLike(expected) === actual;
  if (actual === null) return expected === null || expected === "";
  if (typeof expected === "string" && /[%]/.test(expected)) return likePattern(expected).test(String(actual));
  return String(actual).toLowerCase() === String(expected ?? "").toLowerCase();
}

function compare(actual: Scalar, expected: unknown): number | undefined {
  if (actual === null) return undefined;
  const n = intLike(expected);
  if (typeof actual === "number" && n !== undefined) return actual - n;
  return String(actual).localeCompare(String(expected));
}

function test(field: string, op: Op, actual: Scalar, expected: unknown): boolean {
  const list = listLike(expected) ?? [expected];
  switch (op) {
    case "=":
    case "@":
      return list.some((e) => equal(field, actual, e));
    case "!":
    case "!@":
      return list.every((e) => !equal(field, actual, e));
    case "%":
    case "!%": {
      const hit = list.some((e) =>
        String(actual ?? "")
          .toLowerCase()
          .includes(String(e ?? "").toLowerCase()),
      );
      return op === "%" ? hit : !hit;
    }
    case "like":
    case "!like": {
      const hit = list.some((e) => likePattern(String(e ?? "")).test(String(actual ?? "")));
      return op === "like" ? hit : !hit;
    }
    default: {
      const c = compare(actual, list[0]);
      if (c === undefined) return false;
      return op === "<" ? c < 0 : op === "<=" ? c <= 0 : op === ">" ? c > 0 : c >= 0;
    }
  }
}

/**
 * NAME_SEARCH, the quick search: every word of the query must start a word of the name, last name,
 * second name, e-mail or login (case-insensitive). The portal's own matching is a full-text index;
 * this is the emulator's reading of "quick search by personal data".
 */
function nameSearch(u: SeedUser, query: unknown): boolean {
  const words = [u.name, u.lastName, u.secondName, u.email, u.login]
    .join(" ")
    .toLowerCase()
    .split(/[\s@.]+/)
    .filter(Boolean);
  const tokens = String(query ?? "")
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean);
  return tokens.every((t) => words.some((w) => w.startsWith(t)));
}

function filterOf(params: Params): Array<[string, unknown]> {
  const entries: Array<[string, unknown]> = [];
  for (const [k, v] of Object.entries(params)) {
    if (k.toUpperCase() === "FILTER" && isRecord(v)) entries.push(...Object.entries(v));
    else if (!CONTROL_PARAMS.has(k.toUpperCase())) entries.push([k, v]);
  }
  return entries;
}

function param(params: Params, name: string): unknown {
  const key = Object.keys(params).find((k) => k.toUpperCase() === name);
  return key === undefined ? undefined : params[key];
}

/**
 * user.get: users by filter (top-level keys or `FILTER`), sorted by `sort`/`order` (default ID
 * ascending), 50 per page with `start`, `total` and `next`. Dismissed users are included unless the
 * filter says ACTIVE=true. Needs scope user, user_brief or user_basic (403 insufficient_scope).
 */
export const getUsers: MethodHandler = (params, ctx) => {
  const scopes = ctx.scopes ?? DEFAULT_SCOPES;
  if (!USER_SCOPES.some((s) => scopes.includes(s))) throw errors.insufficientScope();
  const full = scopes.includes("user");
  const tests: Array<(u: SeedUser) => boolean> = [];
  for (const [key, value] of filterOf(params)) {
    const { op, field } = splitKey(key);
    if (field === "NAME_SEARCH") {
      tests.push((u) => nameSearch(u, value));
      continue;
    }
    const get = FIELDS[field];
    if (!get) continue; // keys the emulator does not model are dropped
    tests.push((u) => test(field, op, get(u), value));
  }
  const sortField = String(param(params, "SORT") ?? "ID").toUpperCase();
  const sortGet = FIELDS[sortField] ?? FIELDS.ID!;
  const sign = String(param(params, "ORDER") ?? "ASC").toUpperCase() === "DESC" ? -1 : 1;
  const rows = ctx.store
    .allUsers()
    .filter((u) => tests.every((t) => t(u)))
    .sort((a, b) => (compare(sortGet(a), sortGet(b)) ?? 0) * sign || a.id - b.id);
  const start = pageStart(param(params, "START"));
  const page = rows.slice(start, start + PAGE_SIZE).map((u) => renderUser(u, u.id, ctx, full));
  return paged(page, rows.length, start);
};
