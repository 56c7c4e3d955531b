/**
 * The web approval inbox: a small hono server on 127.0.0.1 over the same app (journal, graph,
 * checkpoints) as the CLI. Approvers sign in; the list and cards come from the journal; decisions go
 * through the shared decision path as the signed-in, authenticated approver (src/inbox/driver.ts).
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { Hono, type Context } from "hono";
import { streamSSE } from "hono/streaming";
import { bodyLimit } from "hono/body-limit";
import { html } from "./html.js";
import { inboxPage, layout, listFragment, type ListFilters, type ListPaging } from "./pages.js";
import { inboxListPage, type InboxListPage } from "./list-page.js";
import { UsageError } from "../errors.js";
import { cursorKey } from "../app/pending.js";
import { inboxItemOf, questionsFor, versionOf, waitingAction } from "./queue.js";
import { Sessions, SignInLinks, isLoopbackAddress } from "./security.js";
import { CLIENT_CSS, CLIENT_JS } from "./static.js";
import type { Env, InboxOptions, RouteContext } from "./routes-context.js";
import { signInRoutes } from "./sign-in-routes.js";
import { threadRoutes } from "./thread-routes.js";
import { evidenceRoutes } from "./evidence-routes.js";

export type { InboxOptions, SignInEvent } from "./routes-context.js";

/** How long closing the inbox waits for requests still being answered. */
const CLOSE_GRACE_MS = 5_000;

export interface RunningInbox {
  url: string;
  /**
   * A one-time sign-in link for this approver, good for one sign-in from this computer within its
   * lifetime; only for an inbox listening on a loopback address.
   */
  signInLink(user: string): { url: string; expiresAt: string };
  close(): Promise<void>;
}

export function createInboxApp(opts: InboxOptions, hostAllowed: (host: string) => boolean): Hono<Env> {
  const { app } = opts;
  const base = opts.basePath ?? "";
  const sessions = new Sessions();
  const pollMs = opts.pollMs ?? 1000;
  const web = new Hono<Env>();

  web.use("*", async (c, next) => {
    // DNS rebinding: only our own host names; and nothing cross-site may change anything.
    const host = c.req.header("host") ?? "";
    if (!hostAllowed(host)) return c.text("unknown host", 421);
    await next();
    c.header(
      "Content-Security-Policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    c.header("X-Content-Type-Options", "nosniff");
    // Not "no-referrer": with it Chromium sends "Origin: null" on our own form posts, which the cross-site check refuses.
    c.header("Referrer-Policy", "same-origin");
    c.header("X-Frame-Options", "DENY");
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
  });
  web.use("*", bodyLimit({ maxSize: 256 * 1024, onError: (c) => c.text("request too large", 413) }));

  const crossSite = (c: Context<Env>): string | undefined => {
    const origin = c.req.header("origin");
    const host = c.req.header("host");
    // https too: behind a TLS-terminating proxy the page's origin is https://<the same host>.
    if (origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`)
      return `a request from ${origin} may not change anything here`;
    const site = c.req.header("sec-fetch-site");
    if (site !== undefined && site !== "same-origin" && site !== "none")
      return `a ${site} request may not change anything here`;
    return undefined;
  };

  const refused: RouteContext["refused"] = (c, status, title, message, user) =>
    c.html(
      layout(
        title,
        html`<h1>${title}</h1><p class="refusal" role="alert">${message}</p><p><a href="${base}/">Back to the inbox</a></p>`,
        user ? { user: user.user, csrf: user.csrf, base } : { base },
      ),
      status,
    );

  const notYours = (c: Context<Env>, threadId: string) =>
    refused(
      c,
      403,
      "Not yours to see",
      `Only the requester of thread ${threadId}, the approvers entitled for its action, and admins may see it.`,
      c.var.session,
    );
  const ctx: RouteContext = { app, opts, base, sessions, crossSite, refused, notYours };

  // ── static assets ────────────────────────────────────────────────────────────────────────────────
  web.get("/static/inbox.js", (c) =>
    c.body(CLIENT_JS, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" }),
  );
  web.get("/static/inbox.css", (c) =>
    c.body(CLIENT_CSS, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "no-cache" }),
  );

  signInRoutes(web, ctx);

  /**
   * The list page a request names (`?cursor=` from a "Next page" link, `?q=`/`?risk=` kept in its
   * links) with its questions (on the first page only), or a 400 page for a cursor no page printed.
   */
  const listPageOf = async (c: Context<Env>) => {
    const cursor = c.req.query("cursor");
    const filters: ListFilters = { q: c.req.query("q") ?? "", risk: c.req.query("risk") ?? "" };
    let page: InboxListPage;
    try {
      page = await inboxListPage(app, c.var.session.user, cursor);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      return refused(c, 400, "Not a page of the list", e.message, c.var.session);
    }
    const paging: ListPaging = {
      damaged: page.damaged,
      next: page.next,
      paged: cursor !== undefined,
      filters,
    };
    const questions = paging.paged ? [] : await questionsFor(app, c.var.session.user);
    return { items: page.items, questions, paging };
  };

  web.get("/", async (c) => {
    const listed = await listPageOf(c);
    if (listed instanceof Response) return listed;
    const { user, csrf } = c.var.session;
    return c.html(inboxPage(user, csrf, listed.items, listed.questions, base, listed.paging));
  });
  web.get("/list", async (c) => {
    const listed = await listPageOf(c);
    if (listed instanceof Response) return listed;
    return c.html(listFragment(listed.items, listed.questions, base, listed.paging).value);
  });

  /**
   * What an open tab watches: its thread's waiting approval (`?thread=`, a card page), or the list
   * page it shows (`?cursor=`, the first page without one), so a poll reads one page, not the list.
   */
  const watched = async (user: string, thread: string | undefined, cursor: string | undefined) => {
    if (thread !== undefined) {
      const action = await waitingAction(app, thread);
      const item = action ? await inboxItemOf(app, action, user) : undefined;
      return item ? [item] : [];
    }
    return (await inboxListPage(app, user, cursor)).items;
  };

  web.get("/events", (c) => {
    const session = c.var.session;
    const user = session.user;
    const thread = c.req.query("thread");
    const cursor = c.req.query("cursor");
    if (cursor !== undefined) {
      try {
        cursorKey(cursor);
      } catch (e) {
        if (e instanceof UsageError) return c.text(e.message, 400);
        throw e;
      }
    }
    return streamSSE(c, async (stream) => {
      let last = "";
      let open = true;
      stream.onAbort(() => {
        open = false;
      });
      while (open) {
        // The session may end while the stream is open (sign-out, idle or absolute limit): then the
        // stream ends too. The check is not activity (peek), so an open tab does not keep an idle
        // session alive.
        if (!sessions.peek(session.id)) {
          await stream.writeSSE({ event: "signed-out", data: "the session ended; sign in again" });
          break;
        }
        const items = await watched(user, thread, cursor);
        const questions = await questionsFor(app, user);
        const version = `${versionOf(items)}:${questions.map((q) => `${q.threadId}@${q.askedAt}`).join(",")}`;
        if (version !== last) {
          last = version;
          await stream.writeSSE({
            event: "inbox",
            data: JSON.stringify({
              version,
              items: items.map((i) => ({ threadId: i.threadId, envelopeHash: i.envelopeHash })),
            }),
          });
        }
        await stream.sleep(pollMs);
      }
    });
  });

  threadRoutes(web, ctx);
  evidenceRoutes(web, ctx);

  return web;
}

export async function startInbox(opts: InboxOptions): Promise<RunningInbox> {
  const host = opts.host ?? "127.0.0.1";
  let hosts = new Set<string>();
  const loopback = host === "localhost" || isLoopbackAddress(host);
  // Links only where the inbox listens on this computer's loopback address; never on an open one.
  const { signInLinks: given, ...rest } = opts;
  const links = loopback ? (given ?? new SignInLinks()) : undefined;
  const web = createInboxApp({ ...rest, ...(links ? { signInLinks: links } : {}) }, (h) => hosts.has(h));
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: web.fetch, port: opts.port ?? 0, hostname: host }, () =>
      resolve(s as Server),
    ) as Server;
    s.once("error", reject);
  });
  const port = (server.address() as AddressInfo).port;
  hosts = new Set([`${host}:${port}`, `127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return {
    url,
    signInLink(user) {
      if (!links)
        throw new Error(
          `one-time sign-in links are only for an inbox on this computer's loopback address, not ${host}`,
        );
      const { token: t, expiresAt } = links.issue(user);
      return { url: `${url}/login/once/${t}`, expiresAt: new Date(expiresAt).toISOString() };
    },
    close: () =>
      new Promise<void>((resolve) => {
        // A request still being answered (a decision whose run has just ended: `npm start --inbox` sees
        // the outcome and closes the inbox) gets its answer; idle keep-alive connections go at once, and
        // anything still open after CLOSE_GRACE_MS is cut.
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
