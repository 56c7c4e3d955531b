/**
 * Undo of a verified action, read from the journal only: which action a thread's undo restores, and
 * the proposal that restores it (src/envelope/compensation.ts). Used by `undo <thread>` before it
 * starts anything, and again by build_envelope, which trusts only the journal's sealed rows.
 */
import {
  changedSinceCreated,
  changedSinceWrite,
  compensationOf,
  deletionOf,
  type ChangedSinceWrite,
  type CompensationPlan,
  type DeletePlan,
} from "../envelope/compensation.js";
import { TARGETS } from "../envelope/targets.js";
import { OPERATIONS, objectNamed } from "../envelope/operations.js";
import { deleteSubjectOf } from "../envelope/delete-subjects.js";
import type { Policy } from "../envelope/policy.js";
import type { ActionRow } from "../store/action-machine.js";
import { setMembersOf } from "../store/action-rows.js";
import type { Journal } from "../store/journal.js";
import type { ProposalRecord, ReasonCode } from "../envelope/records.js";
import { readObject, unreadBaseline, type BaselineRead } from "./reads.js";
import { readDeleted } from "./delete-reads.js";
import type { Bitrix24Tools } from "../tools/bitrix24-tools.js";

type Restore = Extract<CompensationPlan, { ok: true }>;
/** One part of an undo: a restore of an update, or the delete of what a create made. */
export type UndoPart = Restore | DeletePlan;

export function isDeletePart(p: UndoPart): p is DeletePlan {
  return "deletedId" in p;
}

export type UndoPlan =
  | {
      ok: true;
      original: ActionRow;
      proposal: ProposalRecord;
      /**
       * For a change set: one restore per object its VERIFIED reversible updates changed (in the set's
       * order of first change), then one delete per object its VERIFIED creates made where the policy
       * allows that delete (irreversible, so after every restore: the chain rule), which `proposal`
       * proposes. The undo is then itself a change set when it has more than one part.
       */
      parts: Array<{ plan: UndoPart; proposal: ProposalRecord }>;
      /** Actions of the set that are not undone, and why (a delete the policy denies, an unverified action, …). */
      skipped: string[];
      /** The request's scope for the undo thread: the restored tasks and fields. */
      scope: { taskIds?: number[]; dealIds?: number[]; fields: string[] };
    }
  | { ok: false; code: "NO_SUCH_THREAD" | "NOT_UNDOABLE" | "INTEGRITY_CHECK_FAILED"; reason: string };

/** How a run that cannot undo ends: a record failing its seal is tampering; anything else is NOT_UNDOABLE. */
export function undoEndingCode(code: Extract<UndoPlan, { ok: false }>["code"]): ReasonCode {
  return code === "INTEGRITY_CHECK_FAILED" ? "ENVELOPE_TAMPERED" : "NOT_UNDOABLE";
}

/**
 * The undo of thread `threadId`'s verified action, or why there is none. `policy` decides whether what
 * a create made may be deleted.
 */
export async function undoPlanFor(
  journal: Pick<Journal, "getThread" | "currentAction" | "getAction">,
  threadId: string,
  envelopeHash: string | undefined,
  policy: Policy,
): Promise<UndoPlan> {
  const thread = await journal.getThread(threadId);
  if (!thread) return { ok: false, code: "NO_SUCH_THREAD", reason: `no thread ${threadId} in the journal` };
  const action = envelopeHash ? await journal.getAction(envelopeHash) : await journal.currentAction(threadId);
  if (!action || action.threadId !== threadId)
    return {
      ok: false,
      code: "NOT_UNDOABLE",
      reason: `thread ${threadId} has no action${envelopeHash ? ` ${envelopeHash}` : ""} to undo`,
    };
  if (!action.macValid || !thread.macValid) {
    return {
      ok: false,
      code: "INTEGRITY_CHECK_FAILED",
      reason: `the journal's record of thread ${threadId} fails its seal; nothing is proposed from it`,
    };
  }
  if (action.set) return undoOfSet(journal, threadId, action, policy);
  const closed = action.progress.closed;
  if (action.phase !== "closed" || closed?.outcome !== "VERIFIED") {
    const where = closed ? `ended ${closed.outcome} (${closed.reasonCode})` : `is ${action.phase}`;
    return {
      ok: false,
      code: "NOT_UNDOABLE",
      reason: `only a VERIFIED change can be undone; thread ${threadId} ${where}`,
    };
  }
  const plan = partOf(action, policy);
  if (!plan.ok) return { ok: false, code: "NOT_UNDOABLE", reason: `thread ${threadId}: ${plan.reason}` };
  const proposal = proposalOf(
    plan,
    isDeletePart(plan)
      ? `undo of thread ${threadId} (envelope ${action.envelopeHash}): delete ${deletedLabel(plan)}, which its write created`
      : `undo of thread ${threadId} (envelope ${action.envelopeHash}): restore the values recorded before its write`,
  );
  return {
    ok: true,
    original: action,
    proposal,
    parts: [{ plan, proposal }],
    skipped: [],
    scope: scopeOf([plan]),
  };
}

/** The undo of one verified action: a restore of an update, or the delete of what a create made. */
function partOf(m: ActionRow, policy: Policy): UndoPart | { ok: false; reason: string } {
  const effect = OPERATIONS[m.envelope.operation].effect;
  switch (effect) {
    case "update":
    case "delete":
      // A delete is never undone (compensationOf refuses it as irreversible).
      return compensationOf(m.envelope, m.progress.verification?.raw);
    case "create":
    case "create_child":
      return deletionOf(m.envelope, m.progress.verification, policy);
    default: {
      const never: never = effect;
      throw new Error(`unknown effect ${String(never)}`);
    }
  }
}

/** The proposal an undo part is, proposed by code with `rationale`. */
function proposalOf(p: UndoPart, rationale: string): ProposalRecord {
  return { operation: p.operation, taskId: p.taskId, fields: p.fields, rationale, source: "compensation" };
}

/** What a delete removes, named as its subject names it (src/envelope/deleted.ts): "comment 12 of task 4", "task 9". */
function deletedLabel(p: DeletePlan): string {
  return deleteSubjectOf(p.operation)!.label(p.taskId, Number(p.deletedId));
}

/**
 * The fresh read an undo part is built on, and whether the object is still what our run left: for a
 * restore, the object exactly as our write left it (changedSinceWrite); for a delete, the object
 * exactly as our run created it (changedSinceCreated), or already gone (NO_CHANGE: nothing to delete).
 * The object returned is the envelope's baseline read.
 */
export async function readUndoPart(
  tools: Pick<Bitrix24Tools, "read">,
  plan: UndoPart,
): Promise<BaselineRead> {
  if (isDeletePart(plan)) {
    const { res, located } = await readDeleted(tools, {
      operation: plan.operation,
      object: { id: plan.taskId },
      params: plan.fields,
    });
    const what = deletedLabel(plan);
    switch (located.status) {
      case "gone":
        return {
          ok: false,
          code: "NO_CHANGE",
          reason: `${located.reason}: ${what} is already gone, so there is nothing to delete`,
        };
      case "failed":
      case "unknown":
        return unreadBaseline(what, res, located.reason);
      case "present": {
        const changed = changedSinceCreated(plan, located.object);
        if (changed.length > 0)
          return {
            ok: false,
            code: "STALE_STATE",
            reason: `${what} changed after our run created it, so deleting it would delete someone else's change: ${describeChanges(changed, "we created")}`,
          };
        return { ok: true, object: located.object };
      }
      default: {
        const never: never = located;
        throw new Error(`unknown read ${JSON.stringify(never)}`);
      }
    }
  }
  const { res, object } = await readObject(tools, plan.type, plan.taskId);
  if (!object) return unreadBaseline(`${plan.type} ${plan.taskId}`, res);
  const changed = changedSinceWrite(plan, object);
  if (changed.length > 0)
    return {
      ok: false,
      code: "STALE_STATE",
      reason: `${plan.type} ${plan.taskId} changed after the write being undone, so restoring it would overwrite someone else's change: ${describeChanges(changed, "we wrote", true)}`,
    };
  return { ok: true, object };
}

/**
 * Each difference with what it was and is: `ours` labels our value; with `onlyWritten`, only for a field
 * our write set, and any other (which we did not write) is labelled as our verification read it.
 */
function describeChanges(changed: ChangedSinceWrite[], ours: string, onlyWritten = false): string {
  const label = (c: ChangedSinceWrite) =>
    c.marker || (onlyWritten && !c.written) ? "at our verification" : ours;
  return changed
    .map((c) => `${c.field} (${label(c)} ${JSON.stringify(c.ours)}, now ${JSON.stringify(c.now)})`)
    .join("; ");
}

/**
 * The undo of a finished change set: every VERIFIED reversible update is restored, one restore per
 * task (each field back to the value recorded before the set, which every action of the set read at
 * the same moment), expecting the task exactly as the set's last verification read of it left it.
 * What a VERIFIED create made is deleted where the policy allows that delete (after every restore);
 * where it does not, and for an action that did not verify, nothing is done and the action is named.
 */
async function undoOfSet(
  journal: Pick<Journal, "getAction">,
  threadId: string,
  action: ActionRow,
  policy: Policy,
): Promise<UndoPlan> {
  const set = action.set!;
  const members = await setMembersOf(action, (h) => journal.getAction(h));
  if (members.length !== set.set.actions.length || members.some((m) => !m.macValid)) {
    return {
      ok: false,
      code: "INTEGRITY_CHECK_FAILED",
      reason: `the journal's rows of change set ${set.setHash} are missing or fail their seal; nothing is proposed from them`,
    };
  }
  if (members.some((m) => m.phase !== "closed"))
    return {
      ok: false,
      code: "NOT_UNDOABLE",
      reason: `change set ${set.setHash} of thread ${threadId} has not finished`,
    };
  // Keyed by object (kind and id): one restore per task or deal.
  const byTask = new Map<
    string,
    { fields: Record<string, unknown>; wrote: Record<string, unknown>; last: ActionRow; restore?: Restore }
  >();
  const keyOf = (m: ActionRow) => `${m.envelope.object.type}:${m.envelope.object.id}`;
  const skipped: string[] = [];
  const deletes: DeletePlan[] = [];
  for (const m of members) {
    const what = `${m.set?.actionId ?? m.envelopeHash} (${m.envelope.operation} on ${objectNamed(m.envelope.operation, m.envelope.object.id)})`;
    const closed = m.progress.closed!;
    // The latest verification read of each task, whatever the action: the state the set left it in.
    const entry = byTask.get(keyOf(m));
    if (entry && closed.outcome === "VERIFIED") entry.last = m;
    if (closed.outcome !== "VERIFIED") {
      skipped.push(`${what} ended ${closed.outcome} (${closed.reasonCode}): nothing of it to undo`);
      continue;
    }
    const found = partOf(m, policy);
    if (!found.ok) {
      skipped.push(`${what} is not undone: ${found.reason}`);
      continue;
    }
    if (isDeletePart(found)) {
      deletes.push(found);
      continue;
    }
    const plan = found;
    const part = entry ?? { fields: {}, wrote: {}, last: m };
    part.restore ??= plan;
    // The value before the set is the earliest action's record; what the set left is the latest write.
    for (const [f, v] of Object.entries(plan.fields)) if (!(f in part.fields)) part.fields[f] = v;
    Object.assign(part.wrote, plan.wrote);
    part.last = m;
    byTask.set(keyOf(m), part);
  }
  const parts = [...byTask.values()]
    .filter((p) => p.restore !== undefined && Object.keys(p.fields).length > 0)
    .map((p) => {
      const r = p.restore!;
      const plan: Restore = {
        ok: true,
        operation: r.operation,
        type: r.type,
        taskId: r.taskId,
        fields: p.fields,
        wrote: p.wrote,
        afterWrite: afterWriteOf(p.last) ?? r.afterWrite,
      };
      const rationale = `undo of change set ${set.setHash} (thread ${threadId}) on ${r.type} ${r.taskId}: restore the values recorded before the set`;
      return { plan: plan as UndoPart, proposal: proposalOf(plan, rationale) };
    });
  // Deletes are irreversible: after every restore (the chain rule runs them only once those verified),
  // the newest creation first.
  for (const d of deletes.reverse()) {
    const rationale = `undo of change set ${set.setHash} (thread ${threadId}): delete ${deletedLabel(d)}, which the set created`;
    parts.push({ plan: d, proposal: proposalOf(d, rationale) });
  }
  if (parts.length === 0)
    return {
      ok: false,
      code: "NOT_UNDOABLE",
      reason: `change set ${set.setHash} of thread ${threadId} has nothing to undo: ${skipped.join("; ")}`,
    };
  const first = parts[0]!;
  return {
    ok: true,
    original: action,
    proposal:
      parts.length > 1
        ? {
            ...first.proposal,
            actions: parts.map((p) => ({
              operation: p.plan.operation,
              taskId: p.plan.taskId,
              fields: p.plan.fields,
            })),
          }
        : first.proposal,
    parts,
    skipped,
    scope: scopeOf(parts.map((p) => p.plan)),
  };
}

/** The object as an action's verification read it (also for a comment, whose verification reads the task). */
function afterWriteOf(row: ActionRow): Record<string, unknown> | null {
  const x = TARGETS[row.envelope.object.type].extract(row.progress.verification?.raw, row.envelope.object.id);
  return x.ok ? x.object : null;
}

/**
 * A request that asks for an undo: `undo thread <id>` (also `undo <id>`), alone on its line. Any
 * interface that can start a run (CLI, API, Studio's chat) can ask for one this way; the thread id
 * is all it carries, and the proposal is still built by code from the journal.
 */
export function undoRequestOf(request: string): string | undefined {
  const m = /^\s*undo(?:\s+thread)?\s+([A-Za-z0-9][A-Za-z0-9._:-]{0,127})\s*$/i.exec(request);
  return m ? m[1] : undefined;
}

export const undoRequest = (threadId: string): string => `undo thread ${threadId}`;

/** An undo thread's scope: exactly the objects (tasks, deals) and fields it restores. */
function scopeOf(plans: UndoPart[]): { taskIds?: number[]; dealIds?: number[]; fields: string[] } {
  const ids = (type: string) => [...new Set(plans.filter((p) => p.type === type).map((p) => p.taskId))];
  return {
    // A kind that is not restored gets an empty list: the undo may touch none of it.
    taskIds: ids("task"),
    dealIds: ids("deal"),
    fields: [...new Set(plans.flatMap((p) => Object.keys(p.fields)))],
  };
}
