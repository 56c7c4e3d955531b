/**
 * Authentication and authorization for the LangGraph API server (`"auth"` in langgraph.json). The
 * server imports this module at start, so a bad token file stops it there.
 *
 * - ACTION_ENVELOPE_API_TOKENS unset: open development mode. Every caller is the anonymous user (no
 *   roles, permission "unauthenticated", is_authenticated false), which is not passed on to the graph,
 *   so approver ids stay self-declared. Operations that would rewrite graph state are still refused
 *   (src/auth/rules.ts).
 * - set: `Authorization: Bearer <token>` is required on every request (401 otherwise); identity and
 *   roles come from the file. The server hands the user to the graph as
 *   config.configurable.langgraph_auth_user, so check_decision binds the approver to this identity.
 *
 * In both modes a browser request from another site (Origin, Sec-Fetch-Site) is refused with 403, and
 * in open mode so is a request naming a Host that is not a loopback name (DNS rebinding); see
 * src/auth/origin.ts. langgraph.json's http.cors allows only Studio's origin.
 *
 * langgraph.json sets `disable_studio_auth: true`: without it a request carrying the header
 * `x-auth-scheme: langsmith` would skip this module entirely (langgraph-api dist/auth/custom.mjs).
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";
import { loadConfig } from "../config/env.js";
import { authorize, rolePermission, type ApiUser, type AuthMode } from "./rules.js";
import { loadApiTokens, principalFor, type ApiTokenTable } from "./tokens.js";
import { browserOriginProblem, originPolicyFromEnvironment, type OriginPolicy } from "./origin.js";
import { refusedRoute, refusedRouteEntry } from "./routes.js";
import { getDeps } from "../runtime/deps.js";

const CHALLENGE = { "WWW-Authenticate": 'Bearer realm="action-envelope"' };

/** The open-mode user. It never reaches the graph: runs started in open mode carry no langgraph_auth_user (rules.ts). */
export const ANONYMOUS = { identity: "anonymous", display_name: "anonymous", permissions: ["unauthenticated"], is_authenticated: false };

function unauthorized(message: string): HTTPException {
  return new HTTPException(401, { message, headers: CHALLENGE });
}

/**
 * The caller, unless the request addresses a route that is not served (src/auth/routes.ts): then 403,
 * after a request_refused audit record naming the caller (the refusal stands if the audit log fails).
 */
async function admitRoute<U extends { identity: string }>(request: Request, pathname: string, user: U, mode: AuthMode): Promise<U> {
  const refused = refusedRoute(request.method, pathname, mode);
  if (!refused) return user;
  const message = `refused ${request.method} ${pathname}: ${refused.reason}`;
  try {
    const deps = await getDeps();
    await deps.audit.append(refusedRouteEntry(request.method, pathname, refused.route, refused.reason, user.identity, deps.clock().toISOString()));
  } catch (e) {
    console.error(`action-envelope: could not audit a refused request (${(e as Error).message}): ${message}`);
  }
  throw new HTTPException(403, { message });
}

export function createAuth(tokens: ApiTokenTable | undefined, origins: OriginPolicy = originPolicyFromEnvironment(!tokens)) {
  const mode: AuthMode = tokens ? "tokens" : "open";
  return new Auth()
    .authenticate(async (request: Request) => {
      const { pathname } = new URL(request.url);
      // The web inbox (below) makes its own cross-site and host checks, for its forms and its sign-in.
      if (!(pathname === "/inbox" || pathname.startsWith("/inbox/"))) {
        const problem = browserOriginProblem(request, origins);
        if (problem) throw new HTTPException(403, { message: `refused ${request.method} ${pathname}: ${problem}` });
      }
      // POST /internal/truncate wipes threads and checkpoints and asks no authorization event.
      if (pathname.startsWith("/internal/")) throw new HTTPException(403, { message: `refused ${request.method} ${pathname}: internal maintenance routes are not served` });
      // The readiness probe of `npm run dev` (src/cli/dev-server.ts); /ok raises no authorization event.
      if (pathname === "/ok" && request.method === "GET") return { ...ANONYMOUS, permissions: [] };
      // The web inbox mounted next to the API (langgraph.json http.app, src/inbox/mount.ts) signs its
      // users in itself (session cookie, CSRF); a browser sends no Bearer token. It raises no
      // authorization event: it drives the graph in process, as the signed-in approver.
      if (pathname === "/inbox" || pathname.startsWith("/inbox/")) return { ...ANONYMOUS, permissions: [] };
      if (!tokens) return admitRoute(request, pathname, ANONYMOUS, mode);
      const header = request.headers.get("authorization");
      if (!header) throw unauthorized("missing Authorization: Bearer <API token> (ACTION_ENVELOPE_API_TOKENS is set on this server)");
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!m) throw unauthorized("the Authorization header must be: Bearer <API token>");
      const principal = principalFor(tokens, m[1]!);
      if (!principal) throw unauthorized("unknown API token");
      return admitRoute(request, pathname, {
        identity: principal.identity,
        display_name: principal.identity,
        permissions: principal.roles.map(rolePermission),
        is_authenticated: true,
      }, mode);
    })
    .on("*", ({ event, value, user }) => {
      const verdict = authorize(mode, event, value, user as ApiUser);
      if (!verdict.allow) throw new HTTPException(verdict.status, { message: verdict.message });
      return verdict.filters;
    });
}

function tokensFromEnvironment(): ApiTokenTable | undefined {
  const config = loadConfig();
  return config.apiTokensPath ? loadApiTokens(config.apiTokensPath) : undefined;
}

/** Referenced by langgraph.json: `"auth": {"path": "./src/auth/auth.ts:auth", "disable_studio_auth": true}`. */
export const auth = createAuth(tokensFromEnvironment());
