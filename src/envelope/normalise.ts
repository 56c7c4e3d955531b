/**
 * Equality of a value read from Bitrix24 with a value the envelope holds. The rules are few and
 * explicit (NORMALISATION.md is the reader-facing version):
 *
 *  1. null equals only null; a missing key never reaches this function (it is UNKNOWN upstream).
 *  2. id and enum fields: 5 and "5" are equal; only non-negative integers and canonical digit strings
 *     count as ids ("05", "5 ", "5.0" are compared exactly and so differ from "5").
 *  3. datetime fields: equal when both parse as ISO 8601 with an explicit offset and denote the same
 *     instant ("2026-12-15T18:00:00+03:00" equals "2026-12-15T15:00:00Z"); otherwise compared exactly.
 *  4. id_list fields: equal when both are arrays of ids with the same set of normalised ids (order and
 *     the string/number spelling do not matter; Bitrix24 returns ["2","6"] for AUDITORS [2,6]).
 *  5. strings: compared exactly. Trailing whitespace, case and Unicode normalisation are significant:
 *     "Title " is not "Title", and a precomposed "é" is not "e" + U+0301.
 *  6. everything else (unknown fields, objects, flags, mixed types): canonical JSON equality, so key
 *     order does not matter but 1 and "1" differ.
 */
import { canonicalJson } from "./canonical.js";
import { fieldSpec, moneyCents, normaliseId, parseIsoInstant } from "./fields.js";

/** The rules by which two values are judged equal; each field record names the one that decided it. */
export const NORMALISATION_RULES = [
  { id: "null-only-null", text: 'null equals only null (not "", 0, [] or a missing key)' },
  {
    id: "numeric-string-equal",
    text: 'ids and enums: a non-negative integer and its canonical digit string are equal (5 = "5"; "05", " 5", "5.0" are not)',
  },
  {
    id: "datetime-instant-equal",
    text: "date-times with an explicit offset are equal when they denote the same instant (2026-12-15T18:00:00+03:00 = 2026-12-15T15:00:00Z)",
  },
  {
    id: "id-set-equal",
    text: "id lists are equal when they hold the same set of ids, in any order and number/string spelling",
  },
  {
    id: "money-equal",
    text: 'amounts: equal when they are the same number of hundredths ("5000.00" = 5000 = "5000")',
  },
  {
    id: "string-exact",
    text: "strings are compared exactly, code unit for code unit; nothing is trimmed, case-folded or Unicode-normalised",
  },
  {
    id: "canonical-json-equal",
    text: 'anything else: RFC 8785 canonical JSON equality (object key order ignored; 1 and "1" differ)',
  },
] as const;

export type NormalisationRuleId = (typeof NORMALISATION_RULES)[number]["id"];
export interface NormalisationRule {
  id: NormalisationRuleId;
  text: string;
}

export function normalisationRule(id: NormalisationRuleId): NormalisationRule {
  const rule = NORMALISATION_RULES.find((r) => r.id === id)!;
  return { id: rule.id, text: rule.text };
}

export interface ValueComparison {
  equal: boolean;
  /** The rule that decided. */
  rule: NormalisationRuleId;
  /** True when the values are equal only under the rule: their canonical JSON differs (5 vs "5", +03:00 vs Z). */
  normalised: boolean;
}

/** Equality with the rule that decided it (see NORMALISATION.md). */
export function compareValues(field: string, a: unknown, b: unknown): ValueComparison {
  const decided = (equal: boolean, rule: NormalisationRuleId): ValueComparison => ({
    equal,
    rule,
    normalised: equal && safeCanonical(a) !== safeCanonical(b),
  });
  if (a === null || b === null) return decided(a === b, "null-only-null");
  const kind = fieldSpec(field)?.kind;
  if (kind === "id" || kind === "enum") {
    const x = normaliseId(a),
      y = normaliseId(b);
    if (x !== undefined && y !== undefined) return decided(x === y, "numeric-string-equal");
  } else if (kind === "datetime") {
    const x = parseIsoInstant(a),
      y = parseIsoInstant(b);
    if (x !== undefined && y !== undefined) return decided(x === y, "datetime-instant-equal");
  } else if (kind === "money") {
    const x = moneyCents(a),
      y = moneyCents(b);
    if (x !== undefined && y !== undefined) return decided(x === y, "money-equal");
  } else if (kind === "id_list") {
    const x = idSet(a),
      y = idSet(b);
    if (x && y) return decided(x.size === y.size && [...x].every((id) => y.has(id)), "id-set-equal");
  }
  if (typeof a === "string" && typeof b === "string") return decided(a === b, "string-exact");
  return decided(safeCanonical(a) === safeCanonical(b), "canonical-json-equal");
}

export function valuesEqual(field: string, a: unknown, b: unknown): boolean {
  return compareValues(field, a, b).equal;
}

function idSet(value: unknown): Set<string> | undefined {
  if (!Array.isArray(value)) return undefined;
  const ids = value.map(normaliseId);
  if (ids.some((id) => id === undefined)) return undefined;
  return new Set(ids as string[]);
}

/** Values from a parsed body are JSON; anything else (a stray undefined) compares unequal to everything but itself. */
function safeCanonical(v: unknown): string {
  try {
    return canonicalJson(v);
  } catch {
    return `\u0000not-json:${typeof v}`;
  }
}
