/**
 * Every route the LangGraph API server (@langchain/langgraph-api 1.5.1, dist/server.mjs) serves, and
 * how each is authorized. A route is either checked per request (its handler, or the storage call it
 * makes, raises an authorization event with the caller of this request, which src/auth/rules.ts
 * decides), open (it shows nothing of any thread), or refused here with 403 before its handler runs.
 *
 * Refused (the first two only with a token file: in open mode every caller is the same anonymous user):
 * - the protocol routes (`/threads/{id}/commands`, `/threads/{id}/stream/events`, POST and the
 *   WebSocket GET): their ProtocolService keeps one record per thread bound to the auth of the first
 *   caller and runs every later command under it, so a second caller would act as the first;
 * - `GET /runs/{run_id}/stream`: it authorizes `threads:read` without a thread id, so a requester's
 *   owner filter is never applied; join a run through `/threads/{id}/runs/{run_id}/stream`;
 * - cron routes (not implemented by this server version) and the generative-UI routes (no UI is
 *   configured), and `/internal/*` maintenance (it truncates threads and asks no authorization event).
 *
 * test/api-routes.test.ts enumerates the installed server's routes from its routers and fails for one
 * that is in none of these lists, so an upgrade that adds a route cannot pass unnoticed.
 */
import { randomUUID } from "node:crypto";
import type { AuditEntry } from "../store/audit.js";
import { sha256Hex } from "./tokens.js";

/**
 * - checked: the handler raises these authorization events with this request's caller;
 * - open: shows nothing of any thread;
 * - refused: 403 in both modes;
 * - refusedWithTokens: 403 with a token file; in open development mode every caller is the same
 *   anonymous user, so a handler that keeps the first caller's authorization acts for the same user.
 */
export type RouteCheck =
  { checked: string } | { open: string } | { refused: string } | { refusedWithTokens: string };

export interface ApiRoute {
  /** HTTP method as the router registers it, or "*" for every method (refused routes only). */
  method: string;
  /** Hono path pattern, as registered (`:param`, `:param?`). */
  path: string;
  check: RouteCheck;
}

const PROTOCOL =
  "the protocol routes are not served: their handler binds each thread to the first caller's authorization and runs every later command under it, so they cannot be authorized per request; use the REST routes (POST /threads/{id}/runs/…, GET /threads/{id}/state)";

const r = (method: string, path: string, check: RouteCheck): ApiRoute => ({ method, path, check });
const ev = (events: string) => ({ checked: events });

export const API_ROUTES: readonly ApiRoute[] = [
  // meta
  r("GET", "/ok", { open: "readiness probe; no thread data" }),
  r("GET", "/info", { open: "server version and flags; no thread data" }),
  // assistants (fixed by langgraph.json; writes are refused by rules.ts)
  r("POST", "/assistants", ev("assistants:create")),
  r("POST", "/assistants/search", ev("assistants:search")),
  r("POST", "/assistants/count", ev("assistants:search")),
  r("GET", "/assistants/:assistant_id", ev("assistants:read")),
  r("DELETE", "/assistants/:assistant_id", ev("assistants:delete")),
  r("PATCH", "/assistants/:assistant_id", ev("assistants:update")),
  r("GET", "/assistants/:assistant_id/graph", ev("assistants:read")),
  r("GET", "/assistants/:assistant_id/schemas", ev("assistants:read")),
  r("GET", "/assistants/:assistant_id/subgraphs/:namespace?", ev("assistants:read")),
  r("POST", "/assistants/:assistant_id/latest", ev("assistants:update")),
  r("POST", "/assistants/:assistant_id/versions", ev("assistants:search")),
  // threads
  r("POST", "/threads", ev("threads:create")),
  r("POST", "/threads/search", ev("threads:search")),
  r("POST", "/threads/count", ev("threads:search")),
  r("GET", "/threads/:thread_id", ev("threads:read")),
  r("PATCH", "/threads/:thread_id", ev("threads:update")),
  r("DELETE", "/threads/:thread_id", ev("threads:delete")),
  r("GET", "/threads/:thread_id/state", ev("threads:read")),
  r("POST", "/threads/:thread_id/state", ev("threads:update")),
  r("GET", "/threads/:thread_id/state/:checkpoint_id", ev("threads:read")),
  r("POST", "/threads/:thread_id/state/checkpoint", ev("threads:read")),
  r("GET", "/threads/:thread_id/history", ev("threads:read")),
  r("POST", "/threads/:thread_id/history", ev("threads:read")),
  r("POST", "/threads/:thread_id/copy", ev("threads:read, threads:create")),
  // runs
  r("POST", "/runs", ev("threads:create_run")),
  r("POST", "/runs/stream", ev("threads:create_run")),
  r("POST", "/runs/wait", ev("threads:create_run")),
  r("POST", "/runs/batch", ev("threads:create_run")),
  r("GET", "/threads/:thread_id/runs", ev("threads:read")),
  r("POST", "/threads/:thread_id/runs", ev("threads:create_run")),
  r("POST", "/threads/:thread_id/runs/stream", ev("threads:create_run")),
  r("POST", "/threads/:thread_id/runs/wait", ev("threads:create_run")),
  r("GET", "/threads/:thread_id/runs/:run_id", ev("threads:read")),
  r("DELETE", "/threads/:thread_id/runs/:run_id", ev("threads:delete")),
  // A join's run must be one of the path's thread (src/auth/auth.ts, joinedRun above), checked with a token file.
  r("GET", "/threads/:thread_id/runs/:run_id/join", ev("threads:read")),
  r("GET", "/threads/:thread_id/runs/:run_id/stream", ev("threads:read")),
  r("POST", "/threads/:thread_id/runs/:run_id/cancel", ev("threads:update")),
  r("GET", "/runs/:run_id/stream", {
    refusedWithTokens:
      "joining a run by run id alone is not served: the server authorizes it without the thread, so the thread's owner is never checked; join it as GET /threads/{thread_id}/runs/{run_id}/stream",
  }),
  // crons: not implemented by this server version; rules.ts refuses crons:* too
  r("POST", "/runs/crons", { refused: "scheduled runs are not offered" }),
  r("POST", "/runs/crons/search", { refused: "scheduled runs are not offered" }),
  r("DELETE", "/runs/crons/:cron_id", { refused: "scheduled runs are not offered" }),
  r("POST", "/threads/:thread_id/runs/crons", { refused: "scheduled runs are not offered" }),
  // store (rules.ts refuses store:*)
  r("POST", "/store/namespaces", ev("store:list_namespaces")),
  r("POST", "/store/items/search", ev("store:search")),
  r("PUT", "/store/items", ev("store:put")),
  r("DELETE", "/store/items", ev("store:delete")),
  r("GET", "/store/items", ev("store:get")),
  // protocol transport (any method: the WebSocket upgrade is a GET)
  r("*", "/threads/:thread_id/commands", { refusedWithTokens: PROTOCOL }),
  r("*", "/threads/:thread_id/stream/events", { refusedWithTokens: PROTOCOL }),
  // generative UI (served only with "ui" in langgraph.json, which this project has not)
  r("*", "/ui/:agent", { refused: "no generative UI is configured on this server" }),
  r("*", "/ui/:agent/:basename", { refused: "no generative UI is configured on this server" }),
  // server.mjs itself
  r("*", "/internal/truncate", { refused: "internal maintenance routes are not served" }),
];

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A regular expression for a Hono path pattern: `:name` is one segment, `:name?` an optional one. */
export function routePattern(path: string): RegExp {
  const parts = path.split("/").slice(1);
  let re = "";
  for (const part of parts) {
    if (part.startsWith(":") && part.endsWith("?")) re += "(?:/[^/]+)?";
    else if (part.startsWith(":")) re += "/[^/]+";
    else re += `/${escape(part)}`;
  }
  return new RegExp(`^${re}/?$`);
}

const REFUSED = API_ROUTES.flatMap((x) =>
  "refused" in x.check
    ? [{ ...x, re: routePattern(x.path), why: x.check.refused, tokensOnly: false }]
    : "refusedWithTokens" in x.check
      ? [{ ...x, re: routePattern(x.path), why: x.check.refusedWithTokens, tokensOnly: true }]
      : [],
);

/** The refused route this request addresses in this mode ("tokens": a token file is set), or null. */
export function refusedRoute(
  method: string,
  pathname: string,
  mode: "open" | "tokens",
): { route: ApiRoute; reason: string } | null {
  const m = method.toUpperCase();
  for (const x of REFUSED) {
    if (x.tokensOnly && mode !== "tokens") continue;
    if ((x.method === "*" || x.method === m || (m === "HEAD" && x.method === "GET")) && x.re.test(pathname))
      return { route: x, reason: x.why };
  }
  return null;
}

/**
 * The thread and run path segments a join names (`GET /threads/{thread}/runs/{run}/stream` or
 * `/join`), or undefined for any other request. The server authorizes a join by the path's thread
 * alone and then streams the run's events by run id, whichever thread the run is of (langgraph-api
 * 1.5.1 storage/ops.mjs `Runs.Stream.join`): with a token file src/auth/auth.ts checks the run against
 * the thread first.
 */
export function joinedRun(method: string, pathname: string): { threadId: string; runId: string } | undefined {
  const m = method.toUpperCase();
  if (m !== "GET" && m !== "HEAD") return undefined;
  const match = /^\/threads\/([^/]+)\/runs\/([^/]+)\/(?:stream|join)\/?$/.exec(pathname);
  if (!match) return undefined;
  // As they appear in the path (still encoded): the check asks about exactly these segments.
  return { threadId: match[1]!, runId: match[2]! };
}

/** The thread a path names (`/threads/{id}/…`), or "" when it names none. */
export function threadOfPath(pathname: string): string {
  const m = /^\/threads\/([^/]+)/.exec(pathname);
  return m && !["search", "count"].includes(m[1]!) ? decodeURIComponent(m[1]!) : "";
}

/** The audit record of a request refused at the server's edge (a route that is not served). */
export function refusedRouteEntry(
  method: string,
  pathname: string,
  route: ApiRoute,
  reason: string,
  caller: string,
  at: string,
): AuditEntry {
  const digest = sha256Hex(`${at}\n${caller}\n${method} ${pathname}\n${randomUUID()}`).slice(0, 16);
  return {
    threadId: threadOfPath(pathname),
    revision: 0,
    event: "request_refused",
    discriminator: `ROUTE_NOT_SERVED:${digest}`,
    at,
    requestedBy: "",
    risk: null,
    what: { operation: "", taskId: null, params: null, envelopeHash: null, envelope: null },
    approver: null,
    override: null,
    policy: { id: "", version: "" },
    refusal: { code: "ROUTE_NOT_SERVED", reason: `${method} ${route.path}: ${reason}` },
    outcome: null,
    received: { method, path: pathname, caller },
  };
}
