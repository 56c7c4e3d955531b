import { OPERATIONS, commentIdsWithText, extractComments, madeWhen } from "../envelope/index.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow } from "../store/action-machine.js";
import type { LeaseRecord, PreReadRecord } from "../envelope/records.js";
import { canEditFrom, rawOf } from "../hitl/reads.js";
import { closeRow, unusableApproval } from "../hitl/journal-gate.js";
import { refuseTampered, rollbackOf } from "./write.js";
import type { PhaseContext } from "./phase-context.js";
import {
  heldOrBusy,
  listTitled,
  madeByEarlierOfSet,
  notExecutedWith,
  passed,
  readAndCompare,
  settle,
} from "./settle.js";

/**
 * Phase `decided` (approved): a fresh read right before the write, of the target the journal
 * registered. Only MATCH moves the action on (decided → pre_read); MISMATCH, UNKNOWN and ERROR each
 * close it with their own code, because "changed", "could not tell" and "could not read" call for
 * different actions from a person. Expiry is judged by this server's clock. Before reading it takes
 * the object's lease (src/hitl/object-lease.ts), so no other approved action on the same task can
 * pass its own pre-read until this one is verified or closed.
 *
 * A delete's pre-read reads what it removes, which must be exactly as the envelope recorded it (which
 * the undo checked against what our run created): any difference is STALE_STATE (deleting it would
 * delete someone else's change); an object already gone ends the run with nothing sent (NO_CHANGE: the
 * state the delete asks for is already there), recorded as a MISMATCH with the baseline and said in
 * words.
 */
export async function preRead({ deps, members }: PhaseContext, action: ActionRow): Promise<ActionRow> {
  const envelope = action.envelope;
  const unusable = unusableApproval(envelope, deps.clock(), deps.portal);
  if (unusable) return closeRow(deps, action, "NOT_EXECUTED", unusable.code, unusable.reason);
  // An approved action whose write, or whose close with nothing sent, the anchor already knows (a journal put
  // back to before it): refused before any read.
  const rollback = await rollbackOf(deps, action);
  if (rollback && "reason" in rollback)
    return refuseTampered(deps, action, "ROLLBACK_DETECTED", rollback.reason, rollback.sent);

  // The object is ours from before this read until verification: another approved action on it waits,
  // and reads what we wrote.
  const hold = await heldOrBusy(deps, action);
  if (!hold.held) return hold.closed;

  const effect = OPERATIONS[envelope.operation].effect;
  if (effect === "create")
    return preReadCreate(deps, action, hold.record, madeByEarlierOfSet(action, members ?? []));
  // In a change set, what earlier verified actions of the set wrote on this task is expected here.
  const { res, comparison } = await readAndCompare(deps, action, members ?? []);
  // Only a task answer says whether the acting user may edit it; a deal's does not (the write's answer
  // will), nor does a delete's read of what it removes.
  const canEdit =
    effect !== "delete" && res.ok && envelope.object.type === "task" ? canEditFrom(res.body) : null;
  const record: PreReadRecord = {
    ...comparison,
    // What a delete removes already gone is recorded as a difference; settle closes it NO_CHANGE.
    verdict: comparison.verdict === "GONE" ? "MISMATCH" : comparison.verdict,
    raw: rawOf(res),
    canEdit,
    lease: hold.record,
    at: deps.clock().toISOString(),
  };
  if (comparison.verdict === "MATCH") {
    const close = notExecutedWith(deps, action, record);
    if (effect === "update" && envelope.object.type === "task") {
      if (canEdit === false)
        return close(
          "NOT_PERMITTED",
          `the portal reports that the acting user may not edit task ${envelope.object.id} (action.edit=false)`,
        );
      if (canEdit === null)
        return close(
          "PRECHECK_UNKNOWN",
          "the task answer does not say whether the acting user may edit it (action.edit missing)",
        );
    } else if (effect === "create_child") {
      // A comment: which comments already carry the approved text, so that verification can tell the
      // one this write makes from an earlier one even when the acknowledgement is lost.
      const listed = await deps.tools.read("listTaskComments", { taskId: envelope.object.id });
      const comments = listed.ok ? extractComments(listed.body) : null;
      record.commentsRaw = rawOf(listed);
      if (!comments?.ok) {
        const why = !listed.ok
          ? `${listed.error.kind}: ${listed.error.description}`
          : comments && !comments.ok
            ? comments.reason
            : "unreadable";
        return close(
          "PRECHECK_ERROR",
          `the comments of task ${envelope.object.id} could not be listed (${why}); without that list a lost acknowledgement could not be told from an earlier comment, so nothing is posted`,
        );
      }
      record.sameTextBefore = commentIdsWithText(comments.comments, envelope.params["POST_MESSAGE"]);
      // A comment cannot be deduplicated by the portal: one with the approved text posted since this
      // envelope was made is taken for this envelope's own (a journal put back to before its write).
      // One an earlier action of the set made (its sealed verification names it) is that action's, not this one's.
      const earlier = madeByEarlierOfSet(action, members ?? []);
      const sameText = comments.comments.filter(
        (c) => record.sameTextBefore!.includes(c.id) && !earlier.has(c.id),
      );
      const when = (c: (typeof sameText)[number]) => madeWhen(c.postDate, envelope.createdAt);
      const named = (cs: typeof sameText) => cs.map((c) => `${c.id} at ${String(c.postDate)}`).join(", ");
      const already = sameText.filter((c) => when(c) === "after");
      if (already.length > 0) {
        return close(
          "ALREADY_EXECUTED",
          `task ${envelope.object.id} already has a comment with the approved text posted after this envelope was made (comment ${named(already)}): it is taken for this approval's own, and the comment is not posted again`,
        );
      }
      const unsure = sameText.filter((c) => when(c) === "same_second");
      if (unsure.length > 0) {
        return close(
          "PRECHECK_UNKNOWN",
          `task ${envelope.object.id} has a comment with the approved text posted in the second this envelope was made (comment ${named(unsure)}); the portal stamps to the second, so whether it is this approval's own cannot be told, and the comment is not posted`,
        );
      }
    }
  }
  return settle(deps, action, record, comparison);
}

/**
 * The pre-read of a create (add_task): there is no object to compare, so nothing can be stale; what is
 * recorded is which tasks already carry the approved title, so that verification can tell the task
 * this write makes from an earlier one even when the answer is lost. A list that cannot be read stops
 * the write (PRECHECK_ERROR), because without it a lost answer could not be told apart.
 */
async function preReadCreate(
  deps: Deps,
  action: ActionRow,
  lease: LeaseRecord,
  earlier: ReadonlySet<string>,
): Promise<ActionRow> {
  const envelope = action.envelope;
  const title = envelope.params["TITLE"];
  const { listed, found } = await listTitled(deps, title);
  const base = {
    fields: [],
    moved: [],
    raw: rawOf(listed),
    canEdit: null,
    lease,
    at: deps.clock().toISOString(),
  };
  if (!found.ok) {
    const record: PreReadRecord = {
      ...base,
      verdict: "ERROR",
      reason: `the tasks titled ${JSON.stringify(title)} could not be listed (${found.reason}); without that list a lost answer could not be told from an earlier task, so nothing is created`,
    };
    return notExecutedWith(deps, action, record)("PRECHECK_ERROR", record.reason);
  }
  // A task cannot be deduplicated by the portal: one with the approved title created since this
  // envelope was made is taken for this envelope's own (a journal put back to before its write).
  const when = (id: string) => madeWhen(found.tasks.get(id)?.["createdDate"], envelope.createdAt);
  // One an earlier action of the set made (its sealed verification names it) is that action's, not this one's.
  const already = found.ids.filter((id) => when(id) === "after" && !earlier.has(id));
  const unsure = found.ids.filter((id) => when(id) === "same_second" && !earlier.has(id));
  const refuse = (
    verdict: PreReadRecord["verdict"],
    reason: string,
    code: Parameters<ReturnType<typeof notExecutedWith>>[0],
    why: string,
  ) => notExecutedWith(deps, action, { ...base, verdict, reason, sameTextBefore: found.ids })(code, why);
  if (already.length > 0)
    return refuse(
      "MATCH",
      `task(s) ${already.join(", ")} with the approved title were created after this envelope was made`,
      "ALREADY_EXECUTED",
      `a task titled ${JSON.stringify(title)} was created after this envelope was made (task ${already.join(", ")}): it is taken for this approval's own, and the task is not created again`,
    );
  if (unsure.length > 0)
    return refuse(
      "UNKNOWN",
      `task(s) ${unsure.join(", ")} with the approved title were created in the second this envelope was made`,
      "PRECHECK_UNKNOWN",
      `a task titled ${JSON.stringify(title)} was created in the second this envelope was made (task ${unsure.join(", ")}); the portal stamps to the second, so whether it is this approval's own cannot be told, and the task is not created`,
    );
  const record: PreReadRecord = {
    ...base,
    verdict: "MATCH",
    reason: `creates a new task: nothing existing to compare; ${found.ids.length} task(s) already carry this title (${found.ids.join(", ") || "none"}) and will not be taken for the new one`,
    sameTextBefore: found.ids,
  };
  return passed(deps, action, record);
}
