/**
 * The served graph (src/api/served-graph.ts) with one difference, for tests of a run the API server
 * stopped between steps: a write whose arguments carry STALL_MARK stops for good right after the
 * journal commits its write-ahead entry (intent), once per envelope, as if the process had died there.
 * The test then cancels the run, so the server is left as a crash leaves it: the journal at `intent`,
 * the checkpoint before carry_out, nothing sent.
 */
import { apiGraph } from "../../src/graph/graph.js";
import { guardApiRuns } from "../../src/api/guard.js";
import { serverDeps } from "../../src/runtime/server-deps.js";
import type { Journal } from "../../src/store/journal.js";

export const STALL_MARK = "STALL AFTER INTENT";

const stalled = new Set<string>();
const wrapped = new WeakSet<Journal>();

function stallAfterIntent(journal: Journal): void {
  if (wrapped.has(journal)) return;
  wrapped.add(journal);
  const beginWrite = journal.beginWrite.bind(journal);
  (journal as { beginWrite: Journal["beginWrite"] }).beginWrite = async (intent, sentAt, lease) => {
    const result = await beginWrite(intent, sentAt, lease);
    if (
      result.begun &&
      JSON.stringify(intent.args).includes(STALL_MARK) &&
      !stalled.has(intent.envelopeHash)
    ) {
      stalled.add(intent.envelopeHash);
      return new Promise<never>(() => {});
    }
    return result;
  };
}

export const graph = guardApiRuns(apiGraph, async () => {
  const deps = await serverDeps();
  stallAfterIntent(deps.journal);
  return deps;
});
