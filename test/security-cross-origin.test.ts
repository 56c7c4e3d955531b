/**
 * Browsers on other sites against the LangGraph API in open mode (no token file, the `npm run dev`
 * default), through the real dev server: a page the approver visits must not be able to read an
 * approval's hash and nonce or resume the thread as a self-declared approver, neither by CORS nor by a
 * "simple" text/plain POST that needs no preflight, nor through a DNS-rebound host name. Studio's
 * origin and this server's own pages keep working; clients without Origin (the SDK) are unaffected.
 * Writes are counted in the emulator's call log.
 */
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { envFor, startPortal, tempDir, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { browserOriginProblem, originPolicyFromEnvironment } from "../src/auth/origin.js";

const GRAPH_ID = "bitrix24_task_agent";
const EVIL = "https://evil.example";
const STUDIO = "https://smith.langchain.com";

interface ApprovalPayload {
  kind: string;
  envelopeHash: string;
  nonce: string;
}

let portal: Portal;
let server: RunningDevServer;
let client: Client;

beforeAll(async () => {
  portal = await startPortal();
  server = await startDevServer(envFor(portal, tempDir("ae-cross-origin-")));
  client = new Client({ apiUrl: server.apiUrl, apiKey: null, callerOptions: { maxRetries: 0 } });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A raw HTTP request, so that Host and Origin are exactly what a browser would send. */
function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const url = new URL(path, server.apiUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: {
          ...(body !== undefined ? { "content-length": String(Buffer.byteLength(body)) } : {}),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

async function waitingApproval(): Promise<{ threadId: string; payload: ApprovalPayload }> {
  const thread = await client.threads.create();
  const first = (await client.runs.wait(thread.thread_id, GRAPH_ID, {
    input: { request: "rename task 4 to Quarterly plan", requestedBy: "demo-user" },
  })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
  const payload = first.__interrupt__?.[0]?.value;
  expect(payload?.kind, JSON.stringify(first).slice(0, 500)).toBe("approval");
  return { threadId: thread.thread_id, payload: payload! };
}

const resumeBody = (p: ApprovalPayload) =>
  JSON.stringify({
    assistant_id: GRAPH_ID,
    command: {
      resume: {
        decisions: [
          {
            type: "approve",
            envelopeHash: p.envelopeHash,
            nonce: p.nonce,
            approver: { id: "demo-approver" },
          },
        ],
      },
    },
  });

const hostOf = () => new URL(server.apiUrl).host;

describe("open mode: another site's page", () => {
  it("gets no CORS permission: the preflight names no allowed origin", async () => {
    const pre = await send("OPTIONS", "/threads/search", {
      host: hostOf(),
      origin: EVIL,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type",
    });
    expect(pre.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("cannot read the waiting approval's hash and nonce (POST /threads/search refused with 403)", async () => {
    const { threadId } = await waitingApproval();
    const search = await send(
      "POST",
      "/threads/search",
      { host: hostOf(), origin: EVIL, "content-type": "text/plain" },
      JSON.stringify({ limit: 10 }),
    );
    expect(search.status, search.body).toBe(403);
    expect(search.headers["access-control-allow-origin"]).toBeUndefined();
    expect(search.body).not.toContain(threadId);
    const state = await send("GET", `/threads/${threadId}/state`, { host: hostOf(), origin: EVIL });
    expect(state.status, state.body).toBe(403);
  });

  it("cannot resume with a self-declared approver by a simple text/plain POST: 403, the approval still waits, nothing written", async () => {
    const { threadId, payload } = await waitingApproval();
    const forged = await send(
      "POST",
      `/threads/${threadId}/runs/wait`,
      { host: hostOf(), origin: EVIL, "content-type": "text/plain" },
      resumeBody(payload),
    );
    expect(forged.status, forged.body).toBe(403);
    // A no-cors request without Origin that the browser marks cross-site is refused too.
    const noOrigin = await send(
      "POST",
      `/threads/${threadId}/runs/wait`,
      { host: hostOf(), "sec-fetch-site": "cross-site", "content-type": "text/plain" },
      resumeBody(payload),
    );
    expect(noOrigin.status, noOrigin.body).toBe(403);
    const after = await client.threads.get(threadId);
    expect(after.status).toBe("interrupted");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("cannot reach the server through a DNS-rebound name (Host not loopback), even as its own origin", async () => {
    const { threadId, payload } = await waitingApproval();
    const port = new URL(server.apiUrl).port;
    const rebound = `evil.example:${port}`;
    const forged = await send(
      "POST",
      `/threads/${threadId}/runs/wait`,
      { host: rebound, origin: `http://${rebound}`, "content-type": "text/plain" },
      resumeBody(payload),
    );
    expect(forged.status, forged.body).toBe(403);
    const search = await send(
      "POST",
      "/threads/search",
      { host: rebound, "content-type": "application/json" },
      "{}",
    );
    expect(search.status, search.body).toBe(403);
    expect((await client.threads.get(threadId)).status).toBe("interrupted");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("open mode: what keeps working", () => {
  it("Studio's origin gets its CORS answer and is served", async () => {
    const pre = await send("OPTIONS", "/threads/search", {
      host: hostOf(),
      origin: STUDIO,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type",
    });
    expect(pre.headers["access-control-allow-origin"]).toBe(STUDIO);
    const search = await send(
      "POST",
      "/threads/search",
      { host: hostOf(), origin: STUDIO, "content-type": "application/json" },
      JSON.stringify({ limit: 1 }),
    );
    expect(search.status, search.body).toBe(200);
    expect(search.headers["access-control-allow-origin"]).toBe(STUDIO);
    expect(search.headers["access-control-expose-headers"]).toMatch(/content-location/i);
  });

  it("this server's own origin, localhost by name, and the SDK (no Origin) are served; the approval then runs once", async () => {
    const own = await send(
      "POST",
      "/threads/search",
      { host: hostOf(), origin: server.apiUrl, "content-type": "application/json" },
      "{}",
    );
    expect(own.status, own.body).toBe(200);
    const port = new URL(server.apiUrl).port;
    const byName = await send(
      "POST",
      "/threads/search",
      { host: `localhost:${port}`, "content-type": "application/json" },
      "{}",
    );
    expect(byName.status, byName.body).toBe(200);
    const before = (await portal.writes()).length;
    const { threadId, payload } = await waitingApproval();
    const done = (await client.runs.wait(threadId, GRAPH_ID, {
      command: { resume: JSON.parse(resumeBody(payload)).command.resume },
    })) as { outcome?: string };
    expect(done.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(before + 1);
  });
});

describe("the origin and host rules (src/auth/origin.ts)", () => {
  const req = (headers: Record<string, string>) =>
    new Request("http://127.0.0.1:9/threads/search", { method: "POST", headers });
  it("with a token file the Host is not restricted, but another site's Origin still is", () => {
    const tokens = originPolicyFromEnvironment(false, {});
    expect(browserOriginProblem(req({ host: "agents.example.com" }), tokens)).toBeNull();
    expect(
      browserOriginProblem(req({ host: "agents.example.com", origin: "https://agents.example.com" }), tokens),
    ).toBeNull();
    expect(browserOriginProblem(req({ host: "agents.example.com", origin: EVIL }), tokens)).toMatch(
      /evil\.example/,
    );
    expect(browserOriginProblem(req({ host: "agents.example.com", origin: "null" }), tokens)).toMatch(
      /origin "null"/,
    );
  });
  it("open mode: loopback names on any port, plus ACTION_ENVELOPE_API_HOSTS and ACTION_ENVELOPE_API_ORIGINS", () => {
    const open = originPolicyFromEnvironment(true, {
      ACTION_ENVELOPE_API_HOSTS: "devbox.lan",
      ACTION_ENVELOPE_API_ORIGINS: "http://localhost:5173/",
    });
    for (const host of ["127.0.0.1:2025", "localhost:80", "[::1]:3000", "LOCALHOST", "devbox.lan:8123"])
      expect(browserOriginProblem(req({ host }), open), host).toBeNull();
    for (const host of ["evil.example:2025", "127.0.0.1.evil.example", "", "localhost.evil.example:1"])
      expect(browserOriginProblem(req({ host }), open), host).toMatch(/not a loopback name/);
    expect(
      browserOriginProblem(req({ host: "127.0.0.1:2025", origin: "http://localhost:5173" }), open),
    ).toBeNull();
    expect(
      browserOriginProblem(req({ host: "127.0.0.1:2025", origin: "http://localhost:5174" }), open),
    ).toMatch(/refused/);
    expect(browserOriginProblem(req({ host: "127.0.0.1:2025", origin: STUDIO }), open)).toBeNull();
  });
});
