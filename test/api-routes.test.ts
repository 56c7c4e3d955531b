/**
 * Every route of the installed @langchain/langgraph-api, read from its own routers (the Hono apps
 * that dist/server.mjs mounts, and the routes server.mjs registers itself), must be in
 * src/auth/routes.ts: checked per request by an authorization event, open (no thread data), or
 * refused (in both modes, or with a token file where only the first caller's authorization would count). A version that adds a route, or a router, fails here until the route is classified.
 */
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { API_ROUTES, refusedRoute, routePattern, threadOfPath } from "../src/auth/routes.js";

interface HonoLike {
  routes: Array<{ method: string; path: string }>;
}

const DIST = path.dirname(createRequire(import.meta.url).resolve("@langchain/langgraph-api/server"));
const SERVER = fs.readFileSync(path.join(DIST, "server.mjs"), "utf8");

/** Routers server.mjs mounts with app.route("/", …); a new one must be added to installedRoutes below. */
const KNOWN_MOUNTS = [
  "api",
  "meta",
  "assistants",
  "runs",
  "threads",
  "store",
  "protocol(upgradeWebSocket, ops)",
];

async function installedRoutes(): Promise<Array<{ source: string; method: string; path: string }>> {
  const found: Array<{ source: string; method: string; path: string }> = [];
  const add = (source: string, app: HonoLike) => {
    for (const r of app.routes)
      if (r.method !== "ALL" || !r.path.endsWith("*")) found.push({ source, method: r.method, path: r.path });
  };
  // Every router module under dist/api, whether or not server.mjs mounts it today.
  for (const file of fs.readdirSync(path.join(DIST, "api")).filter((f) => f.endsWith(".mjs"))) {
    const mod = (await import(pathToFileURL(path.join(DIST, "api", file)).href)) as {
      default: HonoLike | ((...a: unknown[]) => HonoLike);
    };
    const app =
      typeof mod.default === "function"
        ? mod.default(() => () => undefined, { runs: {}, threads: {} })
        : mod.default;
    add(`api/${file}`, app);
  }
  // The generative-UI router (mounted as `api` when langgraph.json has "ui").
  add(
    "ui/load.mjs",
    ((await import(pathToFileURL(path.join(DIST, "ui/load.mjs")).href)) as { api: HonoLike }).api,
  );
  // Routes server.mjs registers on its own app.
  for (const m of SERVER.matchAll(/\bapp\.(get|post|put|patch|delete|all|on)\(\s*"([^"]+)"/g)) {
    found.push({ source: "server.mjs", method: m[1]!.toUpperCase(), path: m[2]! });
  }
  const seen = new Set<string>();
  return found.filter((r) => {
    const key = `${r.method} ${r.path}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

const samplePath = (p: string) =>
  p.replace(/:[A-Za-z_]+\?/g, "x").replace(/:[A-Za-z_]+/g, "00000000-0000-0000-0000-000000000000");

describe("routes of the installed LangGraph API server", () => {
  it("server.mjs mounts only the routers enumerated here", () => {
    const mounts = [...SERVER.matchAll(/\bapp\.route\("\/",\s*([^;]+?)\);/g)].map((m) => m[1]!.trim());
    expect(new Set(mounts)).toEqual(new Set(KNOWN_MOUNTS));
  });

  it("every route is checked per request, open, or refused; refused ones are refused and no other is", async () => {
    const routes = await installedRoutes();
    expect(routes.length).toBeGreaterThan(50);
    const unclassified = routes.filter(
      (r) => !API_ROUTES.some((x) => x.path === r.path && (x.method === r.method || x.method === "*")),
    );
    expect(unclassified, "routes in neither list of src/auth/routes.ts").toEqual([]);

    for (const r of routes) {
      const entry = API_ROUTES.find((x) => x.path === r.path && (x.method === r.method || x.method === "*"))!;
      const where = `${r.method} ${r.path} (${JSON.stringify(entry.check)})`;
      const withTokens = refusedRoute(r.method, samplePath(r.path), "tokens");
      const open = refusedRoute(r.method, samplePath(r.path), "open");
      if ("refused" in entry.check) expect([withTokens, open].map(Boolean), where).toEqual([true, true]);
      else if ("refusedWithTokens" in entry.check)
        expect([withTokens, open].map(Boolean), where).toEqual([true, false]);
      else expect([withTokens, open], where).toEqual([null, null]);
    }
    // The protocol routes in particular, for every method (the WebSocket upgrade is a GET).
    for (const method of ["GET", "POST", "PUT", "DELETE"]) {
      expect(refusedRoute(method, "/threads/t1/commands", "tokens")?.reason).toMatch(
        /first caller's authorization/,
      );
      expect(refusedRoute(method, "/threads/t1/stream/events/", "tokens")?.reason).toMatch(
        /first caller's authorization/,
      );
    }
  });

  it("lists no route the server no longer serves", async () => {
    const routes = await installedRoutes();
    const stale = API_ROUTES.filter(
      (x) => !routes.some((r) => r.path === x.path && (x.method === "*" || r.method === x.method)),
    );
    expect(stale).toEqual([]);
  });

  it("matches Hono path patterns segment by segment", () => {
    expect(
      routePattern("/assistants/:assistant_id/subgraphs/:namespace?").test("/assistants/a/subgraphs"),
    ).toBe(true);
    expect(
      routePattern("/assistants/:assistant_id/subgraphs/:namespace?").test("/assistants/a/subgraphs/n"),
    ).toBe(true);
    expect(routePattern("/threads/:thread_id/commands").test("/threads/a/b/commands")).toBe(false);
    expect(refusedRoute("GET", "/threads/t1/runs/r1/stream", "tokens")).toBeNull();
    expect(refusedRoute("GET", "/runs/r1/stream", "tokens")?.reason).toMatch(/owner is never checked/);
    expect(refusedRoute("POST", "/internal/truncate", "open")?.reason).toMatch(/internal maintenance/);
    expect(threadOfPath("/threads/t%201/commands")).toBe("t 1");
    expect(threadOfPath("/threads/search")).toBe("");
  });
});
