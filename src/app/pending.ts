/**
 * Waiting approvals from the journal's index of registered actions: what `pending` lists. Nothing
 * here loads the graph or a checkpoint; only an approval an older version indexed (not yet adopted
 * into the journal's actions) is confirmed against its checkpoint, and that opens the graph then.
 */
import { allowedApprovers } from "../envelope/index.js";
import type { ReadApp, ThreadView } from "./threads.js";
import type { StoresApp } from "./stores-app.js";

/** A full or read-only app (graph open), or the stores alone (graph opened on first need). */
export type PendingSource = ReadApp | StoresApp;

export interface PendingApproval {
  threadId: string;
  envelopeHash: string;
  revision: number;
  requestedBy: string;
  /** Task, field names, risk level and escalation group, when the listing knows them (the journal's index does). */
  taskId?: number;
  fields?: string[];
  risk?: string;
  escalatedTo?: string | null;
  createdAt: string;
  expiresAt: string;
  expired: boolean;
  /** Registered by an older version and not yet adopted into the journal's actions (confirmed against its checkpoint). */
  legacy?: true;
}

export interface PendingQuery {
  /** Only approvals this approver may decide (policy approvers; escalation group members for escalated ones). */
  decidableBy?: string;
  requestedBy?: string;
  taskId?: number;
  /** Only approvals waiting longer than this many milliseconds. */
  olderThanMs?: number;
  limit?: number;
  offset?: number;
}

export interface PendingPage {
  /** Matches before paging. */
  total: number;
  offset: number;
  pending: PendingApproval[];
  /** Registered rows whose seal does not verify: listed by id only, never as approvals. */
  damaged: Array<{ threadId: string; envelopeHash: string }>;
}

/**
 * Waiting approvals, oldest first, from the journal's index of registered actions alone: each row's
 * integrity is its own HMAC, so no checkpoint is loaded (a thread whose run stopped between
 * registering and pausing is listed too; `approve` then says to `recover` it). Approvals an older
 * version indexed are confirmed against their checkpoint, as before.
 */
export async function pendingPage(app: PendingSource, q: PendingQuery = {}): Promise<PendingPage> {
  const now = app.deps.clock().getTime();
  const limit = q.limit ?? 100;
  const offset = q.offset ?? 0;
  const filter = {
    ...(q.requestedBy !== undefined ? { requestedBy: q.requestedBy } : {}),
    ...(q.taskId !== undefined ? { taskId: q.taskId } : {}),
    ...(q.olderThanMs !== undefined ? { registeredBefore: new Date(now - q.olderThanMs).toISOString() } : {}),
  };
  // Entitlement is policy, not SQL: with --mine every match is read and the page cut afterwards.
  const paged = q.decidableBy === undefined;
  const { rows } = await app.deps.journal.listRegistered({ ...filter, limit: paged ? limit + offset : Number.MAX_SAFE_INTEGER, offset: 0 });
  const damaged: PendingPage["damaged"] = [];
  const all: PendingApproval[] = [];
  for (const a of rows) {
    if (!a.macValid) {
      damaged.push({ threadId: a.threadId, envelopeHash: a.envelopeHash });
      continue;
    }
    if (q.decidableBy !== undefined && !mayDecide(app, a, q.decidableBy)) continue;
    all.push({
      threadId: a.threadId,
      envelopeHash: a.envelopeHash,
      revision: a.revision,
      requestedBy: a.envelope.requestedBy,
      taskId: a.envelope.object.id,
      fields: Object.keys(a.envelope.params),
      risk: a.envelope.risk.level,
      escalatedTo: a.escalatedTo,
      createdAt: a.envelope.createdAt,
      expiresAt: a.envelope.expiresAt,
      expired: Date.parse(a.envelope.expiresAt) <= now,
    });
  }
  for (const r of await app.deps.journal.listUnadoptedApprovals()) {
    if (q.requestedBy !== undefined && r.requestedBy !== q.requestedBy) continue;
    const v = await viewLegacy(app, r.threadId);
    const e = v.approval?.envelope;
    if (v.status !== "awaiting_approval" || v.approval?.envelopeHash !== r.envelopeHash || !e) continue;
    if (q.taskId !== undefined && e.object.id !== q.taskId) continue;
    if (q.olderThanMs !== undefined && Date.parse(r.createdAt) > now - q.olderThanMs) continue;
    all.push({
      threadId: r.threadId,
      envelopeHash: r.envelopeHash,
      revision: r.revision,
      requestedBy: r.requestedBy,
      taskId: e.object.id,
      fields: Object.keys(e.params),
      risk: e.risk.level,
      escalatedTo: null,
      createdAt: r.createdAt,
      expiresAt: r.expiresAt,
      expired: Date.parse(r.expiresAt) <= now,
      legacy: true,
    });
  }
  // Paged: the index's count (damaged rows included, they are named in `damaged` as met) plus legacy ones.
  const total = paged ? (await app.deps.journal.listRegistered({ ...filter, limit: 0, offset: 0 })).total + all.filter((p) => p.legacy).length : all.length;
  return { total, offset, pending: all.slice(offset, offset + limit), damaged };
}

/** Every waiting approval (no paging), as `pendingPage` lists them. */
export async function listPending(app: PendingSource, q: Omit<PendingQuery, "limit" | "offset"> = {}): Promise<PendingApproval[]> {
  return (await pendingPage(app, { ...q, limit: Number.MAX_SAFE_INTEGER, offset: 0 })).pending;
}

function mayDecide(app: PendingSource, a: { envelope: { operation: string }; escalatedTo: string | null }, approverId: string): boolean {
  if (!allowedApprovers(app.deps.policy, a.envelope.operation).has(approverId)) return false;
  return a.escalatedTo === null || (app.deps.policy.approvers.groups[a.escalatedTo] ?? []).includes(approverId);
}

/** A thread as viewThread reads it, for an approval an older version indexed. */
async function viewLegacy(app: PendingSource, threadId: string): Promise<ThreadView> {
  const { viewThread } = await import("./threads.js");
  return viewThread("graph" in app ? app : await app.readApp(), threadId);
}
