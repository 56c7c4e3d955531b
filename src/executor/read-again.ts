/** The pre-read made again right before a write that a recovered run carries out (see readAgainBeforeWrite). */
import { OPERATIONS } from "../envelope/index.js";
import type { PreReadRecord } from "../envelope/records.js";
import type { ActionRow } from "../store/action-machine.js";
import { rawOf } from "../hitl/reads.js";
import type { PhaseContext } from "./phase-context.js";
import { readAndCompare, settle } from "./settle.js";

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
  if (OPERATIONS[action.envelope.operation].effect === "create") return null;
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
