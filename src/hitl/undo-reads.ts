/**
 * An undo thread's first proposal, from the journal's record of the action it compensates: every part
 * read fresh and checked before anything is shown. A restore expects its object exactly as our write
 * left it, a delete expects what it removes exactly as our run created it; anyone's later change ends
 * the undo STALE_STATE. What a delete would remove that is already gone is left out of a set and named;
 * a single undo of it ends NO_CHANGE.
 */
import { undoSetNote } from "../envelope/card-notes.js";
import type { ProposalRecord, ReasonCode } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import { baselineKeyOf, withActionIds, type PlannedAction } from "./change-sets.js";
import { isDeletePart, readUndoPart, undoEndingCode, undoPlanFor, type UndoPart } from "./compensation.js";

/** One part of an undo with the object its fresh read found. */
export interface UndoPartRead {
  plan: UndoPart;
  proposal: ProposalRecord;
  object: Record<string, unknown>;
}

/**
 * What an undo builds: nothing to build (the run ends), a change set of restores (and deletes, after
 * them) with the reads each expects, or one part (none on a thread that is no undo's first proposal)
 * and what was not undone.
 */
export type UndoReads =
  | { ended: { code: ReasonCode; reason: string } }
  | { set: { actions: PlannedAction[]; note: string; reads: Map<string, Record<string, unknown>> } }
  | { part: UndoPartRead | undefined; notUndone: string[] };

/** Plans and reads the undo a thread's first proposal is, when the thread compensates another. */
export async function readUndo(
  deps: Deps,
  thread: ThreadRecord,
  previous: ActionRow | undefined,
): Promise<UndoReads> {
  if (!thread.compensates || previous) return { part: undefined, notUndone: [] };
  const { threadId, envelopeHash } = thread.compensates;
  const undo = await undoPlanFor(deps.journal, threadId, envelopeHash, deps.policy);
  if (!undo.ok) return { ended: { code: undoEndingCode(undo.code), reason: undo.reason } };
  const parts: UndoPartRead[] = [];
  const gone: string[] = [];
  for (const part of undo.parts) {
    const read = await readUndoPart(deps.tools, part.plan);
    if (read.ok) parts.push({ ...part, object: read.object });
    else if (read.code === "NO_CHANGE" && undo.parts.length > 1) gone.push(read.reason);
    else return { ended: { code: read.code, reason: read.reason } };
  }
  const notUndone = [...undo.skipped, ...gone];
  if (parts.length > 1) {
    // The undo of a change set that changed several objects: a change set of restores (and deletes,
    // after them), each expecting its object exactly as checked above.
    const planned = parts.map((p) => ({
      operation: p.plan.operation,
      taskId: p.plan.taskId,
      fields: p.plan.fields,
    }));
    return {
      set: {
        actions: withActionIds(planned),
        note: undoSetNote(
          threadId,
          undo.original.set?.setHash,
          parts.some((p) => isDeletePart(p.plan)),
          notUndone,
        ),
        reads: new Map(parts.map((p, i) => [baselineKeyOf(planned[i]!), p.object] as const)),
      },
    };
  }
  if (parts.length === 0)
    return { ended: { code: "NOT_UNDOABLE", reason: `nothing left to undo: ${notUndone.join("; ")}` } };
  return { part: parts[0], notUndone };
}
