/**
 * Canonical JSON (RFC 8785, JSON Canonicalization Scheme) and the hashes built on it. The library does
 * the canonical serialisation; this module first insists that the input really is JSON data, because
 * the library quietly emits invalid text for functions and follows toJSON (a Date becomes a string),
 * and a hash over something that is not the JSON we store would bind nothing.
 */
import { hash } from "node:crypto";
import canonicalize from "canonicalize";
import { EnvelopeError } from "./errors.js";
import { hasLoneSurrogate } from "./fields.js";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * RFC 8785 canonical text of a JSON value. Object properties whose value is undefined are left out, as
 * JSON.stringify does. JSON data (the audit log hashes records of tens of kilobytes) is copied with its
 * keys in canonical order and written by JSON.stringify; data whose keys JavaScript would not keep in
 * that order is checked and written in one pass; anything else takes the checking walk, which names
 * what is wrong and where, and the library.
 */
export function canonicalJson(value: unknown): string {
  const copy = inCanonicalOrder(value);
  const fast =
    copy === NOT_JSON ? undefined : copy === OUT_OF_ORDER ? canonicalText(value) : JSON.stringify(copy);
  if (fast !== undefined && !ESCAPED_SURROGATE.test(fast)) return fast;
  assertJsonData(value, "$");
  const text = canonicalize(value);
  if (text === undefined) throw new EnvelopeError("NOT_JSON", "a JSON value", "undefined");
  return text;
}

/**
 * How JSON.stringify writes an unpaired surrogate (a valid pair it writes as itself): text without this
 * holds none. Text with it takes the checking walk, which refuses the surrogate, or (for a string that
 * merely holds a backslash before these letters) gives the same text.
 */
const ESCAPED_SURROGATE = /\\ud[89a-f]/;

const NOT_JSON = Symbol("not JSON data");
const OUT_OF_ORDER = Symbol("keys JavaScript orders otherwise");

/**
 * A copy of JSON data whose objects hold their keys in canonical order (sorted by UTF-16 code units),
 * so that JSON.stringify writes its canonical text; NOT_JSON as soon as it is not JSON data (as
 * canonicalText), OUT_OF_ORDER when an object's keys cannot be held in that order: JavaScript lists
 * array-index keys ("2", "10") first and in numeric order, so an object whose sorted keys put a name
 * before an index ("-1" < "1") or an index before a smaller one ("10" < "9") is written by
 * canonicalText instead, as is one with an own "__proto__" key (an assignment would set the prototype).
 */
function inCanonicalOrder(value: unknown): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : NOT_JSON;
    case "object": {
      if (value === null) return null;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array(value.length);
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return NOT_JSON;
          const item = inCanonicalOrder(value[i]);
          if (typeof item === "symbol") return item;
          out[i] = item;
        }
        return out;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return NOT_JSON;
      const record = value as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      let named = false;
      let lastIndex = -1;
      for (const key of Object.keys(record).sort()) {
        const v = record[key];
        if (v === undefined) continue;
        const index = arrayIndex(key);
        if (index === undefined) {
          if (key === "__proto__") return OUT_OF_ORDER;
          named = true;
        } else {
          if (named || index < lastIndex) return OUT_OF_ORDER;
          lastIndex = index;
        }
        const copy = inCanonicalOrder(v);
        if (typeof copy === "symbol") return copy;
        out[key] = copy;
      }
      return out;
    }
    default:
      return NOT_JSON;
  }
}

/** The key as an array index (a canonical decimal below 2^32 − 1), which objects list first; else undefined. */
function arrayIndex(key: string): number | undefined {
  const first = key.charCodeAt(0);
  if (!(first >= 48 && first <= 57) || (first === 48 && key.length > 1) || key.length > 10) return undefined;
  for (let i = 1; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  const n = Number(key);
  return n < 4294967295 ? n : undefined;
}

/**
 * The canonical text of JSON data, as the library writes it (keys sorted by UTF-16 code units, strings
 * and numbers as JSON.stringify writes them); undefined as soon as the value is not JSON data
 * (assertJsonData's refusals but unpaired surrogates, which canonicalJson looks for in the text, and
 * sparse arrays).
 */
function canonicalText(value: unknown): string | undefined {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : undefined;
    case "object": {
      if (value === null) return "null";
      if (Array.isArray(value)) {
        let out = "[";
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) return undefined;
          const item = canonicalText(value[i]);
          if (item === undefined) return undefined;
          out += i === 0 ? item : `,${item}`;
        }
        return `${out}]`;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return undefined;
      const record = value as Record<string, unknown>;
      let out = "{";
      let first = true;
      for (const key of Object.keys(record).sort()) {
        const v = record[key];
        if (v === undefined) continue;
        const text = canonicalText(v);
        if (text === undefined) return undefined;
        out += `${first ? "" : ","}${JSON.stringify(key)}:${text}`;
        first = false;
      }
      return `${out}}`;
    }
    default:
      return undefined;
  }
}

/** "sha256:" + lowercase hex over the UTF-8 bytes of the canonical JSON. */
export function sha256Json(value: unknown): string {
  return `sha256:${hash("sha256", canonicalJson(value), "hex")}`;
}

/**
 * A short change-detection digest (64 bits of SHA-256 over canonical JSON). Used only to notice that a
 * field we did not keep in full has changed; the envelope hash, which binds approval, is full SHA-256.
 */
export function fingerprint(value: unknown): string {
  return hash("sha256", canonicalJson(value), "hex").slice(0, 16);
}

export const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

function assertJsonData(value: unknown, path: string): void {
  switch (typeof value) {
    case "string":
      if (hasLoneSurrogate(value))
        throw new EnvelopeError(
          "NOT_JSON",
          `well-formed Unicode at ${path} (RFC 8785 refuses unpaired surrogates)`,
          "a string with an unpaired surrogate",
        );
      return;
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value))
        throw new EnvelopeError("NOT_JSON", `a finite number at ${path}`, String(value));
      return;
    case "object": {
      if (value === null) return;
      if (Array.isArray(value)) {
        value.forEach((item, i) => {
          if (item === undefined)
            throw new EnvelopeError("NOT_JSON", `a JSON value at ${path}[${i}]`, "undefined");
          assertJsonData(item, `${path}[${i}]`);
        });
        return;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new EnvelopeError(
          "NOT_JSON",
          `a plain object at ${path}`,
          `an instance of ${proto?.constructor?.name ?? "unknown"}`,
        );
      }
      for (const [k, v] of Object.entries(value)) {
        if (hasLoneSurrogate(k))
          throw new EnvelopeError(
            "NOT_JSON",
            `well-formed Unicode in the keys of ${path}`,
            "a key with an unpaired surrogate",
          );
        if (v === undefined) continue;
        assertJsonData(v, `${path}.${k}`);
      }
      return;
    }
    default:
      throw new EnvelopeError("NOT_JSON", `a JSON value at ${path}`, typeof value);
  }
}
