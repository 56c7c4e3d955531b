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
import { SqliteAuditLog } from "../src/store/audit.js";
import { ANONYMOUS } from "../src/auth/auth.js";
import { tempDir } from "./support/harness.js";

function serve(auth: unknown, store?: unknown) {
  const routes = createAuditRoutes(async () => ({ audit: new SqliteAuditLog(path.join(tempDir("ae-audit-routes-"), "audit.sqlite")), checkpointer: new MemorySaver() }));
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
    expect(await get("/audit/threads")).toEqual({ status: 200, body: { threads: [] } });
    expect(await get("/audit/verify")).toEqual({ status: 200, body: { intact: true, records: 0, head: null } });
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
      expect(String(r.body["message"])).toContain(`${user.identity} holds none of the roles requester, approver, admin`);
    }
  });

  it("a requester: a thread the server's store does not give them is refused, existing or not; verify needs approver or admin", async () => {
    const user = { identity: "dave", permissions: ["role:requester"], is_authenticated: true };
    const store = { threads: { get: async () => { throw new Error("Thread with ID t1 not found"); } } };
    const get = serve({ user, scopes: user.permissions }, store);
    expect(await get("/audit/threads")).toEqual({ status: 200, body: { threads: [] } });
    const show = await get("/audit/threads/t1");
    expect(show.status).toBe(403);
    expect(String(show.body["message"])).toContain("dave (requester) may read the audit of their own threads only, and thread t1 is not one of them");
    expect((await get("/audit/verify")).status).toBe(403);
  });
});
