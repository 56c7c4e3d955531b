/**
 * Approvals registered by a version that kept the envelope only in graph state (before the journal held
 * actions) are adopted once, when the stores open: each waiting row of that version's `approvals` table
 * becomes a thread and action row when the thread's latest checkpoint holds an envelope that hashes to
 * the row's hash (so an edited checkpoint is not adopted). The table is then renamed out of the way,
 * so a later open reads nothing more.
 */
import type { AppConfig } from "../config/env.js";
import { hashEnvelope, renderCard, type Envelope } from "../envelope/index.js";
import type { Journal } from "../store/journal.js";
import { deriveScope, isRequestScope } from "./scope.js";

export async function adoptLegacyApprovals(config: AppConfig, journal: Journal): Promise<void> {
  const rows = await journal.legacyApprovals();
  if (rows === null) return;
  if (rows.length > 0) {
    const { closeCheckpointer, createCheckpointer } = await import("../store/checkpointer.js");
    const saver = createCheckpointer(config);
    try {
      for (const row of rows) {
        const values =
          (await saver.getTuple({ configurable: { thread_id: row.threadId, checkpoint_ns: "" } }))?.checkpoint
            .channel_values ?? {};
        await adoptOne(journal, row, values as Record<string, unknown>);
      }
    } finally {
      await closeCheckpointer(saver);
    }
  }
  await journal.retireLegacyApprovals();
}

async function adoptOne(
  journal: Journal,
  row: { threadId: string; envelopeHash: string },
  state: Record<string, unknown>,
): Promise<void> {
  const envelope = state["envelope"] as Envelope | null | undefined;
  if (!envelope) return;
  let hash: string;
  try {
    hash = hashEnvelope(envelope);
  } catch {
    return;
  }
  if (hash !== row.envelopeHash) return;
  const request = typeof state["request"] === "string" ? state["request"] : "";
  const thread = await journal.registerThread({
    threadId: row.threadId,
    request,
    requestedBy: envelope.requestedBy,
    scope: deriveScope(request, isRequestScope(state["scope"]) ? state["scope"] : undefined),
    createdAt: envelope.createdAt,
  });
  await journal.registerAction(
    {
      envelopeHash: hash,
      threadId: row.threadId,
      revision: envelope.revision,
      envelope,
      card: renderCard(envelope, hash, "text").text,
      scope: thread.scope,
      policy: { id: envelope.policy.id, version: envelope.policy.version },
      escalatedTo: null,
      supersededHashes: [],
      editedBy: envelope.editedBy ?? null,
    },
    envelope.createdAt,
  );
}
