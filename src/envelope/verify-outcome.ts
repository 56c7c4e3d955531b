/**
 * Post-write verification: a fresh read after the write judged against the approved values, the
 * invariants and the write's acknowledgement. It reads the object out of the answer the same strict
 * way as the pre-write comparison (src/envelope/compare.ts).
 */
import { fingerprint } from "./canonical.js";
import {
  checkField,
  fingerprintedMoves,
  has,
  movedOf,
  show,
  type FieldCheck,
  type FieldStatus,
  type MovedField,
  type ObjectIdentity,
  type ReadResult,
} from "./compare.js";
import type { Envelope } from "./envelope.js";
import { compareValues, normalisationRule } from "./normalise.js";
import { OPERATIONS } from "./operations.js";
import { TARGETS } from "./targets.js";

/** What the write call returned, if anything. */
export type Acknowledgement =
  | { status: "OK"; body: unknown }
  | {
      status: "ERROR";
      error: {
        kind: string;
        code?: string;
        description: string;
        httpStatus?: number;
        outcomeUnknown?: boolean;
      };
    }
  | { status: "MISSING"; reason: string };

export interface VerifyResult {
  verdict: VerifyVerdict;
  fields: FieldCheck[];
  reason: string;
  /** Every field that differs from the baseline, including the requested ones that now hold the approved value. */
  moved: MovedField[];
  identity: ObjectIdentity;
}

export type VerifyVerdict = "VERIFIED" | "VERIFICATION_FAILED" | "INVARIANT_VIOLATION" | "INCONCLUSIVE";

/**
 * Fresh read after the write. The state decides, never the acknowledgement alone:
 *  - read failed or unusable → INCONCLUSIVE;
 *  - an invariant or any other non-automatic field changed → INVARIANT_VIOLATION;
 *  - a requested field does not hold the approved value → VERIFICATION_FAILED ("not applied" when it
 *    still holds the baseline value); but when the write's outcome is unknown (no acknowledgement, or
 *    an error that leaves it open: outcomeUnknown) and every such field still holds its baseline value
 *    → INCONCLUSIVE: not applied as of this read, and the write may still land (a timeout is neither
 *    success nor failure);
 *  - a requested or invariant field cannot be extracted → INCONCLUSIVE;
 *  - every requested value present, invariants intact, acknowledgement OK → VERIFIED;
 *  - the same state but the acknowledgement is ERROR or MISSING → INCONCLUSIVE: the state matches, but
 *    whether the write we sent did it (or will still land, or was sent twice) is not proven.
 */
export function verifyOutcome(
  e: Envelope,
  ack: Acknowledgement,
  read: ReadResult,
  beforeWrite?: unknown,
  readAt?: string,
): VerifyResult {
  const t = TARGETS[e.object.type];
  const fieldToTaskKey = t.keyOf;
  const CHANGE_MARKER_FIELD = t.changeMarker;
  const ackNote = describeAck(ack);
  const noIdentity: ObjectIdentity = { expected: e.object.id, answered: null, status: "UNKNOWN" };
  if (read.status === "failed") {
    return {
      verdict: "INCONCLUSIVE",
      fields: [],
      reason: `the verification read failed (${read.error.kind}${read.error.code !== undefined ? ` ${read.error.code}` : ""}: ${read.error.description}); ${ackNote}`,
      moved: [],
      identity: noIdentity,
    };
  }
  const extracted = t.extract(read.body, e.object.id);
  if (!extracted.ok) {
    // An answer about another object is a definite identity mismatch, but it still says nothing about
    // this task's state: the verdict stays INCONCLUSIVE, the identity is recorded as MISMATCH.
    const other = extracted.otherId !== undefined;
    return {
      verdict: "INCONCLUSIVE",
      fields: [],
      reason: `${other ? "identity mismatch" : "cannot verify"}: ${extracted.reason}; ${ackNote}`,
      moved: [],
      identity: other
        ? { expected: e.object.id, answered: extracted.otherId, status: "MISMATCH" }
        : noIdentity,
    };
  }
  const task = extracted.object;
  const identity: ObjectIdentity = { expected: e.object.id, answered: task[t.idKey], status: "MATCH" };
  const fields: FieldCheck[] = [];
  const moved: MovedField[] = [];

  // Only an update writes task fields; a create's params are checked on the created object (created.ts).
  const requested = OPERATIONS[e.operation].effect === "update" ? e.params : {};
  for (const [field, approved] of Object.entries(requested)) {
    const baseline = e.baseline.values[field];
    const check: FieldCheck = {
      ...checkField(
        task,
        { field, taskKey: fieldToTaskKey(field), role: "requested", expected: approved },
        (equal) => (equal ? "applied" : "wrong_value"),
      ),
      baseline,
    };
    fields.push(check);
    if (check.status === "unknown") continue;
    // Not the approved value but still the baseline's: not applied, judged by the rule that says so.
    const asBaseline = compareValues(field, baseline, check.actual);
    if (check.status === "wrong_value" && asBaseline.equal) {
      check.status = "not_applied";
      check.rule = normalisationRule(asBaseline.rule);
      if (asBaseline.normalised) check.normalised = true;
    }
    if (!asBaseline.equal) moved.push(movedOf(check));
  }
  for (const field of e.invariantFields) {
    const check = checkField(
      task,
      { field, taskKey: fieldToTaskKey(field), role: "invariant", expected: e.baseline.values[field] },
      (equal) => (equal ? "unchanged" : "violated"),
    );
    fields.push(check);
    if (check.status === "violated") moved.push(movedOf(check));
  }

  // Everything else the task showed at envelope time: the change marker (kept in full) and the fingerprinted keys.
  const automaticKeys = new Set(e.automaticFields.map(fieldToTaskKey));
  const markerKey = fieldToTaskKey(CHANGE_MARKER_FIELD);
  if (has(task, markerKey)) {
    const c = compareValues(CHANGE_MARKER_FIELD, e.baseline.values[CHANGE_MARKER_FIELD], task[markerKey]);
    if (!c.equal) {
      const automatic = automaticKeys.has(markerKey);
      const check: FieldCheck = {
        field: CHANGE_MARKER_FIELD,
        taskKey: markerKey,
        role: automatic ? "automatic" : "other",
        expected: e.baseline.values[CHANGE_MARKER_FIELD],
        actual: task[markerKey],
        status: automatic ? "automatic" : "unexpected",
        rule: normalisationRule(c.rule),
      };
      fields.push(check);
      moved.push(movedOf(check));
    }
  }
  // The task as the pre-read saw it right before the write: a field that had already moved then (the
  // pre-read lets fields it does not compare move) and holds that same value now was not moved by us.
  const before = beforeWrite === undefined ? undefined : t.extract(beforeWrite, e.object.id);
  const seenBefore = (taskKey: string, now: unknown): boolean =>
    before !== undefined &&
    before.ok &&
    has(before.object, taskKey) &&
    fingerprint(before.object[taskKey]) === fingerprint(now);
  for (const m of fingerprintedMoves(e, task)) {
    const automatic = m.role === "automatic";
    const earlier = !automatic && seenBefore(m.taskKey, m.now);
    fields.push({
      field: m.field,
      taskKey: m.taskKey,
      role: m.role,
      actual: m.now,
      baselineFingerprint: m.beforeFingerprint!,
      status: automatic ? "automatic" : earlier ? "changed_before_write" : "unexpected",
      note: automatic
        ? "allowed to change by itself"
        : earlier
          ? "changed after the envelope was made, but already so at the pre-read and unchanged by the write"
          : "changed although it was neither requested nor automatic",
    });
    moved.push(m);
  }

  const violated = fields.filter((f) => f.status === "violated" || f.status === "unexpected");
  const failed = fields.filter((f) => f.status === "not_applied" || f.status === "wrong_value");
  const unknown = fields.filter((f) => f.status === "unknown");
  const list = (fs: FieldCheck[]) =>
    fs
      .map(
        (f) =>
          `${f.field}${f.role === "requested" ? ` (${f.status.replace("_", " ")}: approved ${show(f.expected)}, now ${show(f.actual)})` : f.actual !== undefined ? ` (now ${show(f.actual)}${f.expected !== undefined ? `, was ${show(f.expected)}` : ""})` : ""}`,
      )
      .join("; ");

  const done = (verdict: VerifyVerdict, reason: string): VerifyResult => ({
    verdict,
    fields,
    moved,
    identity,
    reason,
  });
  if (violated.length) {
    return done(
      "INVARIANT_VIOLATION",
      `fields that were not to change did: ${list(violated)}${failed.length ? `; also not as approved: ${list(failed)}` : ""}; ${ackNote}`,
    );
  }
  if (failed.length) {
    const unknownOutcome = outcomeUnknown(ack);
    if (unknownOutcome && failed.every((f) => f.status === "not_applied")) {
      // No answer (or an answer that leaves the outcome open): a write still in flight may land after
      // this read. "Not applied" would be a claim the read cannot make; it says only "not yet".
      return done("INCONCLUSIVE", `${notYetApplied(readAt)}: ${list(failed)}; ${ackNote}; ${MAY_STILL_LAND}`);
    }
    const allNotApplied =
      failed.every((f) => f.status === "not_applied") && failed.length === Object.keys(requested).length;
    return done(
      "VERIFICATION_FAILED",
      `${allNotApplied ? "the change was not applied" : `the ${t.type} does not hold the approved values`}: ${list(failed)}; ${ackNote}${unknownOutcome ? `; ${MAY_STILL_LAND}` : ""}`,
    );
  }
  if (unknown.length) {
    return done(
      "INCONCLUSIVE",
      `cannot verify ${unknown.map((f) => f.field).join(", ")}: ${unknown.map((f) => f.note).join("; ")}; ${ackNote}`,
    );
  }
  if (ack.status !== "OK") {
    return done(
      "INCONCLUSIVE",
      `the ${t.type} holds ${Object.keys(requested).length ? "the approved values" : "its watched values"} and the invariants are intact, but ${ackNote}, so it is not proven that this write made the change (or that it was applied only once)`,
    );
  }
  const withStatus = (status: FieldStatus) => fields.filter((f) => f.status === status).map((f) => f.field);
  const automatic = withStatus("automatic");
  const earlier = withStatus("changed_before_write");
  return done(
    "VERIFIED",
    `fresh read shows ${Object.keys(requested).length ? `${Object.keys(requested).join(", ")} as approved` : `${t.type} ${e.object.id} as before`}, ${e.invariantFields.length} invariant field(s) unchanged${
      automatic.length ? `, automatic changes: ${automatic.join(", ")}` : ""
    }${earlier.length ? `; changed before the write (seen at the pre-read, not by this write): ${earlier.join(", ")}` : ""}`,
  );
}

/**
 * Whether the acknowledgement leaves open if the write was carried out: none arrived (MISSING), or the
 * error says so (outcomeUnknown: a timeout, a dropped connection, a 5xx to a write). A read that does
 * not show such a write's change cannot say it was not applied, only that it was not applied yet.
 */
export function outcomeUnknown(ack: Acknowledgement): boolean {
  return ack.status === "MISSING" || (ack.status === "ERROR" && ack.error.outcomeUnknown === true);
}

/** What an INCONCLUSIVE verdict of a write whose outcome is unknown adds: why it is not a failure. */
export const MAY_STILL_LAND =
  "the write's outcome is unknown and it may still land, so this is neither success nor failure; read the object again later";

/** "not applied as of the read at <time>" (the time when the caller gave it). */
export function notYetApplied(readAt: string | undefined, what = "the change"): string {
  return `${what} is not applied as of the read after the write${readAt ? ` at ${readAt}` : ""}`;
}

/** One line on what the write's answer was, for verdict reasons. */
export function describeAck(ack: Acknowledgement): string {
  switch (ack.status) {
    case "OK":
      return "the target acknowledged the write";
    case "ERROR":
      return `the target answered the write with an error (${ack.error.kind}${ack.error.code !== undefined ? ` ${ack.error.code}` : ""}: ${ack.error.description}${ack.error.outcomeUnknown ? "; outcome unknown" : ""})`;
    case "MISSING":
      return `the acknowledgement is missing (${ack.reason})`;
  }
}
