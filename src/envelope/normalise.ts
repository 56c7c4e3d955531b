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
import { fieldSpec, normaliseId, parseIsoInstant } from "./fields.js";

export function valuesEqual(field: string, a: unknown, b: unknown): boolean {
  if (a === null || b === null) return a === b;
  const kind = fieldSpec(field)?.kind;
  if (kind === "id" || kind === "enum") {
    const x = normaliseId(a), y = normaliseId(b);
    if (x !== undefined && y !== undefined) return x === y;
  } else if (kind === "datetime") {
    const x = parseIsoInstant(a), y = parseIsoInstant(b);
    if (x !== undefined && y !== undefined) return x === y;
  } else if (kind === "id_list") {
    const x = idSet(a), y = idSet(b);
    if (x && y) return x.size === y.size && [...x].every((id) => y.has(id));
  }
  if (typeof a === "string" && typeof b === "string") return a === b;
  return safeCanonical(a) === safeCanonical(b);
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
