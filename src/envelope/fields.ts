/**
 * What the core knows about Bitrix24 task fields: the naming bridge between input keys (UPPER_SNAKE,
 * e.g. RESPONSIBLE_ID) and task output keys (camelCase, e.g. responsibleId), and the value kind of each
 * known field. The kind decides both validation of a proposed value and how two values are compared
 * (see NORMALISATION.md). It is a fact about Bitrix24, not a policy choice, so it lives in code.
 */

/**
 * "code": a string from a fixed list, compared exactly (a deal's STAGE_ID "WON"); "money": an amount,
 * a non-negative decimal with at most two places, compared as a number ("5000.00" = 5000).
 */
export type FieldKind = "string" | "datetime" | "id" | "enum" | "id_list" | "flag" | "code" | "money";

export interface FieldSpec {
  kind: FieldKind;
  /** Allowed values for enum fields, as the digit strings Bitrix24 returns. */
  values?: readonly string[];
  /** Smallest id allowed for id and id_list fields (GROUP_ID 0 means "no group"). */
  minId?: number;
  maxLength?: number;
  minLength?: number;
  /**
   * The portal stores the value with surrounding whitespace removed (a task's title): a value that has
   * some would be written otherwise than approved and could never verify, so it is refused.
   */
  trimmed?: true;
  /** Whether a client may write it with tasks.task.update at all. */
  writable: boolean;
}

export const STATUS_VALUES = ["1", "2", "3", "4", "5", "6", "7"] as const;
export const PRIORITY_VALUES = ["0", "1", "2"] as const;

/**
 * Names of the enum codes, as Bitrix24 documents them (shared/notes/bitrix24-api.md: status 1 new and 7
 * declined are legacy values). Shown next to the code on the card; an edit may name a value instead
 * of its code (PRIORITY=high), and the envelope still holds the code.
 */
export const ENUM_LABELS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  PRIORITY: { "0": "low", "1": "medium", "2": "high" },
  STATUS: {
    "1": "new",
    "2": "waiting",
    "3": "in progress",
    "4": "awaiting control",
    "5": "completed",
    "6": "deferred",
    "7": "declined",
  },
};

/** Other names people use for the same codes (REST 3.0 says "pending" for waiting; "normal" priority). */
const ENUM_ALIASES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  PRIORITY: { normal: "1" },
  STATUS: {
    pending: "2",
    "in-progress": "3",
    inprogress: "3",
    "supposedly completed": "4",
    done: "5",
    complete: "5",
    postponed: "6",
  },
};

const nameKey = (s: string) =>
  s
    .trim()
    .toLowerCase()
    .replace(/[\s_]+/g, " ");

/** The documented name of an enum field's code ("high" for PRIORITY "2"), or undefined. */
export function enumLabel(field: string, value: unknown): string | undefined {
  const code =
    typeof value === "number" && Number.isInteger(value)
      ? String(value)
      : typeof value === "string"
        ? value
        : undefined;
  return code === undefined ? undefined : ENUM_LABELS[field]?.[code];
}

/**
 * An enum value given by name or by code, as the code: PRIORITY "high" → "2", "2" → "2". Names are
 * matched without regard to case, spaces or underscores. Undefined when the field has no names or the
 * name is not one of them.
 */
export function enumCodeOf(field: string, given: string): string | undefined {
  const labels = ENUM_LABELS[field];
  if (!labels) return undefined;
  if (given in labels) return given;
  const key = nameKey(given);
  for (const [code, name] of Object.entries(labels)) if (nameKey(name) === key) return code;
  const alias = ENUM_ALIASES[field]?.[key] ?? ENUM_ALIASES[field]?.[key.replace(/ /g, "")];
  return alias;
}

/** An edit's fields with enum values given by name replaced by their codes; anything else unchanged. */
export function codesForNames(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) {
    const code = typeof value === "string" && ENUM_LABELS[field] ? enumCodeOf(field, value) : undefined;
    out[field] = code ?? value;
  }
  return out;
}

/** Known task fields. Fields outside this table are compared as exact canonical JSON and cannot appear in a policy. */
export const TASK_FIELDS: Readonly<Record<string, FieldSpec>> = {
  TITLE: { kind: "string", minLength: 1, maxLength: 255, trimmed: true, writable: true },
  DESCRIPTION: { kind: "string", writable: true },
  DEADLINE: { kind: "datetime", writable: true },
  START_DATE_PLAN: { kind: "datetime", writable: true },
  END_DATE_PLAN: { kind: "datetime", writable: true },
  PRIORITY: { kind: "enum", values: PRIORITY_VALUES, writable: true },
  STATUS: { kind: "enum", values: STATUS_VALUES, writable: true },
  RESPONSIBLE_ID: { kind: "id", minId: 1, writable: true },
  CREATED_BY: { kind: "id", minId: 1, writable: true },
  GROUP_ID: { kind: "id", minId: 0, writable: true },
  PARENT_ID: { kind: "id", minId: 0, writable: true },
  AUDITORS: { kind: "id_list", minId: 1, writable: true },
  ACCOMPLICES: { kind: "id_list", minId: 1, writable: true },
  ALLOW_CHANGE_DEADLINE: { kind: "flag", writable: true },
  TASK_CONTROL: { kind: "flag", writable: true },
  ID: { kind: "id", minId: 1, writable: false },
  CHANGED_DATE: { kind: "datetime", writable: false },
  CHANGED_BY: { kind: "id", minId: 0, writable: false },
  CREATED_DATE: { kind: "datetime", writable: false },
  CLOSED_DATE: { kind: "datetime", writable: false },
  CLOSED_BY: { kind: "id", minId: 0, writable: false },
  STATUS_CHANGED_DATE: { kind: "datetime", writable: false },
  STATUS_CHANGED_BY: { kind: "id", minId: 0, writable: false },
  ACTIVITY_DATE: { kind: "datetime", writable: false },
  DATE_START: { kind: "datetime", writable: false },
  VIEWED_DATE: { kind: "datetime", writable: false },
};

/** CRM deal stages of the general funnel and the currencies the portal has (crm.deal.* takes and returns them as strings). */
export const DEAL_STAGES = [
  "NEW",
  "PREPARATION",
  "PREPAYMENT_INVOICE",
  "EXECUTING",
  "FINAL_INVOICE",
  "WON",
  "LOSE",
  "APOLOGY",
] as const;
export const DEAL_CURRENCIES = ["RUB", "USD", "EUR"] as const;

/** Known deal fields (crm.deal.get answers UPPER_SNAKE keys, so the field name is the key). */
export const DEAL_FIELDS: Readonly<Record<string, FieldSpec>> = {
  TITLE: { kind: "string", minLength: 1, maxLength: 255, writable: true },
  STAGE_ID: { kind: "code", values: DEAL_STAGES, writable: true },
  OPPORTUNITY: { kind: "money", writable: true },
  CURRENCY_ID: { kind: "code", values: DEAL_CURRENCIES, writable: true },
  ASSIGNED_BY_ID: { kind: "id", minId: 1, writable: true },
  CLOSEDATE: { kind: "datetime", writable: true },
  COMMENTS: { kind: "string", writable: true },
  TYPE_ID: { kind: "string", writable: false },
  PROBABILITY: { kind: "id", minId: 0, writable: false },
  COMPANY_ID: { kind: "id", minId: 0, writable: false },
  CONTACT_ID: { kind: "id", minId: 0, writable: false },
  CATEGORY_ID: { kind: "id", minId: 0, writable: false },
  BEGINDATE: { kind: "datetime", writable: false },
  OPENED: { kind: "flag", writable: false },
  CLOSED: { kind: "flag", writable: false },
  STAGE_SEMANTIC_ID: { kind: "code", values: ["P", "S", "F"], writable: false },
  DATE_CREATE: { kind: "datetime", writable: false },
  DATE_MODIFY: { kind: "datetime", writable: false },
  CREATED_BY_ID: { kind: "id", minId: 0, writable: false },
  MODIFY_BY_ID: { kind: "id", minId: 0, writable: false },
  MOVED_BY_ID: { kind: "id", minId: 0, writable: false },
  MOVED_TIME: { kind: "datetime", writable: false },
  IS_NEW: { kind: "flag", writable: false },
  LAST_ACTIVITY_TIME: { kind: "datetime", writable: false },
  LAST_ACTIVITY_BY: { kind: "id", minId: 0, writable: false },
};

/**
 * The params of a comment on a task (task.commentitem.add's FIELDS). The author is the webhook's user,
 * never a param: a comment written in someone else's name is not something an agent proposes.
 */
export const COMMENT_FIELDS: Readonly<Record<string, FieldSpec>> = {
  POST_MESSAGE: { kind: "string", minLength: 1, maxLength: 10000, writable: true },
};

/** A comment delete's params (delete_task_comment): the id of the comment under the envelope's task. */
export const DELETE_COMMENT_FIELDS: Readonly<Record<string, FieldSpec>> = {
  COMMENT_ID: { kind: "id", minId: 1, writable: true },
};

/** The target's own change marker, read at envelope time and compared before the write. */
export const CHANGE_MARKER_FIELD = "CHANGED_DATE";

export const UPPER_SNAKE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

/** "RESPONSIBLE_ID" -> "responsibleId", "UF_CRM_TASK" -> "ufCrmTask" (the way tasks.task.* converts output keys). */
export function fieldToTaskKey(field: string): string {
  const parts = field
    .toLowerCase()
    .split("_")
    .filter((p) => p.length > 0);
  return parts.map((p, i) => (i === 0 ? p : p.charAt(0).toUpperCase() + p.slice(1))).join("");
}

/** "responsibleId" -> "RESPONSIBLE_ID". Inverse of fieldToTaskKey for keys made of letters (digits stick to the previous word). */
export function taskKeyToField(key: string): string {
  return key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
}

/**
 * A field's spec in a field table. Without one: the task's field, else the deal's (the names they share,
 * TITLE and ID, have the same kind), else the comment's — which is how values are compared.
 */
export function fieldSpec(field: string, table?: Readonly<Record<string, FieldSpec>>): FieldSpec | undefined {
  const has = (t: Readonly<Record<string, FieldSpec>>) => Object.prototype.hasOwnProperty.call(t, field);
  if (table) return has(table) ? table[field] : undefined;
  return has(TASK_FIELDS)
    ? TASK_FIELDS[field]
    : has(DEAL_FIELDS)
      ? DEAL_FIELDS[field]
      : has(COMMENT_FIELDS)
        ? COMMENT_FIELDS[field]
        : undefined;
}

/**
 * An amount as a number of hundredths ("5000.00", "5000", 5000, 5000.5 → 500000n, 500050n), or
 * undefined. A bigint: up to 15 digits before the point exceed a double's exact integers once counted
 * in hundredths, and "999999999999999.99" must not equal "999999999999999.90".
 */
export function moneyCents(value: unknown): bigint | undefined {
  const text =
    typeof value === "number"
      ? Number.isFinite(value)
        ? String(value)
        : ""
      : typeof value === "string"
        ? value
        : "";
  const m = /^(\d{1,15})(?:\.(\d{1,2}))?$/.exec(text);
  if (!m) return undefined;
  return BigInt(m[1]!) * 100n + BigInt((m[2] ?? "").padEnd(2, "0"));
}

// ---------------------------------------------------------------------------------------------------
// Value checks shared by validation and comparison.

const CANONICAL_DIGITS = /^(?:0|[1-9][0-9]*)$/;

/** An id as Bitrix24 writes it: a non-negative safe integer, or its canonical digit string. Returns the digit string. */
export function normaliseId(value: unknown): string | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) && value >= 0 ? String(value) : undefined;
  if (typeof value === "string" && CANONICAL_DIGITS.test(value) && value.length <= 16) {
    return Number.isSafeInteger(Number(value)) ? value : undefined;
  }
  return undefined;
}

const ISO_WITH_OFFSET =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-](\d{2}):(\d{2}))$/;

/**
 * Milliseconds since the epoch for an ISO 8601 date-time with an explicit offset, or undefined.
 * Calendar-checked (no 31 February), so Date's lenient parsing never decides a comparison.
 * `allowFraction: false` is the input rule for proposed values: Bitrix24 itself writes whole seconds.
 */
export function parseIsoInstant(value: unknown, allowFraction = true): number | undefined {
  if (typeof value !== "string") return undefined;
  const m = ISO_WITH_OFFSET.exec(value);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, , oh, om] = m;
  if (frac !== undefined && !allowFraction) return undefined;
  const year = Number(y),
    month = Number(mo),
    day = Number(d);
  const hour = Number(h),
    minute = Number(mi),
    second = Number(s);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  if (oh !== undefined && (Number(oh) > 23 || Number(om) > 59)) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Why a proposed value is not acceptable for its field, or undefined when it is. `limits` come from the policy. */
export function checkFieldValue(
  field: string,
  value: unknown,
  limits: {
    maxLength?: number | undefined;
    minLength?: number | undefined;
    allowedValues?: readonly string[] | undefined;
  } = {},
  table: Readonly<Record<string, FieldSpec>> = TASK_FIELDS,
): string | undefined {
  const spec = fieldSpec(field, table);
  if (!spec)
    return `${field} is not a known ${table === TASK_FIELDS ? "task" : table === DEAL_FIELDS ? "deal" : "comment"} field`;
  switch (spec.kind) {
    case "string": {
      if (typeof value !== "string") return `${field} must be a string, got ${typeName(value)}`;
      const length = [...value].length;
      const min = limits.minLength ?? spec.minLength;
      const max = limits.maxLength ?? spec.maxLength;
      if (min !== undefined && length < min)
        return `${field} must have at least ${min} characters, got ${length}`;
      if (max !== undefined && length > max)
        return `${field} must have at most ${max} characters, got ${length}`;
      if (hasLoneSurrogate(value))
        return `${field} contains an unpaired UTF-16 surrogate, which cannot be sent as UTF-8`;
      if (spec.trimmed && value.trim() !== value)
        return `${field} must not start or end with whitespace, got ${JSON.stringify(value)}: the portal stores it without, so the approved value could never be verified`;
      return undefined;
    }
    case "datetime":
      if (typeof value !== "string")
        return `${field} must be an ISO 8601 date-time string with offset, got ${typeName(value)}`;
      if (parseIsoInstant(value, false) === undefined) {
        return `${field} must be an ISO 8601 date-time with offset and whole seconds like 2026-12-15T18:00:00+03:00, got ${JSON.stringify(value)}`;
      }
      return undefined;
    case "enum": {
      const id = normaliseId(value);
      const allowed = limits.allowedValues ?? spec.values ?? [];
      if (id === undefined || !allowed.includes(id)) {
        const named = (v: string) =>
          ENUM_LABELS[field]?.[v] ? `"${v}" (${ENUM_LABELS[field]![v]})` : `"${v}"`;
        return `${field} must be one of ${allowed.map(named).join(", ")}${ENUM_LABELS[field] ? " (a code, or its name in an edit)" : ""}, got ${JSON.stringify(value)}`;
      }
      return undefined;
    }
    case "id": {
      const id = normaliseId(value);
      if (id === undefined || Number(id) < (spec.minId ?? 0)) {
        return `${field} must be an id (integer ≥ ${spec.minId ?? 0}, as a number or digit string), got ${JSON.stringify(value)}`;
      }
      return undefined;
    }
    case "id_list": {
      if (!Array.isArray(value)) return `${field} must be an array of ids, got ${typeName(value)}`;
      const seen = new Set<string>();
      for (const [i, item] of value.entries()) {
        const id = normaliseId(item);
        if (id === undefined || Number(id) < (spec.minId ?? 0)) {
          return `${field}[${i}] must be an id (integer ≥ ${spec.minId ?? 0}), got ${JSON.stringify(item)}`;
        }
        if (seen.has(id))
          return `${field} lists id ${id} twice; the list replaces the whole set, so each id must appear once`;
        seen.add(id);
      }
      const max = limits.maxLength;
      if (max !== undefined && value.length > max)
        return `${field} must list at most ${max} ids, got ${value.length}`;
      return undefined;
    }
    case "flag":
      if (value !== "Y" && value !== "N") return `${field} must be "Y" or "N", got ${JSON.stringify(value)}`;
      return undefined;
    case "code": {
      const allowed = limits.allowedValues ?? spec.values ?? [];
      if (typeof value !== "string" || !allowed.includes(value))
        return `${field} must be one of ${allowed.map((v) => `"${v}"`).join(", ")}, got ${JSON.stringify(value)}`;
      return undefined;
    }
    case "money":
      if (moneyCents(value) === undefined)
        return `${field} must be an amount ≥ 0 with at most two decimals, as a number or a string like "5000.00", got ${JSON.stringify(value)}`;
      return undefined;
  }
}

export function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}
