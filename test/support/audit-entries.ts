/** Audit entries for the audit log's own tests (chain, pages, routes), numbered so each is distinct. */
import type { AuditEntry } from "../../src/store/audit.js";

/** A refused decision on `threadId`, the i-th of the test (its time i seconds into 2026). */
export function refusalEntry(threadId: string, i: number): AuditEntry {
  return {
    threadId,
    revision: 1,
    event: "decision_refused",
    discriminator: `attempt-${i}`,
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
    requestedBy: "demo-user",
    risk: null,
    what: {
      operation: "update_task",
      taskId: 4,
      params: { TITLE: `t${i}` },
      envelopeHash: null,
      envelope: null,
    },
    approver: null,
    override: null,
    policy: { id: "default", version: "1" },
    refusal: { code: "HASH_MISMATCH", reason: `attempt ${i}` },
    outcome: null,
  };
}
