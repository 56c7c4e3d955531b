/**
 * Who may read the /audit routes (src/api/audit-routes.ts), decided from the user the API server's auth
 * middleware left on the request. The token cases run through the real dev server in test/api-cli.test.ts;
 * here the other users: none at all (no auth module: refused), the open mode's anonymous user (sees
 * everything), Studio's built-in user (no role: refused), a requester whose thread store knows no thread.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Hono } from "hono";
import { MemorySaver } from "@langchain/langgraph";
import { createAuditRoutes } from "../src/api/audit-routes.js";
import Database from "better-sqlite3";
import { FIRST_RECORDS_SQL, SqliteAuditLog } from "../src/store/audit.js";
import { ANONYMOUS } from "../src/auth/auth.js";
import { tempDir } from "./support/harness.js";
import { refusalEntry } from "./support/audit-entries.js";

function serve(auth: unknown, store?: unknown) {
  const routes = createAuditRoutes(async () => ({
    audit: new SqliteAuditLog(path.join(tempDir("ae-audit-routes-"), "audit.sqlite")),
    checkpointer: new MemorySaver(),
  }));
  const app = new Hono();
  app.use(async (c, next) => {
    const vars = c as unknown as { set(k: string, v: unknown): void };
    if (auth !== undefined) vars.set("auth", auth);
    if (store !== undefined) vars.set("LANGGRAPH_OPS", store);
    await next();
  });
  app.route("/", routes);
  return async (route: string) => {
    const res = await app.request(route);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
}

describe("/audit routes: who sees what", () => {
  it("without the server's auth module every route is refused (fails closed)", async () => {
    const get = serve(undefined);
    for (const route of ["/audit/threads", "/audit/threads/t1", "/audit/verify"]) {
      const r = await get(route);
      expect(r.status, route).toBe(403);
      expect(String(r.body["message"])).toContain("need the server's auth module");
    }
  });

  it("open development mode: the anonymous user reads everything", async () => {
    const get = serve({ user: { ...ANONYMOUS }, scopes: ANONYMOUS.permissions });
    expect(await get("/audit/threads")).toEqual({ status: 200, body: { threads: [], next: null } });
    expect(await get("/audit/verify")).toEqual({
      status: 200,
      body: { intact: true, records: 0, head: null },
    });
    const missing = await get("/audit/threads/t1");
    expect(missing.status).toBe(404);
    expect(String(missing.body["message"])).toContain("no audit records and no checkpoints for thread t1");
  });

  it("Studio's built-in user (authenticated, no role) and a token user without a known role are refused", async () => {
    for (const user of [
      { identity: "langgraph-studio-user", permissions: [], is_authenticated: true },
      { identity: "zoe", permissions: ["role:other"], is_authenticated: true },
    ]) {
      const r = await serve({ user, scopes: user.permissions })("/audit/threads");
      expect(r.status).toBe(403);
      expect(String(r.body["message"])).toContain(
        `${user.identity} holds none of the roles requester, approver, admin`,
      );
    }
  });

  it("a requester: a thread the server's store does not give them is refused, existing or not; verify needs approver or admin", async () => {
    const user = { identity: "dave", permissions: ["role:requester"], is_authenticated: true };
    const store = {
      threads: {
        get: async () => {
          throw new Error("Thread with ID t1 not found");
        },
      },
    };
    const get = serve({ user, scopes: user.permissions }, store);
    expect(await get("/audit/threads")).toEqual({ status: 200, body: { threads: [], next: null } });
    const show = await get("/audit/threads/t1");
    expect(show.status).toBe(403);
    expect(String(show.body["message"])).toContain(
      "dave (requester) may read the audit of their own threads only, and thread t1 is not one of them",
    );
    expect((await get("/audit/verify")).status).toBe(403);
  });
});

const entry = refusalEntry;

describe("/audit/threads pages by cursor", () => {
  it("threads in the order of their first record, a page at a time; threads and records added between pages are neither skipped nor repeated", async () => {
    const file = path.join(tempDir("ae-audit-routes-"), "audit.sqlite");
    const audit = new SqliteAuditLog(file);
    let i = 0;
    for (const t of ["t1", "t2", "t1", "t3", "t2", "t4", "t5"]) await audit.append(entry(t, i++));
    const app = new Hono();
    app.use(async (c, next) => {
      (c as unknown as { set(k: string, v: unknown): void }).set("auth", {
        user: { ...ANONYMOUS },
        scopes: ANONYMOUS.permissions,
      });
      await next();
    });
    app.route(
      "/",
      createAuditRoutes(async () => ({ audit, checkpointer: new MemorySaver() })),
    );
    const get = async (route: string) => {
      const res = await app.request(route);
      return {
        status: res.status,
        body: (await res.json()) as {
          threads?: Array<{ threadId: string; records: number }>;
          next?: string | null;
          message?: string;
        },
      };
    };
    try {
      const seen: string[] = [];
      let route = "/audit/threads?limit=2";
      for (let page = 0; page < 10; page++) {
        const r = await get(route);
        expect(r.status).toBe(200);
        seen.push(...r.body.threads!.map((t) => t.threadId));
        // Arrivals while paging: a record on a listed thread, a record on a thread not reached yet, a new thread.
        if (page === 0) {
          await audit.append(entry("t1", i++));
          await audit.append(entry("t4", i++));
          await audit.append(entry("t6", i++));
        }
        if (!r.body.next) break;
        route = `/audit/threads?limit=2&cursor=${r.body.next}`;
      }
      expect(seen).toEqual(["t1", "t2", "t3", "t4", "t5", "t6"]);
      // Each summary counts the thread's records, wherever they lie.
      const all = await get("/audit/threads?limit=1000");
      expect(all.body.threads!.map((t) => [t.threadId, t.records])).toEqual([
        ["t1", 3],
        ["t2", 2],
        ["t3", 1],
        ["t4", 2],
        ["t5", 1],
        ["t6", 1],
      ]);
      expect(all.body.next).toBeNull();
      expect((await get("/audit/threads?limit=0")).status).toBe(400);
      expect((await get("/audit/threads?limit=1001")).status).toBe(400);
      expect((await get("/audit/threads?cursor=abc")).status).toBe(400);
    } finally {
      await audit.close();
    }
  });

  it("a page's first records are found through the primary key and the (thread_id, seq) index, not a scan of the log", async () => {
    const file = path.join(tempDir("ae-audit-routes-"), "audit.sqlite");
    new SqliteAuditLog(file).close();
    const db = new Database(file);
    try {
      const plan = (
        db
          .prepare(`EXPLAIN QUERY PLAN ${FIRST_RECORDS_SQL("audit_records", () => "?")}`)
          .all(10, 100) as Array<{ detail: string }>
      ).map((r) => r.detail);
      expect(plan.join("\n")).toMatch(/SEARCH a USING INTEGER PRIMARY KEY \(rowid>\?\)/);
      expect(plan.join("\n")).toMatch(
        /SEARCH b USING COVERING INDEX audit_records_thread \(thread_id=\? AND seq<\?\)/,
      );
      expect(plan.join("\n")).not.toContain("TEMP B-TREE");
    } finally {
      db.close();
    }
  });
});
