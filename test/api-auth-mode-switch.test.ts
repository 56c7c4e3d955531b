/**
 * The LangGraph API server restarted without its token file on the same project (its `.langgraph_api`)
 * and data directory: open development mode. The server keeps each thread's run config and merges it
 * into every later run on the thread, the authenticated user it stamped there included; a run in open
 * mode must still carry no authenticated user, so a decision sent in it is self-declared. Through the
 * real dev server and @langchain/langgraph-sdk; writes counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import {
  envFor,
  selfDeclaredRequestersPolicy,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { newApiToken } from "../src/auth/tokens.js";

const GRAPH_ID = "bitrix24_task_agent";

interface ApprovalPayload {
  kind: string;
  envelopeHash: string;
  nonce: string;
}

function clientFor(apiUrl: string, token?: string): Client {
  return new Client({
    apiUrl,
    apiKey: null,
    defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {},
    callerOptions: { maxRetries: 0 },
  });
}

type Values = { refusals?: Array<{ code: string; reason: string }>; outcome?: string | null };

let portal: Portal;
let server: RunningDevServer | undefined;

beforeAll(async () => {
  portal = await startPortal();
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

describe("a server restarted in open mode on a project that ran with tokens", () => {
  it("a decision naming the approver who last ran on the thread is self-declared, refused by a policy that refuses such ids", async () => {
    const dataDir = tempDir("ae-mode-switch-");
    const tokenFile = path.join(tempDir("ae-api-tokens-"), "api-tokens.json");
    const dave = newApiToken("dave", ["requester"]);
    const alice = newApiToken("alice", ["approver"]);
    fs.writeFileSync(tokenFile, JSON.stringify({ tokens: [dave.entry, alice.entry] }));
    const policy = selfDeclaredRequestersPolicy((p) => {
      p.approvers.allowUnauthenticated = false;
    });

    server = await startDevServer(
      envFor(portal, dataDir, { ACTION_ENVELOPE_POLICY: policy, ACTION_ENVELOPE_API_TOKENS: tokenFile }),
    );
    const asDave = clientFor(server.apiUrl, dave.token);
    const { thread_id: threadId } = await asDave.threads.create();
    const first = (await asDave.runs.wait(threadId, GRAPH_ID, {
      input: { request: "rename task 4 to Switched" },
    })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
    const payload = first.__interrupt__?.[0]?.value;
    expect(payload?.kind, JSON.stringify(first).slice(0, 500)).toBe("approval");
    // Alice answers from a stale card: refused, not counted, and the approval keeps waiting. Her run
    // was started on the idle thread, so the server keeps its config (with her user) as the thread's.
    await clientFor(server.apiUrl, alice.token).runs.wait(threadId, GRAPH_ID, {
      command: {
        resume: {
          decisions: [{ type: "approve", envelopeHash: `sha256:${"0".repeat(64)}`, nonce: payload!.nonce }],
        },
      },
    });
    const asAlice = await asDave.threads.getState(threadId);
    expect((asAlice.values as Values).refusals?.at(-1)?.code).toBe("HASH_MISMATCH");
    expect(asAlice.next).toEqual(["await_approval"]);
    expect(await server.stop()).toBe(0);
    const project = server.project;
    server = undefined;

    // The same project and data directory, no token file: every caller is anonymous.
    server = await startDevServer(envFor(portal, dataDir, { ACTION_ENVELOPE_POLICY: policy }), { project });
    expect(server.output()).toMatch(/auth: +OPEN/);
    const anyone = clientFor(server.apiUrl);
    expect((await anyone.threads.getState(threadId)).next).toEqual(["await_approval"]);
    await anyone.runs.wait(threadId, GRAPH_ID, {
      command: {
        resume: {
          decisions: [
            {
              type: "approve",
              envelopeHash: payload!.envelopeHash,
              nonce: payload!.nonce,
              approver: { id: "alice" },
            },
          ],
        },
      },
    });
    const after = await anyone.threads.getState(threadId);
    const values = after.values as Values;
    expect(values.outcome ?? null, JSON.stringify(values).slice(0, 2000)).toBeNull();
    expect(values.refusals?.at(-1)).toMatchObject({
      code: "SIGNATURE_REQUIRED",
      reason: expect.stringMatching(/does not accept self-declared approvers/),
    });
    expect(after.next).toEqual(["await_approval"]);
    expect(await portal.writes()).toEqual([]);
  }, 400_000);
});
