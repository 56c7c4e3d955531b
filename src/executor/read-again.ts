/** The pre-read made again right before a write that a recovered run carries out (see readAgainBeforeWrite). */
import { OPERATIONS } from "../envelope/index.js";
import type { PreReadRecord } from "../envelope/records.js";
import type { ActionRow } from "../store/action-machine.js";
import { rawOf } from "../hitl/reads.js";
import type { PhaseContext } from "./phase-context.js";
import { listTitled, madeByEarlierOfSet, notExecutedWith, readAndCompare, settle } from "./settle.js";
import type { Deps } from "../runtime/deps.js";

/**
 * The pre-read again, for a write whose pre-read this run did not make (a process stopped between the
 * pre-read and the write-ahead entry, and the action is carried out on recovery), or whose object lease
 * another action took meanwhile (`because` says which): the object may have changed since, and the
 * write is only sent on a fresh MATCH. Null when it still matches (or for a
 * create, which has nothing existing to compare); otherwise the action closed NOT_EXECUTED as its
 * pre-read would have closed it, keeping the read that stopped it.
 */
export async function readAgainBeforeWrite(
  { deps, members }: PhaseContext,
  action: ActionRow,
  because = "was made by a process that stopped before writing",
): Promise<ActionRow | null> {
  if (OPERATIONS[action.envelope.operation].effect === "create")
    return readAgainBeforeCreate(deps, action, because, members ?? []);
  const { res, comparison: found } = await readAndCompare(deps, action, members ?? []);
  // A write another process recorded meanwhile is reconciled by the write step, never closed from here.
  if (found.verdict === "MATCH" || (await deps.journal.findExecution(action.envelopeHash))) return null;
  const earlier = action.progress.preRead;
  const comparison = {
    ...found,
    reason: `read again before the write, because the pre-read of ${earlier?.at ?? "an earlier run"} ${because}: ${found.reason}`,
  };
  const record: PreReadRecord = {
    ...comparison,
    verdict: comparison.verdict === "GONE" ? "MISMATCH" : comparison.verdict,
    raw: rawOf(res),
    canEdit: null,
    ...(earlier?.lease ? { lease: earlier.lease } : {}),
    at: deps.clock().toISOString(),
  };
  return settle(deps, action, record, comparison);
}

/**
 * A new task has nothing existing to compare, but what its pre-read listed can have changed: a task
 * with the approved title that appeared since (made by the action that held the object meanwhile, or by
 * anyone) would stand beside a second one if this write went out, and verification could no longer tell
 * which is this action's. Null when the tasks carrying the title are still the ones the pre-read listed.
 */
async function readAgainBeforeCreate(
  deps: Deps,
  action: ActionRow,
  because: string,
  members: readonly ActionRow[],
): Promise<ActionRow | null> {
  const earlier = action.progress.preRead;
  const title = action.envelope.params["TITLE"];
  const { listed, found } = await listTitled(deps, title);
  const known = new Set([...(earlier?.sameTextBefore ?? []), ...madeByEarlierOfSet(action, members)]);
  const appeared = found.ok ? found.ids.filter((id) => !known.has(id)) : [];
  if (found.ok && appeared.length === 0) return null;
  if (await deps.journal.findExecution(action.envelopeHash)) return null;
  const why = `read again before the write, because the pre-read of ${earlier?.at ?? "an earlier run"} ${because}`;
  const record: PreReadRecord = {
    verdict: found.ok ? "MISMATCH" : "ERROR",
    reason: found.ok
      ? `${why}: task(s) ${appeared.join(", ")} titled ${JSON.stringify(title)} appeared since; a second task of that title would follow, and which one is this approval's could not be told`
      : `${why}: the tasks titled ${JSON.stringify(title)} could not be listed (${found.reason}); nothing is created`,
    fields: [],
    moved: [],
    raw: rawOf(listed),
    canEdit: null,
    ...(found.ok ? { sameTextBefore: found.ids } : {}),
    ...(earlier?.lease ? { lease: earlier.lease } : {}),
    at: deps.clock().toISOString(),
  };
  return notExecutedWith(deps, action, record)(found?.ok ? "STALE_STATE" : "PRECHECK_ERROR", record.reason);
}
