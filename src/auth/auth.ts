/**
 * Authentication and authorization for the LangGraph API server (`"auth"` in langgraph.json names
 * src/api/served-auth.ts, which builds them from here). The server imports that module at start, so a
 * bad token file stops it there.
 *
 * - ACTION_ENVELOPE_API_TOKENS unset: open development mode. Every caller is the anonymous user (no
 *   roles, permission "unauthenticated", is_authenticated false), which is not passed on to the graph,
 *   so approver ids stay self-declared. Operations that would rewrite graph state are still refused
 *   (src/auth/rules.ts).
 * - set: `Authorization: Bearer <token>` (or `x-api-key: <token>`, as the SDK and agent-chat-ui send
 *   an API key) is required on every request (401 otherwise); identity and
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
import { Auth, HTTPException, type AuthFilters } from "@langchain/langgraph-sdk/auth";
import { getPath } from "hono/utils/url";
import { loadConfig } from "../config/env.js";
import {
  authorize,
  dropHeadCheckpoint,
  isRecord,
  namedCheckpointId,
  rolePermission,
  type ApiUser,
  type AuthMode,
} from "./rules.js";
import { loadApiTokens, principalFor, type ApiTokenTable } from "./tokens.js";
import { serverDeps } from "../runtime/server-deps.js";
import { nextFromJournal } from "../store/action-machine.js";
import type { ChatDecision } from "../hitl/text-decision.js";
import { browserOriginProblem, originPolicyFromEnvironment, type OriginPolicy } from "./origin.js";
import { joinedRun, refusedRoute, refusedRouteEntry } from "./routes.js";

const CHALLENGE = { "WWW-Authenticate": 'Bearer realm="action-envelope"' };

/** The open-mode user. It never reaches the graph: runs started in open mode carry no langgraph_auth_user (rules.ts). */
export const ANONYMOUS = {
  identity: "anonymous",
  display_name: "anonymous",
  permissions: ["unauthenticated"],
  is_authenticated: false,
};

function unauthorized(message: string): HTTPException {
  return new HTTPException(401, { message, headers: CHALLENGE });
}

/**
 * The caller, unless the request addresses a route that is not served (src/auth/routes.ts): then 403,
 * after a request_refused audit record naming the caller (the refusal stands if the audit log fails).
 */
async function admitRoute<U extends { identity: string }>(
  request: Request,
  pathname: string,
  user: U,
  mode: AuthMode,
): Promise<U> {
  const refused = refusedRoute(request.method, pathname, mode);
  if (!refused) return user;
  const message = `refused ${request.method} ${pathname}: ${refused.reason}`;
  try {
    const deps = await serverDeps();
    await deps.audit.append(
      refusedRouteEntry(
        request.method,
        pathname,
        refused.route,
        refused.reason,
        user.identity,
        deps.clock().toISOString(),
      ),
    );
  } catch (e) {
    console.error(`action-envelope: could not audit a refused request (${(e as Error).message}): ${message}`);
  }
  throw new HTTPException(403, { message });
}

/**
 * Whether the server holds run `runId` as a run of thread `threadId` that the caller of `request` may
 * read, asked of the server with that caller's credentials; false when it cannot be told.
 */
export type RunOfThread = (threadId: string, runId: string, request: Request) => Promise<boolean>;

/**
 * With a token file, a join (`GET /threads/{thread}/runs/{run}/stream` or `/join`) whose run is not
 * one of that thread's is refused: the server checks the caller against the path's thread only and
 * then streams the run by its id, so another caller's run would be streamed through one's own thread.
 */
async function admitJoin(request: Request, pathname: string, runOfThread: RunOfThread): Promise<void> {
  const joined = joinedRun(request.method, pathname);
  if (!joined || (await runOfThread(joined.threadId, joined.runId, request))) return;
  throw new HTTPException(404, {
    message: `refused ${request.method} ${pathname}: expected a run of thread ${joined.threadId} that this caller may read, found none with id ${joined.runId}; a run is joined through its own thread`,
  });
}

/**
 * The handlers for a token table (undefined: open mode). `headOf` gives a thread's latest checkpoint
 * id, or undefined when unknown: a run naming that checkpoint runs like one naming none. `runOfThread`
 * checks a join's run against its thread (with a token file).
 */
export function createAuth(
  tokens: ApiTokenTable | undefined,
  headOf: (threadId: string) => Promise<string | undefined>,
  runOfThread: RunOfThread,
  origins: OriginPolicy = originPolicyFromEnvironment(!tokens),
) {
  const mode: AuthMode = tokens ? "tokens" : "open";
  return new Auth()
    .authenticate(async (request: Request) => {
      // The path as the server routes it: Hono decodes escapes first (`/%69nternal/truncate` is served as
      // `/internal/truncate`), while URL.pathname keeps them; every check below must see the routed path.
      const pathname = getPath(request);
      // The web inbox (below) makes its own cross-site and host checks, for its forms and its sign-in.
      if (!(pathname === "/inbox" || pathname.startsWith("/inbox/"))) {
        const problem = browserOriginProblem(request, origins);
        if (problem)
          throw new HTTPException(403, { message: `refused ${request.method} ${pathname}: ${problem}` });
      }
      // POST /internal/truncate wipes threads and checkpoints and asks no authorization event.
      if (pathname.startsWith("/internal/"))
        throw new HTTPException(403, {
          message: `refused ${request.method} ${pathname}: internal maintenance routes are not served`,
        });
      // The readiness probe of `npm run dev` (src/cli/dev-server.ts); /ok raises no authorization event.
      if (pathname === "/ok" && request.method === "GET") return { ...ANONYMOUS, permissions: [] };
      // The web inbox mounted next to the API (langgraph.json http.app, src/inbox/mount.ts) signs its
      // users in itself (session cookie, CSRF); a browser sends no Bearer token. It raises no
      // authorization event: it drives the graph in process, as the signed-in approver.
      if (pathname === "/inbox" || pathname.startsWith("/inbox/")) return { ...ANONYMOUS, permissions: [] };
      if (!tokens) return admitRoute(request, pathname, ANONYMOUS, mode);
      const principal = principalFor(tokens, presentedToken(request));
      if (!principal) throw unauthorized("unknown API token");
      await admitJoin(request, pathname, runOfThread);
      return admitRoute(
        request,
        pathname,
        {
          identity: principal.identity,
          display_name: principal.identity,
          permissions: principal.roles.map(rolePermission),
          is_authenticated: true,
        },
        mode,
      );
    })
    .on("*", ({ event, value, user }) => {
      const judge = () => {
        const verdict = authorize(mode, event, value, user as ApiUser);
        if (!verdict.allow) throw new HTTPException(verdict.status, { message: verdict.message });
        return verdict.filters;
      };
      if (
        event === "threads:create_run" &&
        isRecord(value) &&
        isRecord(value["kwargs"]) &&
        typeof value["thread_id"] === "string"
      ) {
        const kwargs = value["kwargs"];
        const threadId = value["thread_id"];
        // useStream names the thread's current head checkpoint on every submit; that is not a fork.
        const head = namedCheckpointId(kwargs) !== undefined;
        // An approver's chat message to a thread whose approval waits is a decision, not a new request.
        const chat = mode === "tokens" && chatFromApprover(kwargs, user as ApiUser);
        if (head || chat) {
          // No filters and {} match alike for a run (langgraph-api isAuthMatching).
          const judged: Promise<AuthFilters<string>> = (async () => {
            if (head) dropHeadCheckpoint(kwargs, await headOf(threadId));
            if (chat && (await approvalWaits(threadId))) chatAsDecision(kwargs, chat);
            return judge() ?? {};
          })();
          return judged;
        }
      }
      return judge();
    });
}

/**
 * The API token a request presents: `Authorization: Bearer <token>`, or `x-api-key: <token>` (how the
 * SDK's Client and agent-chat-ui send an API key). Both present must agree. 401 when none is readable.
 */
function presentedToken(request: Request): string {
  const header = request.headers.get("authorization");
  const apiKey = request.headers.get("x-api-key")?.trim() || undefined;
  let bearer: string | undefined;
  if (header) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m)
      throw unauthorized(
        "the Authorization header must be: Bearer <API token> (or send the token as x-api-key)",
      );
    bearer = m[1]!;
  }
  if (bearer && apiKey && bearer !== apiKey)
    throw unauthorized("Authorization: Bearer and x-api-key carry different tokens; send one");
  const token = bearer ?? apiKey;
  if (!token)
    throw unauthorized(
      "missing Authorization: Bearer <API token> (or x-api-key: <API token>); ACTION_ENVELOPE_API_TOKENS is set on this server",
    );
  return token;
}

/**
 * With tokens, a chat message is a run with input, which needs the role requester. An approver who
 * lacks it, typing the card's decision into a chat client, sends one to a thread they do not own:
 * the text of its last human message, or undefined when the run is anything else.
 */
function chatFromApprover(kwargs: Record<string, unknown>, user: ApiUser): string | undefined {
  if (
    !user.permissions.includes(rolePermission("approver")) ||
    user.permissions.includes(rolePermission("requester"))
  )
    return undefined;
  if (kwargs["command"] !== undefined && kwargs["command"] !== null) return undefined;
  const input = kwargs["input"];
  if (
    !isRecord(input) ||
    !Array.isArray(input["messages"]) ||
    Object.keys(input).some((k) => k !== "messages" && k !== "context")
  )
    return undefined;
  const last = input["messages"].at(-1) as { type?: unknown; role?: unknown; content?: unknown } | undefined;
  if (!last || !(last.type === "human" || last.role === "user" || last.role === "human")) return undefined;
  if (typeof last.content === "string") return last.content;
  if (!Array.isArray(last.content)) return undefined;
  return last.content
    .map((p: { type?: unknown; text?: unknown }) =>
      p?.type === "text" && typeof p.text === "string" ? p.text : "",
    )
    .join("");
}

/** Whether the journal says this thread waits for an approval (its next step is await_approval). */
async function approvalWaits(threadId: string): Promise<boolean> {
  const { thread, action } = await (await serverDeps()).journal.threadRows(threadId);
  return nextFromJournal(thread, action) === "await_approval";
}

/** The run becomes a resume carrying the message's text, which check_decision reads as a decision (src/hitl/text-decision.ts). */
function chatAsDecision(kwargs: Record<string, unknown>, text: string): void {
  const resume: ChatDecision = { chatDecision: text };
  delete kwargs["input"];
  kwargs["command"] = { resume };
}

/** The token table ACTION_ENVELOPE_API_TOKENS names, or undefined (open mode) when it is unset. */
export function tokensFromEnvironment(): ApiTokenTable | undefined {
  const config = loadConfig();
  return config.apiTokensPath ? loadApiTokens(config.apiTokensPath) : undefined;
}
