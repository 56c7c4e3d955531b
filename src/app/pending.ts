/**
 * Waiting approvals from the journal's index of registered actions: what `pending` lists. Nothing
 * here loads the graph or a checkpoint.
 */
import {
  allowedApprovers,
  requesterVerificationOf,
  type Envelope,
  type Policy,
  type RequesterVerification,
} from "../envelope/index.js";
import { UsageError } from "../errors.js";
import type { ActionRow } from "../store/action-machine.js";
import {
  keyBefore,
  registeredRows,
  type RegisteredFilter,
  type RegisteredKey,
} from "../store/waiting-list.js";
import type { StoreDeps } from "../runtime/deps.js";
import type { ApprovalRequest } from "../hitl/contract.js";
import { approvalBinding } from "../hitl/approval-request.js";

/** What listing pending approvals reads: the stores alone. An App and a ReadApp each are one. */
export interface PendingSource {
  deps: StoreDeps;
}

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
  object?: Envelope["object"];
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
  changeSet?: {
    setHash: string;
    actions: Array<{
      actionId: string;
      envelopeHash: string;
      operation: string;
      taskId: number;
      object?: Envelope["object"];
      fields: string[];
    }>;
  };
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
  /** Approvals to pass over before the page (read through, in order); `cursor` is the way to page. */
  offset?: number;
  /** Where the page starts: the `next` of the page before it. */
  cursor?: string;
}

export interface PendingPage {
  /**
   * Matching approvals, counted in SQL (a change set once; a row that fails its seal as one). With
   * `decidableBy`, a change set counts when the approver may decide one of its operations; the page lists
   * it only when they may decide all of them.
   */
  total: number;
  offset: number;
  pending: PendingApproval[];
  /**
   * Registered rows whose seal does not verify, met in this page's stretch of the order (from its
   * cursor up to its last approval): listed by id only, never as approvals, and never moving a page.
   */
  damaged: Array<{ threadId: string; envelopeHash: string }>;
  /** The cursor of the next page (`--cursor`), or null when nothing follows. */
  next: string | null;
}

/**
 * A page being listed: the total, then the approvals one at a time as they are read (so a caller can
 * write each out and keep none), then the damaged rows met and the next cursor.
 */
export interface PendingListing {
  total: number;
  offset: number;
  approvals: AsyncGenerator<PendingApproval, void>;
  /** Valid once `approvals` is done. */
  end(): { damaged: PendingPage["damaged"]; next: string | null };
}

/** Rows read per query while a page is filled. */
const CHUNK_ROWS = 256;

/**
 * Waiting approvals, oldest first, from the journal's index of registered actions alone: each row's
 * integrity is its own HMAC, so no checkpoint is loaded (a thread whose run stopped between
 * registering and pausing is listed too; `approve` then says to `recover` it). Pages by a keyset cursor
 * over (registered_at, envelope hash): rows arriving between pages come after the cursor, so none is
 * skipped or listed twice; memory holds one chunk of rows, whatever the number listed.
 */
export async function pendingListing(app: PendingSource, q: PendingQuery = {}): Promise<PendingListing> {
  const now = app.deps.clock().getTime();
  const limit = q.limit ?? 100;
  const offset = q.offset ?? 0;
  const filter = filterOf(app, q, now);
  const after = q.cursor !== undefined ? cursorKey(q.cursor) : undefined;
  const total = await app.deps.journal.countRegistered(filter);
  const journal = app.deps.journal;
  const damaged: PendingPage["damaged"] = [];
  let next: string | null = null;
  const noteDamaged = (threadId: string, envelopeHash: string) =>
    void (damaged.some((d) => d.envelopeHash === envelopeHash) || damaged.push({ threadId, envelopeHash }));

  async function* approvals(): AsyncGenerator<PendingApproval, void> {
    let passed = 0;
    let listed = 0;
    for await (const a of registeredRows(
      (f) => journal.listRegistered(f),
      { ...filter, ...(after ? { after } : {}) },
      CHUNK_ROWS,
    )) {
      const skipping = passed < offset;
      const approval = await approvalAt(
        app,
        a,
        filter,
        q.decidableBy,
        now,
        skipping ? () => undefined : noteDamaged,
      );
      if (!approval) continue;
      if (skipping) {
        passed += 1;
        continue;
      }
      yield approval;
      listed += 1;
      if (listed >= limit) {
        const at = keyOf(a);
        next =
          (await journal.listRegistered({ ...filter, after: at, limit: 1 })).length > 0 ? cursorOf(at) : null;
        return;
      }
    }
  }
  return { total, offset, approvals: approvals(), end: () => ({ damaged, next }) };
}

/** The query as SQL filters it: requester, object, age and, for `decidableBy`, operations and escalation groups. */
function filterOf(app: PendingSource, q: PendingQuery, now: number): RegisteredFilter {
  if (q.taskId !== undefined && q.dealId !== undefined)
    throw new UsageError("list approvals about one object: a task or a deal, not both");
  const object =
    q.taskId !== undefined
      ? { type: "task", id: q.taskId }
      : q.dealId !== undefined
        ? { type: "deal", id: q.dealId }
        : undefined;
  return {
    ...(q.requestedBy !== undefined ? { requestedBy: q.requestedBy } : {}),
    ...(object !== undefined ? { object } : {}),
    ...(q.olderThanMs !== undefined ? { registeredBefore: new Date(now - q.olderThanMs).toISOString() } : {}),
    ...(q.decidableBy !== undefined ? { decidable: decidableIn(app.deps.policy, q.decidableBy) } : {}),
  };
}

/**
 * The approver's entitlement as SQL can test it: the operations the policy names that they may decide
 * (or, when its default approvers include them, those it names that they may not: every other
 * operation falls to the default), and the escalation groups they belong to.
 */
export function decidableIn(policy: Policy, approverId: string): NonNullable<RegisteredFilter["decidable"]> {
  const named = Object.keys(policy.operations);
  const d = policy.approvers;
  const byDefault =
    d.approverIds.includes(approverId) ||
    d.approverGroups.some((g) => (d.groups[g] ?? []).includes(approverId));
  const operations = named.filter((op) => allowedApprovers(policy, op).has(approverId) !== byDefault);
  const groups = Object.entries(policy.approvers.groups)
    .filter(([, members]) => members.includes(approverId))
    .map(([g]) => g);
  return { operations, exclude: byDefault, groups };
}

/** Whether a checked row matches the filter: the same test SQL made on the unchecked row. */
function matches(r: ActionRow, f: RegisteredFilter): boolean {
  const e = r.envelope;
  return (
    r.phase === "registered" &&
    (f.requestedBy === undefined || e.requestedBy === f.requestedBy) &&
    (f.object === undefined || (e.object.type === f.object.type && e.object.id === f.object.id)) &&
    (f.registeredBefore === undefined || r.registeredAt < f.registeredBefore) &&
    (f.decidable === undefined ||
      (f.decidable.operations.includes(e.operation) !== f.decidable.exclude &&
        (r.escalatedTo === null || f.decidable.groups.includes(r.escalatedTo))))
  );
}

/**
 * The approval listed at row `a`, or undefined: a damaged row (noted), a change set listed at another
 * of its rows, or one the approver may not decide. A change set is listed once, at the first of its
 * rows (in listing order) the filter matches, so it never appears on two pages.
 */
async function approvalAt(
  app: PendingSource,
  a: ActionRow,
  filter: RegisteredFilter,
  decidableBy: string | undefined,
  now: number,
  noteDamaged: (threadId: string, envelopeHash: string) => void,
): Promise<PendingApproval | undefined> {
  if (!a.macValid) return void noteDamaged(a.threadId, a.envelopeHash);
  if (a.set) {
    const members = await Promise.all(
      a.set.set.actions.map(async (x) =>
        x.envelopeHash === a.envelopeHash ? a : await app.deps.journal.getAction(x.envelopeHash),
      ),
    );
    const first = members
      .filter((m): m is ActionRow => m !== undefined && m.macValid && matches(m, filter))
      .reduce((x, m) => (keyBefore(keyOf(m), keyOf(x)) ? m : x), a);
    if (first !== a) return undefined;
    const broken = a.set.set.actions.filter((x, i) => !members[i]?.macValid);
    if (broken.length > 0) {
      // A set with a member missing or failing its seal cannot be approved (INTEGRITY_CHECK_FAILED): those rows are named, the set not listed.
      for (const x of broken) noteDamaged(a.threadId, x.envelopeHash);
      return undefined;
    }
    const operations = a.set.set.actions.map((x) => x.operation);
    if (decidableBy !== undefined && !mayDecide(app, a, decidableBy, operations)) return undefined;
    const actions = (members as ActionRow[]).map((x) => ({
      actionId: x.set?.actionId ?? "a?",
      envelopeHash: x.envelopeHash,
      envelope: x.envelope,
    }));
    const bound = { ...approvalBinding(a), envelope: members[0]!.envelope, changeSet: { ...a.set, actions } };
    return listedApproval(a.threadId, bound, now, a.escalatedTo);
  }
  if (decidableBy !== undefined && !mayDecide(app, a, decidableBy)) return undefined;
  return listedApproval(a.threadId, { ...approvalBinding(a), envelope: a.envelope }, now, a.escalatedTo);
}

const keyOf = (r: ActionRow): RegisteredKey => ({
  registeredAt: r.registeredAt,
  envelopeHash: r.envelopeHash,
});

/** A page's cursor: the key of its last row, opaque to the caller (base64url of JSON). */
export function cursorOf(k: RegisteredKey): string {
  return Buffer.from(JSON.stringify([k.registeredAt, k.envelopeHash])).toString("base64url");
}

/** The key a cursor names; a UsageError for anything a page did not print. */
export function cursorKey(cursor: string): RegisteredKey {
  try {
    const v = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === "string" && typeof v[1] === "string")
      return { registeredAt: v[0], envelopeHash: v[1] };
  } catch {
    // Reported below.
  }
  throw new UsageError(`expected a cursor as a page printed it (its "next"); got "${cursor.slice(0, 40)}"`);
}

/**
 * A waiting approval as a listing shows it, from what a decision on it is bound to (`bound`: the hash,
 * revision and expiry of its envelope, or of its change set) and its first envelope. A change set is
 * listed once: its first action's task, object and operation, every action's field names, the set's
 * requester, risk and creation time, and its actions in order. `pending --api` lists a server's
 * approval payloads with it too (src/api/cli-api.ts); `escalatedTo` only where the listing knows it.
 */
export function listedApproval(
  threadId: string,
  bound: Pick<ApprovalRequest, "envelopeHash" | "revision" | "expiresAt" | "envelope"> & {
    changeSet?: Pick<NonNullable<ApprovalRequest["changeSet"]>, "set" | "setHash" | "actions">;
  },
  now: number,
  escalatedTo?: string | null,
): PendingApproval {
  const e = bound.envelope;
  const cs = bound.changeSet;
  return {
    threadId,
    envelopeHash: bound.envelopeHash,
    revision: bound.revision,
    requestedBy: cs ? cs.set.requestedBy : e.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(cs ? cs.set : e),
    taskId: e.object.id,
    object: { ...e.object },
    operation: e.operation,
    fields: cs
      ? [...new Set(cs.actions.flatMap((x) => Object.keys(x.envelope.params)))]
      : Object.keys(e.params),
    risk: cs ? cs.set.risk.level : e.risk.level,
    ...(escalatedTo !== undefined ? { escalatedTo } : {}),
    createdAt: cs ? cs.set.createdAt : e.createdAt,
    expiresAt: bound.expiresAt,
    expired: Date.parse(bound.expiresAt) <= now,
    ...(cs
      ? {
          changeSet: {
            setHash: cs.setHash,
            actions: cs.actions.map((x) => ({
              actionId: x.actionId,
              envelopeHash: x.envelopeHash,
              operation: x.envelope.operation,
              taskId: x.envelope.object.id,
              object: { ...x.envelope.object },
              fields: Object.keys(x.envelope.params),
            })),
          },
        }
      : {}),
  };
}

function mayDecide(
  app: PendingSource,
  a: { envelope: { operation: string }; escalatedTo: string | null },
  approverId: string,
  operations: string[] = [a.envelope.operation],
): boolean {
  if (operations.some((op) => !allowedApprovers(app.deps.policy, op).has(approverId))) return false;
  return (
    a.escalatedTo === null || (app.deps.policy.approvers.groups[a.escalatedTo] ?? []).includes(approverId)
  );
}
