/**
 * The read that shows what a delete removes, by code (src/envelope/deleted.ts judges it): a comment
 * through its task's comment list (a list that was read and lacks it says "gone" positively, where
 * task.commentitem.get answers one error for a missing comment, task or access alike), a task
 * through tasks.task.get (`result: []` when it is gone).
 */
import {
  canonicalJson,
  compareBeforeDelete,
  locateDeleted,
  OPERATIONS,
  type Envelope,
  type OperationName,
  type SubjectRead,
} from "../envelope/index.js";
import type { McpCallResult } from "../tools/mcp-call.js";
import type { Bitrix24Tools } from "../tools/bitrix24-tools.js";
import { toReadResult, type BaselineRead } from "./reads.js";

export async function readDeleted(
  tools: Pick<Bitrix24Tools, "read">,
  e: { operation: OperationName; object: { id: number }; params: Record<string, unknown> },
): Promise<{ res: McpCallResult; located: SubjectRead }> {
  const res =
    OPERATIONS[e.operation].deletes === "task_comment"
      ? await tools.read("listTaskComments", { taskId: e.object.id })
      : await tools.read("getTask", { taskId: e.object.id });
  return { res, located: locateDeleted(e, toReadResult(res)) };
}

/**
 * The baseline of a delete built again from an earlier revision of the same delete (a fresh envelope
 * after an expired approval was escalated): what it removes must still be exactly as that revision
 * recorded it, which the undo had checked against what our run created. `earlier` are the envelopes
 * that may be that revision; one of the same operation, object and params is. A delete with no such
 * earlier revision is refused: only an undo proposes one (src/hitl/compensation.ts), whatever graph
 * state says.
 */
export async function deleteBaselineFrom(
  tools: Pick<Bitrix24Tools, "read">,
  earlier: readonly Envelope[],
  proposal: { operation: OperationName; taskId: number; fields: Record<string, unknown> },
): Promise<BaselineRead> {
  const previous = earlier.find(
    (e) =>
      e.operation === proposal.operation &&
      e.object.id === proposal.taskId &&
      canonicalJson(e.params) === canonicalJson(proposal.fields),
  );
  if (!previous)
    return {
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: `${proposal.operation} is proposed only by an undo, as the delete of what our run created; this one is not`,
    };
  const { res, located } = await readDeleted(tools, previous);
  const c = compareBeforeDelete(previous, toReadResult(res));
  switch (c.verdict) {
    case "MATCH":
      return located.status === "present"
        ? { ok: true, object: located.object }
        : { ok: false, code: "BASELINE_READ_FAILED", reason: c.reason };
    case "GONE":
      return { ok: false, code: "NO_CHANGE", reason: c.reason };
    case "MISMATCH":
      return { ok: false, code: "STALE_STATE", reason: c.reason };
    case "UNKNOWN":
    case "ERROR":
      return { ok: false, code: "BASELINE_READ_FAILED", reason: c.reason };
    default: {
      const never: never = c;
      throw new Error(`unknown verdict ${JSON.stringify(never)}`);
    }
  }
}
