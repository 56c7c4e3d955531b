/**
 * Where a case record comes from: a thread's audit records, the chain's verification from the thread's
 * first record to the head, and the thread's state in some checkpointer (the CLI's own, or the
 * LangGraph API server's). Shared by `audit show|export` (src/cli/audit-command.ts) and the API
 * server's /audit routes (src/api/audit-routes.ts), so both compute exactly the same record.
 */
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type { AuditLog, AuditRecord, ChainVerification } from "../store/audit.js";
import { buildCase } from "./bundle.js";
import type { RunStatus } from "./case-input.js";

export interface CaseSource {
  audit: Pick<AuditLog, "records" | "verify">;
  thread(threadId: string): Promise<{ status: RunStatus; state?: ThreadMirror }>;
}

/** A thread's latest checkpoint as the graph reads it: the fields of LangGraph's `StateSnapshot` used here. */
export interface CheckpointView {
  values: unknown;
  next: readonly string[];
  tasks: readonly { interrupts?: readonly unknown[] }[];
}

/** Reads a thread's latest checkpoint; the graph's wiring makes one for a checkpointer (src/graph/graph.ts). */
export type CheckpointReader = (threadId: string) => Promise<CheckpointView>;

/** A thread's state and status as its latest checkpoint holds them. */
export async function threadFromCheckpoints(
  read: CheckpointReader,
  threadId: string,
): Promise<{ status: RunStatus; state?: ThreadMirror }> {
  const snapshot = await read(threadId);
  const values = snapshot.values as ThreadMirror | undefined;
  if (!values || Object.keys(values).length === 0) return { status: "not_found" };
  if (snapshot.tasks.some((t) => (t.interrupts ?? []).length > 0))
    return { status: "awaiting_approval", state: values };
  if (snapshot.next.length > 0) return { status: "interrupted_run", state: values };
  return { status: "finished", state: values };
}

/**
 * The chain's check for a view of these records (one thread's, in chain order): from the first of them
 * to the head, so a view costs what came after the thread began, not the whole log. It is the check of
 * the whole chain for every record it covers: a record of the thread edited, or any record after it
 * edited, removed, reordered or inserted, is found as `audit verify` finds it, and a chain rewritten
 * from there on with consistent hashes passes both (`audit verify --head` catches that). What lies
 * before the thread's first record is not part of its evidence and is left to `audit verify`. With no
 * records, nothing is checked and the head is reported.
 */
export function verifyForView(
  audit: Pick<AuditLog, "verify">,
  records: readonly AuditRecord[],
): Promise<ChainVerification> {
  return audit.verify({ from: records[0]?.seq ?? Number.MAX_SAFE_INTEGER });
}

/** One run's case record and evidence objects with the chain's verification; undefined when the thread has neither records nor checkpoints. */
export async function caseOf(
  s: CaseSource,
  threadId: string,
): Promise<({ chain: ChainVerification } & ReturnType<typeof buildCase>) | undefined> {
  const [records, thread] = await Promise.all([s.audit.records({ threadId }), s.thread(threadId)]);
  if (records.length === 0 && thread.status === "not_found") return undefined;
  const chain = await verifyForView(s.audit, records);
  return { chain, ...buildCase({ threadId, status: thread.status, state: thread.state, records, chain }) };
}
