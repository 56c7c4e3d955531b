/**
 * The auth the LangGraph API server runs (langgraph.json: `"auth": {"path": "./src/api/served-auth.ts:auth"}`):
 * src/auth/auth.ts's handlers for the token file in the environment, reading a thread's latest checkpoint
 * through the graph the server serves, and a join's run through the server's own run lookup. The server
 * imports this module at start, so a bad token file stops it there.
 */
import { createAuth, tokensFromEnvironment } from "../auth/auth.js";

/**
 * The thread's latest checkpoint id, read through the graph the server serves (the server sets its
 * checkpointer on that very object when it first runs or reads it), or undefined when unknown. The
 * graph is loaded on the first read, not when the server imports this module.
 */
async function servedHead(threadId: string): Promise<string | undefined> {
  const { apiGraph: graph } = await import("../graph/graph.js");
  if (!graph.checkpointer) return undefined;
  const snapshot = await graph.getState({ configurable: { thread_id: threadId } });
  const id = snapshot.config?.configurable?.["checkpoint_id"];
  return typeof id === "string" ? id : undefined;
}

/** The server's in-process fetch (langgraph-api dist/loopback.mjs binds it when the server starts). */
const LOOPBACK = Symbol.for("langgraph_api:fetch");

/**
 * Whether the server holds `runId` as a run of `threadId` that the caller may read: the server's own
 * `GET /threads/{thread}/runs/{run}` (which checks the run's thread and the caller's owner filter),
 * asked in process with the caller's credentials. False when the server cannot be asked.
 */
async function servedRunOfThread(threadId: string, runId: string, request: Request): Promise<boolean> {
  const fetchInServer = (globalThis as Record<symbol, unknown>)[LOOPBACK] as
    ((url: string, init: RequestInit) => Promise<Response>) | undefined;
  if (!fetchInServer) return false;
  const headers = new Headers();
  for (const name of ["authorization", "x-api-key"]) {
    const value = request.headers.get(name);
    if (value !== null) headers.set(name, value);
  }
  const res = await fetchInServer(new URL(`/threads/${threadId}/runs/${runId}`, request.url).href, {
    headers,
  });
  if (!res.ok) return false;
  const run = (await res.json().catch(() => undefined)) as { thread_id?: unknown } | undefined;
  return run?.thread_id === threadId;
}

export const auth = createAuth(tokensFromEnvironment(), servedHead, servedRunOfThread);
