/**
 * Waiting approvals from the journal's index of registered actions: what `pending` lists. Nothing
 * here loads the graph or a checkpoint.
 */
import { allowedApprovers, requesterVerificationOf, type Envelope, type RequesterVerification } from "../envelope/index.js";
import { UsageError } from "../errors.js";
import type { ActionRow } from "../store/action-machine.js";
import type { StoreDeps } from "../runtime/deps.js";

/** What listing pending approvals reads: the stores alone. An App, a ReadApp and a StoresApp each are one. */
export interface PendingSource {
  deps: StoreDeps;
}

/** What an approval's action acts on: a task (id 0 for a new one) or a deal. */
export type PendingObject = Envelope["object"];

export interface PendingApproval {
  threadId: string;
  /** What a decision names: the envelope's hash, or for a change set the set's hash. */
  envelopeHash: string;
  revision: number;
  requestedBy: string;
  /** How the requester was established, as the sealed envelope (or set) records it; the card says the same. */
  requesterVerifiedBy: RequesterVerification;
  /**
   * Task, field names, risk level and escalation group, when the listing knows them (the journal's
   * index does). For a change set: the first action's task, every action's field names, the set's risk.
   */
  taskId?: number;
  /**
   * The object `taskId` numbers, with its kind (`{type: "deal", id: 3}`), and the operation; for a
   * change set, its first action's (each action has its own in `changeSet.actions`). Absent from
   * listings that do not know them (`pending --api`).
   */
  object?: PendingObject;
  operation?: string;
  fields?: string[];
  risk?: string;
  escalatedTo?: string | null;
  createdAt: string;
  expiresAt: string;
  expired: boolean;
  /**
   * Set when the approval is for a change set (listed once, not once per action): the set's hash (also
   * in `envelopeHash`) and its actions in order, each with its own envelope hash, object (`taskId` is its
   * id, whatever its kind; `object` adds the kind) and field names.
   */
  changeSet?: { setHash: string; actions: Array<{ actionId: string; envelopeHash: string; operation: string; taskId: number; object?: PendingObject; fields: string[] }> };
}

export interface PendingQuery {
  /** Only approvals this approver may decide (policy approvers; escalation group members for escalated ones). */
  decidableBy?: string;
  requestedBy?: string;
  /** Only approvals with an action on this task (a change set: any of its actions). */
  taskId?: number;
  /** Only approvals with an action on this deal (a change set: any of its actions). Not with `taskId`. */
  dealId?: number;
  /** Only approvals waiting longer than this many milliseconds. */
  olderThanMs?: number;
  limit?: number;
  offset?: number;
}

export interface PendingPage {
  /**
   * Matches before paging (a change set counts once; a row that fails its seal counts as one). Exact
   * whenever the listing read every matching row; past EXACT_TOTAL_ROWS matching rows only the rows up
   * to the page are read, and a change set lying wholly beyond the page counts once per action (with an
   * object filter, so does a row beyond the page about another kind of object with the same id).
   */
  total: number;
  offset: number;
  pending: PendingApproval[];
  /** Registered rows whose seal does not verify: listed by id only, never as approvals. */
  damaged: Array<{ threadId: string; envelopeHash: string }>;
}

/**
 * Waiting approvals, oldest first, from the journal's index of registered actions alone: each row's
 * integrity is its own HMAC, so no checkpoint is loaded (a thread whose run stopped between
 * registering and pausing is listed too; `approve` then says to `recover` it).
 */
export async function pendingPage(app: PendingSource, q: PendingQuery = {}): Promise<PendingPage> {
  const now = app.deps.clock().getTime();
  const limit = q.limit ?? 100;
  const offset = q.offset ?? 0;
  if (q.taskId !== undefined && q.dealId !== undefined) throw new UsageError("list approvals about one object: a task or a deal, not both");
  const object: PendingObject | undefined = q.taskId !== undefined ? { type: "task", id: q.taskId } : q.dealId !== undefined ? { type: "deal", id: q.dealId } : undefined;
  const filter = {
    ...(q.requestedBy !== undefined ? { requestedBy: q.requestedBy } : {}),
    // The journal's index filters by the object's id, whatever its kind; the kind is checked on each row read.
    ...(object !== undefined ? { objectId: object.id } : {}),
    ...(q.olderThanMs !== undefined ? { registeredBefore: new Date(now - q.olderThanMs).toISOString() } : {}),
  };
  // Entitlement is policy, not SQL: with --mine every match is read and the page cut afterwards.
  const paged = q.decidableBy === undefined;
  const rowTotal = (await app.deps.journal.listRegistered({ ...filter, limit: 0, offset: 0 })).total;
  // A change set's rows are listed as one approval, so the rows to read for a page are not known in
  // advance: read them in order until the page is full (or all of them, up to EXACT_TOTAL_ROWS, for an exact total).
  const readAll = !paged || rowTotal <= EXACT_TOTAL_ROWS;
  const wanted = offset + limit;
  const damaged: PendingPage["damaged"] = [];
  const noteDamaged = (threadId: string, envelopeHash: string) => void (damaged.some((d) => d.envelopeHash === envelopeHash) || damaged.push({ threadId, envelopeHash }));
  const all: PendingApproval[] = [];
  const seenSets = new Set<string>();
  /** Hashes of the matching rows accounted for (read, or fetched as a member of a listed set). */
  const counted = new Set<string>();
  /** A row the index's filter returns (by the object's id, not its kind): what `rowTotal` counted. */
  const inFilter = (r: ActionRow) =>
    r.phase === "registered" &&
    (q.requestedBy === undefined || r.envelope.requestedBy === q.requestedBy) &&
    (object === undefined || r.envelope.object.id === object.id) &&
    (filter.registeredBefore === undefined || r.registeredAt < filter.registeredBefore);
  /** The object asked for, of its kind: a deal (or a new task, id 0) with a task's number is not that task. */
  const about = (o: PendingObject) => object === undefined || (o.type === object.type && o.id === object.id);
  let read = 0;
  while (read < rowTotal && (readAll || all.length < wanted)) {
    const chunk = readAll ? Math.max(rowTotal - read, 1) : Math.max(wanted - all.length, 1) + 16;
    const { rows } = await app.deps.journal.listRegistered({ ...filter, limit: chunk, offset: read });
    if (rows.length === 0) break;
    read += rows.length;
    for (const a of rows) {
      counted.add(a.envelopeHash);
      if (!a.macValid) {
        noteDamaged(a.threadId, a.envelopeHash);
        continue;
      }
      if (a.set) {
        // Listed once, at its first row; every member is read (a filter may have matched only some).
        if (seenSets.has(a.set.setHash)) continue;
        seenSets.add(a.set.setHash);
        const members = await Promise.all(a.set.set.actions.map(async (x) => (x.envelopeHash === a.envelopeHash ? a : await app.deps.journal.getAction(x.envelopeHash))));
        for (const m of members) if (m && inFilter(m)) counted.add(m.envelopeHash);
        // A set is about an object when any of its actions is (the row read may be about another kind with the same id).
        if (!members.some((m) => m && inFilter(m) && about(m.envelope.object))) continue;
        const broken = a.set.set.actions.filter((x, i) => !members[i]?.macValid);
        if (broken.length > 0) {
          // A set with a member missing or failing its seal cannot be approved (INTEGRITY_CHECK_FAILED): those rows are named, the set not listed.
          for (const x of broken) noteDamaged(a.threadId, x.envelopeHash);
          continue;
        }
        if (q.decidableBy !== undefined && !mayDecide(app, a, q.decidableBy, a.set.set.actions.map((x) => x.operation))) continue;
        all.push(setApproval(a, members as ActionRow[], now));
        continue;
      }
      if (!about(a.envelope.object)) continue;
      if (q.decidableBy !== undefined && !mayDecide(app, a, q.decidableBy)) continue;
      all.push({
        threadId: a.threadId,
        envelopeHash: a.envelopeHash,
        revision: a.revision,
        requestedBy: a.envelope.requestedBy,
        requesterVerifiedBy: requesterVerificationOf(a.envelope),
        taskId: a.envelope.object.id,
        object: { ...a.envelope.object },
        operation: a.envelope.operation,
        fields: Object.keys(a.envelope.params),
        risk: a.envelope.risk.level,
        escalatedTo: a.escalatedTo,
        createdAt: a.envelope.createdAt,
        expiresAt: a.envelope.expiresAt,
        expired: Date.parse(a.envelope.expiresAt) <= now,
      });
    }
  }
  // Paged: the approvals and damaged rows met, plus each matching row not read (beyond the page).
  const total = paged ? all.length + damaged.length + Math.max(0, rowTotal - counted.size) : all.length;
  return { total, offset, pending: all.slice(offset, offset + limit), damaged };
}

/** Every waiting approval (no paging), as `pendingPage` lists them. */
export async function listPending(app: PendingSource, q: Omit<PendingQuery, "limit" | "offset"> = {}): Promise<PendingApproval[]> {
  return (await pendingPage(app, { ...q, limit: Number.MAX_SAFE_INTEGER, offset: 0 })).pending;
}

/** Rows of matching approvals read before the total is only counted (the page still lists correctly beyond it). */
export const EXACT_TOTAL_ROWS = 1_000;

/** A change set's rows (in set order) as one waiting approval, bound to the set's hash. */
function setApproval(first: ActionRow, members: ActionRow[], now: number): PendingApproval {
  const m = first.set!;
  return {
    threadId: first.threadId,
    envelopeHash: m.setHash,
    revision: m.set.revision,
    requestedBy: m.set.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(m.set),
    taskId: members[0]!.envelope.object.id,
    object: { ...members[0]!.envelope.object },
    operation: members[0]!.envelope.operation,
    fields: [...new Set(members.flatMap((x) => Object.keys(x.envelope.params)))],
    risk: m.set.risk.level,
    escalatedTo: first.escalatedTo,
    createdAt: m.set.createdAt,
    expiresAt: m.set.expiresAt,
    expired: Date.parse(m.set.expiresAt) <= now,
    changeSet: {
      setHash: m.setHash,
      actions: members.map((x) => ({ actionId: x.set?.actionId ?? "a?", envelopeHash: x.envelopeHash, operation: x.envelope.operation, taskId: x.envelope.object.id, object: { ...x.envelope.object }, fields: Object.keys(x.envelope.params) })),
    },
  };
}

function mayDecide(app: PendingSource, a: { envelope: { operation: string }; escalatedTo: string | null }, approverId: string, operations: string[] = [a.envelope.operation]): boolean {
  if (operations.some((op) => !allowedApprovers(app.deps.policy, op).has(approverId))) return false;
  return a.escalatedTo === null || (app.deps.policy.approvers.groups[a.escalatedTo] ?? []).includes(approverId);
}
