/**
 * What waits for one signed-in person, read from the journal (the authority), so threads started from
 * the CLI, the LangGraph API or Studio all appear: every pending approval whose registered action is
 * intact and still waiting, that this person may approve (policy approvers, narrowed to the
 * escalation group once escalated) or cancel (their own request). Newest first.
 */
import { createHash } from "node:crypto";
import type { App } from "../app/threads.js";
import { allowedApprovers } from "../envelope/policy.js";
import type { ActionRow } from "../store/action-machine.js";

export interface InboxItem {
  threadId: string;
  envelopeHash: string;
  nonce: string;
  revision: number;
  requestedBy: string;
  createdAt: string;
  expiresAt: string;
  risk: string;
  reversibility: string;
  operation: string;
  taskId: number;
  fields: string[];
  escalatedTo: string | null;
  lastRefusal: { code: string; reason: string } | null;
  /** May approve, reject or edit. */
  mayDecide: boolean;
  /** May approve: narrowed to the escalation group's members once escalated. */
  mayApprove: boolean;
  /** May cancel: an approver or the requester. */
  mayCancel: boolean;
}

export interface Entitlement {
  mayDecide: boolean;
  mayApprove: boolean;
  mayCancel: boolean;
}

export function entitlementOf(app: App, action: ActionRow, user: string): Entitlement {
  const policy = app.deps.policy;
  const approver = allowedApprovers(policy, action.envelope.operation).has(user);
  const inGroup = !action.escalatedTo || (policy.approvers.groups[action.escalatedTo] ?? []).includes(user);
  return { mayDecide: approver, mayApprove: approver && inGroup, mayCancel: approver || action.envelope.requestedBy === user };
}

/** The journal's action for a thread when it is a live, intact, waiting approval; else undefined. */
export async function waitingAction(app: App, threadId: string): Promise<ActionRow | undefined> {
  const action = await app.deps.journal.currentAction(threadId);
  return action && action.macValid && action.phase === "registered" && !action.progress.closed ? action : undefined;
}

export async function inboxFor(app: App, user: string): Promise<InboxItem[]> {
  const rows = await app.deps.journal.listApprovals("pending");
  const items: InboxItem[] = [];
  for (const row of rows) {
    const action = await waitingAction(app, row.threadId);
    if (!action || action.envelopeHash !== row.envelopeHash) continue;
    const may = entitlementOf(app, action, user);
    if (!may.mayDecide && !may.mayCancel) continue;
    const e = action.envelope;
    const last = action.progress.lastRefusal;
    items.push({
      threadId: action.threadId,
      envelopeHash: action.envelopeHash,
      nonce: e.nonce,
      revision: e.revision,
      requestedBy: e.requestedBy,
      createdAt: e.createdAt,
      expiresAt: e.expiresAt,
      risk: e.risk.level,
      reversibility: e.risk.reversibility,
      operation: e.operation,
      taskId: e.object.id,
      fields: Object.keys(e.params),
      escalatedTo: action.escalatedTo,
      lastRefusal: last ? { code: last.code, reason: last.reason } : null,
      ...may,
    });
  }
  return items.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || a.threadId.localeCompare(b.threadId));
}

/** Changes whenever anything on the list changes (arrived, decided, revised, refused, escalated). */
export function versionOf(items: InboxItem[]): string {
  return createHash("sha256")
    .update(JSON.stringify(items.map((i) => [i.threadId, i.envelopeHash, i.lastRefusal?.code ?? null])))
    .digest("hex")
    .slice(0, 16);
}
