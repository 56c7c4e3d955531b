/**
 * Verification of an operation that creates an object under its target (add_task_comment): the
 * created object is read back and compared with the approved params, and the target itself is
 * verified like any write (its watched fields must not move). Pure: the node does the reads.
 *
 * Which comment is ours:
 *  - the acknowledgement names its id (`{"result": 12}`): that comment must exist and carry the
 *    approved text, and no other comment with that text may have appeared since the pre-read;
 *  - the acknowledgement is lost or an error, or names a comment that already carried the approved
 *    text at the pre-read (an earlier comment, not this write's): a comment with the approved text
 *    that was not on the task at the pre-read is looked for. None: not applied after a definite error,
 *    not applied yet (INCONCLUSIVE: the write may still land) when the outcome is unknown. One: the
 *    state matches, but as with any write without an acknowledgement it is not proven that our call
 *    made it (INCONCLUSIVE). More than one: more was posted than was approved (INVARIANT_VIOLATION).
 */
import { describeReceived } from "./errors.js";
import type { Envelope } from "./envelope.js";
import { fieldToTaskKey, normaliseId } from "./fields.js";
import { compareValues, normalisationRule } from "./normalise.js";
import { isRecord, jsonOf } from "./targets.js";
import { checkField, show, type FieldCheck, type ObjectIdentity, type ReadResult } from "./compare.js";
import {
  MAY_STILL_LAND,
  notYetApplied,
  outcomeUnknown,
  verifyOutcome,
  type Acknowledgement,
  type VerifyResult,
  type VerifyVerdict,
} from "./verify-outcome.js";

/** A comment as task.commentitem.getlist lists it (UPPER_SNAKE keys, ids as strings). */
export interface CommentItem {
  id: string;
  authorId: string | null;
  message: unknown;
  postDate: unknown;
  /** The comment as listed. */
  raw: Record<string, unknown>;
}

export type CommentsExtracted = { ok: true; comments: CommentItem[] } | { ok: false; reason: string };

/** body.result as a list of comments; anything else is unusable (no guessing from a partial shape). */
export function extractComments(body: unknown): CommentsExtracted {
  const json = jsonOf(body);
  if (!json) return { ok: false, reason: `the comment list is text, not JSON: ${describeReceived(body)}` };
  const value = json.value;
  if (!isRecord(value) || !("result" in value))
    return { ok: false, reason: `the comment list answer has no "result": ${describeReceived(value)}` };
  const result = value["result"];
  if (!Array.isArray(result))
    return { ok: false, reason: `"result" of the comment list is not an array: ${describeReceived(result)}` };
  const comments: CommentItem[] = [];
  for (const [i, item] of result.entries()) {
    if (!isRecord(item))
      return { ok: false, reason: `comment ${i} is not an object: ${describeReceived(item)}` };
    const id = normaliseId(item["ID"]);
    if (id === undefined)
      return { ok: false, reason: `comment ${i} has no usable ID: ${describeReceived(item["ID"])}` };
    comments.push({
      id,
      authorId: normaliseId(item["AUTHOR_ID"]) ?? null,
      message: item["POST_MESSAGE"],
      postDate: item["POST_DATE"],
      raw: item,
    });
  }
  return { ok: true, comments };
}

/** Ids of the comments carrying exactly `message` (the pre-read records them, so verification can tell a new one). */
export function commentIdsWithText(comments: CommentItem[], message: unknown): string[] {
  return comments.filter((c) => compareValues("POST_MESSAGE", message, c.message).equal).map((c) => c.id);
}

/** The id a task.commentitem.add acknowledgement names (`{"result": 12}`), if it names one. */
export function createdIdOf(ack: Acknowledgement): string | undefined {
  const body = ackBody(ack);
  return isRecord(body) ? normaliseId(body["result"]) : undefined;
}

/** An OK acknowledgement's body as JSON (parsed when it arrived as text); undefined otherwise. */
function ackBody(ack: Acknowledgement): unknown {
  return ack.status === "OK" ? jsonOf(ack.body)?.value : undefined;
}

export interface CreatedObject {
  type: "task_comment" | "task";
  /** The created comment's id, when it could be tied to this write. */
  id: string | null;
  /** How it was found: by the id the acknowledgement named, or by looking for the approved text. */
  via: "acknowledgement" | "search";
  /** Comments with the approved text that were not on the task at the pre-read. */
  newWithText: string[];
}

export type CreateVerifyResult = VerifyResult & { created: CreatedObject };

const RANK: Record<VerifyVerdict, number> = {
  VERIFIED: 0,
  INCONCLUSIVE: 1,
  VERIFICATION_FAILED: 2,
  INVARIANT_VIOLATION: 3,
};

/**
 * `taskRead` is the target after the write, `commentsRead` its comment list after the write,
 * `beforeWrite` the pre-read's raw task answer, `sameTextBefore` the ids of comments that already
 * carried the approved text at the pre-read (undefined when the pre-read could not list them).
 */
export function verifyCreatedComment(
  e: Envelope,
  ack: Acknowledgement,
  taskRead: ReadResult,
  commentsRead: ReadResult,
  beforeWrite: unknown,
  sameTextBefore: string[] | undefined,
  readAt?: string,
): CreateVerifyResult {
  const parent = verifyOutcome(e, ack, taskRead, beforeWrite, readAt);
  const approved = e.params["POST_MESSAGE"];
  // An id the pre-read already listed with the approved text names an earlier comment, not one this
  // write made: such an acknowledgement ties nothing to this write, and the comment is looked for.
  const named = createdIdOf(ack);
  const earlier = named !== undefined && sameTextBefore?.includes(named) === true ? named : undefined;
  const ackId = earlier === undefined ? named : undefined;
  const via = ackId !== undefined ? "acknowledgement" : "search";
  const field = (status: FieldCheck["status"], actual?: unknown, note?: string): FieldCheck => ({
    field: "POST_MESSAGE",
    taskKey: "POST_MESSAGE",
    role: "requested",
    expected: approved,
    ...(actual !== undefined ? { actual } : {}),
    status,
    ...(note ? { note } : {}),
    rule: normalisationRule("string-exact"),
  });
  const combine = (
    verdict: VerifyVerdict,
    own: string,
    check: FieldCheck,
    created: CreatedObject,
  ): CreateVerifyResult => {
    // The worse of the two verdicts stands: a moved watched field of the task outweighs a good comment.
    const worst = RANK[parent.verdict] > RANK[verdict] ? parent.verdict : verdict;
    const parentNote = parent.verdict === "VERIFIED" ? "" : `; the task itself: ${parent.reason}`;
    return {
      ...parent,
      verdict: worst,
      fields: [check, ...parent.fields],
      reason: `${own}${parentNote}`,
      created,
    };
  };

  if (commentsRead.status === "failed") {
    const created: CreatedObject = { type: "task_comment", id: ackId ?? null, via, newWithText: [] };
    return combine(
      "INCONCLUSIVE",
      `the comment list could not be read (${commentsRead.error.kind}: ${commentsRead.error.description}), so the comment cannot be checked`,
      field("unknown", undefined, "comment list read failed"),
      created,
    );
  }
  const listed = extractComments(commentsRead.body);
  if (!listed.ok) {
    const created: CreatedObject = { type: "task_comment", id: ackId ?? null, via, newWithText: [] };
    return combine(
      "INCONCLUSIVE",
      `cannot check the comment: ${listed.reason}`,
      field("unknown", undefined, listed.reason),
      created,
    );
  }
  const withText = commentIdsWithText(listed.comments, approved);
  const newWithText =
    sameTextBefore === undefined ? withText : withText.filter((id) => !sameTextBefore.includes(id));

  if (ackId !== undefined) {
    const ours = listed.comments.find((c) => c.id === ackId);
    const created: CreatedObject = { type: "task_comment", id: ackId, via, newWithText };
    if (!ours) {
      return combine(
        "VERIFICATION_FAILED",
        `the target acknowledged comment ${ackId}, but task ${e.object.id} has no comment ${ackId}`,
        field("not_applied", undefined, `no comment ${ackId} on the task`),
        created,
      );
    }
    const same = compareValues("POST_MESSAGE", approved, ours.message).equal;
    if (!same) {
      return combine(
        "VERIFICATION_FAILED",
        `comment ${ackId} does not carry the approved text: approved ${show(approved)}, now ${show(ours.message)}`,
        field("wrong_value", ours.message),
        created,
      );
    }
    const others = newWithText.filter((id) => id !== ackId);
    if (others.length) {
      return combine(
        "INVARIANT_VIOLATION",
        `comment ${ackId} carries the approved text, but ${others.length} more comment(s) with the same text appeared since the pre-read (${others.join(", ")}): more was posted than was approved`,
        field("applied", ours.message),
        created,
      );
    }
    return combine(
      "VERIFIED",
      `comment ${ackId} on task ${e.object.id} carries the approved text, read back after the write`,
      field("applied", ours.message),
      created,
    );
  }

  // No id from the target (or one of an earlier comment): look for what appeared.
  const ackNote = createAckNote(ack, "comment", earlier);
  if (sameTextBefore === undefined) {
    const created: CreatedObject = { type: "task_comment", id: null, via, newWithText: [] };
    return combine(
      "INCONCLUSIVE",
      `${ackNote}, and the pre-read did not list the task's comments, so a comment with the approved text (${withText.length} now) cannot be told from an earlier one`,
      field("unknown", undefined, "cannot tell a new comment from an earlier one"),
      created,
    );
  }
  if (newWithText.length === 0) {
    const created: CreatedObject = { type: "task_comment", id: null, via, newWithText };
    if (outcomeUnknown(ack)) {
      // The comment may still be posted by a write that is still in flight: not yet, not never.
      return combine(
        "INCONCLUSIVE",
        `${notYetApplied(readAt, "the comment")}: no comment with the approved text has appeared on task ${e.object.id} yet; ${ackNote}; ${MAY_STILL_LAND}`,
        field("not_applied", undefined, "no new comment with the approved text yet"),
        created,
      );
    }
    return combine(
      "VERIFICATION_FAILED",
      `the comment was not applied: no comment with the approved text appeared on task ${e.object.id}; ${ackNote}`,
      field("not_applied", undefined, "no new comment with the approved text"),
      created,
    );
  }
  if (newWithText.length > 1) {
    const created: CreatedObject = { type: "task_comment", id: null, via, newWithText };
    return combine(
      "INVARIANT_VIOLATION",
      `${newWithText.length} comments with the approved text appeared since the pre-read (${newWithText.join(", ")}): more was posted than was approved; ${ackNote}`,
      field("applied", approved),
      created,
    );
  }
  const created: CreatedObject = { type: "task_comment", id: newWithText[0]!, via, newWithText };
  return combine(
    "INCONCLUSIVE",
    `comment ${newWithText[0]} with the approved text appeared on task ${e.object.id}, but ${ackNote}, so it is not proven that this write made it`,
    field("applied", approved),
    created,
  );
}

// ── A new task (add_task) ───────────────────────────────────────────────────────────────────────────

/** Ids of the tasks in a tasks.task.list answer whose title is exactly `title` (the filter may match more). */
export function taskIdsWithTitle(
  body: unknown,
  title: unknown,
): { ok: true; ids: string[]; tasks: Map<string, Record<string, unknown>> } | { ok: false; reason: string } {
  const json = jsonOf(body);
  if (!json) return { ok: false, reason: `the task list is text, not JSON: ${describeReceived(body)}` };
  const value = json.value;
  const tasks = isRecord(value) && isRecord(value["result"]) ? value["result"]["tasks"] : undefined;
  if (!Array.isArray(tasks))
    return {
      ok: false,
      reason: `the task list answer has no "result.tasks" array: ${describeReceived(value)}`,
    };
  const found = new Map<string, Record<string, unknown>>();
  for (const t of tasks) {
    if (!isRecord(t)) continue;
    const id = normaliseId(t["id"]);
    if (id !== undefined && compareValues("TITLE", title, t["title"]).equal) found.set(id, t);
  }
  return { ok: true, ids: [...found.keys()], tasks: found };
}

/** The id a tasks.task.add acknowledgement names (`{"result":{"task":{"id":"12",…}}}`), if it names one. */
export function createdTaskIdOf(ack: Acknowledgement): string | undefined {
  const body = ackBody(ack);
  const task = isRecord(body) && isRecord(body["result"]) ? body["result"]["task"] : undefined;
  return isRecord(task) ? normaliseId(task["id"]) : undefined;
}

/**
 * Verification of a created task: the tasks carrying the approved title after the write, against those
 * that carried it at the pre-read. With the acknowledged id: that task must be among them and hold every
 * approved value, and no other new one may have appeared; an acknowledged id the pre-read already listed
 * names an earlier task and counts as no id. With the answer lost: one new task with the
 * approved values is INCONCLUSIVE (not proven that this write made it), none is not applied (or, when
 * the write's outcome is unknown, not applied yet: INCONCLUSIVE), more than one is more than approved.
 */
export function verifyCreatedTask(
  e: Envelope,
  ack: Acknowledgement,
  listRead: ReadResult,
  sameTitleBefore: string[] | undefined,
  readAt?: string,
): CreateVerifyResult & { created: { type: "task" } } {
  // An id the pre-read already listed with the approved title names an earlier task, not one this
  // write made: such an acknowledgement ties nothing to this write, and the task is looked for.
  const named = createdTaskIdOf(ack);
  const earlier = named !== undefined && sameTitleBefore?.includes(named) === true ? named : undefined;
  const ackId = earlier === undefined ? named : undefined;
  const via: CreatedObject["via"] = ackId !== undefined ? "acknowledgement" : "search";
  // The read is about the created task, not the envelope's object (id 0: "a new task", no id yet). Its
  // identity names that task once its id is known (acknowledged, or found by the search) and is a MATCH
  // only when the list read back holds it. ObjectIdentity.expected is a number: with no id known it stays
  // 0, which the case record prints as "a new task", never as a task numbered 0.
  const identityOf = (id: string | null, readBack: boolean): ObjectIdentity =>
    id === null
      ? { expected: 0, answered: null, status: "UNKNOWN" }
      : { expected: Number(id), answered: readBack ? id : null, status: readBack ? "MATCH" : "UNKNOWN" };
  const result = (
    verdict: VerifyVerdict,
    reason: string,
    fields: FieldCheck[],
    id: string | null,
    newWithText: string[],
    readBack = id !== null,
  ) => ({
    verdict,
    reason,
    fields,
    moved: [],
    identity: identityOf(id, readBack),
    created: { type: "task" as const, id, via, newWithText },
  });
  if (listRead.status === "failed")
    return result(
      "INCONCLUSIVE",
      `the task list could not be read (${listRead.error.kind}: ${listRead.error.description}), so the new task cannot be checked`,
      [],
      ackId ?? null,
      [],
      false,
    );
  const listed = taskIdsWithTitle(listRead.body, e.params["TITLE"]);
  if (!listed.ok)
    return result(
      "INCONCLUSIVE",
      `cannot check the new task: ${listed.reason}`,
      [],
      ackId ?? null,
      [],
      false,
    );
  const fresh =
    sameTitleBefore === undefined ? listed.ids : listed.ids.filter((id) => !sameTitleBefore.includes(id));
  const check = (task: Record<string, unknown>): FieldCheck[] =>
    Object.entries(e.params).map(([field, approved]) =>
      checkField(
        task,
        { field, taskKey: fieldToTaskKey(field), role: "requested", expected: approved },
        (equal) => (equal ? "applied" : "wrong_value"),
      ),
    );
  const ackNote = createAckNote(ack, "task", earlier);
  const judge = (id: string, others: string[], lead: string): ReturnType<typeof result> => {
    const fields = check(listed.tasks.get(id)!);
    const wrong = fields.filter((f) => f.status === "wrong_value");
    const unknown = fields.filter((f) => f.status === "unknown");
    if (others.length)
      return result(
        "INVARIANT_VIOLATION",
        `${lead}, but ${others.length} more new task(s) with the same title appeared (${others.join(", ")}): more was created than was approved`,
        fields,
        id,
        fresh,
      );
    if (wrong.length)
      return result(
        "VERIFICATION_FAILED",
        `task ${id} does not hold the approved values: ${wrong.map((f) => `${f.field} (approved ${JSON.stringify(f.expected)}, now ${JSON.stringify(f.actual)})`).join("; ")}`,
        fields,
        id,
        fresh,
      );
    if (unknown.length)
      return result(
        "INCONCLUSIVE",
        `cannot check ${unknown.map((f) => f.field).join(", ")} of task ${id}`,
        fields,
        id,
        fresh,
      );
    if (via === "search")
      return result(
        "INCONCLUSIVE",
        `task ${id} with the approved values appeared, but ${ackNote}, so it is not proven that this write made it`,
        fields,
        id,
        fresh,
      );
    return result(
      "VERIFIED",
      `${lead}, read back with every approved value (${Object.keys(e.params).join(", ")})`,
      fields,
      id,
      fresh,
    );
  };
  if (ackId !== undefined) {
    if (!listed.tasks.has(ackId))
      return result(
        "VERIFICATION_FAILED",
        `the target acknowledged task ${ackId}, but no task ${ackId} with the approved title exists`,
        [],
        ackId,
        fresh,
        false,
      );
    return judge(
      ackId,
      fresh.filter((id) => id !== ackId),
      `task ${ackId} was created`,
    );
  }
  if (sameTitleBefore === undefined)
    return result(
      "INCONCLUSIVE",
      `${ackNote}, and the pre-read did not list the tasks with this title, so a new one cannot be told from an earlier one`,
      [],
      null,
      [],
    );
  if (fresh.length === 0 && outcomeUnknown(ack)) {
    // The task may still be made by a write that is still in flight: not yet, not never.
    return result(
      "INCONCLUSIVE",
      `${notYetApplied(readAt, "the new task")}: no new task with the approved title has appeared yet; ${ackNote}; ${MAY_STILL_LAND}`,
      [],
      null,
      fresh,
    );
  }
  if (fresh.length === 0)
    return result(
      "VERIFICATION_FAILED",
      `the task was not created: no new task with the approved title appeared; ${ackNote}`,
      [],
      null,
      fresh,
    );
  return judge(fresh[0]!, fresh.slice(1), `task ${fresh[0]} was created`);
}

/**
 * Why a create's acknowledgement does not settle it: missing, an error, an answer naming no new id, or
 * one naming `earlier`, an object the pre-read already listed with the approved text or title.
 */
function createAckNote(ack: Acknowledgement, created: "comment" | "task", earlier?: string): string {
  if (ack.status === "MISSING") return `the acknowledgement is missing (${ack.reason})`;
  if (ack.status === "ERROR")
    return `the target answered with an error (${ack.error.kind}: ${ack.error.description}${ack.error.outcomeUnknown ? "; outcome unknown" : ""})`;
  if (earlier !== undefined) {
    const what = created === "comment" ? "text" : "title";
    return `the acknowledgement names ${created} ${earlier}, which already carried the approved ${what} at the pre-read, before this write (expected a ${created} made by this write)`;
  }
  return `the acknowledgement names no ${created} id`;
}

/**
 * When an object the portal stamped at `portalTime` was made, against an envelope made at `createdAt`.
 * The portal stamps to the second (2026-12-03T16:16:43+03:00), the envelope to the millisecond, so an
 * object stamped in the envelope's own second may have come before it or after: "same_second", which
 * cannot be told either way. Undefined for a stamp that is not a time.
 */
export function madeWhen(
  portalTime: unknown,
  createdAt: string,
): "before" | "same_second" | "after" | undefined {
  if (typeof portalTime !== "string") return undefined;
  const made = Date.parse(portalTime);
  const second = Math.floor(Date.parse(createdAt) / 1000) * 1000;
  if (!Number.isFinite(made) || !Number.isFinite(second)) return undefined;
  return made < second ? "before" : made < second + 1000 ? "same_second" : "after";
}
