/**
 * Where a case record comes from: a thread's audit records, the chain's verification (from where the
 * thread's records begin, verifyForView), and the thread's state in some checkpointer (the CLI's own, or the
 * LangGraph API server's). Shared by `audit show|export` (src/cli/audit-command.ts), the API
 * server's /audit routes (src/api/audit-routes.ts) and the inbox's evidence page and bundle
 * (src/inbox/evidence-routes.ts), so all three compute exactly the same record.
 */
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type { AuditLog, AuditRecord, ChainVerification } from "../store/audit.js";
import type { ThreadRecord } from "../store/action-machine.js";
import { buildCase } from "./bundle.js";
import { contradictionOf, journalFactsOf, type JournalReader } from "./journal-check.js";
import type { RunStatus } from "./case-input.js";

export interface CaseSource {
  audit: Pick<AuditLog, "records" | "verify">;
  thread(threadId: string): Promise<{ status: RunStatus; state?: ThreadMirror }>;
  /**
   * The journal, where it is at hand: where the thread's records begin (verifyForView), and the sealed
   * rows its records are held against (checkedForView).
   */
  journal?: JournalReader;
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
 * The chain's check for a view of one thread's records (in chain order). For a thread whose sealed
 * journal row names where its records begin (`auditFrom`, set at registration), from there (or from
 * an earlier record of the thread) to the head: every record of the thread and every record after
 * its registration is checked as `audit verify` checks it, so one of its records edited, removed,
 * reordered or inserted is found, and a view costs what was appended since the thread began, not the
 * whole log. A chain rewritten from there on with consistent hashes passes both (`audit verify --head`
 * catches that), and what lies before is not the thread's evidence. Any other thread (registered before
 * `auditFrom` was recorded, unknown to the journal, or with a seal that fails) gets the whole chain.
 */
export function verifyForView(
  audit: Pick<AuditLog, "verify">,
  records: readonly AuditRecord[],
  thread: ThreadRecord | undefined,
): Promise<ChainVerification> {
  const from = thread?.macValid ? thread.auditFrom : undefined;
  if (from === undefined) return audit.verify();
  return audit.verify({ from: Math.min(from, records[0]?.seq ?? from) });
}

/**
 * The chain's check for a view of one thread (verifyForView), and, where the journal is at hand, the
 * thread's records held against its sealed rows (src/evidence/journal-check.ts): records linked after
 * the head by a writer of the data directory keep the chain intact, and an earlier head kept elsewhere
 * too, so a record the journal contradicts breaks the view's chain ("contradicted").
 */
export async function checkedForView(
  audit: Pick<AuditLog, "verify">,
  threadId: string,
  records: readonly AuditRecord[],
  thread: ThreadRecord | undefined,
  journal: JournalReader | undefined,
): Promise<ChainVerification> {
  const chain = await verifyForView(audit, records, thread);
  if (!chain.intact || !journal) return chain;
  const problem = contradictionOf(threadId, records, await journalFactsOf(journal, threadId, records));
  if (!problem) return chain;
  return {
    intact: false,
    records: chain.records,
    ...(chain.from !== undefined ? { from: chain.from } : {}),
    problem,
  };
}

/** One run's case record and evidence objects with the chain's verification; undefined when the thread has neither records nor checkpoints. */
export async function caseOf(
  s: CaseSource,
  threadId: string,
): Promise<({ chain: ChainVerification } & ReturnType<typeof buildCase>) | undefined> {
  const [records, thread, row] = await Promise.all([
    s.audit.records({ threadId }),
    s.thread(threadId),
    s.journal?.getThread(threadId),
  ]);
  if (records.length === 0 && thread.status === "not_found") return undefined;
  const chain = await checkedForView(s.audit, threadId, records, row, s.journal);
  const state = stateForCase(thread.state, row);
  return { chain, ...buildCase({ threadId, status: thread.status, state, records, chain }) };
}

/**
 * Graph state for a case record only where the journal holds no row of the thread (where the journal
 * is not at hand, `stateWithoutRecords` still keeps it to a thread without records). A thread the
 * journal registered reports from its audit records alone: with its records cut from the log's tail,
 * state rewritten to an outcome must not show as one.
 */
export function stateForCase<S>(state: S | undefined, row: unknown): S | undefined {
  return row ? undefined : state;
}
