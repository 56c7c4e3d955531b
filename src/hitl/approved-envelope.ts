import { hashEnvelope, type Envelope } from "../envelope/index.js";
import type { Journal } from "../store/journal.js";

/**
 * Checks the envelope about to be acted on against the journal, not against graph state: a checkpoint
 * edited after approval changes the state's envelope and hash together, but cannot change what the
 * journal recorded when the approval was accepted. Returns why it fails, or null when it is the one.
 */
export async function approvedEnvelopeProblem(envelope: Envelope | null, journal: Journal): Promise<string | null> {
  if (!envelope) return "there is no envelope in the thread state";
  const claim = await journal.findClaim(envelope.nonce);
  if (!claim) return `no accepted decision is recorded for nonce ${envelope.nonce}; the envelope's nonce was altered or never approved`;
  if (claim.decisionType !== "approve") return `the decision recorded for this nonce is "${claim.decisionType}", not an approval`;
  if (claim.threadId !== envelope.runContext.threadId) {
    return `the approval was recorded for thread ${claim.threadId}, but the envelope names thread ${envelope.runContext.threadId}`;
  }
  const recomputed = hashEnvelope(envelope);
  if (recomputed !== claim.envelopeHash) {
    return `the envelope now hashes to ${recomputed}, but the approved envelope hashed to ${claim.envelopeHash}`;
  }
  return null;
}
