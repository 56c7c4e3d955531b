/**
 * Where a case record comes from: a thread's audit records, the whole chain's verification and the
 * thread's state in some checkpointer (the CLI's own, or the LangGraph API server's). Shared by
 * `audit show|export` (src/cli/audit-command.ts) and the API server's /audit routes
 * (src/api/audit-routes.ts), so both compute exactly the same record.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { State } from "../graph/state.js";
import type { AuditLog, ChainVerification } from "../store/audit.js";
import { buildCase, type RunStatus } from "./bundle.js";

export interface CaseSource {
  audit: Pick<AuditLog, "records" | "verify">;
  thread(threadId: string): Promise<{ status: RunStatus; state?: State }>;
}

/** A thread's state and status as a checkpointer holds them. */
export async function threadFromCheckpoints(
  saver: BaseCheckpointSaver,
  threadId: string,
): Promise<{ status: RunStatus; state?: State }> {
  const { compileGraph } = await import("../graph/graph.js");
  const snapshot = await compileGraph({ checkpointer: saver }).getState({
    configurable: { thread_id: threadId },
  });
  const values = snapshot.values as State | undefined;
  if (!values || Object.keys(values).length === 0) return { status: "not_found" };
  if (snapshot.tasks.some((t) => (t.interrupts ?? []).length > 0))
    return { status: "awaiting_approval", state: values };
  if (snapshot.next.length > 0) return { status: "interrupted_run", state: values };
  return { status: "finished", state: values };
}

/** One run's case record and evidence objects with the chain's verification; undefined when the thread has neither records nor checkpoints. */
export async function caseOf(
  s: CaseSource,
  threadId: string,
): Promise<({ chain: ChainVerification } & ReturnType<typeof buildCase>) | undefined> {
  const [records, chain, thread] = await Promise.all([
    s.audit.records({ threadId }),
    s.audit.verify(),
    s.thread(threadId),
  ]);
  if (records.length === 0 && thread.status === "not_found") return undefined;
  return { chain, ...buildCase({ threadId, status: thread.status, state: thread.state, records, chain }) };
}
