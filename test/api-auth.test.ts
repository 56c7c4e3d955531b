/**
 * LangGraph API authentication and authorization (src/auth/), through the real dev server and
 * @langchain/langgraph-sdk: one server open (no ACTION_ENVELOPE_API_TOKENS), one with a token file.
 * In both, nothing an API client sends may rewrite graph state (updateState, command.goto/update,
 * breakpoints, runs from a chosen checkpoint, copies); with tokens, callers are who their token says,
 * and the approval is bound to that identity. Writes are counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { spawn } from "node:child_process";
import {
  DEFAULT_POLICY,
  ROOT,
  envFor,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  until,
  type Portal,
} from "./support/harness.js";
import {
  DEV_SERVER_ARGS,
  isolatedConfig,
  startDevServer,
  type RunningDevServer,
} from "./support/dev-server.js";
import { newApiToken, parseApiTokens, principalFor, sha256Hex, type ApiRole } from "../src/auth/tokens.js";
import { classifyRun } from "../src/auth/rules.js";
import { authenticatedIdentity } from "../src/auth/identity.js";
import { ConfigError } from "../src/errors.js";

const GRAPH_ID = "bitrix24_task_agent";

interface ApprovalPayload {
  kind: string;
  envelopeHash: string;
  nonce: string;
  envelope: { params: Record<string, unknown>; object: { id: number } };
}

interface Side {
  portal: Portal;
  dataDir: string;
  server: RunningDevServer;
}

const USERS: Record<string, ApiRole[]> = {
  dave: ["requester"],
  erin: ["requester"],
  alice: ["approver"],
  carol: ["admin"],
};

function clientFor(apiUrl: string, headers: Record<string, string> = {}): Client {
  return new Client({ apiUrl, apiKey: null, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
}

/** The promise must fail with this HTTP status, and its message must match. */
async function refused(p: Promise<unknown>, status: number, message: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e as { status?: number; message?: string },
  );
  expect(err, `expected HTTP ${status}, but the call succeeded`).toBeDefined();
  expect(err!.status, err!.message).toBe(status);
  expect(err!.message).toMatch(message);
}

async function startSide(extraEnv: (dir: string) => Record<string, string>): Promise<Side> {
  const portal = await startPortal();
  const dataDir = tempDir("ae-api-auth-");
  const server = await startDevServer(envFor(portal, dataDir, extraEnv(dataDir)));
  return { portal, dataDir, server };
}

async function toApproval(
  client: Client,
  input: Record<string, unknown>,
): Promise<{ threadId: string; payload: ApprovalPayload }> {
  const thread = await client.threads.create();
  const first = (await client.runs.wait(thread.thread_id, GRAPH_ID, { input })) as {
    __interrupt__?: Array<{ value: ApprovalPayload }>;
  };
  const payload = first.__interrupt__?.[0]?.value;
  expect(payload?.kind, JSON.stringify(first).slice(0, 500)).toBe("approval");
  return { threadId: thread.thread_id, payload: payload! };
}

const approval = (p: ApprovalPayload, approver: string) => ({
  decisions: [{ type: "approve", envelopeHash: p.envelopeHash, nonce: p.nonce, approver: { id: approver } }],
});

async function auditedDecisions(
  side: Side,
  threadId: string,
): Promise<Array<{ id: string; verifiedBy: string }>> {
  const r = await runCli(["audit", "show", threadId, "--json"], envFor(side.portal, side.dataDir));
  expect(r.code, r.stderr).toBe(0);
  const { caseRecord } = parseJsonOutput(r.stdout) as {
    caseRecord: {
      auditRecords: Array<{ event: string; approver: { id: string; verifiedBy: string } | null }>;
    };
  };
  return caseRecord.auditRecords
    .filter((rec) => rec.event === "decision_accepted")
    .map((rec) => ({ id: rec.approver!.id, verifiedBy: rec.approver!.verifiedBy }));
}

/**
 * Every way of rewriting a waiting thread's state, run against one thread: each must be refused with
 * 403, and afterwards the thread still waits for the same envelope and nothing was written.
 */
async function stateRewritesAreRefused(
  client: Client,
  side: Side,
  threadId: string,
  payload: ApprovalPayload,
  approver: string,
  creator = client,
): Promise<void> {
  const history = await client.threads.getHistory(threadId, { limit: 10 });
  const earlier = history.at(-1)!.checkpoint.checkpoint_id!;
  expect(earlier).toBeTruthy();
  const resume = approval(payload, approver);

  await refused(
    client.threads.updateState(threadId, {
      values: { envelopeHash: `sha256:${"0".repeat(64)}` },
      asNode: "build_envelope",
    }),
    403,
    /refused threads:update .*graph state is not editable/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, { command: { goto: "execute" } }),
    403,
    /refused threads:create_run .*command\.goto/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, {
      command: { update: { envelopeHash: `sha256:${"0".repeat(64)}` }, resume },
    }),
    403,
    /command\.update is not accepted/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, { command: { resume }, interruptBefore: ["execute"] }),
    403,
    /interrupt_before is not accepted/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, { command: { resume }, interruptAfter: "*" }),
    403,
    /interrupt_after is not accepted/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, { command: { resume }, checkpointId: earlier }),
    403,
    /chosen checkpoint \(checkpoint_id/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, {
      command: { resume },
      checkpoint: { checkpoint_id: earlier, checkpoint_ns: "", checkpoint_map: {} },
    }),
    403,
    /fork or replay/,
  );
  await refused(
    client.runs.wait(threadId, GRAPH_ID, { command: { resume }, multitaskStrategy: "rollback" }),
    403,
    /multitask_strategy "rollback"/,
  );
  await refused(client.threads.copy(threadId), 403, /copying a thread/);
  await refused(
    client.threads.update(threadId, { metadata: { owner: "mallory" } }),
    403,
    /refused threads:update/,
  );
  await refused(client.threads.delete(threadId), 403, /refused threads:delete/);
  // A new thread with state written into it as if nodes had run.
  await refused(
    creator.threads.create({
      supersteps: [{ updates: [{ values: { outcome: "VERIFIED" }, asNode: "finish" }] }],
    }),
    403,
    /refused threads:update/,
  );

  const state = await client.threads.getState(threadId);
  expect(state.next).toEqual(["await_approval"]);
  expect((state.values as { envelopeHash: string }).envelopeHash).toBe(payload.envelopeHash);
  expect((await client.threads.getHistory(threadId, { limit: 50 })).length).toBe(history.length);
  expect(await side.portal.writes()).toEqual([]);
}

let open: Side;
let guarded: Side;
const tokens: Record<string, string> = {};
let tokenFile = "";

beforeAll(async () => {
  const dir = tempDir("ae-api-tokens-");
  tokenFile = path.join(dir, "api-tokens.json");
  const entries = Object.entries(USERS).map(([identity, roles]) => {
    const made = newApiToken(identity, roles);
    tokens[identity] = made.token;
    return made.entry;
  });
  fs.writeFileSync(tokenFile, JSON.stringify({ tokens: entries }, null, 2));
  // Both servers start at once: each takes 5-20 s.
  // The repository's default policy as it is: a high-risk change needs a verified requester.
  const policy = { ACTION_ENVELOPE_POLICY: DEFAULT_POLICY };
  [open, guarded] = await Promise.all([
    startSide(() => policy),
    startSide(() => ({ ...policy, ACTION_ENVELOPE_API_TOKENS: tokenFile })),
  ]);
}, 180_000);

afterAll(async () => {
  for (const side of [open, guarded]) {
    if (!side) continue;
    await side.server.stop();
    await side.portal.emulator.close();
  }
}, 90_000);

describe("token file", () => {
  it("keeps hashes only and finds the principal of a token", () => {
    const { token, entry } = newApiToken("alice", ["approver", "approver"]);
    expect(entry).toEqual({ token_sha256: sha256Hex(token), identity: "alice", roles: ["approver"] });
    const table = parseApiTokens(JSON.stringify({ tokens: [entry] }), "/etc/t.json");
    expect(JSON.stringify(table.entries)).not.toContain(token);
    expect(principalFor(table, token)).toEqual({ identity: "alice", roles: ["approver"] });
    expect(principalFor(table, `${token}x`)).toBeUndefined();
  });

  it("names the file and the bad entry", () => {
    const error = (text: string) => {
      try {
        parseApiTokens(text, "/etc/t.json");
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error("expected a ConfigError");
    };
    const ok = { token_sha256: "a".repeat(64), identity: "alice", roles: ["approver"] };
    expect(error("{")).toMatch(/^ACTION_ENVELOPE_API_TOKENS file \/etc\/t\.json: is not JSON/);
    expect(error(JSON.stringify({ tokens: [ok, { ...ok, token_sha256: "s3cret", identity: "bob" }] }))).toBe(
      'ACTION_ENVELOPE_API_TOKENS file /etc/t.json: tokens[1] (identity "bob").token_sha256: must be 64 lower-case hex characters: the sha256 of the token (sha256sum), not the token itself',
    );
    expect(error(JSON.stringify({ tokens: [{ ...ok, roles: ["boss"] }] }))).toMatch(
      /tokens\[0\] \(identity "alice"\)\.roles\.0: each role must be one of requester, approver, admin/,
    );
    expect(error(JSON.stringify({ tokens: [ok, { ...ok, identity: "bob" }] }))).toMatch(
      /tokens\[1\] \(identity "bob"\): token_sha256 repeats tokens\[0\]/,
    );
    expect(error(JSON.stringify({ tokens: [] }))).toMatch(/tokens: must list at least one token/);
  });

  it("classifies runs: only command.resume, no breakpoints, no chosen checkpoint", () => {
    expect(classifyRun({ input: { request: "x" } }, "reject")).toEqual({ kind: "input" });
    expect(classifyRun({ command: { resume: { decisions: [] } } }, undefined)).toEqual({ kind: "resume" });
    expect(classifyRun({ input: null, interrupt_before: [] }, "enqueue")).toEqual({ kind: "continue" });
    expect(classifyRun({ command: { resume: 1, graph: "PARENT" } }, undefined)).toMatchObject({
      refused: expect.stringMatching(/command\.graph/),
    });
    expect(classifyRun({ config: { configurable: { thread_ts: "1" } } }, undefined)).toMatchObject({
      refused: expect.stringMatching(/thread_ts/),
    });
    expect(classifyRun({ config: { configurable: { checkpoint_ns: "" } } }, undefined)).toEqual({
      kind: "continue",
    });
    expect(classifyRun({ input: { request: "x" }, command: { resume: 1 } }, undefined)).toMatchObject({
      refused: expect.stringMatching(/not both/),
    });
    expect(classifyRun({ input: { request: "x" }, temporary: true }, undefined)).toMatchObject({
      refused: expect.stringMatching(/temporary thread that the server deletes/),
    });
    expect(classifyRun({ input: { request: "x" }, temporary: false }, undefined)).toEqual({ kind: "input" });
    expect(
      classifyRun({ input: { request: "x" }, webhook: "http://10.0.0.1/hook" }, undefined),
    ).toMatchObject({ refused: expect.stringMatching(/webhook \("http:\/\/10\.0\.0\.1\/hook"\)/) });
    expect(classifyRun({ command: { resume: 1 }, webhook: "/threads" }, undefined)).toMatchObject({
      refused: expect.stringMatching(/POST the thread's state/),
    });
  });
});

describe("identity inside the graph", () => {
  it("only a token-authenticated langgraph_auth_user counts; the open-mode user and the CLI have none", () => {
    const user = (u: Record<string, unknown>) => ({ langgraph_auth_user: u });
    expect(
      authenticatedIdentity(
        user({ identity: "alice", is_authenticated: true, permissions: ["role:approver"] }),
      ),
    ).toBe("alice");
    expect(
      authenticatedIdentity(
        user({
          identity: "",
          display_name: "anonymous",
          is_authenticated: false,
          permissions: ["unauthenticated"],
        }),
      ),
    ).toBeUndefined();
    expect(
      authenticatedIdentity(
        user({ identity: "anonymous", is_authenticated: true, permissions: ["unauthenticated"] }),
      ),
    ).toBeUndefined();
    expect(authenticatedIdentity({ thread_id: "t" })).toBeUndefined();
    expect(authenticatedIdentity(undefined)).toBeUndefined();
  });
});

/** Starts npm run dev with these variables (ACTION_ENVELOPE_API_TOKENS taken from env only) and waits for it to exit. */
async function devServerExit(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const project = isolatedConfig();
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k !== "ACTION_ENVELOPE_API_TOKENS"),
  );
  const child = spawn(process.execPath, [...DEV_SERVER_ARGS, "--config", project.file, "--no-reload"], {
    cwd: ROOT,
    env: { ...inherited, ACTION_ENVELOPE_DATA_DIR: tempDir(), MODEL: "offline", NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, out };
}

describe("a bad token setting stops npm run dev before the server starts", () => {
  it("a bad entry, naming the file and the entry", async () => {
    const file = path.join(tempDir("ae-api-tokens-"), "bad.json");
    fs.writeFileSync(
      file,
      JSON.stringify({ tokens: [{ token_sha256: "s3cret-token", identity: "mallory", roles: ["admin"] }] }),
    );
    const { code, out } = await devServerExit({ ACTION_ENVELOPE_API_TOKENS: file });
    expect(code, out).toBe(1);
    expect(out).toContain(
      `configuration error: ACTION_ENVELOPE_API_TOKENS file ${file}: tokens[0] (identity "mallory").token_sha256: must be 64 lower-case hex characters`,
    );
    expect(out).not.toMatch(/API:\s+http/);
  }, 120_000);

  it("set but empty, unreadable, or writable by every user: each named, with the fix", async () => {
    const empty = await devServerExit({ ACTION_ENVELOPE_API_TOKENS: "" });
    expect(empty.code, empty.out).toBe(1);
    expect(empty.out).toContain(
      "configuration error: ACTION_ENVELOPE_API_TOKENS is set but empty, which would leave the LangGraph API open to every caller",
    );

    const file = path.join(tempDir("ae-api-tokens-"), "api-tokens.json");
    const missing = await devServerExit({ ACTION_ENVELOPE_API_TOKENS: file });
    expect(missing.code, missing.out).toBe(1);
    expect(missing.out).toContain(`ACTION_ENVELOPE_API_TOKENS file ${file}: cannot be read (ENOENT)`);

    fs.writeFileSync(file, JSON.stringify({ tokens: [newApiToken("alice", ["approver"]).entry] }));
    fs.chmodSync(file, 0o666);
    const loose = await devServerExit({ ACTION_ENVELOPE_API_TOKENS: file });
    expect(loose.code, loose.out).toBe(1);
    expect(loose.out).toContain(`ACTION_ENVELOPE_API_TOKENS ${file} is writable by every user (mode 0666)`);
    expect(loose.out).toContain(`fix: chmod 644 ${file}`);
    for (const r of [empty, missing, loose]) expect(r.out).not.toMatch(/API:\s+http/);
  }, 120_000);

  it("the start-up banner says whether the server is open or takes tokens", () => {
    expect(open.server.output()).toMatch(
      /auth: +OPEN: ACTION_ENVELOPE_API_TOKENS is not set, so every caller is anonymous/,
    );
    expect(guarded.server.output()).toContain(`auth:   API tokens from ${tokenFile} (4 entries)`);
  });
});

describe("open development mode (ACTION_ENVELOPE_API_TOKENS unset)", () => {
  it("serves anyone, and loads the auth module with Studio's header bypass disabled", async () => {
    expect(open.server.project.auth).toMatchObject({ disable_studio_auth: true });
    expect(path.isAbsolute(open.server.project.auth!.path.split(":")[0]!)).toBe(true);
    const client = clientFor(open.server.apiUrl, { "x-auth-scheme": "langsmith" });
    expect((await client.assistants.search({ graphId: GRAPH_ID })).map((a) => a.graph_id)).toContain(
      GRAPH_ID,
    );
    // The server routes the decoded path: an escaped letter reaches the same route and is refused alike.
    for (const route of ["/internal/truncate", "/%69nternal/truncate"]) {
      const res = await fetch(`${open.server.apiUrl}${route}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ threads: true, checkpointer: true }),
      });
      expect(res.status, route).toBe(403);
      expect(await res.text(), route).toMatch(/internal maintenance routes are not served/);
    }
  });

  it("refuses a run without a thread, which the server would delete with its checkpoints when it ends", async () => {
    const client = clientFor(open.server.apiUrl);
    const input = { request: "rename task 4 to Stateless", requestedBy: "demo-user" };
    await refused(client.runs.wait(null, GRAPH_ID, { input }), 403, /a run without a thread/);
    const batch = await fetch(`${open.server.apiUrl}/runs/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify([{ assistant_id: GRAPH_ID, input }]),
    });
    expect(batch.status).toBe(403);
    expect(await batch.text()).toMatch(/temporary thread that the server deletes/);
    // A run on a thread that names a webhook: the server would POST the thread's state there.
    const { thread_id } = await client.threads.create();
    await refused(
      client.runs.wait(thread_id, GRAPH_ID, { input, webhook: "http://127.0.0.1:9/hook" }),
      403,
      /a run with a webhook/,
    );
  });

  it("refuses every state rewrite with 403 and writes nothing; the approval then counts as self-declared", async () => {
    const client = clientFor(open.server.apiUrl);
    const { threadId, payload } = await toApproval(client, {
      request: "rename task 4 to X",
      requestedBy: "demo-user",
    });
    await stateRewritesAreRefused(client, open, threadId, payload, "demo-approver");

    // A user smuggled into the run's config is overwritten by the server's, which open mode does not pass on.
    const forged = {
      configurable: {
        langgraph_auth_user: {
          identity: "demo-approver",
          is_authenticated: true,
          permissions: ["role:approver"],
        },
      },
    };
    const final = (await client.runs.wait(threadId, GRAPH_ID, {
      command: { resume: approval(payload, "demo-approver") },
      config: forged,
    })) as Record<string, unknown>;
    expect(final["outcome"], JSON.stringify(final).slice(0, 3000)).toBe("VERIFIED");
    const writes = await open.portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "X" });
    expect(await auditedDecisions(open, threadId)).toEqual([
      { id: "demo-approver", verifiedBy: "self_declared" },
    ]);
  });
});

describe("row 9: a resume that is not a decision, to a waiting approval", () => {
  it("null fails the run naming what to send (RESUME_MISSING), other non-objects are refused MALFORMED; each audited, the approval keeps waiting", async () => {
    const client = clientFor(open.server.apiUrl);
    const before = (await open.portal.writes()).length;
    const { threadId, payload } = await toApproval(client, {
      request: "rename task 4 to Nine",
      requestedBy: "demo-user",
    });
    await expect(client.runs.wait(threadId, GRAPH_ID, { command: { resume: null } })).rejects.toThrow(
      /"error":"ResumeMissing","message":"RESUME_MISSING: command\.resume is null, so nothing was decided; this thread still waits for an approval: resume with \{\\?"decisions\\?":/,
    );
    // The same through the streaming route.
    const events: Array<{ event: string; data: unknown }> = [];
    for await (const chunk of client.runs.stream(threadId, GRAPH_ID, { command: { resume: null } }))
      events.push(chunk as { event: string; data: unknown });
    expect(JSON.stringify(events.filter((e) => e.event === "error"))).toMatch(/RESUME_MISSING/);
    for (const resume of [5, "approve", false, [] as unknown[]]) {
      await client.runs.wait(threadId, GRAPH_ID, { command: { resume } });
      const values = (await client.threads.getState(threadId)).values as {
        refusals?: Array<{ code: string; reason: string }>;
      };
      expect(
        values.refusals?.at(-1),
        `${JSON.stringify(resume)} -> ${JSON.stringify(values.refusals)}`,
      ).toMatchObject({
        code: "MALFORMED",
        reason: expect.stringMatching(/^expected \{"decisions":\[<one decision>\]\}/),
      });
    }
    const state = await client.threads.getState(threadId);
    expect(state.next).toEqual(["await_approval"]);
    const r = await runCli(["audit", "show", threadId, "--json"], envFor(open.portal, open.dataDir));
    const records = (
      parseJsonOutput(r.stdout) as {
        caseRecord: { auditRecords: Array<{ event: string; refusal: { code: string } | null }> };
      }
    ).caseRecord.auditRecords;
    expect(records.filter((x) => x.event === "decision_refused").map((x) => x.refusal!.code)).toEqual([
      "RESUME_MISSING",
      "RESUME_MISSING",
      "MALFORMED",
      "MALFORMED",
      "MALFORMED",
      "MALFORMED",
    ]);
    expect((await open.portal.writes()).length).toBe(before);

    const final = (await client.runs.wait(threadId, GRAPH_ID, {
      command: { resume: approval(payload, "demo-approver") },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    expect((await open.portal.writes()).length).toBe(before + 1);
  });
});

describe("with a token file (ACTION_ENVELOPE_API_TOKENS)", () => {
  const as = (who: string) => clientFor(guarded.server.apiUrl, { Authorization: `Bearer ${tokens[who]}` });
  let threadId = "";
  let payload: ApprovalPayload;

  it("answers 401 without a token, with an unknown one, and to the x-auth-scheme: langsmith header", async () => {
    await refused(clientFor(guarded.server.apiUrl).threads.create(), 401, /missing Authorization: Bearer/);
    await refused(
      clientFor(guarded.server.apiUrl, { Authorization: "Bearer ae_not-a-token" }).threads.search(),
      401,
      /unknown API token/,
    );
    await refused(
      clientFor(guarded.server.apiUrl, { Authorization: `Basic ${tokens["alice"]}` }).threads.search(),
      401,
      /must be: Bearer/,
    );
    await refused(
      clientFor(guarded.server.apiUrl, { "x-auth-scheme": "langsmith" }).threads.search(),
      401,
      /missing Authorization/,
    );
    await refused(
      clientFor(guarded.server.apiUrl, { "x-auth-scheme": "langsmith" }).assistants.search({
        graphId: GRAPH_ID,
      }),
      401,
      /missing Authorization/,
    );
    const res = await fetch(`${guarded.server.apiUrl}/threads/search`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    // The readiness probe of npm run dev needs no token and shows nothing.
    expect((await fetch(`${guarded.server.apiUrl}/ok`)).status).toBe(200);
    // The mounted web inbox signs its users in itself: no Bearer demanded there, and nothing else is opened by it.
    const inbox = await fetch(`${guarded.server.apiUrl}/inbox/`, { redirect: "manual" });
    expect(inbox.status, await inbox.text()).not.toBe(401);
    expect(
      (await fetch(`${guarded.server.apiUrl}/inbox-not-really/threads`, { redirect: "manual" })).status,
    ).toBe(401);
    expect(await guarded.portal.writes()).toEqual([]);
  });

  it("a requester starts a run as themselves; requestedBy naming someone else is refused", async () => {
    const dave = as("dave");
    const thread = await dave.threads.create();
    expect(thread.metadata).toMatchObject({ owner: "dave" });
    await refused(
      dave.runs.wait(thread.thread_id, GRAPH_ID, {
        input: { request: "rename task 4 to X", requestedBy: "erin" },
      }),
      403,
      /REQUESTER_NOT_CALLER: input\.requestedBy is "erin", but the request is authenticated as dave/,
    );
    await refused(
      as("alice").runs.wait(thread.thread_id, GRAPH_ID, { input: { request: "rename task 4 to X" } }),
      403,
      /needs the role requester; alice holds approver/,
    );
    await refused(as("alice").threads.create(), 403, /creating threads needs the role requester/);

    ({ threadId, payload } = await toApproval(dave, { request: "rename task 4 to X" }));
    const state = await dave.threads.getState(threadId);
    expect((state.values as { requestedBy: string }).requestedBy).toBe("dave");
    expect(payload.envelope.params).toEqual({ TITLE: "X" });
    expect(await guarded.portal.writes()).toEqual([]);
  });

  it("another requester cannot see, search, resume or start runs on that thread; approvers and admins can read it", async () => {
    const erin = as("erin");
    await refused(erin.threads.get(threadId), 404, /not found/);
    await refused(erin.threads.getState(threadId), 404, /not found/);
    expect((await erin.threads.search({ limit: 100 })).map((t) => t.thread_id)).not.toContain(threadId);
    await refused(
      erin.runs.wait(threadId, GRAPH_ID, { command: { resume: approval(payload, "erin") } }),
      404,
      /.*/,
    );
    await refused(
      erin.runs.wait(threadId, GRAPH_ID, { input: { request: "rename task 4 to Y" } }),
      404,
      /.*/,
    );

    expect((await as("alice").threads.search({ limit: 100 })).map((t) => t.thread_id)).toContain(threadId);
    expect((await as("carol").threads.getState(threadId)).next).toEqual(["await_approval"]);
    await refused(
      as("carol").runs.wait(threadId, GRAPH_ID, { command: { resume: approval(payload, "carol") } }),
      403,
      /needs the role approver/,
    );
    expect(await guarded.portal.writes()).toEqual([]);
  });

  it("another requester cannot join the owner's run through a thread of their own (404, nothing streamed); the owner and an approver can", async () => {
    const dave = as("dave");
    const own = await dave.threads.create();
    // The run is held at its read of the task, its first events already out. Resumable, as useStream
    // starts its runs: the server keeps the run's events and replays them to a join.
    await guarded.portal.fault({ method: "tasks.task.get", kind: "latency", ms: 2000, times: 1 });
    const run = await dave.runs.create(own.thread_id, GRAPH_ID, {
      input: { request: "rename task 5 to Joined elsewhere" },
      streamResumable: true,
    });
    await until("the run's read of the task", async () => (await guarded.portal.faultsArmed()) === 0);
    const replay = (thread: string, who: string) =>
      fetch(`${guarded.server.apiUrl}/threads/${thread}/runs/${run.run_id}/stream`, {
        headers: { Authorization: `Bearer ${tokens[who]}`, "Last-Event-ID": "-1" },
      });

    const erin = as("erin");
    const mine = await erin.threads.create();
    // The owner's and an approver's joins run to the run's end; another requester's is answered at once.
    const joins = ["dave", "alice"].map(async (who) => {
      const res = await replay(own.thread_id, who);
      return { who, status: res.status, body: await res.text() };
    });
    const leaked = await replay(mine.thread_id, "erin");
    const body = await leaked.text();
    expect(leaked.status, body.slice(0, 300)).toBe(404);
    expect(body).toMatch(/expected a run of thread \S+ that this caller may read, found none with id/);
    expect(body).not.toContain("Joined elsewhere");
    await refused(erin.runs.join(mine.thread_id, run.run_id), 404, /a run is joined through its own thread/);

    for (const { who, status, body: events } of await Promise.all(joins)) {
      expect(status, who).toBe(200);
      expect(events, who).toContain("Joined elsewhere");
      expect(events, who).toContain('"kind":"approval"');
    }
  });

  it("no role may rewrite the thread's state: 403 for the requester and the approver alike, nothing written", async () => {
    await stateRewritesAreRefused(as("alice"), guarded, threadId, payload, "alice", as("dave"));
    await refused(
      as("dave").threads.updateState(threadId, { values: { requestedBy: "alice" } }),
      403,
      /graph state is not editable/,
    );
    await refused(
      as("carol").threads.updateState(threadId, { values: { requestedBy: "alice" } }),
      403,
      /graph state is not editable/,
    );
  });

  it("the approver's decision is bound to the authenticated identity: naming another approver is refused by the graph", async () => {
    const alice = as("alice");
    await alice.runs.wait(threadId, GRAPH_ID, { command: { resume: approval(payload, "bob") } });
    const state = await alice.threads.getState(threadId);
    const refusals = (state.values as { refusals: Array<{ code: string; reason: string }> }).refusals;
    expect(refusals.at(-1)).toMatchObject({ code: "APPROVER_NOT_ALLOWED" });
    expect(refusals.at(-1)!.reason).toMatch(/authenticated as alice, but the decision names approver bob/);
    expect(state.next).toEqual(["await_approval"]);
    expect(await guarded.portal.writes()).toEqual([]);
  });

  it("the approver resumes; exactly the approved envelope is written and the audit log records the authenticated approver", async () => {
    const final = (await as("alice").runs.wait(threadId, GRAPH_ID, {
      command: { resume: approval(payload, "alice") },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    const writes = await guarded.portal.writes();
    expect(writes).toHaveLength(1);
    expect(Number(writes[0]!.params["taskId"])).toBe(4);
    expect(writes[0]!.params["fields"]).toEqual(payload.envelope.params);
    expect(await auditedDecisions(guarded, threadId)).toEqual([
      { id: "alice", verifiedBy: "authentication" },
    ]);
  });
});

describe("protocol routes (POST /threads/{id}/commands, /threads/{id}/stream/events): refused with a token file", () => {
  const as = (who: string) => clientFor(guarded.server.apiUrl, { Authorization: `Bearer ${tokens[who]}` });
  const post = (who: string, route: string, body: unknown) =>
    fetch(`${guarded.server.apiUrl}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", Authorization: `Bearer ${tokens[who]}` },
      body: JSON.stringify(body),
    });

  async function refusedRoutes(
    threadId: string,
  ): Promise<Array<{ caller: string; path: string; code: string }>> {
    const r = await runCli(["audit", "show", threadId, "--json"], envFor(guarded.portal, guarded.dataDir));
    expect(r.code, r.stderr).toBe(0);
    const { caseRecord } = parseJsonOutput(r.stdout) as {
      caseRecord: {
        auditRecords: Array<{
          event: string;
          refusal: { code: string } | null;
          received?: { caller: string; path: string };
        }>;
      };
    };
    return caseRecord.auditRecords
      .filter((rec) => rec.event === "request_refused")
      .map((rec) => ({ caller: rec.received!.caller, path: rec.received!.path, code: rec.refusal!.code }));
  }

  it("rows 1-3: an approver's read, then the requester's own approval, another requester's state.get and cancel: 403 each, audited, nothing written", async () => {
    const before = (await guarded.portal.writes()).length;
    const { threadId, payload } = await toApproval(as("dave"), { request: "rename task 4 to Protocol" });
    const commands = `/threads/${threadId}/commands`;

    // Row 1: the approver reads the thread once through the protocol route, then the requester sends his own approval there.
    const read = await post("alice", commands, { id: 1, method: "state.get", params: {} });
    expect(read.status).toBe(403);
    const readText = await read.text();
    expect(readText).toMatch(/refused POST \/threads\/.*\/commands: the protocol routes are not served/);
    expect(readText).not.toContain(payload.nonce);
    for (const command of [
      {
        id: 2,
        method: "run.start",
        params: { assistant_id: GRAPH_ID, command: { resume: approval(payload, "alice") } },
      },
      {
        id: 3,
        method: "input.respond",
        params: { interrupt_id: "any", response: approval(payload, "alice") },
      },
    ]) {
      const res = await post("dave", commands, command);
      expect(res.status, await res.clone().text()).toBe(403);
    }
    // Row 2: another requester's state.get shows neither card, hash nor nonce.
    const peek = await post("erin", commands, { id: 4, method: "state.get", params: {} });
    expect(peek.status).toBe(403);
    const peekText = await peek.text();
    expect(peekText).not.toContain(payload.envelopeHash);
    expect(peekText).not.toContain(payload.nonce);
    // Row 3: another requester's cancel decision.
    const cancel = await post("erin", commands, {
      id: 5,
      method: "run.start",
      params: {
        assistant_id: GRAPH_ID,
        command: {
          resume: {
            decisions: [{ type: "cancel", envelopeHash: payload.envelopeHash, nonce: payload.nonce }],
          },
        },
      },
    });
    expect(cancel.status).toBe(403);
    // The event stream, POST (SSE) and GET (the WebSocket upgrade route).
    expect((await post("alice", `/threads/${threadId}/stream/events`, { channels: ["values"] })).status).toBe(
      403,
    );
    const ws = await fetch(`${guarded.server.apiUrl}/threads/${threadId}/stream/events`, {
      headers: { Authorization: `Bearer ${tokens["alice"]}` },
    });
    expect(ws.status).toBe(403);
    // Without a token it is 401, as everywhere, and not audited.
    expect(
      (
        await fetch(`${guarded.server.apiUrl}${commands}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        })
      ).status,
    ).toBe(401);

    const state = await as("alice").threads.getState(threadId);
    expect(state.next).toEqual(["await_approval"]);
    expect((state.values as { envelopeHash: string }).envelopeHash).toBe(payload.envelopeHash);
    expect((await guarded.portal.writes()).length).toBe(before);
    const audited = await refusedRoutes(threadId);
    expect(audited.map((a) => a.caller)).toEqual(["alice", "dave", "dave", "erin", "erin", "alice", "alice"]);
    expect(new Set(audited.map((a) => a.code))).toEqual(new Set(["ROUTE_NOT_SERVED"]));

    // The REST route still serves the approver, under the approver's own identity.
    const final = (await as("alice").runs.wait(threadId, GRAPH_ID, {
      command: { resume: approval(payload, "alice") },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    expect((await guarded.portal.writes()).length).toBe(before + 1);
    expect(await auditedDecisions(guarded, threadId)).toEqual([
      { id: "alice", verifiedBy: "authentication" },
    ]);
  });

  it("refused requests naming a thread, before its run and after it finished, leave its requester: audit show, GET /audit/threads/{id} and audit list still say dave; each refusal names erin", async () => {
    const commands = (id: string) => `/threads/${id}/commands`;
    const refuse = async (id: string) =>
      expect((await post("erin", commands(id), { id: 1, method: "state.get", params: {} })).status).toBe(403);
    const { thread_id: threadId } = await as("dave").threads.create();
    // Another requester sends requests the server does not serve, naming the thread: before its run begins…
    await refuse(threadId);
    const first = (await as("dave").runs.wait(threadId, GRAPH_ID, {
      input: { request: "rename task 5 to Refused later" },
    })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
    const payload = first.__interrupt__![0]!.value;
    const final = (await as("alice").runs.wait(threadId, GRAPH_ID, {
      command: { resume: approval(payload, "alice") },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    // …and after it finished.
    await refuse(threadId);
    const refusal = { caller: "erin", path: commands(threadId), code: "ROUTE_NOT_SERVED" };
    expect(await refusedRoutes(threadId)).toEqual([refusal, refusal]);

    const env = envFor(guarded.portal, guarded.dataDir);
    const json = await runCli(["audit", "show", threadId, "--json"], env);
    expect(json.code, json.stderr).toBe(0);
    const { caseRecord } = parseJsonOutput(json.stdout) as {
      caseRecord: {
        firstPage: { requestedBy: string; outcome: { outcome: string } };
        auditChain: { intact: boolean };
      };
    };
    expect(caseRecord.firstPage).toMatchObject({ requestedBy: "dave", outcome: { outcome: "VERIFIED" } });
    expect(caseRecord.auditChain.intact).toBe(true);
    const text = await runCli(["audit", "show", threadId], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain("Requested by:  dave");
    const served = await fetch(`${guarded.server.apiUrl}/audit/threads/${threadId}`, {
      headers: { Authorization: `Bearer ${tokens["alice"]}` },
    });
    expect(served.status).toBe(200);
    const api = (await served.json()) as { caseRecord: { firstPage: { requestedBy: string } } };
    expect(api.caseRecord.firstPage.requestedBy).toBe("dave");
    const list = await runCli(["audit", "list", "--json"], env);
    expect(list.code, list.stderr).toBe(0);
    const { threads } = parseJsonOutput(list.stdout) as {
      threads: Array<{ threadId: string; requestedBy: string; outcome: string | null }>;
    };
    expect(threads.find((t) => t.threadId === threadId)).toMatchObject({
      requestedBy: "dave",
      outcome: "VERIFIED",
    });
  });

  it("GET /runs/{run_id}/stream (no owner check) is refused too; an open server serves the protocol routes (one anonymous caller)", async () => {
    for (const route of ["stream", "%73tream"]) {
      const join = await fetch(
        `${guarded.server.apiUrl}/runs/00000000-0000-0000-0000-000000000000/${route}`,
        {
          headers: { Authorization: `Bearer ${tokens["erin"]}` },
        },
      );
      expect(join.status, route).toBe(403);
      expect(await join.text(), route).toMatch(/owner is never checked/);
    }
    // Open mode: every caller is the same anonymous user, so the cached authorization is nobody else's (test/studio.test.ts streams through them).
    const thread = await clientFor(open.server.apiUrl).threads.create();
    const res = await fetch(`${open.server.apiUrl}/threads/${thread.thread_id}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 1, method: "state.get" }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  });
});

describe("with a token file: the keys and decisions of agent-chat-ui and Agent Inbox", () => {
  // agent-chat-ui src/providers/Stream.tsx: `if (apiKey) headers.set("X-Api-Key", apiKey);` (and the
  // SDK's Client sends its apiKey option as x-api-key).
  const keyed = (who: string) => clientFor(guarded.server.apiUrl, { "x-api-key": tokens[who]! });

  it("x-api-key is a token like Authorization: Bearer; both present must agree", async () => {
    expect(Array.isArray(await keyed("dave").threads.search())).toBe(true);
    await refused(
      clientFor(guarded.server.apiUrl, { "x-api-key": "ae_not-a-token" }).threads.search(),
      401,
      /unknown API token/,
    );
    await refused(
      clientFor(guarded.server.apiUrl, {
        "x-api-key": tokens["dave"]!,
        Authorization: `Bearer ${tokens["alice"]}`,
      }).threads.search(),
      401,
      /different tokens/,
    );
  });

  it("the card's one line, sent by the approver as Agent Inbox's response, is the decision: VERIFIED, one write, bound to the caller", async () => {
    const before = (await guarded.portal.writes()).length;
    const { threadId: t, payload: p } = await toApproval(keyed("dave"), {
      request: "rename task 4 to Keyed plan",
    });
    const line = (p as ApprovalPayload & { exampleLine?: string }).exampleLine;
    expect(line).toBe(`approve ${p.envelopeHash} nonce ${p.nonce}`);
    // agent-inbox src/components/agent-inbox/contexts/ThreadContext.tsx sendHumanResponse:
    //   `return client.runs.create(threadId, graphId, { command: { resume: response } })`
    // with response = [{ type: "response", args: <the text typed in the response box> }].
    const alice = keyed("alice");
    const run = await alice.runs.create(t, GRAPH_ID, {
      command: { resume: [{ type: "response", args: line }] },
    });
    await alice.runs.join(t, run.run_id);
    const state = await alice.threads.getState(t);
    expect((state.values as { outcome?: string }).outcome).toBe("VERIFIED");
    const writes = await guarded.portal.writes();
    expect(writes.length - before).toBe(1);
    expect(writes.at(-1)!.params["fields"]).toEqual({ TITLE: "Keyed plan" });
    expect(await auditedDecisions(guarded, t)).toEqual([{ id: "alice", verifiedBy: "authentication" }]);
  });
});

describe("with a token file: an approver's chat message while the approval waits", () => {
  const keyed = (who: string) => clientFor(guarded.server.apiUrl, { "x-api-key": tokens[who]! });
  // agent-chat-ui src/components/thread/index.tsx: `stream.submit({ messages: [...toolMessages, newHumanMessage], context }, ...)`
  // with `newHumanMessage = { id: uuidv4(), type: "human", content: [{ type: "text", text: input }] }`.
  const chat = (text: string) => ({
    messages: [{ id: crypto.randomUUID(), type: "human", content: [{ type: "text", text }] }],
  });

  it('is taken as a decision, not a new request: a bare "approve" is answered with the line to send, the card\'s line is VERIFIED with one write', async () => {
    const before = (await guarded.portal.writes()).length;
    const { threadId: t, payload: p } = await toApproval(keyed("dave"), {
      request: "rename task 4 to Chat plan",
    });
    const alice = keyed("alice");
    // alice holds no requester role: a run with input would be 403; while the approval waits it is a decision.
    await alice.runs.wait(t, GRAPH_ID, { input: chat("approve") });
    const refusedState = await alice.threads.getState(t);
    expect(refusedState.next).toEqual(["await_approval"]);
    const answer = (refusedState.values as { messages: Array<{ type: string; content: string }> }).messages
      .filter((m) => m.type === "ai")
      .at(-1)!.content;
    expect(answer).toContain(`approve ${p.envelopeHash} nonce ${p.nonce}`);
    expect((await guarded.portal.writes()).length).toBe(before);
    await alice.runs.wait(t, GRAPH_ID, { input: chat(`approve ${p.envelopeHash} nonce ${p.nonce}`) });
    expect(((await alice.threads.getState(t)).values as { outcome?: string }).outcome).toBe("VERIFIED");
    expect((await guarded.portal.writes()).length - before).toBe(1);
    expect(await auditedDecisions(guarded, t)).toEqual([{ id: "alice", verifiedBy: "authentication" }]);
    // Once nothing waits, the same chat message from alice is a run with input again, which needs the role requester.
    await refused(alice.runs.wait(t, GRAPH_ID, { input: chat("approve") }), 403, /needs the role requester/);
  });
});

describe("verified requesters through the API server (default policy: high risk needs a verified requester)", () => {
  const as = (who: string) => clientFor(guarded.server.apiUrl, { Authorization: `Bearer ${tokens[who]}` });
  it("open server: any requestedBy is self-declared; a high-risk request ends REQUESTER_NOT_VERIFIED before approval, saying why; nothing written", async () => {
    const client = clientFor(open.server.apiUrl);
    const before = (await open.portal.writes()).length;
    const thread = await client.threads.create();
    const out = (await client.runs.wait(thread.thread_id, GRAPH_ID, {
      input: { request: "assign task 4 to user 7", requestedBy: "dave" },
    })) as Record<string, unknown>;
    expect(out["__interrupt__"]).toBeUndefined();
    expect(out).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "REQUESTER_NOT_VERIFIED" });
    expect(String(out["reason"])).toMatch(
      /the requester dave is self-declared .* requires a verified requester/,
    );
    // A medium-risk request still goes to approval, shown as self-declared.
    const { payload } = await toApproval(client, {
      request: "rename task 4 to Named by anyone",
      requestedBy: "dave",
    });
    expect((payload.envelope as unknown as { requesterVerifiedBy: string }).requesterVerifiedBy).toBe(
      "self_declared",
    );
    expect((await open.portal.writes()).length).toBe(before);
  });

  it("tokens: the caller is the requester, verified by the token; the same high-risk request goes to approval and its card says so", async () => {
    const dave = as("dave");
    const before = (await guarded.portal.writes()).length;
    const { payload } = await toApproval(dave, { request: "assign task 4 to user 7" });
    const envelope = payload.envelope as unknown as {
      requestedBy: string;
      requesterVerifiedBy: string;
      risk: { level: string };
    };
    expect(envelope).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "authentication",
      risk: { level: "high" },
    });
    expect(JSON.stringify(payload)).toContain("Requested by: dave (verified: API token)");
    expect((await guarded.portal.writes()).length).toBe(before);
  });
});
