/** One page of waiting approvals, collected for a test to compare whole (`pendingListing` streams them). */
import {
  pendingListing,
  type PendingApproval,
  type PendingPage,
  type PendingQuery,
  type PendingSource,
} from "../../src/app/pending.js";

export async function pendingPage(app: PendingSource, q: PendingQuery = {}): Promise<PendingPage> {
  const listing = await pendingListing(app, q);
  const pending: PendingApproval[] = [];
  for await (const p of listing.approvals) pending.push(p);
  return { total: listing.total, offset: listing.offset, pending, ...listing.end() };
}
