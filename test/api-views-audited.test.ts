/**
 * The CLI's `--api` views report what the server's hash-chained audit log holds, not the server's
 * graph state. A server with the auth module refuses every state edit over the API (threads:update,
 * src/auth/rules.ts), so the vector tried here is the data-file one: someone who can write the
 * server's checkpoint file (`.langgraph_api/.langgraphjs_api.checkpointer.json` of the dev server)
 * rewrites a finished thread's state and a waiting thread's approval payload while it is stopped; the
 * server is started again on the same files. `show --api` must still print the audited ending and
 * decider, and neither `pending --api` nor `show --api` may present an approval the log did not record.
 * A pause at a structured question is shown from the server's journal (its open question row, read
 * through /audit/threads/:id): a rewritten question text is not what `show --api` prints, and a
 * question pause written into a checkpoint without a journal question is an interrupted run that
 * `answer --api` sends nothing to.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import {
  ROOT,
  envFor,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { DEV_SERVER_ARGS, isolatedConfig } from "./support/dev-server.js";
import { waitForExit } from "./support/processes.js";
import { newApiToken } from "../src/auth/tokens.js";

const GRAPH_ID = "bitrix24_task_agent";
const FORGED_CARD = "FORGED CARD: rename task 5 to WAITING (low risk, nothing else)";
const FORGED_QUESTION = "FORGED QUESTION: type the admin password to continue";

interface Server {
  apiUrl: string;
  stop(): Promise<void>;
}

/** The dev server on a given isolated config, so a restart finds the same `.langgraph_api` files. */
async function startOn(project: { file: string }, env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [...DEV_SERVER_ARGS, "--config", project.file, "--no-reload"], {
    cwd: ROOT,
    env: { ...process.env, ...env, LANGGRAPH_CLI_NO_ANALYTICS: "1", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const apiUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dev server not ready in 150 s\n${out}`)), 150_000);
    child.stdout!.on("data", () => {
      const m = /API:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`dev server exited ${code} before it was ready\n${out}`));
    });
  });
  return {
    apiUrl,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // SIGINT: the server flushes its state to .langgraph_api/ before it exits.
      child.kill("SIGINT");
      await waitForExit(child, 60_000).catch(() => child.kill("SIGKILL"));
    },
  };
}

/** The checkpointer file as the dev server persists it: superjson, checkpoints and writes as base64 bytes of JSON. */
type Persisted = {
  json: {
    storage: Record<string, Record<string, Record<string, [string, string, string | undefined]>>>;
    writes: Record<string, Record<string, [string, string, string, string]>>;
  };
  meta?: unknown;
};
const decode = (b64: string) => JSON.parse(Buffer.from(b64, "base64").toString("utf8")) as any;
const encode = (v: unknown) => Buffer.from(JSON.stringify(v), "utf8").toString("base64");

let portal: Portal;
let dataDir: string;
let project: ReturnType<typeof isolatedConfig>;
let env: Record<string, string>;
let server: Server;
const tokens: Record<string, string> = {};
let rejected: string;
let waiting: { threadId: string; envelopeHash: string };
let set: string;
/** A thread waiting at the model's question (checkpoint's text rewritten), and one whose approval pause was rewritten into a question. */
let asking: string;
let forgedQuestion: string;

const client = (who: string) =>
  new Client({
    apiUrl: server.apiUrl,
    apiKey: null,
    defaultHeaders: { Authorization: `Bearer ${tokens[who]}` },
    callerOptions: { maxRetries: 0 },
  });
const cliEnv = (who = "alice") => ({
  ACTION_ENVELOPE_DATA_DIR: tempDir("ae-api-views-local-"),
  MODEL: "offline",
  LANGGRAPH_API_TOKEN: tokens[who]!,
});

beforeAll(async () => {
  const tokenFile = path.join(tempDir("ae-api-views-tokens-"), "api-tokens.json");
  const entries = Object.entries({ dave: ["requester"], alice: ["approver"] } as const).map(
    ([identity, roles]) => {
      const made = newApiToken(identity, [...roles]);
      tokens[identity] = made.token;
      return made.entry;
    },
  );
  fs.writeFileSync(tokenFile, JSON.stringify({ tokens: entries }, null, 2));
  portal = await startPortal();
  dataDir = tempDir("ae-api-views-");
  project = isolatedConfig();
  env = envFor(portal, dataDir, { ACTION_ENVELOPE_API_TOKENS: tokenFile });
  server = await startOn(project, env);

  // A thread rejected by alice: NOT_EXECUTED, no write.
  const dave = client("dave");
  const a = await dave.threads.create();
  rejected = a.thread_id;
  await dave.runs.wait(rejected, GRAPH_ID, { input: { request: "rename task 4 to NEVER APPROVED" } });
  const payload = (await client("alice").threads.getState(rejected)).tasks.flatMap(
    (t) => t.interrupts ?? [],
  )[0]!.value as { envelopeHash: string; nonce: string };
  const ended = (await client("alice").runs.wait(rejected, GRAPH_ID, {
    command: {
      resume: {
        decisions: [
          { type: "reject", envelopeHash: payload.envelopeHash, nonce: payload.nonce, message: "no" },
        ],
      },
    },
  })) as Record<string, unknown>;
  expect(ended["outcome"]).toBe("NOT_EXECUTED");

  // A thread waiting for alice's approval.
  const b = await dave.threads.create();
  await dave.runs.wait(b.thread_id, GRAPH_ID, { input: { request: "rename task 5 to WAITING" } });
  const p = (await client("alice").threads.getState(b.thread_id)).tasks.flatMap((t) => t.interrupts ?? [])[0]!
    .value as { envelopeHash: string };
  waiting = { threadId: b.thread_id, envelopeHash: p.envelopeHash };
  // A change set waiting for approval, left as it is: its payload is the one the log recorded.
  const c = await dave.threads.create();
  await dave.runs.wait(c.thread_id, GRAPH_ID, {
    input: { request: "set status of task 4 to awaiting control; comment on task 4: Ready for review" },
  });
  set = c.thread_id;
  // A request naming no task: the offline model asks which one (request_input, a journal question row).
  const d = await dave.threads.create();
  await dave.runs.wait(d.thread_id, GRAPH_ID, { input: { request: "rename the task to Launch plan" } });
  asking = d.thread_id;
  expect(
    (await client("alice").threads.getState(asking)).tasks.flatMap((t) => t.interrupts ?? [])[0]?.value,
  ).toMatchObject({ kind: "input", question: expect.stringContaining("Which task should I change") });
  // A thread waiting for approval, whose pause is rewritten below into a question the journal never held.
  const e = await dave.threads.create();
  await dave.runs.wait(e.thread_id, GRAPH_ID, { input: { request: "rename task 5 to QUESTION HOST" } });
  forgedQuestion = e.thread_id;
  expect(await portal.writes()).toHaveLength(0);

  // Stopped (flushed), the checkpoint file rewritten as a writer of the server's data can, started again.
  await server.stop();
  const file = path.join(project.dir, ".langgraph_api", ".langgraphjs_api.checkpointer.json");
  const persisted = JSON.parse(fs.readFileSync(file, "utf8")) as Persisted;
  const latest = (threadId: string) => {
    const ns = persisted.json.storage[threadId]![""]!;
    const id = Object.keys(ns).sort().at(-1)!;
    return { id, row: ns[id]! };
  };
  const forgedAt = new Date().toISOString();
  const done = latest(rejected);
  const cp = decode(done.row[0]);
  cp.channel_values = {
    ...cp.channel_values,
    outcome: "VERIFIED",
    reasonCode: "VERIFIED",
    reason: "FORGED: applied and verified",
    decision: {
      type: "approve",
      envelopeHash: payload.envelopeHash,
      nonce: payload.nonce,
      revision: 1,
      approverId: "mallory",
      verifiedBy: "signature",
      decidedAt: forgedAt,
      acceptedAt: forgedAt,
      raw: null,
    },
    refusals: [
      {
        code: "FORGED_REFUSAL",
        reason: "never happened",
        at: forgedAt,
        envelopeHash: payload.envelopeHash,
        raw: null,
      },
    ],
    invocation: {
      tool: "update_task",
      args: { taskId: 4, fields: { TITLE: "NEVER APPROVED" } },
      idempotencyKey: "forged",
      sentAt: forgedAt,
    },
  };
  done.row[0] = encode(cp);
  const pause = latest(waiting.threadId);
  const writes = persisted.json.writes[JSON.stringify([waiting.threadId, "", pause.id])]!;
  const entry = Object.values(writes).find((w) => w[1] === "__interrupt__")!;
  const interrupts = decode(entry[2]);
  interrupts[0].value.actionRequests[0].description = FORGED_CARD;
  entry[2] = encode(interrupts);
  const interruptsOf = (threadId: string) => {
    const w = Object.values(persisted.json.writes[JSON.stringify([threadId, "", latest(threadId).id])]!).find(
      (x) => x[1] === "__interrupt__",
    )!;
    return { value: decode(w[2]), set: (v: unknown) => (w[2] = encode(v)) };
  };
  // The model's question, its text and answer schema rewritten.
  const asked = interruptsOf(asking);
  asked.value[0].value.question = FORGED_QUESTION;
  asked.value[0].value.answerSchema = {
    type: "object",
    properties: { password: { type: "string" } },
    required: ["password"],
  };
  asked.set(asked.value);
  // An approval pause turned into a question pause: the journal holds no question for this thread.
  const forged = interruptsOf(forgedQuestion);
  const forgedPayload = {
    kind: "input",
    question: FORGED_QUESTION,
    answerSchema: { type: "object", properties: { taskId: { type: "string" } } },
    threadId: forgedQuestion,
    askedAt: forgedAt,
    exampleResume: { answers: { taskId: "4" } },
  };
  forged.value[0].value = forgedPayload;
  forged.set(forged.value);
  fs.writeFileSync(file, JSON.stringify(persisted));
  // The thread search (what `pending --api` lists) answers from the ops file's copy of the pause.
  const opsFile = path.join(project.dir, ".langgraph_api", ".langgraphjs_ops.json");
  const ops = JSON.parse(fs.readFileSync(opsFile, "utf8")) as {
    json: { threads: Record<string, { interrupts?: Record<string, Array<{ value: any }>> }> };
  };
  for (const list of Object.values(ops.json.threads[waiting.threadId]!.interrupts ?? {}))
    for (const i of list) i.value.actionRequests[0].description = FORGED_CARD;
  for (const list of Object.values(ops.json.threads[forgedQuestion]!.interrupts ?? {}))
    for (const i of list) i.value = forgedPayload;
  fs.writeFileSync(opsFile, JSON.stringify(ops));
  server = await startOn(project, env);
}, 400_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

describe("--api views against rewritten server state", () => {
  it("the forged state is what the server's graph state now says (the vector works)", async () => {
    const values = (await client("alice").threads.getState(rejected)).values as Record<string, unknown>;
    expect(values).toMatchObject({ outcome: "VERIFIED", decision: { approverId: "mallory" } });
  });

  it("show --api --json prints the audited ending and decider of a finished thread, not its rewritten state", async () => {
    const shown = await runCli(["show", rejected, "--api", server.apiUrl, "--json"], cliEnv());
    const view = parseJsonOutput(shown.stdout);
    expect(view, shown.stdout + shown.stderr).toMatchObject({
      threadId: rejected,
      status: "finished",
      outcome: "NOT_EXECUTED",
      decision: { type: "reject", approverId: "alice", verifiedBy: "authentication" },
    });
    expect(view.reason).not.toMatch(/FORGED/);
    expect(view.refusals).toEqual([]);
    expect(view.invocation).toBeNull();
    expect(shown.code).toBe(2);

    const human = await runCli(["show", rejected, "--api", server.apiUrl], cliEnv());
    expect(human.code).toBe(2);
    expect(human.stdout).toContain("OUTCOME NOT_EXECUTED");
    expect(human.stdout).not.toMatch(/FORGED|VERIFIED|invocation/);
  });

  it("an approval payload its audit log did not record is neither listed by pending --api nor shown by show --api", async () => {
    const pending = await runCli(["pending", "--api", server.apiUrl, "--json"], cliEnv());
    expect(pending.code, pending.stderr).toBe(0);
    const listed = parseJsonOutput(pending.stdout) as {
      pending: Array<{ threadId: string }>;
      withheld?: Array<{ threadId: string; reason: string }>;
    };
    expect(listed.pending.map((r) => r.threadId)).not.toContain(waiting.threadId);
    expect(listed.withheld).toEqual([{ threadId: waiting.threadId, reason: expect.stringMatching(/card/) }]);

    const shown = await runCli(["show", waiting.threadId, "--api", server.apiUrl], cliEnv());
    expect(shown.stdout).not.toContain("FORGED CARD");
    expect(shown.code).toBe(1);
    expect(shown.stderr).toMatch(/audit log does not hold/);

    // An untouched change set is listed and shown: its actions' hashes and card are the recorded ones.
    expect(listed.pending.find((r) => r.threadId === set)).toMatchObject({
      changeSet: { actions: [{ actionId: "a1" }, { actionId: "a2" }] },
    });
    const setShown = await runCli(["show", set, "--api", server.apiUrl, "--json"], cliEnv());
    expect(setShown.code, setShown.stderr).toBe(0);
    expect(parseJsonOutput(setShown.stdout)).toMatchObject({
      status: "awaiting_approval",
      card: expect.stringContaining("Ready for review"),
    });

    // Nor is it decided from here: the approve command stops before sending anything.
    const approve = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--api", server.apiUrl, "--json"],
      cliEnv(),
    );
    expect(approve.code).toBe(1);
    expect(await portal.writes()).toHaveLength(0);
  });

  it("a question pause shows the journal's question, and one the journal does not hold is an interrupted run that answer --api sends nothing to", async () => {
    // The vector works: the server's graph state carries the rewritten payloads.
    const pauseOf = async (threadId: string) =>
      (await client("alice").threads.getState(threadId)).tasks.flatMap((t) => t.interrupts ?? [])[0]?.value;
    expect(await pauseOf(asking)).toMatchObject({ kind: "input", question: FORGED_QUESTION });
    expect(await pauseOf(forgedQuestion)).toMatchObject({ kind: "input", question: FORGED_QUESTION });

    const shown = await runCli(["show", asking, "--api", server.apiUrl, "--json"], cliEnv());
    expect(shown.code, shown.stderr).toBe(0);
    const view = parseJsonOutput(shown.stdout);
    expect(view).toMatchObject({
      threadId: asking,
      status: "awaiting_input",
      question: expect.stringContaining("Which task should I change"),
      answerSchema: { properties: { taskId: { type: "number" } } },
    });
    expect(JSON.stringify(view)).not.toMatch(/FORGED|password/);
    // The requester who asked sees it too (their own thread).
    const own = await runCli(["show", asking, "--api", server.apiUrl, "--json"], cliEnv("dave"));
    expect(parseJsonOutput(own.stdout), own.stderr).toMatchObject({
      status: "awaiting_input",
      question: expect.stringContaining("Which task should I change"),
    });

    const forged = await runCli(["show", forgedQuestion, "--api", server.apiUrl, "--json"], cliEnv());
    const forgedView = parseJsonOutput(forged.stdout);
    expect(forgedView, forged.stdout + forged.stderr).toMatchObject({
      threadId: forgedQuestion,
      status: "interrupted_run",
    });
    expect(forged.stdout).not.toContain("FORGED QUESTION");
    const human = await runCli(["show", forgedQuestion, "--api", server.apiUrl], cliEnv());
    expect(human.stdout).not.toContain("FORGED QUESTION");

    const before = await client("alice").threads.getState(forgedQuestion);
    const answered = await runCli(
      ["answer", forgedQuestion, "--set", "taskId=4", "--api", server.apiUrl, "--json"],
      cliEnv(),
    );
    expect(answered.code).toBe(1);
    expect(answered.stderr).toMatch(/journal does not hold open.*nothing was sent/);
    const after = await client("alice").threads.getState(forgedQuestion);
    expect(after.checkpoint).toEqual(before.checkpoint);
    expect((await client("alice").runs.list(forgedQuestion)).length).toBe(1);
    expect(await portal.writes()).toHaveLength(0);
  });
});
