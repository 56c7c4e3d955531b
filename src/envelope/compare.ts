/**
 * Pre-write comparison: a fresh read just before the write against the envelope's baseline, and the
 * field-check shapes it shares with post-write verification (src/envelope/verify-outcome.ts). The
 * object is read out of the target's answer the strict way: an answer that is not the documented
 * shape, or is about another object, yields no values at all (UNKNOWN) rather than values guessed
 * from whatever is there.
 */
import { fingerprint } from "./canonical.js";
import type { Envelope } from "./envelope.js";
import { TARGETS, type TargetType } from "./targets.js";
import { compareValues, normalisationRule, type NormalisationRule } from "./normalise.js";

/** A read of the target by code: the full response body as parsed JSON (or raw text if it was not JSON), or why the read failed. */
export type ReadResult =
  | { status: "ok"; body: unknown }
  | { status: "failed"; error: { kind: string; code?: string; description: string } };
export type FieldStatus =
  /** compareBaseline */
  | "match"
  | "mismatch"
  /** verifyOutcome, requested fields */
  | "applied"
  | "not_applied"
  | "wrong_value"
  /** verifyOutcome, invariant fields */
  | "unchanged"
  | "violated"
  /** verifyOutcome, other fields that changed */
  | "automatic"
  | "unexpected"
  /** verifyOutcome: changed since the envelope, but already so at the pre-read and unchanged since: not this write's doing */
  | "changed_before_write"
  /** either: could not be extracted */
  | "unknown";

export interface FieldCheck {
  /** UPPER_SNAKE field name (for other fields: derived from the task key, which is given in `taskKey`). */
  field: string;
  taskKey: string;
  role: "compared" | "requested" | "invariant" | "automatic" | "other";
  /** Compare: the baseline value. Verify: the approved value (requested) or the baseline value (invariant). Absent for fingerprinted fields. */
  expected?: unknown;
  /** As read now; absent when it could not be extracted. */
  actual?: unknown;
  /** Verify, requested fields: the value at envelope time, to tell "not applied" from "something else". */
  baseline?: unknown;
  status: FieldStatus;
  note?: string;
  /** The normalisation rule that judged `actual` against `expected` (and, for verify, `baseline`); see NORMALISATION.md. */
  rule?: NormalisationRule;
  /** True when the values matched only under the rule (5 vs "5", +03:00 vs Z): not byte-identical. */
  normalised?: boolean;
  /** For a fingerprinted field (not kept in full in the envelope): its 64-bit digest as read at envelope time. */
  baselineFingerprint?: string;
}

/** Whether the answer is about the envelope's object at all. */
export interface ObjectIdentity {
  expected: number;
  /** The id the answer named (as received); null when the answer named none or could not be read. */
  answered: unknown;
  /** MATCH: same object; MISMATCH: the answer is definitely about another object; UNKNOWN: cannot tell. */
  status: "MATCH" | "MISMATCH" | "UNKNOWN";
}

/** A field whose value now differs from the envelope's baseline, with both sides. */
export interface MovedField {
  field: string;
  taskKey: string;
  role: FieldCheck["role"];
  /** The baseline value, when the envelope keeps it in full (compared and invariant fields, CHANGED_DATE). */
  before?: unknown;
  /** For other fields the envelope keeps only a 64-bit fingerprint of the value at envelope time. */
  beforeFingerprint?: string;
  now: unknown;
  rule?: NormalisationRule;
}

export interface CompareResult {
  verdict: CompareVerdict;
  fields: FieldCheck[];
  reason: string;
  /** Every field that differs from the baseline (compared, invariant and fingerprinted), each with before and now. */
  moved: MovedField[];
  identity: ObjectIdentity;
}
export type CompareVerdict = "MATCH" | "MISMATCH" | "UNKNOWN" | "ERROR";

/**
 * Fresh read just before the write against the baseline. MATCH only when every compared field was
 * extracted and equals its baseline value, and no invariant field that could be read differs. A field
 * that differs makes MISMATCH (a definite change wins over not being able to read another field), as
 * does an answer about another object (identity MISMATCH); a compared field that cannot be extracted
 * makes UNKNOWN; a failed read makes ERROR. Only MATCH lets the write proceed. Every field that moved
 * (compared, invariant, or fingerprinted) is listed in `moved` with before and now.
 */
export function compareBaseline(e: Envelope, read: ReadResult): CompareResult {
  const t = TARGETS[e.object.type];
  const fieldToTaskKey = t.keyOf;
  const CHANGE_MARKER_FIELD = t.changeMarker;
  const noIdentity: ObjectIdentity = { expected: e.object.id, answered: null, status: "UNKNOWN" };
  const unknownFields = (note: string): FieldCheck[] =>
    e.comparedFields.map((f) => ({
      field: f,
      taskKey: fieldToTaskKey(f),
      role: "compared",
      expected: e.baseline.values[f],
      status: "unknown",
      note,
    }));
  if (read.status === "failed") {
    return {
      verdict: "ERROR",
      fields: unknownFields("read failed"),
      reason: `the fresh read failed (${read.error.kind}${read.error.code !== undefined ? ` ${read.error.code}` : ""}): ${read.error.description}`,
      moved: [],
      identity: noIdentity,
    };
  }
  const extracted = t.extract(read.body, e.object.id);
  if (!extracted.ok) {
    const other = extracted.otherId !== undefined;
    return {
      verdict: other ? "MISMATCH" : "UNKNOWN",
      fields: unknownFields(extracted.reason),
      reason: other
        ? `identity mismatch: ${extracted.reason}; it says nothing about ${t.type} ${e.object.id}`
        : `cannot compare: ${extracted.reason}`,
      moved: [],
      identity: other
        ? { expected: e.object.id, answered: extracted.otherId, status: "MISMATCH" }
        : noIdentity,
    };
  }
  const task = extracted.object;
  const identity: ObjectIdentity = { expected: e.object.id, answered: task[t.idKey], status: "MATCH" };
  const check = (field: string, role: "compared" | "invariant"): FieldCheck => {
    const taskKey = fieldToTaskKey(field);
    return checkField(
      task,
      { field, taskKey, role, expected: e.baseline.values[field] },
      (equal) => (equal ? "match" : "mismatch"),
      `the answer has no "${taskKey}"${role === "invariant" ? " (an invariant the pre-read could not see; it does not decide the verdict)" : ""}`,
    );
  };
  const fields: FieldCheck[] = [
    ...e.comparedFields.map((f) => check(f, "compared")),
    ...e.invariantFields.map((f) => check(f, "invariant")),
  ];
  const moved: MovedField[] = [
    ...fields.filter((f) => f.status === "mismatch").map(movedOf),
    ...fingerprintedMoves(e, task),
  ];
  const done = (verdict: CompareVerdict, reason: string): CompareResult => ({
    verdict,
    fields,
    reason,
    moved,
    identity,
  });
  const mismatched = fields.filter((f) => f.status === "mismatch");
  const unknown = fields.filter((f) => f.status === "unknown" && f.role === "compared");
  if (mismatched.length) {
    const marker = mismatched.some((f) => f.field === CHANGE_MARKER_FIELD)
      ? ` (the ${t.type} was changed since ${String(e.baseline.values[CHANGE_MARKER_FIELD])})`
      : "";
    return done(
      "MISMATCH",
      `${t.type} ${e.object.id} changed since the envelope was made${marker}: ${describeMoves(moved)}`,
    );
  }
  if (unknown.length) {
    return done(
      "UNKNOWN",
      `cannot compare ${unknown.map((f) => f.field).join(", ")}: ${unknown.map((f) => f.note).join("; ")}`,
    );
  }
  const others = moved.length ? `; other fields moved: ${describeMoves(moved)}` : "";
  return done(
    "MATCH",
    `all ${e.comparedFields.length} compared fields equal the baseline (${e.comparedFields.join(", ")}), ${e.invariantFields.length} invariant field(s) checked${others}`,
  );
}

/**
 * One field of `object` against `expected` under the normalisation rules: "unknown" (noted `missing`)
 * when the answer has no such key, else the status `statusOf` gives to the comparison.
 */
export function checkField(
  object: Record<string, unknown>,
  base: Pick<FieldCheck, "field" | "taskKey" | "role" | "expected">,
  statusOf: (equal: boolean) => FieldStatus,
  missing = `the answer has no "${base.taskKey}"`,
): FieldCheck {
  if (!has(object, base.taskKey)) return { ...base, status: "unknown", note: missing };
  const actual = object[base.taskKey];
  const c = compareValues(base.field, base.expected, actual);
  return {
    ...base,
    actual,
    status: statusOf(c.equal),
    rule: normalisationRule(c.rule),
    ...(c.normalised ? { normalised: true } : {}),
  };
}

/** A field check that moved, as a MovedField with before and now. */
export function movedOf(f: FieldCheck): MovedField {
  const before = f.role === "requested" ? f.baseline : f.expected;
  return {
    field: f.field,
    taskKey: f.taskKey,
    role: f.role,
    before,
    now: f.actual,
    ...(f.rule ? { rule: f.rule } : {}),
  };
}

/** Keys the envelope kept only as fingerprints whose value is no longer the one read at envelope time. */
export function fingerprintedMoves(e: Envelope, task: Record<string, unknown>): MovedField[] {
  const t = TARGETS[e.object.type];
  const taskKeyToField = t.fieldOf;
  const automaticKeys = new Set(e.automaticFields.map(t.keyOf));
  const out: MovedField[] = [];
  for (const [taskKey, digest] of Object.entries(e.baseline.fingerprints)) {
    if (!has(task, taskKey) || fingerprint(task[taskKey]) === digest) continue;
    out.push({
      field: taskKeyToField(taskKey),
      taskKey,
      role: automaticKeys.has(taskKey) ? "automatic" : "other",
      beforeFingerprint: digest,
      now: task[taskKey],
    });
  }
  return out;
}

/** The moved fields in one line each: before and now. */
export function describeMoves(moved: MovedField[]): string {
  return moved
    .map(
      (m) =>
        `${m.field} was ${m.beforeFingerprint !== undefined ? `(fingerprint ${m.beforeFingerprint}; value not kept)` : show(m.before)}, now ${show(m.now)}`,
    )
    .join("; ");
}
/** A value in a reason: as JSON, bounded to 200 characters. */
export function show(v: unknown): string {
  if (v === undefined) return "(missing)";
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 200 ? `${s.slice(0, 200)}… (${s.length} chars)` : s;
}

/** Whether `o` has `key` as its own property. */
export function has(o: Record<string, unknown>, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, key);
}

/**
 * Why a proposal changes nothing, or undefined when it changes something: every requested value
 * already equals the task's current value under the normalisation rules (`"1"` requested, `1` read).
 * A field the task answer does not carry counts as a change (it cannot be shown to be equal). Meant to
 * run on the baseline read, before an envelope is built, so that a no-op is refused with NO_CHANGE
 * instead of being put in front of an approver.
 */
export function noChangeReason(
  params: Record<string, unknown>,
  task: Record<string, unknown>,
  type: TargetType = "task",
): string | undefined {
  const fieldToTaskKey = TARGETS[type].keyOf;
  // (For updates only: a comment or another create always changes something.)
  const fields = Object.keys(params);
  if (fields.length === 0) return undefined;
  const same: string[] = [];
  for (const field of fields) {
    const key = fieldToTaskKey(field);
    if (!has(task, key)) return undefined;
    const c = compareValues(field, params[field], task[key]);
    if (!c.equal) return undefined;
    same.push(
      `${field} is already ${show(task[key])}${c.normalised ? ` (requested ${show(params[field])}, equal under ${c.rule})` : ""}`,
    );
  }
  return `the proposal changes nothing: ${same.join("; ")}`;
}
