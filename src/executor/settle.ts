/** How a pre-read ends, by its verdict: the move on to the write, or the close that keeps the read that stopped it. */
import {
  OPERATIONS,
  compareBaseline,
  compareBeforeDelete,
  taskIdsWithTitle,
  type CompareResult,
  type GoneResult,
} from "../envelope/index.js";
import type { LeaseRecord, PreReadRecord } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import { verifiedInJournal, type ActionRow } from "../store/action-machine.js";
import { closeRow, rowAfter } from "../hitl/journal-gate.js";
import { busyReason, holdObject } from "../hitl/object-lease.js";
import { readDeleted } from "../hitl/delete-reads.js";
import { readObject, toReadResult } from "../hitl/reads.js";
import { expectedEnvelope } from "../hitl/change-sets.js";
import type { McpCallResult } from "../tools/mcp-call.js";
import { normaliseId } from "../envelope/fields.js";

/**
 * Ends a pre-read by its verdict: MATCH moves the action on (decided → pre_read); any other closes it
 * NOT_EXECUTED with its own code, keeping the pre-read that stopped it.
 */
export async function settle(
  deps: Deps,
  action: ActionRow,
  record: PreReadRecord,
  comparison: CompareResult | GoneResult,
): Promise<ActionRow> {
  const close = notExecutedWith(deps, action, record);
  switch (comparison.verdict) {
    case "MATCH":
      return passed(deps, action, record);
    case "GONE":
      // What a delete removes is already gone: the state it asks for is there.
      return close("NO_CHANGE", `${comparison.reason}; nothing was sent`);
    case "MISMATCH":
      // An answer about another object is not "the task changed": it is the wrong object, named as such.
      return close(
        comparison.identity.status === "MISMATCH" ? "IDENTITY_MISMATCH" : "STALE_STATE",
        comparison.reason,
      );
    case "UNKNOWN":
      return close("PRECHECK_UNKNOWN", comparison.reason);
    case "ERROR":
      return close("PRECHECK_ERROR", comparison.reason);
    default: {
      const never: never = comparison;
      throw new Error(`unknown verdict ${JSON.stringify(never)}`);
    }
  }
}

/** Moves the action on (decided → pre_read) with the pre-read that passed (an action moved meanwhile is where the journal says). */
export async function passed(deps: Deps, action: ActionRow, record: PreReadRecord): Promise<ActionRow> {
  return rowAfter(
    deps,
    action,
    await deps.journal.moveAction(action.envelopeHash, "pre_read", { preRead: record }),
  );
}

/** Ends the action NOT_EXECUTED with `code`, keeping the pre-read that stopped it. */
export function notExecutedWith(deps: Deps, action: ActionRow, record: PreReadRecord) {
  return (
    code:
      | "NOT_PERMITTED"
      | "NO_CHANGE"
      | "ALREADY_EXECUTED"
      | "PRECHECK_UNKNOWN"
      | "STALE_STATE"
      | "IDENTITY_MISMATCH"
      | "PRECHECK_ERROR",
    reason: string,
  ): Promise<ActionRow> => closeRow(deps, action, "NOT_EXECUTED", code, reason, { preRead: record });
}

/**
 * The object's lease taken (or kept) for this action, or the action closed NOT_EXECUTED / TARGET_BUSY
 * when another approved action holds it past the wait: at the pre-read, and again before a write whose
 * lease ran out and was taken meanwhile.
 */
export async function heldOrBusy(
  deps: Deps,
  action: ActionRow,
): Promise<{ held: true; record: LeaseRecord } | { held: false; closed: ActionRow }> {
  const hold = await holdObject(deps, action);
  if (hold.held) return { held: true, record: hold.record };
  const reason = busyReason(action, hold.holder, hold.record.waitedMs);
  return { held: false, closed: await closeRow(deps, action, "NOT_EXECUTED", "TARGET_BUSY", reason) };
}

/**
 * The target read now and compared with what the approval expects: for a delete, the object it
 * removes (GONE when already gone); otherwise the object against its baseline, with what earlier
 * verified actions of a change set (`members`) wrote on it. The pre-read and the read again before a
 * recovered write make the same comparison.
 */
export async function readAndCompare(
  deps: Pick<Deps, "tools">,
  action: ActionRow,
  members: ActionRow[],
): Promise<{ res: McpCallResult; comparison: CompareResult | GoneResult }> {
  const envelope = action.envelope;
  if (OPERATIONS[envelope.operation].effect === "delete") {
    const { res } = await readDeleted(deps.tools, envelope);
    return { res, comparison: compareBeforeDelete(envelope, toReadResult(res)) };
  }
  const { res } = await readObject(deps.tools, envelope.object.type, envelope.object.id);
  return { res, comparison: compareBaseline(expectedEnvelope(action, members), toReadResult(res)) };
}

/**
 * The tasks carrying a title, as the create's pre-read, its read again and its verification list them:
 * one page of 50, newest first, asked for explicitly so that a new task is on the page even where more
 * tasks carry the title and a portal's default order differs. `found` has the tasks or why they could
 * not be listed.
 */
export async function listTitled(deps: Pick<Deps, "tools">, title: unknown) {
  const listed = await deps.tools.read("listTasks", { filter: { TITLE: title }, order: { ID: "desc" } });
  const found: ReturnType<typeof taskIdsWithTitle> = listed.ok
    ? taskIdsWithTitle(listed.body, title)
    : { ok: false, reason: `${listed.error.kind}: ${listed.error.description}` };
  return { listed, found };
}

/**
 * In a change set, the ids of what earlier VERIFIED actions of the set with the same operation created
 * (a comment, a task), as their sealed verification recorded them. Such an object is the earlier
 * action's own: it stays among the objects that carried the approved text before this write (so
 * verification does not take it for this one's), but it is not taken for this action's own write,
 * which has not been sent.
 */
export function madeByEarlierOfSet(action: ActionRow, members: readonly ActionRow[]): Set<string> {
  const index = action.set?.index;
  const out = new Set<string>();
  if (index === undefined) return out;
  for (const m of members) {
    if ((m.set?.index ?? Infinity) >= index || m.envelope.operation !== action.envelope.operation) continue;
    const id = verifiedInJournal(m) ? normaliseId(m.progress.verification?.created?.id) : undefined;
    if (id !== undefined) out.add(id);
  }
  return out;
}
