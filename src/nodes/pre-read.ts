import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { compareBaseline } from "../envelope/index.js";
import { approvedEnvelopeProblem } from "../hitl/approved-envelope.js";
import { canEditFrom, rawOf, toReadResult } from "../hitl/reads.js";
import type { PreReadRecord } from "../hitl/records.js";
import { endRun } from "./finish-with.js";

/**
 * A fresh read right before the write. Only MATCH continues; MISMATCH, UNKNOWN and ERROR each end the
 * run with their own code, because "changed", "could not tell" and "could not read" call for
 * different actions from a person.
 */
export async function preRead(state: State): Promise<Update> {
  const deps = await getDeps();
  const envelope = state.envelope!;
  const now = deps.clock();
  if (now.getTime() >= Date.parse(envelope.expiresAt)) {
    return endRun("NOT_EXECUTED", "APPROVAL_EXPIRED", `the approval expired at ${envelope.expiresAt}, before the write (now ${now.toISOString()})`);
  }
  const problem = await approvedEnvelopeProblem(envelope, deps.journal);
  if (problem) return endRun("NOT_EXECUTED", "ENVELOPE_TAMPERED", problem);
  if (envelope.portal !== deps.portal) {
    return endRun("NOT_EXECUTED", "WRONG_TARGET", `the envelope was approved for portal ${envelope.portal}, but this process is connected to ${deps.portal}`);
  }

  const res = await deps.tools.read("getTask", { taskId: envelope.object.id });
  const comparison = compareBaseline(envelope, toReadResult(res));
  const canEdit = res.ok ? canEditFrom(res.body) : null;
  const record: PreReadRecord = { ...comparison, raw: rawOf(res), canEdit, at: deps.clock().toISOString() };
  switch (comparison.verdict) {
    case "MATCH":
      if (canEdit === false) {
        return { preRead: record, ...endRun("NOT_EXECUTED", "NOT_PERMITTED", `the portal reports that the acting user may not edit task ${envelope.object.id} (action.edit=false)`) };
      }
      if (canEdit === null) {
        return { preRead: record, ...endRun("NOT_EXECUTED", "PRECHECK_UNKNOWN", "the task answer does not say whether the acting user may edit it (action.edit missing)") };
      }
      return { preRead: record };
    case "MISMATCH":
      return { preRead: record, ...endRun("NOT_EXECUTED", "STALE_STATE", comparison.reason) };
    case "UNKNOWN":
      return { preRead: record, ...endRun("NOT_EXECUTED", "PRECHECK_UNKNOWN", comparison.reason) };
    case "ERROR":
      return { preRead: record, ...endRun("NOT_EXECUTED", "PRECHECK_ERROR", comparison.reason) };
    default: {
      const never: never = comparison.verdict;
      throw new Error(`unknown verdict ${String(never)}`);
    }
  }
}
