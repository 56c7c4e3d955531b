/**
 * The web inbox mounted next to the LangGraph API (langgraph.json "http".app → src/inbox/mount.ts),
 * through the real dev server (npm run dev): a thread started over the API is listed under /inbox,
 * the same sign-in / CSRF / cross-site rules apply, and an approval there executes it once, visible
 * to the API as the thread's state.
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { hashPassword } from "../src/inbox/users.js";
import { envFor, startPortal, tempDir, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";

const GRAPH_ID = "bitrix24_task_agent";
let portal: Portal;
let server: RunningDevServer;

class Browserless {
  cookies = new Map<string, string>();
  constructor(readonly origin: string) {}
  async req(
    p: string,
    form?: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const res = await fetch(this.origin + p, {
      method: form ? "POST" : "GET",
      headers: {
        cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        accept: "text/html",
        ...(form ? { "content-type": "application/x-www-form-urlencoded", origin: this.origin } : {}),
        ...headers,
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
      redirect: "manual",
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      if (/max-age=0/i.test(c)) this.cookies.delete(pair!.slice(0, eq));
      else this.cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    return res;
  }
}

describe("web inbox mounted in the LangGraph API server under /inbox", () => {
  beforeAll(async () => {
    portal = await startPortal();
    const dataDir = tempDir("ae-inbox-api-");
    const usersFile = path.join(dataDir, "inbox-users.json");
    fs.writeFileSync(
      usersFile,
      JSON.stringify({ users: [{ id: "alice", password: await hashPassword("alice-password-1") }] }),
    );
    server = await startDevServer(envFor(portal, dataDir, { ACTION_ENVELOPE_INBOX_USERS: usersFile }));
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await portal?.emulator.close();
  });

  it("lists a thread started over the API, keeps the sign-in and CSRF rules, and an approval there executes it once", async () => {
    const client = new Client({ apiUrl: server.apiUrl });
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, GRAPH_ID, {
      input: { request: "rename task 4 to Approved under /inbox", requestedBy: "demo-user" },
    });
    const payload = (await client.threads.getState(thread.thread_id)).tasks[0]!.interrupts[0]!.value as {
      envelopeHash: string;
      nonce: string;
    };

    const b = new Browserless(server.apiUrl);
    const home = await b.req("/inbox/");
    expect(home.status).toBe(303);
    expect(home.headers.get("location")).toBe("/inbox/login");
    const login = await (await b.req("/inbox/login")).text();
    expect(login).toContain('action="/inbox/login"');
    expect(login).toContain('href="/inbox/static/inbox.css"');
    expect((await b.req("/inbox/static/inbox.js")).status).toBe(200);
    const loginCsrf = /name="csrf" value="([^"]+)"/.exec(login)![1]!;
    expect(
      (await b.req("/inbox/login", { csrf: loginCsrf, user: "alice", password: "wrong-password" })).status,
    ).toBe(401);
    const signedIn = await b.req("/inbox/login", {
      csrf: /name="csrf" value="([^"]+)"/.exec(await (await b.req("/inbox/login")).text())![1]!,
      user: "alice",
      password: "alice-password-1",
    });
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get("location")).toBe("/inbox/");

    const list = await (await b.req("/inbox/")).text();
    expect(list).toContain(`href="/inbox/t/${thread.thread_id}"`);
    const card = await (await b.req(`/inbox/t/${thread.thread_id}`)).text();
    expect(card).toContain(payload.envelopeHash);
    expect(card).toContain(`action="/inbox/t/${thread.thread_id}/decide"`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(card)![1]!;
    const form = { action: "approve", envelopeHash: payload.envelopeHash, nonce: payload.nonce };
    // Without the CSRF token, or from another site: refused, nothing written.
    expect((await b.req(`/inbox/t/${thread.thread_id}/decide`, form)).status).toBe(403);
    expect(
      (
        await b.req(
          `/inbox/t/${thread.thread_id}/decide`,
          { ...form, csrf },
          { origin: "https://evil.example" },
        )
      ).status,
    ).toBe(403);
    // Another host name (DNS rebinding): refused.
    const rebound = await new Promise<number>((resolve, reject) => {
      const u = new URL(`${server.apiUrl}/inbox/login`);
      http
        .get(
          { host: u.hostname, port: u.port, path: u.pathname, headers: { host: "evil.example" } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        )
        .on("error", reject);
    });
    expect(rebound).toBe(421);
    expect(await portal.writes()).toHaveLength(0);

    const decided = await b.req(`/inbox/t/${thread.thread_id}/decide`, { ...form, csrf });
    expect(decided.status).toBe(200);
    expect(await decided.text()).toContain("VERIFIED");
    expect((await portal.writes()).map((w) => w.params)).toEqual([
      { taskId: 4, fields: { TITLE: "Approved under /inbox" } },
    ]);
    // The API sees the outcome in the thread's state (same checkpointer).
    const done = (await client.threads.getState(thread.thread_id)).values as {
      outcome?: string;
      decision?: { approverId: string; verifiedBy: string };
    };
    expect(done.outcome).toBe("VERIFIED");
    expect(done.decision).toMatchObject({ approverId: "alice", verifiedBy: "authentication" });
    // The API's own routes are unaffected.
    expect((await fetch(`${server.apiUrl}/ok`)).status).toBe(200);
    // The API's own thread record follows (not left "interrupted", so `pending --api` no longer lists it).
    expect((await client.threads.get(thread.thread_id)).status).toBe("idle");
  }, 120_000);
});
