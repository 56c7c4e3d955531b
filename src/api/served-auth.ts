/**
 * The auth the LangGraph API server runs (langgraph.json: `"auth": {"path": "./src/api/served-auth.ts:auth"}`):
 * src/auth/auth.ts's handlers for the token file in the environment, reading a thread's latest checkpoint
 * through the graph the server serves. The server imports this module at start, so a bad token file stops
 * it there.
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

export const auth = createAuth(tokensFromEnvironment(), servedHead);
