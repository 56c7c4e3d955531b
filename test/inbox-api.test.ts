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
import { envFor, journalSql, startPortal, tempDir, until, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";

const GRAPH_ID = "bitrix24_task_agent";
let portal: Portal;
let server: RunningDevServer;
let dataDir: string;

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

beforeAll(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-inbox-api-");
  const usersFile = path.join(dataDir, "inbox-users.json");
  fs.writeFileSync(
    usersFile,
    JSON.stringify({ users: [{ id: "alice", password: await hashPassword("alice-password-1") }] }),
  );
  server = await startDevServer(
    // Reads held by the portal (the race below) stay well inside the client's timeout.
    envFor(portal, dataDir, { ACTION_ENVELOPE_INBOX_USERS: usersFile, BITRIX24_TIMEOUT_MS: "8000" }),
  );
}, 180_000);
afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
});

describe("web inbox mounted in the LangGraph API server under /inbox", () => {
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

/** Signed in to the inbox under /inbox as alice; `card` is the thread's page as she sees it. */
async function signedInAlice(threadId: string): Promise<{ b: Browserless; csrf: string }> {
  const b = new Browserless(server.apiUrl);
  const login = await (await b.req("/inbox/login")).text();
  const signedIn = await b.req("/inbox/login", {
    csrf: /name="csrf" value="([^"]+)"/.exec(login)![1]!,
    user: "alice",
    password: "alice-password-1",
  });
  expect(signedIn.status).toBe(303);
  const card = await (await b.req(`/inbox/t/${threadId}`)).text();
  return { b, csrf: /name="csrf" value="([^"]+)"/.exec(card)![1]! };
}

describe("an approval from /inbox and a run over the API at the same moment", () => {
  it("the API run fails IN_PROGRESS while the inbox's run holds the thread; one write, and the outcome is the write's", async () => {
    const client = new Client({ apiUrl: server.apiUrl });
    const thread = await client.threads.create();
    const threadId = thread.thread_id;
    await client.runs.wait(threadId, GRAPH_ID, {
      input: { request: "rename task 5 to Raced under /inbox", requestedBy: "demo-user" },
    });
    const payload = (await client.threads.getState(threadId)).tasks[0]!.interrupts[0]!.value as {
      envelopeHash: string;
      nonce: string;
    };
    const { b, csrf } = await signedInAlice(threadId);
    const before = (await portal.writes()).length;
    // Every read of the task is held by the portal, so the inbox's run (which claimed the approval) is
    // in its pre-read when the API run arrives; without the thread's lease that run would carry the
    // same action out too, and its pre-read, answered after the inbox's write, would see the task
    // changed and close the action NOT_EXECUTED while the write had landed.
    await portal.fault({ kind: "latency", method: "tasks.task.get", ms: 2500, times: 0 });
    try {
      const inbox = b.req(`/inbox/t/${threadId}/decide`, {
        action: "approve",
        envelopeHash: payload.envelopeHash,
        nonce: payload.nonce,
        csrf,
      });
      await until("the inbox's claim", async () => {
        const rows = await journalSql(dataDir, "SELECT phase FROM T.actions WHERE thread_id = ?", [threadId]);
        return rows.some((r) => r["phase"] === "decided");
      });
      await new Promise((r) => setTimeout(r, 400));
      // Another approver's approval of the same card over the API (open API: self-declared), meanwhile.
      const run = await client.runs.create(threadId, GRAPH_ID, {
        command: {
          resume: {
            decisions: [
              {
                type: "approve",
                envelopeHash: payload.envelopeHash,
                nonce: payload.nonce,
                approver: { id: "demo-approver" },
              },
            ],
          },
        },
      });
      const page = await (await inbox).text();
      // The API run came while the inbox's run held the thread: it failed before any step, saying why.
      const joined: unknown = await client.runs.join(threadId, run.run_id).catch((e: unknown) => e);
      expect(JSON.stringify(joined)).toContain("another process is working on this thread right now");
      expect((await client.runs.get(threadId, run.run_id)).status).toBe("error");
      const writes = (await portal.writes()).slice(before);
      expect(writes.map((w) => w.params)).toEqual([{ taskId: 5, fields: { TITLE: "Raced under /inbox" } }]);
      expect((await portal.task(5)).title).toBe("Raced under /inbox");
      // The write went out and is on the task: no view may report it NOT_EXECUTED.
      const [row] = await journalSql(
        dataDir,
        "SELECT phase, progress_json FROM T.actions WHERE thread_id = ?",
        [threadId],
      );
      const closed = (JSON.parse(String(row!["progress_json"])) as { closed?: { outcome: string } }).closed;
      expect(closed).toMatchObject({ outcome: "VERIFIED" });
      expect(((await client.threads.getState(threadId)).values as { outcome?: string }).outcome).toBe(
        "VERIFIED",
      );
      expect(page).not.toContain("NOT_EXECUTED");
    } finally {
      await portal.clearFaults();
    }
  }, 120_000);
});
