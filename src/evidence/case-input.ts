/**
 * What a case record and its evidence are built from: a thread's run status, graph state, audit records and
 * chain check.
 */
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type { AuditRecord, ChainVerification } from "../store/audit.js";

export type RunStatus = "awaiting_approval" | "finished" | "interrupted_run" | "not_found";

export interface CaseInput {
  threadId: string;
  status: RunStatus;
  state: ThreadMirror | undefined;
  records: AuditRecord[];
  chain: ChainVerification;
}

/**
 * Graph state, only for a thread the audit log knows nothing of (a run still going before its first
 * record). Once a thread has records they are what the case record reports: state is writable by any
 * API client (updateState, run input) and by anyone who can edit the checkpoints, so a waiting
 * thread's state rewritten to an outcome, a decision or a write must not show as one.
 */
export function stateWithoutRecords(
  state: ThreadMirror | undefined,
  records: readonly AuditRecord[],
): ThreadMirror | undefined {
  return records.length === 0 ? state : undefined;
}
