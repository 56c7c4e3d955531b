/**
 * Approvals registered by a version that kept the envelope only in graph state (before the journal held
 * actions) are adopted once, when the stores open: each waiting row of that version's `approvals` table
 * becomes a thread and action row when the thread's latest checkpoint holds an envelope that hashes to
 * the row's hash (so an edited checkpoint is not adopted). The table is then renamed out of the way,
 * so a later open reads nothing more.
 */
import type { AppConfig } from "../config/env.js";
import {
  checkProposal,
  hashEnvelope,
  parseEnvelope,
  renderCard,
  requesterNotVerified,
  type Envelope,
  type Policy,
} from "../envelope/index.js";
import { canonicalJson } from "../envelope/canonical.js";
import type { Journal } from "../store/journal.js";
import { deriveScope, isRequestScope } from "./scope.js";

/**
 * `policy`: the policy this process runs; an envelope it would not have built (operation, fields,
 * values, risk, time to live, requester) is not adopted. `now`: this server's clock.
 */
export async function adoptLegacyApprovals(
  config: AppConfig,
  journal: Journal,
  policy: Policy,
  now: Date = new Date(),
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<void> {
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
        await adoptOne(journal, row, values as Record<string, unknown>, policy, now, log);
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
  policy: Policy,
  now: Date,
  log: (line: string) => void,
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
  // The checkpoint and the approvals table are both in the data directory: that the one hashes to the
  // other proves nothing about who made the envelope, so it is adopted only when it is one this
  // policy would have built (and sealed) for a self-declared requester.
  const unfit = unfitForPolicy(envelope, policy, now);
  if (unfit) {
    log(
      `action-envelope: the older version's approval ${hash} of thread ${row.threadId} was not adopted: ${unfit}`,
    );
    return;
  }
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

/**
 * Why an envelope read from a checkpoint is not one the policy would build, or undefined when it is:
 * its shape, its operation, fields and values, the risk and time to live the policy gives them, and a
 * requester the policy accepts as self-declared (an adopted thread records its requester so).
 */
function unfitForPolicy(value: Envelope, policy: Policy, now: Date): string | undefined {
  let envelope: Envelope;
  try {
    envelope = parseEnvelope(value);
  } catch (e) {
    return `expected a valid envelope, found one that does not validate (${(e as Error).message})`;
  }
  const check = checkProposal(
    policy,
    {},
    { operation: envelope.operation, taskId: envelope.object.id, fields: envelope.params },
  );
  if (!check.allowed)
    return `policy ${policy.id}@${policy.version} refuses it (${check.code}: ${check.reasons.join("; ")})`;
  if (canonicalJson(check.risk) !== canonicalJson(envelope.risk))
    return `expected risk ${canonicalJson(check.risk)} under policy ${policy.id}@${policy.version}, found ${canonicalJson(envelope.risk)}`;
  const verifiedBy = envelope.requesterVerifiedBy ?? "self_declared";
  if (verifiedBy !== "self_declared")
    return `expected a self-declared requester (nothing recorded how ${envelope.requestedBy} was verified), found ${verifiedBy}`;
  const unverified = requesterNotVerified(policy, check.risk.level, envelope.requestedBy, verifiedBy);
  if (unverified) return unverified;
  const created = Date.parse(envelope.createdAt);
  const ttlMs = Date.parse(envelope.expiresAt) - created;
  if (!(created <= now.getTime()))
    return `expected it made before now (${now.toISOString()}), found createdAt ${envelope.createdAt}`;
  if (!(ttlMs <= check.ttlSeconds * 1000))
    return `expected at most ${check.ttlSeconds} s between createdAt and expiresAt under policy ${policy.id}@${policy.version}, found ${envelope.createdAt} to ${envelope.expiresAt}`;
  return undefined;
}
