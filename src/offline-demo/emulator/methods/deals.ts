/**
 * crm.deal.get / crm.deal.list / crm.deal.update, as b24restdocs api-reference/crm/deals/ documents them and
 * OpenIntegrations' recorded Get-deal.mdx shows the body: UPPER_SNAKE keys, every scalar a string, money with two
 * decimals, dates with the portal offset. Errors are HTTP 400 with an EMPTY `error` code. Needs scope `crm`.
 */
import { formatNullableDate, formatPortalDate, parsePortalDate } from "../dates.js";
import { errors } from "../errors.js";
import { stageSemantics } from "../seed.js";
import { canEdit, canRead, str } from "../shapes.js";
import { DEAL_CURRENCIES, DEAL_STAGES, DEFAULT_SCOPES, type DealRecord } from "../types.js";
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

const yn = (b: boolean) => (b ? "Y" : "N");
const money = (n: number | null) => (n === null ? null : n.toFixed(2));

function requireCrmScope(ctx: MethodContext): void {
  if (!(ctx.scopes ?? DEFAULT_SCOPES).includes("crm")) throw errors.insufficientScope();
}

/** CRM methods read their parameters case-insensitively (`id` or `ID`, `fields` or `FIELDS`). */
function param(params: Params, name: string): unknown {
  if (Object.hasOwn(params, name)) return params[name];
  const key = Object.keys(params).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : params[key];
}

/** Output fields in the order of the recorded answer. */
const FIELD_GETTERS: [string, (d: DealRecord) => unknown][] = [
  ["ID", (d) => String(d.id)],
  ["TITLE", (d) => d.title],
  ["TYPE_ID", (d) => d.typeId],
  ["STAGE_ID", (d) => d.stageId],
  ["PROBABILITY", (d) => str(d.probability)],
  ["CURRENCY_ID", (d) => d.currencyId],
  ["OPPORTUNITY", (d) => money(d.opportunity)],
  ["IS_MANUAL_OPPORTUNITY", (d) => yn(d.isManualOpportunity)],
  ["TAX_VALUE", (d) => money(d.taxValue)],
  ["LEAD_ID", () => null],
  ["COMPANY_ID", (d) => str(d.companyId)],
  ["CONTACT_ID", (d) => str(d.contactId)],
  ["QUOTE_ID", () => null],
  ["BEGINDATE", (d) => formatNullableDate(d.begindate)],
  ["CLOSEDATE", (d) => formatNullableDate(d.closedate)],
  ["ASSIGNED_BY_ID", (d) => String(d.assignedById)],
  ["CREATED_BY_ID", (d) => String(d.createdById)],
  ["MODIFY_BY_ID", (d) => String(d.modifyById)],
  ["DATE_CREATE", (d) => formatPortalDate(d.dateCreate)],
  ["DATE_MODIFY", (d) => formatPortalDate(d.dateModify)],
  ["OPENED", (d) => yn(d.opened)],
  ["CLOSED", (d) => yn(stageSemantics(d.stageId).closed)],
  ["COMMENTS", (d) => d.comments],
  ["ADDITIONAL_INFO", (d) => d.additionalInfo],
  ["LOCATION_ID", () => null],
  ["CATEGORY_ID", () => "0"],
  ["STAGE_SEMANTIC_ID", (d) => stageSemantics(d.stageId).semantic],
  ["IS_NEW", (d) => yn(d.stageId === "NEW")],
  ["IS_RECURRING", () => "N"],
  ["IS_RETURN_CUSTOMER", () => "N"],
  ["IS_REPEATED_APPROACH", () => "N"],
  ["SOURCE_ID", (d) => d.sourceId],
  ["SOURCE_DESCRIPTION", (d) => d.sourceDescription],
  ["ORIGINATOR_ID", () => null],
  ["ORIGIN_ID", () => null],
  ["MOVED_BY_ID", (d) => String(d.movedById)],
  ["MOVED_TIME", (d) => formatPortalDate(d.movedTime)],
  ["LAST_ACTIVITY_TIME", (d) => formatPortalDate(d.lastActivityTime)],
  ["UTM_SOURCE", () => null],
  ["UTM_MEDIUM", () => null],
  ["UTM_CAMPAIGN", () => null],
  ["UTM_CONTENT", () => null],
  ["UTM_TERM", () => null],
  ["LAST_ACTIVITY_BY", (d) => String(d.lastActivityBy)],
];
const FIELD_NAMES = new Set(FIELD_GETTERS.map(([k]) => k));

/** One deal; `select` null = every field. A narrowed select keeps ID. */
export function renderDeal(d: DealRecord, select: Set<string> | null = null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, get] of FIELD_GETTERS)
    if (select === null || select.has(key) || key === "ID") out[key] = get(d);
  return out;
}

function requireDealId(params: Params): number {
  const id = intLike(param(params, "id"));
  if (id === undefined || id <= 0) throw errors.crm("ID is not defined or invalid");
  return id;
}

export const getDeal: MethodHandler = (params, ctx) => {
  requireCrmScope(ctx);
  const id = requireDealId(params);
  const deal = ctx.store.getDeal(id);
  if (!deal) throw errors.crm("Not found");
  if (!canRead(deal, ctx.userId)) throw errors.crm("Access denied");
  return { result: renderDeal(deal) };
};

// ── crm.deal.update ─────────────────────────────────────────────────────────────────────────────

type Parsed = { ok: true; value: unknown } | { ok: false; message: string };
const ok = (value: unknown): Parsed => ({ ok: true, value });
const fail = (message: string): Parsed => ({ ok: false, message });
const text = (v: unknown) =>
  v === null ? null : typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined;
const flag = (v: unknown) =>
  v === "Y" || v === true || v === "1" || v === 1
    ? true
    : v === "N" || v === false || v === "0" || v === 0
      ? false
      : undefined;

function optionalId(v: unknown): Parsed {
  if (v === null || v === "" || v === 0 || v === "0") return ok(null);
  const n = intLike(v);
  return n === undefined || n < 0 ? fail("Invalid identifier") : ok(n);
}

/** One of the listed codes, exactly. */
const oneOf =
  (codes: readonly string[], message: string) =>
  (v: unknown): Parsed =>
    typeof v === "string" && codes.includes(v) ? ok(v) : fail(message);
/** Y/N (or true/false, 1/0). */
const yesNo =
  (message: string) =>
  (v: unknown): Parsed => {
    const b = flag(v);
    return b === undefined ? fail(message) : ok(b);
  };
/** Text; empty clears it (null). */
const optionalText =
  (message: string) =>
  (v: unknown): Parsed => {
    const t = text(v);
    return t === undefined ? fail(message) : ok(t === "" ? null : t);
  };
/** A portal date; null or empty clears it. */
const optionalDate =
  (message: string) =>
  (v: unknown): Parsed => {
    if (v === null || v === "") return ok(null);
    const t = typeof v === "string" ? parsePortalDate(v) : undefined;
    return t === undefined ? fail(message) : ok(t);
  };

/** Fields the emulator models for crm.deal.update, by their UPPER_SNAKE name; any other key is ignored (as documented). */
const UPDATABLE: Record<string, { prop: keyof DealRecord; parse(v: unknown, ctx: MethodContext): Parsed }> = {
  TITLE: {
    prop: "title",
    parse: (v) => {
      const t = text(v);
      return t === undefined || t === null ? fail('Invalid value for the "Name" field') : ok(t);
    },
  },
  TYPE_ID: {
    prop: "typeId",
    parse: (v) => {
      const t = text(v);
      return t ? ok(t) : fail('Invalid value for the "Type" field');
    },
  },
  STAGE_ID: { prop: "stageId", parse: oneOf(DEAL_STAGES, 'Invalid value for the "Stage" field') },
  PROBABILITY: {
    prop: "probability",
    parse: (v) => {
      if (v === null || v === "") return ok(null);
      const n = intLike(v);
      return n === undefined || n < 0 || n > 100 ? fail('Invalid value for the "Probability" field') : ok(n);
    },
  },
  CURRENCY_ID: {
    prop: "currencyId",
    parse: oneOf(DEAL_CURRENCIES, 'Invalid value for the "Currency" field'),
  },
  OPPORTUNITY: {
    prop: "opportunity",
    parse: (v) => {
      const n =
        typeof v === "number" ? v : typeof v === "string" && /^\s*\d+(\.\d+)?\s*$/.test(v) ? Number(v) : NaN;
      return Number.isFinite(n) && n >= 0
        ? ok(Math.round(n * 100) / 100)
        : fail('Invalid value for the "Amount" field');
    },
  },
  IS_MANUAL_OPPORTUNITY: {
    prop: "isManualOpportunity",
    parse: yesNo("Invalid value for IS_MANUAL_OPPORTUNITY"),
  },
  TAX_VALUE: {
    prop: "taxValue",
    parse: (v) => {
      if (v === null || v === "") return ok(null);
      const n = Number(v);
      return Number.isFinite(n) && n >= 0 ? ok(n) : fail('Invalid value for the "Tax" field');
    },
  },
  COMPANY_ID: { prop: "companyId", parse: optionalId },
  CONTACT_ID: { prop: "contactId", parse: optionalId },
  BEGINDATE: { prop: "begindate", parse: optionalDate('Invalid value for the "Start date" field') },
  CLOSEDATE: { prop: "closedate", parse: optionalDate('Invalid value for the "Close date" field') },
  OPENED: { prop: "opened", parse: yesNo('Invalid value for the "Available to everyone" field') },
  COMMENTS: { prop: "comments", parse: optionalText('Invalid value for the "Comment" field') },
  ADDITIONAL_INFO: { prop: "additionalInfo", parse: optionalText("Invalid value for ADDITIONAL_INFO") },
  SOURCE_ID: { prop: "sourceId", parse: optionalText('Invalid value for the "Source" field') },
  SOURCE_DESCRIPTION: {
    prop: "sourceDescription",
    parse: optionalText("Invalid value for SOURCE_DESCRIPTION"),
  },
  ASSIGNED_BY_ID: {
    prop: "assignedById",
    parse: (v, ctx) => {
      const n = intLike(v);
      return n === undefined || !ctx.store.getUser(n)
        ? fail('Invalid value for the "Responsible person" field')
        : ok(n);
    },
  },
};

/**
 * `{id, fields, params}`: only the given modelled keys change; unknown keys (UF_*, PARENT_ID_*, CLOSED, ...) are
 * ignored like the portal does. STAGE_ID decides STAGE_SEMANTIC_ID and CLOSED; a stage move sets MOVED_BY_ID/TIME.
 * DATE_MODIFY and MODIFY_BY_ID move on every update that reaches a deal. Answers `true`, not the deal.
 */
export const updateDeal: MethodHandler = (params, ctx) => {
  requireCrmScope(ctx);
  const id = requireDealId(params);
  const fields = param(params, "fields");
  if (!isRecord(fields)) {
    // PHP sees an empty JSON list as an empty array: nothing to change.
    if (!(Array.isArray(fields) && fields.length === 0)) throw errors.crm("Parameter 'fields' must be array");
  }
  const extra = param(params, "params");
  if (extra !== undefined && extra !== null && extra !== "" && !isRecord(extra) && !Array.isArray(extra)) {
    throw errors.crm("Parameter 'params' must be array");
  }
  const deal = ctx.store.getDeal(id);
  if (!deal) throw errors.crm("Not found");
  if (!canEdit(deal, ctx.userId)) throw errors.crm("Access denied");
  const changes: Partial<DealRecord> = {};
  const problems: string[] = [];
  for (const [rawKey, value] of Object.entries(isRecord(fields) ? fields : {})) {
    const spec = UPDATABLE[rawKey.toUpperCase()];
    if (!spec) continue;
    const parsed = spec.parse(value, ctx);
    if (parsed.ok) (changes as Record<string, unknown>)[spec.prop] = parsed.value;
    else if (!problems.includes(parsed.message)) problems.push(parsed.message);
  }
  if (problems.length > 0) throw errors.crm(problems.join("<br>"));
  const now = Math.floor(ctx.nowSec);
  const next: DealRecord = { ...deal, ...changes, modifyById: ctx.userId, dateModify: now };
  if (next.stageId !== deal.stageId) {
    next.movedById = ctx.userId;
    next.movedTime = now;
  }
  ctx.store.putDeal(next);
  return { result: true };
};

// ── crm.deal.list ───────────────────────────────────────────────────────────────────────────────

type Scalar = string | number | boolean | null;
type Kind = "number" | "string" | "date" | "flag";
const FILTERS: Record<string, [Kind, (d: DealRecord) => Scalar]> = {
  ID: ["number", (d) => d.id],
  TITLE: ["string", (d) => d.title],
  TYPE_ID: ["string", (d) => d.typeId],
  STAGE_ID: ["string", (d) => d.stageId],
  STAGE_SEMANTIC_ID: ["string", (d) => stageSemantics(d.stageId).semantic],
  CATEGORY_ID: ["number", () => 0],
  PROBABILITY: ["number", (d) => d.probability],
  CURRENCY_ID: ["string", (d) => d.currencyId],
  OPPORTUNITY: ["number", (d) => d.opportunity],
  IS_MANUAL_OPPORTUNITY: ["flag", (d) => d.isManualOpportunity],
  COMPANY_ID: ["number", (d) => d.companyId],
  CONTACT_ID: ["number", (d) => d.contactId],
  ASSIGNED_BY_ID: ["number", (d) => d.assignedById],
  CREATED_BY_ID: ["number", (d) => d.createdById],
  MODIFY_BY_ID: ["number", (d) => d.modifyById],
  MOVED_BY_ID: ["number", (d) => d.movedById],
  DATE_CREATE: ["date", (d) => d.dateCreate],
  DATE_MODIFY: ["date", (d) => d.dateModify],
  MOVED_TIME: ["date", (d) => d.movedTime],
  BEGINDATE: ["date", (d) => d.begindate],
  CLOSEDATE: ["date", (d) => d.closedate],
  OPENED: ["flag", (d) => d.opened],
  CLOSED: ["flag", (d) => stageSemantics(d.stageId).closed],
  SOURCE_ID: ["string", (d) => d.sourceId],
};

type Op = "=" | "!" | "@" | "!@" | "%" | "like" | "<" | "<=" | ">" | ">=";

/** The documented prefixes: >= > <= < @ !@ % =% %= = != !. */
function splitKey(key: string): { op: Op; field: string } {
  const m = /^(!@|!=|=%|%=|>=|<=|@|%|>|<|=|!)?(.*)$/.exec(key.trim())!;
  const raw = m[1] ?? "=";
  const op: Op = raw === "!=" ? "!" : raw === "=%" || raw === "%=" ? "like" : (raw as Op);
  return { op, field: (m[2] ?? "").toUpperCase() };
}

function expectedValue(kind: Kind, v: unknown): Scalar {
  if (v === null || v === undefined || v === "") return null;
  if (kind === "number") {
    const n =
      typeof v === "number" ? v : typeof v === "string" && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : NaN;
    return Number.isFinite(n) ? n : String(v);
  }
  if (kind === "date")
    return typeof v === "string" ? (parsePortalDate(v) ?? v) : typeof v === "number" ? v : String(v);
  if (kind === "flag") return flag(v) ?? String(v);
  return String(v);
}

function compare(a: Scalar, b: Scalar): number | undefined {
  if (a === null || b === null) return undefined;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

function matches(kind: Kind, op: Op, actual: Scalar, raw: unknown): boolean {
  const list = (listLike(raw) ?? [raw]).map((v) => expectedValue(kind, v));
  const eq = (e: Scalar) =>
    actual === null
      ? e === null
      : typeof actual === "string" && typeof e === "string"
        ? actual.toLowerCase() === e.toLowerCase()
        : actual === e;
  switch (op) {
    case "=":
    case "@":
      return list.some(eq);
    case "!":
    case "!@":
      return list.every((e) => !eq(e));
    case "%":
      // LIKE does not apply to status-like fields (the docs: TYPE_ID, STAGE_ID); here it is a substring match on text.
      return list.some((e) =>
        String(actual ?? "")
          .toLowerCase()
          .includes(String(e ?? "").toLowerCase()),
      );
    case "like":
      return list.some((e) => likePattern(String(e ?? "")).test(String(actual ?? "")));
    default: {
      const c = compare(actual, list[0] ?? null);
      if (c === undefined) return false;
      return op === "<" ? c < 0 : op === "<=" ? c <= 0 : op === ">" ? c > 0 : c >= 0;
    }
  }
}

function selectOf(raw: unknown): Set<string> | null {
  const list = listLike(raw);
  if (!list) return null;
  const keys = list.filter((k): k is string => typeof k === "string").map((k) => k.trim().toUpperCase());
  if (keys.length === 0 || keys.includes("*")) return null;
  const known = keys.filter((k) => FIELD_NAMES.has(k));
  return new Set(known);
}

/**
 * `{filter, select, order, start}` (any case): 50 deals per page with `total` and `next`, default order ID
 * ascending. Unknown filter keys are dropped and unknown sort fields ignored.
 */
export const listDeals: MethodHandler = (params, ctx) => {
  requireCrmScope(ctx);
  const tests: ((d: DealRecord) => boolean)[] = [];
  const filter = param(params, "filter");
  if (isRecord(filter)) {
    for (const [key, value] of Object.entries(filter)) {
      const { op, field } = splitKey(key);
      const spec = FILTERS[field];
      if (!spec) continue;
      const [kind, get] = spec;
      tests.push((d) => matches(kind, op, get(d), value));
    }
  }
  const sorts: [(d: DealRecord) => Scalar, number][] = [];
  const order = param(params, "order");
  if (isRecord(order)) {
    for (const [key, dir] of Object.entries(order)) {
      const spec = FILTERS[key.toUpperCase()];
      if (spec) sorts.push([spec[1], String(dir).toUpperCase() === "DESC" ? -1 : 1]);
    }
  }
  const rows = ctx.store
    .allDeals()
    .filter((d) => canRead(d, ctx.userId))
    .filter((d) => tests.every((t) => t(d)))
    .sort((a, b) => {
      for (const [get, sign] of sorts) {
        const c = compare(get(a), get(b)) ?? (get(a) === null ? (get(b) === null ? 0 : -1) : 1);
        if (c !== 0) return c * sign;
      }
      return a.id - b.id;
    });
  const start = pageStart(param(params, "start"));
  const select = selectOf(param(params, "select"));
  const page = rows.slice(start, start + PAGE_SIZE).map((d) => renderDeal(d, select));
  return paged(page, rows.length, start);
};
