/**
 * One page of the inbox list: the signed-in person's waiting approvals read through the journal's
 * keyset order (registered_at, envelope hash) from an opaque cursor, as `pending` pages
 * (src/app/pending.ts), so memory and reads follow the page, not the number waiting.
 */
import type { App } from "../app/open-app.js";
import { cursorKey, cursorOf } from "../app/pending.js";
import { registeredRows, type RegisteredFilter } from "../store/waiting-list.js";
import { byExpiry, inboxItemOf, isApprover, waitingAction, type InboxItem } from "./queue.js";

/** Approvals on one page of the inbox list. */
export const INBOX_PAGE_SIZE = 50;

export interface InboxListPage {
  /** This page's approvals, soonest expiry first. */
  items: InboxItem[];
  /**
   * Waiting rows whose seal does not verify, met in this page's stretch of the order: named, never
   * listed, and never counted towards the page, so no page moves.
   */
  damaged: Array<{ threadId: string; envelopeHash: string }>;
  /** The cursor of the next page, or null when nothing follows. */
  next: string | null;
}

/**
 * The page of `user`'s inbox that starts after `cursor` (from the start without one). A cursor no
 * page printed is a UsageError. Someone who approves no operation sees only their own requests, so
 * SQL reads only those rows; every row read is still checked against its seal.
 */
export async function inboxListPage(app: App, user: string, cursor?: string): Promise<InboxListPage> {
  const journal = app.deps.journal;
  const after = cursor !== undefined ? cursorKey(cursor) : undefined;
  const filter: RegisteredFilter = isApprover(app, user) ? {} : { requestedBy: user };
  const items: InboxItem[] = [];
  const damaged: InboxListPage["damaged"] = [];
  let next: string | null = null;
  for await (const row of registeredRows(
    (f) => journal.listRegistered(f),
    { ...filter, ...(after ? { after } : {}) },
    INBOX_PAGE_SIZE + 1,
  )) {
    if (!row.macValid) {
      damaged.push({ threadId: row.threadId, envelopeHash: row.envelopeHash });
      continue;
    }
    // A change set has one waiting row per action; it is listed at the row its thread's current action is.
    const action = await waitingAction(app, row.threadId);
    if (!action || action.envelopeHash !== row.envelopeHash) continue;
    const item = await inboxItemOf(app, action, user);
    if (!item) continue;
    items.push(item);
    if (items.length >= INBOX_PAGE_SIZE) {
      const at = { registeredAt: row.registeredAt, envelopeHash: row.envelopeHash };
      next =
        (await journal.listRegistered({ ...filter, after: at, limit: 1 })).length > 0 ? cursorOf(at) : null;
      break;
    }
  }
  return { items: items.sort(byExpiry), damaged, next };
}
