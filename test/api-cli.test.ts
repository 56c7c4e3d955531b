/**
 * One world of threads: a thread started over the LangGraph API (as Studio or a script would) is
 * listed, shown and approved from the terminal with the CLI's `--api URL` mode, against the real dev
 * server with a token file. The CLI process has no data directory of the server's: everything goes
 * through the API. Writes are counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
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
  const entries = Object.entries({
    dave: ["requester"],
    erin: ["requester"],
    alice: ["approver"],
  } as const).map(([identity, roles]) => {
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
const cliEnv = (extra: Record<string, string> = {}) => ({
  ACTION_ENVELOPE_DATA_DIR: tempDir("ae-api-cli-local-"),
  MODEL: "offline",
  LANGGRAPH_API_TOKEN: tokens["alice"]!,
  ...extra,
});

describe("the CLI's --api mode", () => {
  it("rejects a URL that is not http(s)", () => {
    expect(apiTarget(undefined, {})).toBeUndefined();
    expect(apiTarget(undefined, { url: "http://127.0.0.1:2024/" })).toEqual({ url: "http://127.0.0.1:2024" });
    expect(() => apiTarget("ftp://x", {})).toThrow(/http\(s\) URL/);
  });

  it("a thread started over the API is pending, shown and approved from the terminal: one write, VERIFIED, approver from the token", async () => {
    const dave = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const thread = await dave.threads.create();
    await dave.runs.wait(thread.thread_id, GRAPH_ID, { input: { request: "rename task 4 to X" } });

    const pending = await runCli(["pending", "--api", server.apiUrl, "--json"], cliEnv());
    expect(pending.code, pending.stderr).toBe(0);
    const rows = (
      parseJsonOutput(pending.stdout) as {
        pending: Array<{ threadId: string; envelopeHash: string; requestedBy: string }>;
      }
    ).pending;
    const row = rows.find((r) => r.threadId === thread.thread_id);
    expect(row, pending.stdout).toMatchObject({
      requestedBy: "dave",
      envelopeHash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      object: { type: "task", id: 4 },
      operation: "update_task",
    });

    const show = await runCli(["show", thread.thread_id, "--api", server.apiUrl], cliEnv());
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain("approval card");
    expect(show.stdout).toContain(row!.envelopeHash);
    expect(show.stdout).toContain(`--api ${server.apiUrl}`);

    // The token is read from the environment; the CLI names no approver and the server fills in alice.
    const approve = await runCli(
      ["approve", thread.thread_id, "--hash", row!.envelopeHash, "--api", server.apiUrl, "--json"],
      cliEnv(),
    );
    expect(approve.code, approve.stdout + approve.stderr).toBe(0);
    expect(parseJsonOutput(approve.stdout)).toMatchObject({
      threadId: thread.thread_id,
      status: "finished",
      outcome: "VERIFIED",
      decision: { approverId: "alice", verifiedBy: "authentication" },
    });
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(Number(writes[0]!.params["taskId"])).toBe(4);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "X" });

    // Approving again: the server refuses the late resume and the CLI says so (exit 2); nothing more is written.
    const again = await runCli(
      ["approve", thread.thread_id, "--hash", row!.envelopeHash, "--api", server.apiUrl],
      cliEnv(),
    );
    expect(again.code).toBe(2);
    expect(again.stdout).toMatch(/Refused THREAD_ENDED: this thread ended at .* with VERIFIED/);
    expect(await portal.writes()).toHaveLength(1);
  });

  it("the reverse: run --api from the terminal (requester from the token), approved over the API by pasting exampleResume: one more write, VERIFIED", async () => {
    const before = (await portal.writes()).length;
    const started = await runCli(
      ["run", "rename task 4 to Z", "--api", server.apiUrl, "--json"],
      cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }),
    );
    expect(started.code, started.stdout + started.stderr).toBe(0);
    const view = parseJsonOutput(started.stdout) as {
      threadId: string;
      status: string;
      envelopeHash: string;
      envelope: { requestedBy: string; params: Record<string, unknown> };
    };
    expect(view).toMatchObject({
      status: "awaiting_approval",
      envelope: { requestedBy: "dave", params: { TITLE: "Z" } },
    });

    const alice = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["alice"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const payload = (await alice.threads.getState(view.threadId)).tasks.flatMap((t) => t.interrupts ?? [])[0]!
      .value as { envelopeHash: string; exampleResume: unknown };
    expect(payload.envelopeHash).toBe(view.envelopeHash);
    const final = (await alice.runs.wait(view.threadId, GRAPH_ID, {
      command: { resume: payload.exampleResume },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(before + 1);
    expect(writes.at(-1)!.params["fields"]).toEqual({ TITLE: "Z" });
  });

  it("answer, edit and cancel from the terminal over the API: the question answered, a new revision from the edit, then cancelled; no write", async () => {
    const dave = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const thread = await dave.threads.create();
    const writesBefore = (await portal.writes()).length;
    await dave.runs.wait(thread.thread_id, GRAPH_ID, {
      input: { request: "rename the task to ANSWERED OVER THE API" },
    });

    // The question goes to the requester (dave): only he may continue his own thread.
    const answered = await runCli(
      ["answer", thread.thread_id, "--set", "taskId=4", "--api", server.apiUrl, "--json"],
      cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }),
    );
    expect(answered.code, answered.stderr + answered.stdout).toBe(0);
    const waiting = parseJsonOutput(answered.stdout);
    expect(waiting).toMatchObject({
      status: "awaiting_approval",
      envelope: { object: { id: 4 }, params: { TITLE: "ANSWERED OVER THE API" } },
    });

    const edited = await runCli(
      ["edit", thread.thread_id, "--set", "TITLE=EDITED OVER THE API", "--api", server.apiUrl, "--json"],
      cliEnv(),
    );
    expect(edited.code, edited.stderr + edited.stdout).toBe(0);
    const revised = parseJsonOutput(edited.stdout);
    expect(revised).toMatchObject({
      status: "awaiting_approval",
      envelope: { revision: 2, params: { TITLE: "EDITED OVER THE API" } },
    });
    expect(revised.envelopeHash).not.toBe(waiting.envelopeHash);

    const cancelled = await runCli(
      [
        "cancel",
        thread.thread_id,
        "--reason",
        "not needed",
        "--as",
        "alice",
        "--api",
        server.apiUrl,
        "--json",
      ],
      cliEnv(),
    );
    expect(cancelled.code, cancelled.stderr + cancelled.stdout).toBe(0);
    expect(parseJsonOutput(cancelled.stdout)).toMatchObject({
      outcome: "NOT_EXECUTED",
      reasonCode: "CANCELLED",
    });
    expect((await portal.writes()).length).toBe(writesBefore);
  });

  it("undo over the API: `undo --api` proposes restoring a verified change (built by the server from its journal, no model), approved from the terminal; Studio's chat asks the same with `undo thread <id>`", async () => {
    const dave = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const alice = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["alice"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const before = (await portal.task(4))["title"];
    const thread = await dave.threads.create();
    await dave.runs.wait(thread.thread_id, GRAPH_ID, {
      input: { request: "rename task 4 to UNDONE OVER THE API" },
    });
    const payload = (await alice.threads.getState(thread.thread_id)).tasks.flatMap(
      (t) => t.interrupts ?? [],
    )[0]!.value as { exampleResume: unknown };
    expect(
      (
        (await alice.runs.wait(thread.thread_id, GRAPH_ID, {
          command: { resume: payload.exampleResume },
        })) as Record<string, unknown>
      )["outcome"],
    ).toBe("VERIFIED");
    const writes = (await portal.writes()).length;

    const undo = await runCli(
      ["undo", thread.thread_id, "--api", server.apiUrl, "--json"],
      cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }),
    );
    expect(undo.code, undo.stdout + undo.stderr).toBe(0);
    const waiting = parseJsonOutput(undo.stdout) as {
      threadId: string;
      status: string;
      envelopeHash: string;
      card: string;
      envelope: { requestedBy: string; params: Record<string, unknown> };
    };
    expect(waiting).toMatchObject({
      status: "awaiting_approval",
      envelope: { requestedBy: "dave", params: { TITLE: before } },
    });
    expect(waiting.card).toContain(`UNDO of thread ${thread.thread_id}`);
    expect((await portal.writes()).length).toBe(writes);

    // The same request typed in Studio's chat: another undo proposal of the same change, waiting too.
    const chat = await dave.threads.create();
    await dave.runs.wait(chat.thread_id, GRAPH_ID, {
      input: { messages: [{ role: "user", content: `undo thread ${thread.thread_id}` }] },
    });
    const chatPayload = (await dave.threads.getState(chat.thread_id)).tasks.flatMap(
      (t) => t.interrupts ?? [],
    )[0]!.value as { envelope: { params: Record<string, unknown> } };
    expect(chatPayload.envelope.params).toEqual({ TITLE: before });

    const approved = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--api", server.apiUrl, "--json"],
      cliEnv(),
    );
    expect(parseJsonOutput(approved.stdout)).toMatchObject({ outcome: "VERIFIED" });
    expect((await portal.task(4))["title"]).toBe(before);
    expect((await portal.writes()).length).toBe(writes + 1);
    // Undoing a thread that is not a verified change ends NOT_UNDOABLE on the server, no model call, no write.
    const bad = await runCli(
      ["undo", chat.thread_id, "--api", server.apiUrl, "--json"],
      cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! }),
    );
    expect(parseJsonOutput(bad.stdout)).toMatchObject({
      outcome: "NOT_EXECUTED",
      reasonCode: "NOT_UNDOABLE",
    });
    expect((await portal.writes()).length).toBe(writes + 1);
  });

  it("LANGGRAPH_API_URL selects the server too; without a token the server's 401 is reported", async () => {
    const r = await runCli(
      ["pending"],
      cliEnv({ LANGGRAPH_API_URL: server.apiUrl, LANGGRAPH_API_TOKEN: "" }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/401|Authorization/);
  });
});

describe("audit --api: the server's audit log over HTTP, read-only", () => {
  let threadId: string;

  beforeAll(async () => {
    // A thread started over the API by dave and approved over the API by alice.
    const dave = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["dave"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const alice = new Client({
      apiUrl: server.apiUrl,
      apiKey: null,
      defaultHeaders: { Authorization: `Bearer ${tokens["alice"]}` },
      callerOptions: { maxRetries: 0 },
    });
    const thread = await dave.threads.create();
    threadId = thread.thread_id;
    await dave.runs.wait(threadId, GRAPH_ID, { input: { request: "rename task 4 to AUDITED OVER THE API" } });
    const payload = (await alice.threads.getState(threadId)).tasks.flatMap((t) => t.interrupts ?? [])[0]!
      .value as { exampleResume: unknown };
    const final = (await alice.runs.wait(threadId, GRAPH_ID, {
      command: { resume: payload.exampleResume },
    })) as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
  }, 120_000);

  /** The local audit commands on the server's own data directory: what --api must print too. */
  const local = (args: string[]) =>
    runCli(["audit", ...args], { ...cliEnv(), ACTION_ENVELOPE_DATA_DIR: dataDir, LANGGRAPH_API_URL: "" });

  it("an approver lists and shows the thread's records; list and verify print exactly what the local commands print on the server's data directory", async () => {
    const list = await runCli(["audit", "list", "--api", server.apiUrl, "--json"], cliEnv());
    expect(list.code, list.stderr).toBe(0);
    const threads = (JSON.parse(list.stdout) as { threads: Array<Record<string, unknown>> }).threads;
    expect(threads.find((t) => t["threadId"] === threadId)).toMatchObject({
      requestedBy: "dave",
      lastEvent: "execution_outcome",
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
    });
    for (const args of [["list"], ["list", "--json"], ["verify"], ["verify", "--json"]]) {
      const [remote, here] = await Promise.all([
        runCli(["audit", ...args, "--api", server.apiUrl], cliEnv()),
        local(args),
      ]);
      expect(remote.code, remote.stderr).toBe(0);
      expect(remote.stdout, args.join(" ")).toBe(here.stdout);
    }

    const show = await runCli(["audit", "show", threadId, "--api", server.apiUrl], cliEnv());
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(`CASE RECORD  thread ${threadId}  (finished)`);
    expect(show.stdout).toContain("Requested by:  dave");
    expect(show.stdout).toMatch(/Decided by: +alice — approve \(authentication\)/);
    for (const name of [
      "approval-request-r1",
      "decision-r1-accepted-approve",
      "pre-read",
      "invocation",
      "acknowledgement",
      "post-write-read",
      "outcome",
    ])
      expect(show.stdout).toContain(`-${name}]`);
    const json = await runCli(["audit", "show", threadId, "--api", server.apiUrl, "--json"], cliEnv());
    const { caseRecord } = JSON.parse(json.stdout) as {
      caseRecord: { firstPage: Record<string, unknown>; auditChain: { intact: boolean } };
    };
    expect(caseRecord.firstPage).toMatchObject({
      status: "finished",
      requestedBy: "dave",
      decidedBy: { id: "alice", verifiedBy: "authentication" },
      outcome: { outcome: "VERIFIED" },
    });
    expect(caseRecord.auditChain.intact).toBe(true);
  });

  it("export --api writes a bundle that sha256sum -c accepts", async () => {
    const out = path.join(tempDir("ae-api-audit-export-"), "bundle");
    const exp = await runCli(["audit", "export", threadId, "--out", out, "--api", server.apiUrl], cliEnv());
    expect(exp.code, exp.stderr).toBe(0);
    const files = fs.readdirSync(out);
    expect(files).toContain("case-record.json");
    expect(files).toContain("01-approval-request-r1.card.txt");
    const check = spawnSync("sha256sum", ["-c", "SHA256SUMS"], { cwd: out, encoding: "utf8" });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(JSON.parse(fs.readFileSync(path.join(out, "case-record.json"), "utf8")).firstPage.threadId).toBe(
      threadId,
    );
    // Anchored in the server's audit log, not only in itself.
    const anchored = await runCli(["audit", "check", out, "--api", server.apiUrl], cliEnv());
    expect(anchored.code, anchored.stdout + anchored.stderr).toBe(0);
    expect(anchored.stdout).toContain(`BUNDLE CONFIRMED: thread ${threadId}`);
    expect(anchored.stdout).toContain(`against the audit log of ${server.apiUrl}`);
  });

  it("a requester reads the audit of their own threads only; verify needs approver or admin; no token is 401", async () => {
    const asDave = cliEnv({ LANGGRAPH_API_TOKEN: tokens["dave"]! });
    const asErin = cliEnv({ LANGGRAPH_API_TOKEN: tokens["erin"]! });
    const mine = await runCli(["audit", "show", threadId, "--api", server.apiUrl], asDave);
    expect(mine.code, mine.stderr).toBe(0);
    expect(mine.stdout).toContain(`CASE RECORD  thread ${threadId}`);
    const daveList = JSON.parse(
      (await runCli(["audit", "list", "--api", server.apiUrl, "--json"], asDave)).stdout,
    ) as { threads: Array<{ threadId: string; requestedBy: string }> };
    expect(daveList.threads.map((t) => t.threadId)).toContain(threadId);
    expect(daveList.threads.every((t) => t.requestedBy === "dave")).toBe(true);

    const theirs = await runCli(["audit", "show", threadId, "--api", server.apiUrl], asErin);
    expect(theirs.code).toBe(2);
    expect(theirs.stderr).toMatch(
      /refused: 403 .*refused audit show .*erin \(requester\) may read the audit of their own threads only/,
    );
    expect(theirs.stdout).toBe("");
    const exported = await runCli(
      [
        "audit",
        "export",
        threadId,
        "--out",
        path.join(tempDir("ae-api-audit-erin-"), "b"),
        "--api",
        server.apiUrl,
      ],
      asErin,
    );
    expect(exported.code).toBe(2);
    const erinList = JSON.parse(
      (await runCli(["audit", "list", "--api", server.apiUrl, "--json"], asErin)).stdout,
    ) as { threads: Array<{ threadId: string }> };
    expect(erinList.threads).toEqual([]);
    const verify = await runCli(["audit", "verify", "--api", server.apiUrl], asErin);
    expect(verify.code).toBe(2);
    expect(verify.stderr).toMatch(/403 .*refused audit verify: erin \(requester\)/);

    const anonymous = await runCli(
      ["audit", "list", "--api", server.apiUrl],
      cliEnv({ LANGGRAPH_API_TOKEN: "" }),
    );
    expect(anonymous.code).toBe(2);
    expect(anonymous.stderr).toMatch(/401 .*missing Authorization: Bearer/);
    for (const route of ["/audit/threads", `/audit/threads/${threadId}`, "/audit/verify"]) {
      expect((await fetch(`${server.apiUrl}${route}`)).status, route).toBe(401);
      expect(
        (await fetch(`${server.apiUrl}${route}`, { headers: { Authorization: "Bearer not-a-token" } }))
          .status,
        route,
      ).toBe(401);
    }
  });
});
