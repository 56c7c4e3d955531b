/**
 * The audit log over HTTP, read-only, next to the LangGraph API (mounted by src/inbox/mount.ts through
 * langgraph.json `http.app`), so `audit list|show|export|verify --api URL` works against a server whose
 * data directory the caller cannot reach. The answers are exactly what the local commands compute
 * (src/cli/app-session.ts caseOf, the audit log's threadPage() and verify()); the CLI renders them with
 * the same renderers.
 *
 *   GET /audit/threads[?limit=N&cursor=C]  {threads, next}           audit list (a page; next: cursor or null)
 *   GET /audit/threads/{thread}   {caseRecord, evidence, question}      audit show / export; --api views
 *   GET /audit/verify[?head=HASH] ChainVerification                     audit verify
 *
 * Who sees what. The API's auth middleware (src/auth/auth.ts) has already authenticated the caller
 * (401 without a valid Bearer token on a server with a token file); no authorization event covers
 * these routes, so they decide here:
 * - approver and admin: every thread's records, and the whole chain's verification;
 * - requester: only threads the API server marks as theirs (metadata owner, stamped from the token
 *   when the thread was created; src/auth/rules.ts), checked by asking the server's thread store with
 *   the caller's own auth context, so the same rule as `threads.get` applies. Not `requestedBy` in the
 *   records: a CLI run on the same journal names its requester without authenticating it. `verify`
 *   is refused to requesters (a chain problem names the thread and event of another requester's record);
 *   the chain's state is in each case record they may read;
 * - open development mode (no token file): every caller is anonymous and sees everything, like the
 *   rest of the API in that mode.
 * The state the evidence is built from comes from the API server's own checkpointer (its threads).
 * `question` is the journal's row for the thread's structured question (src/store/journal.ts
 * QuestionEntry: text, fields, status, last refusal) or null when it has none: the CLI's --api views
 * show a question pause from it, not from the checkpoint's interrupt payload (which whoever can write
 * the server's checkpoints can rewrite). It is absent when the routes were given no journal.
 */
import { Hono, type Context } from "hono";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { loadConfig } from "../config/env.js";
import { createAuditLog, createJournal } from "../store/backends.js";
import { AuditLogError, type AuditLog } from "../store/audit.js";
import type { Journal } from "../store/journal.js";
import { caseOf, threadFromCheckpoints, type CheckpointReader } from "../evidence/case-source.js";
import { OWNER_KEY } from "../auth/rules.js";

export const AUDIT_PREFIX = "/audit";

/** A reader of the server's checkpoints through the graph, loaded when a thread is first read. */
async function checkpointsOf(checkpointer: BaseCheckpointSaver): Promise<CheckpointReader> {
  const { checkpointReader } = await import("../graph/graph.js");
  return checkpointReader(checkpointer);
}

/** What the server's auth middleware left on the request context (langgraph-api dist/auth/custom.mjs). */
interface AuthContext {
  user: { identity: string; permissions?: string[]; is_authenticated?: boolean };
  scopes: string[];
}
/** The part of the API server's storage these routes use (set on the context as LANGGRAPH_OPS by its server.mjs). */
interface ThreadStore {
  threads: {
    get(threadId: string, auth: AuthContext | undefined): Promise<{ metadata?: Record<string, unknown> }>;
  };
}

type Viewer =
  | { sees: "all" }
  | { sees: "own"; identity: string; store: ThreadStore; auth: AuthContext }
  | { refused: string };

/** Decides from the authenticated user alone; fails closed when the server loaded no auth module. */
export function viewerOf(auth: AuthContext | undefined, store: ThreadStore | undefined): Viewer {
  if (!auth?.user)
    return {
      refused:
        "the audit routes need the server's auth module (langgraph.json auth: ./src/api/served-auth.ts:auth)",
    };
  const perms = auth.user.permissions ?? [];
  if (auth.user.is_authenticated !== true && perms.includes("unauthenticated")) return { sees: "all" };
  if (auth.user.is_authenticated !== true) return { refused: "not authenticated" };
  if (perms.includes("role:approver") || perms.includes("role:admin")) return { sees: "all" };
  if (perms.includes("role:requester")) {
    if (!store)
      return { refused: "the server's thread store is not available to tell which threads are yours" };
    return { sees: "own", identity: auth.user.identity, store, auth };
  }
  return { refused: `${auth.user.identity} holds none of the roles requester, approver, admin` };
}

/** Whether the API server's thread store gives this requester the thread (its owner filter applied). */
async function owns(viewer: Extract<Viewer, { sees: "own" }>, threadId: string): Promise<boolean> {
  try {
    const thread = await viewer.store.threads.get(threadId, viewer.auth);
    return thread.metadata?.[OWNER_KEY] === viewer.identity;
  } catch {
    return false;
  }
}

/** Threads per page of GET /audit/threads: `limit` asks for fewer or more, up to MAX_THREADS_PAGE. */
export const THREADS_PAGE = 100;
export const MAX_THREADS_PAGE = 1000;

/** `?limit=N&cursor=C` of GET /audit/threads: C is the `next` of the page before (a record's seq). */
function pagingOf(
  limit: string | undefined,
  cursor: string | undefined,
): { limit: number; after?: number } | { error: string } {
  const n = limit === undefined ? THREADS_PAGE : Number(limit);
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_THREADS_PAGE)
    return {
      error: `limit is a whole number from 1 to ${MAX_THREADS_PAGE}; got "${String(limit).slice(0, 40)}"`,
    };
  if (cursor === undefined) return { limit: n };
  const after = Number(cursor);
  if (!/^\d{1,15}$/.test(cursor) || !Number.isSafeInteger(after))
    return { error: `cursor is the "next" of the page before (a number); got "${cursor.slice(0, 40)}"` };
  return { limit: n, after };
}

export interface AuditSource {
  audit: AuditLog;
  checkpointer: BaseCheckpointSaver;
  /**
   * The journal whose question rows the thread route reports (without it the route leaves `question`
   * out) and whose thread rows say where a thread's audit records begin (without it a case record checks
   * the whole chain).
   */
  journal?: Pick<Journal, "getQuestion" | "getThread" | "getAction" | "findExecution">;
}

/**
 * The routes, given how to reach the audit log and the server's checkpointer (opened on first use and
 * kept for the server's lifetime).
 */
export function createAuditRoutes(open: () => Promise<AuditSource>): Hono {
  let source: Promise<AuditSource> | undefined;
  const get = () =>
    (source ??= open().catch((e) => {
      source = undefined;
      throw e;
    }));
  const routes = new Hono();
  const context = (c: Context) => {
    const vars = c as unknown as { get(key: string): unknown };
    return viewerOf(
      vars.get("auth") as AuthContext | undefined,
      vars.get("LANGGRAPH_OPS") as ThreadStore | undefined,
    );
  };
  const refuse = (c: Context, what: string, why: string) =>
    c.json({ error: "Forbidden", message: `refused ${what}: ${why}` }, 403);
  const damaged = (c: Context, e: unknown) => {
    if (e instanceof AuditLogError) return c.json({ error: "AuditLogDamaged", message: e.message }, 500);
    throw e;
  };

  routes.get(`${AUDIT_PREFIX}/threads`, async (c) => {
    const viewer = context(c);
    if ("refused" in viewer) return refuse(c, "audit list", viewer.refused);
    try {
      const paging = pagingOf(c.req.query("limit"), c.req.query("cursor"));
      if ("error" in paging) return c.json({ error: "BadRequest", message: paging.error }, 400);
      const { audit } = await get();
      const page = await audit.threadPage(paging);
      let threads = page.threads;
      if (viewer.sees === "own") {
        const mine = await Promise.all(threads.map((t) => owns(viewer, t.threadId)));
        threads = threads.filter((_, i) => mine[i]);
      }
      return c.json({ threads, next: page.next === null ? null : String(page.next) });
    } catch (e) {
      return damaged(c, e);
    }
  });

  routes.get(`${AUDIT_PREFIX}/threads/:thread`, async (c) => {
    const threadId = c.req.param("thread");
    const viewer = context(c);
    if ("refused" in viewer) return refuse(c, "audit show", viewer.refused);
    // The same answer whether the thread exists or not: a requester learns nothing about others' threads.
    if (viewer.sees === "own" && !(await owns(viewer, threadId))) {
      return refuse(
        c,
        `audit show ${threadId}`,
        `${viewer.identity} (requester) may read the audit of their own threads only, and thread ${threadId} is not one of them`,
      );
    }
    try {
      const { audit, checkpointer, journal } = await get();
      const found = await caseOf(
        {
          audit,
          thread: async (id) => threadFromCheckpoints(await checkpointsOf(checkpointer), id),
          ...(journal ? { journal } : {}),
        },
        threadId,
      );
      if (!found)
        return c.json(
          {
            error: "NotFound",
            message: `no audit records and no checkpoints for thread ${threadId} on this server; see "audit list --api"`,
          },
          404,
        );
      const question = journal ? { question: (await journal.getQuestion(threadId)) ?? null } : {};
      return c.json({ caseRecord: found.caseRecord, evidence: found.evidence, ...question });
    } catch (e) {
      return damaged(c, e);
    }
  });

  routes.get(`${AUDIT_PREFIX}/verify`, async (c) => {
    const viewer = context(c);
    if ("refused" in viewer) return refuse(c, "audit verify", viewer.refused);
    if (viewer.sees === "own") {
      return refuse(
        c,
        "audit verify",
        `${viewer.identity} (requester): verifying the whole chain needs the role approver or admin (a problem it reports may name another requester's thread); the chain's state is in the case record of each of your threads (audit show)`,
      );
    }
    const head = c.req.query("head");
    if (head !== undefined && head.length > 100)
      return c.json(
        { error: "BadRequest", message: `head is at most 100 characters; got ${head.length}` },
        400,
      );
    try {
      const { audit } = await get();
      return c.json(await audit.verify(head !== undefined ? { head } : {}));
    } catch (e) {
      return damaged(c, e);
    }
  });

  return routes;
}

/** As the API server mounts it: the audit log and the journal from this process's environment. */
export function serverAuditRoutes(checkpointer: () => Promise<BaseCheckpointSaver>): Hono {
  return createAuditRoutes(async () => {
    const config = loadConfig();
    const saver = await checkpointer();
    const audit = await createAuditLog(config);
    try {
      return { audit, journal: await createJournal(config), checkpointer: saver };
    } catch (e) {
      await audit.close();
      throw e;
    }
  });
}
