/**
 * One world of threads: a thread started over the LangGraph API (as Studio or a script would) is
 * listed, shown and approved from the terminal with the CLI's `--api URL` mode, against the real dev
 * server with a token file. The CLI process has no data directory of the server's: everything goes
 * through the API. Writes are counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { envFor, parseJsonOutput, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { newApiToken } from "../src/auth/tokens.js";
import { apiTarget } from "../src/api/cli-api.js";

const GRAPH_ID = "bitrix24_task_agent";

let portal: Portal;
let dataDir: string;
let server: RunningDevServer;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  const tokenFile = path.join(tempDir("ae-api-cli-tokens-"), "api-tokens.json");
  const entries = Object.entries({ dave: ["requester"], alice: ["approver"] } as const).map(([identity, roles]) => {
    const made = newApiToken(identity, [...roles]);
    tokens[identity] = made.token;
    return made.entry;
  });
  fs.writeFileSync(tokenFile, JSON.stringify({ tokens: entries }, null, 2));
  portal = await startPortal();
  dataDir = tempDir("ae-api-cli-");
  server = await startDevServer(envFor(portal, dataDir, { ACTION_ENVELOPE_API_TOKENS: tokenFile }));
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

/** The CLI as an approver on another machine: its own empty data directory, the server's URL and alice's token. */
const cliEnv = (extra: Record<string, string> = {}) => ({ ACTION_ENVELOPE_DATA_DIR: tempDir("ae-api-cli-local-"), MODEL: "offline", LANGGRAPH_API_TOKEN: tokens["alice"]!, ...extra });

describe("the CLI's --api mode", () => {
  it("rejects a URL that is not http(s)", () => {
    expect(apiTarget(undefined, {})).toBeUndefined();
    expect(apiTarget(undefined, { url: "http://127.0.0.1:2024/" })).toEqual({ url: "http://127.0.0.1:2024" });
    expect(() => apiTarget("ftp://x", {})).toThrow(/http\(s\) URL/);
  });

  it("a thread started over the API is pending, shown and approved from the terminal: one write, VERIFIED, approver from the token", async () => {
    const dave = new Client({ apiUrl: server.apiUrl, apiKey: null, defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` }, callerOptions: { maxRetries: 0 } });
    const thread = await dave.threads.create();
    await dave.runs.wait(thread.thread_id, GRAPH_ID, { input: { request: "rename task 4 to X" } });

    const pending = await runCli(["pending", "--api", server.apiUrl, "--json"], cliEnv());
    expect(pending.code, pending.stderr).toBe(0);
    const rows = (parseJsonOutput(pending.stdout) as { pending: Array<{ threadId: string; envelopeHash: string; requestedBy: string }> }).pending;
    const row = rows.find((r) => r.threadId === thread.thread_id);
    expect(row, pending.stdout).toMatchObject({ requestedBy: "dave", envelopeHash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });

    const show = await runCli(["show", thread.thread_id, "--api", server.apiUrl], cliEnv());
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain("approval card");
    expect(show.stdout).toContain(row!.envelopeHash);
    expect(show.stdout).toContain(`--api ${server.apiUrl}`);

    // The token is read from the environment; the CLI names no approver and the server fills in alice.
    const approve = await runCli(["approve", thread.thread_id, "--hash", row!.envelopeHash, "--api", server.apiUrl, "--json"], cliEnv());
    expect(approve.code, approve.stdout + approve.stderr).toBe(0);
    expect(parseJsonOutput(approve.stdout)).toMatchObject({ threadId: thread.thread_id, status: "finished", outcome: "VERIFIED", decision: { approverId: "alice", verifiedBy: "authentication" } });
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(Number(writes[0]!.params["taskId"])).toBe(4);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "X" });

    // Approving again: the server refuses the late resume and the CLI says so (exit 2); nothing more is written.
    const again = await runCli(["approve", thread.thread_id, "--hash", row!.envelopeHash, "--api", server.apiUrl], cliEnv());
    expect(again.code).toBe(2);
    expect(again.stdout).toMatch(/Refused THREAD_ENDED: this thread ended at .* with VERIFIED/);
    expect(await portal.writes()).toHaveLength(1);
  });

  it("the reverse: run --api from the terminal (requester from the token), approved over the API by pasting exampleResume: one more write, VERIFIED", async () => {
    const before = (await portal.writes()).length;
    const started = await runCli(["run", "rename task 4 to Z", "--api", server.apiUrl, "--json"], cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }));
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const view = parseJsonOutput(started.stdout) as { threadId: string; status: string; envelopeHash: string; envelope: { requestedBy: string; params: Record<string, unknown> } };
    expect(view).toMatchObject({ status: "awaiting_approval", envelope: { requestedBy: "dave", params: { TITLE: "Z" } } });

    const alice = new Client({ apiUrl: server.apiUrl, apiKey: null, defaultHeaders: { Authorization: `Bearer ${tokens["alice"]}` }, callerOptions: { maxRetries: 0 } });
    const payload = (await alice.threads.getState(view.threadId)).tasks.flatMap((t) => t.interrupts ?? [])[0]!.value as { envelopeHash: string; exampleResume: unknown };
    expect(payload.envelopeHash).toBe(view.envelopeHash);
    const final = (await alice.runs.wait(view.threadId, GRAPH_ID, { command: { resume: payload.exampleResume } })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(before + 1);
    expect(writes.at(-1)!.params["fields"]).toEqual({ TITLE: "Z" });
  });

  it("answer, edit and cancel from the terminal over the API: the question answered, a new revision from the edit, then cancelled; no write", async () => {
    const dave = new Client({ apiUrl: server.apiUrl, apiKey: null, defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` }, callerOptions: { maxRetries: 0 } });
    const thread = await dave.threads.create();
    const writesBefore = (await portal.writes()).length;
    await dave.runs.wait(thread.thread_id, GRAPH_ID, { input: { request: "rename the task to ANSWERED OVER THE API" } });

    // The question goes to the requester (dave): only he may continue his own thread.
    const answered = await runCli(["answer", thread.thread_id, "--set", "taskId=4", "--api", server.apiUrl, "--json"], cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }));
    expect(answered.code, answered.stderr + answered.stdout).toBe(0);
    const waiting = parseJsonOutput(answered.stdout);
    expect(waiting).toMatchObject({ status: "awaiting_approval", envelope: { object: { id: 4 }, params: { TITLE: "ANSWERED OVER THE API" } } });

    const edited = await runCli(["edit", thread.thread_id, "--set", "TITLE=EDITED OVER THE API", "--api", server.apiUrl, "--json"], cliEnv());
    expect(edited.code, edited.stderr + edited.stdout).toBe(0);
    const revised = parseJsonOutput(edited.stdout);
    expect(revised).toMatchObject({ status: "awaiting_approval", envelope: { revision: 2, params: { TITLE: "EDITED OVER THE API" } } });
    expect(revised.envelopeHash).not.toBe(waiting.envelopeHash);

    const cancelled = await runCli(["cancel", thread.thread_id, "--reason", "not needed", "--as", "alice", "--api", server.apiUrl, "--json"], cliEnv());
    expect(cancelled.code, cancelled.stderr + cancelled.stdout).toBe(0);
    expect(parseJsonOutput(cancelled.stdout)).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "CANCELLED" });
    expect((await portal.writes()).length).toBe(writesBefore);
  });

  it("LANGGRAPH_API_URL selects the server too; without a token the server's 401 is reported", async () => {
    const r = await runCli(["pending"], cliEnv({ LANGGRAPH_API_URL: server.apiUrl, LANGGRAPH_API_TOKEN: "" }));
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/401|Authorization/);
  });
});
