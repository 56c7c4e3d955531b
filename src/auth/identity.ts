/**
 * The caller's identity as the LangGraph API server authenticated it, read inside a node. The server
 * puts the user returned by src/auth/auth.ts into config.configurable.langgraph_auth_user on every
 * run (langgraph-api dist/utils/run-auth.mjs, applyAuthToRunConfig). In open development mode
 * src/auth/rules.ts removes it again, and the run guard (src/api/guard.ts) one the server kept in the
 * thread's config from a run made while it had a token file, so such runs carry none, like CLI runs. Should an anonymous
 * user ever arrive (is_authenticated false, permission "unauthenticated"), it does not count either:
 * only a token-authenticated user does; anything else means "self-declared".
 */

/** The authenticated identity, or undefined when the run was not started by a token-authenticated caller (CLI, open mode). */
export function authenticatedIdentity(configurable: Record<string, unknown> | undefined): string | undefined {
  const user = configurable?.["langgraph_auth_user"] as
    { identity?: unknown; is_authenticated?: unknown; permissions?: unknown } | undefined;
  if (!user || user.is_authenticated !== true) return undefined;
  if (Array.isArray(user.permissions) && user.permissions.includes("unauthenticated")) return undefined;
  return typeof user.identity === "string" && user.identity !== "" ? user.identity : undefined;
}
