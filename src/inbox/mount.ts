/**
 * The web inbox mounted next to the LangGraph API: langgraph.json `"http": {"app":
 * "./src/inbox/mount.ts:app"}` makes the API server (langgraph-api dist/server.mjs, registerHttp)
 * route this Hono app before its own routes, so the inbox answers under /inbox on the API's port.
 *
 * - Same inbox, same rules: sign-in against ACTION_ENVELOPE_INBOX_USERS, session cookie, CSRF token
 *   on every form, cross-site and host checks (any loopback host:port, since the API's port is chosen
 *   at start), every link and form under /inbox. Without ACTION_ENVELOPE_INBOX_USERS, /inbox answers
 *   503 saying how to enable it; the API is unaffected.
 * - Threads of the API server: the server keeps checkpoints in its own checkpointer (not the
 *   project's), so the inbox drives the graph on that same checkpointer instance, in this process,
 *   under the journal's thread lock, with the signed-in approver as the authenticated user (as the
 *   standalone inbox does). The API's own run records are not involved in such a resume.
 * - The audit log is served here too, read-only under /audit (src/api/audit-routes.ts), for the CLI's
 *   `audit … --api`; unlike /inbox it is authenticated by the API's Bearer tokens.
 * - The API's auth middleware (src/auth/auth.ts) runs before this app and lets /inbox/* through
 *   without a Bearer token (a browser's navigation and form posts carry none); the inbox's own
 *   sign-in guards every page, with or without ACTION_ENVELOPE_API_TOKENS.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { Hono } from "hono";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { loadConfig } from "../config/env.js";
import { serverDeps } from "../runtime/server-deps.js";
import { openApp, type App } from "../app/open-app.js";
import { createInboxApp } from "./server.js";
import { loadInboxUsers } from "./users.js";
import { serverAuditRoutes } from "../api/audit-routes.js";

export const INBOX_PREFIX = "/inbox";
const LOOPBACK_HOST = /^(127\.0\.0\.1|localhost|\[::1\])(:\d{1,5})?$/;

/**
 * The API server's checkpointer: the module instance its own server.mjs imported (storage/checkpoint.mjs
 * is not in the package's exports, so it is loaded by file URL, which ESM caches as the same module).
 */
async function apiCheckpointer(): Promise<BaseCheckpointSaver> {
  const server = createRequire(import.meta.url).resolve("@langchain/langgraph-api/server");
  const mod = (await import(
    pathToFileURL(path.join(path.dirname(server), "storage/checkpoint.mjs")).href
  )) as { checkpointer: BaseCheckpointSaver };
  return mod.checkpointer;
}

type Inbox =
  { fetch: (req: Request, env?: unknown) => Response | Promise<Response>; app: App } | { disabled: string };

/** The API server's storage (set on every request's context by langgraph-api server.mjs as LANGGRAPH_OPS). */
interface ApiOps {
  threads: {
    setStatus(threadId: string, options: { checkpoint?: unknown; exception?: unknown }): Promise<void>;
  };
}
let inbox: Promise<Inbox> | undefined;

async function build(): Promise<Inbox> {
  const config = loadConfig();
  if (!config.inboxUsersPath) {
    return {
      disabled:
        "The web inbox is not enabled on this server: set ACTION_ENVELOPE_INBOX_USERS to a JSON file of approver credentials (made with `npm run cli -- inbox-user --id <approver> --file inbox-users.json`) and restart it.",
    };
  }
  const users = loadInboxUsers(config.inboxUsersPath);
  const app = openApp(await serverDeps(), { checkpointer: await apiCheckpointer() });
  const web = createInboxApp({ app, users, basePath: INBOX_PREFIX }, (host) => LOOPBACK_HOST.test(host));
  return { fetch: (req, env) => web.fetch(req, env as never), app };
}

export const app = new Hono();

// The audit log, read-only, for `audit … --api` (src/api/audit-routes.ts): Bearer-authenticated like the API.
app.route("/", serverAuditRoutes(apiCheckpointer));

app.all(`${INBOX_PREFIX}/*`, async (c) => {
  inbox ??= build();
  const target = await inbox;
  if ("disabled" in target) return c.text(target.disabled, 503);
  const url = new URL(c.req.url);
  url.pathname = url.pathname.slice(INBOX_PREFIX.length) || "/";
  const res = await target.fetch(new Request(url, c.req.raw), c.env);
  // A decision or answer resumed the thread outside the API's run queue: refresh the API's own thread
  // record (status, interrupts) from the checkpoint, as its queue does after a run, so that
  // `threads.search({status: "interrupted"})` (the CLI's `pending --api`) does not list it any more.
  const posted = c.req.method === "POST" ? /^\/t\/([^/]+)\/(decide|answer)$/.exec(url.pathname) : null;
  const ops = (c as unknown as { get(key: string): unknown }).get("LANGGRAPH_OPS") as ApiOps | undefined;
  if (posted && ops) {
    const threadId = decodeURIComponent(posted[1]!);
    try {
      const checkpoint = await target.app.graph.getState({ configurable: { thread_id: threadId } });
      await ops.threads.setStatus(threadId, { checkpoint });
    } catch {
      // A thread the API does not know (started from the CLI on the same journal): nothing to refresh.
    }
  }
  return res;
});
app.get(INBOX_PREFIX, (c) => c.redirect(`${INBOX_PREFIX}/`, 308));
