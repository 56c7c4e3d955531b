/**
 * Studio and the LangGraph API as interfaces (issue 13), through the real dev server and
 * @langchain/langgraph-sdk: the schemas Studio draws its forms from, chat-mode input, malformed input
 * ending at once with INVALID_INPUT and no model call, `exampleResume` pasted as it is, and resumes
 * sent to a thread that is not waiting refused visibly. One server open, one with a token file.
 * Writes are counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { envFor, parseJsonOutput, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { newApiToken } from "../src/auth/tokens.js";

const GRAPH_ID = "bitrix24_task_agent";

interface ApprovalPayload {
  kind: string;
  envelopeHash: string;
  nonce: string;
  envelope: { params: Record<string, unknown>; object: { id: number } };
  exampleResume: { decisions: Array<Record<string, unknown>> };
  exampleResumeFill: Array<{ path: string; with: string }>;
  lastRefusal?: { code: string; reason: string };
}

interface Side {
  portal: Portal;
  dataDir: string;
  server: RunningDevServer;
}

function clientFor(apiUrl: string, headers: Record<string, string> = {}): Client {
  return new Client({ apiUrl, apiKey: null, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
}

async function startSide(extra: Record<string, string> = {}): Promise<Side> {
  const portal = await startPortal();
  const dataDir = tempDir("ae-studio-");
  const server = await startDevServer(envFor(portal, dataDir, extra));
  return { portal, dataDir, server };
}

async function auditOf(
  side: Side,
  threadId: string,
): Promise<
  Array<{
    event: string;
    refusal: { code: string; reason: string } | null;
    approver: { id: string | null; verifiedBy: string } | null;
  }>
> {
  const r = await runCli(["audit", "show", threadId, "--json"], envFor(side.portal, side.dataDir));
  expect(r.code, r.stderr).toBe(0);
  return (parseJsonOutput(r.stdout) as { caseRecord: { auditRecords: never[] } }).caseRecord.auditRecords;
}

const interruptOf = async (client: Client, threadId: string) =>
  (await client.threads.getState(threadId)).tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as
    ApprovalPayload | undefined;

let open: Side;
let guarded: Side;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  const dir = tempDir("ae-studio-tokens-");
  const tokenFile = path.join(dir, "api-tokens.json");
  const entries = Object.entries({ dave: ["requester"], alice: ["approver"] } as const).map(
    ([identity, roles]) => {
      const made = newApiToken(identity, [...roles]);
      tokens[identity] = made.token;
      return made.entry;
    },
  );
  fs.writeFileSync(tokenFile, JSON.stringify({ tokens: entries }, null, 2));
  [open, guarded] = await Promise.all([startSide(), startSide({ ACTION_ENVELOPE_API_TOKENS: tokenFile })]);
}, 180_000);

afterAll(async () => {
  for (const side of [open, guarded]) {
    if (!side) continue;
    await side.server.stop();
    await side.portal.emulator.close();
  }
}, 90_000);

describe("schemas (client.assistants.getSchemas)", () => {
  it("input: request required, requestedBy and scope typed and described, chat messages accepted; every state and output field described", async () => {
    const schemas = await clientFor(open.server.apiUrl).assistants.getSchemas(GRAPH_ID);
    const input = schemas.input_schema as {
      required?: string[];
      properties: Record<string, Record<string, any>>;
    };
    expect(input.required).toEqual(["request"]);
    expect(Object.keys(input.properties).sort()).toEqual([
      "messages",
      "request",
      "requestedBy",
      "requesterSignature",
      "scope",
    ]);
    expect(input.properties["requesterSignature"]).toMatchObject({
      type: "string",
      description: expect.stringMatching(/run --key/),
    });
    expect(input.properties["request"]).toMatchObject({
      type: "string",
      minLength: 1,
      maxLength: 4000,
      description: expect.stringMatching(/Required/),
    });
    expect(input.properties["requestedBy"]).toMatchObject({
      type: "string",
      description: expect.stringMatching(/unless the server authenticates/),
    });
    expect(input.properties["scope"]).toMatchObject({
      type: "object",
      description: expect.stringMatching(/Optional/),
    });
    expect(input.properties["scope"]!["properties"]["taskIds"]).toMatchObject({
      type: "array",
      items: { type: "integer" },
    });
    expect(input.properties["messages"]).toMatchObject({
      langgraph_type: "messages",
      description: expect.stringMatching(/last human message is the request/),
    });

    const state = schemas.state_schema as { properties: Record<string, { description?: string }> };
    expect(Object.keys(state.properties).length).toBeGreaterThanOrEqual(25);
    const undescribed = Object.entries(state.properties)
      .filter(([, p]) => !p.description)
      .map(([k]) => k);
    expect(undescribed).toEqual([]);
    expect(state.properties["outcome"]).toMatchObject({
      anyOf: expect.arrayContaining([
        { type: "string", enum: expect.arrayContaining(["VERIFIED", "NOT_EXECUTED"]) },
      ]),
    });

    const output = schemas.output_schema as { properties: Record<string, { description?: string }> };
    expect(Object.keys(output.properties)).toEqual(
      expect.arrayContaining(["outcome", "reasonCode", "reason", "envelopeHash", "verification", "messages"]),
    );
    expect(Object.keys(output.properties)).not.toContain("pendingDecision");
    expect(Object.entries(output.properties).filter(([, p]) => !p.description)).toEqual([]);
  });
});

describe("input that does not validate ends the run at once: INVALID_INPUT naming the field, no model call, no Bitrix24 call", () => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ["empty input {}", {}, /input field "request" is required/],
    ["no request at all", { requestedBy: "demo-user" }, /input field "request" is required/],
    [
      "request not a string",
      { request: 5, requestedBy: "demo-user" },
      /input field "request" must be a string, not number/,
    ],
    ["blank request", { request: "   ", requestedBy: "demo-user" }, /input field "request" is required/],
    [
      "no requestedBy (open server)",
      { request: "rename task 4 to X" },
      /input field "requestedBy" is required/,
    ],
    [
      "chat mode without requestedBy (open server)",
      { messages: [{ type: "human", content: "rename task 4 to X" }] },
      /input field "requestedBy" is required/,
    ],
    [
      "chat messages with no human message",
      { messages: [{ type: "ai", content: "hello" }], requestedBy: "demo-user" },
      /input field "messages" has no human message/,
    ],
    ["empty chat messages", { messages: [], requestedBy: "demo-user" }, /input field "request" is required/],
    [
      "an item that is not a chat message",
      { messages: [{}], requestedBy: "demo-user" },
      /input field "messages\.0": not a chat message/,
    ],
    [
      "scope with a non-numeric task id",
      { request: "rename task 4 to X", requestedBy: "demo-user", scope: { taskIds: ["four"] } },
      /input field "scope\.taskIds\.0"/,
    ],
    [
      "scope of the wrong type",
      { request: "rename task 4 to X", requestedBy: "demo-user", scope: "task 4" },
      /input field "scope"/,
    ],
  ];
  for (const [name, input, message] of cases) {
    it(name, async () => {
      const client = clientFor(open.server.apiUrl);
      const before = (await open.portal.calls()).length;
      const thread = await client.threads.create();
      const result = (await client.runs.wait(thread.thread_id, GRAPH_ID, { input })) as Record<
        string,
        unknown
      >;
      expect(result["__error__"], JSON.stringify(result).slice(0, 2000)).toBeUndefined();
      const state = await client.threads.getState(thread.thread_id);
      const values = state.values as Record<string, any>;
      expect(values).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "INVALID_INPUT", agentSteps: 0 });
      expect(values["reason"]).toMatch(message);
      expect(state.next).toEqual([]);
      // No model turn (agentSteps counts them) and nothing read from or written to Bitrix24.
      expect((await open.portal.calls()).length).toBe(before);
      const chat = (values["messages"] as Array<{ type: string; content: string }>).filter(
        (m) => m.type === "ai",
      );
      expect(chat.at(-1)?.content).toMatch(/^Outcome: NOT_EXECUTED \(INVALID_INPUT\)/);
    });
  }
});

it("input that is not an object fails the run with INVALID_INPUT (not LangGraph's InvalidUpdateError), before any node", async () => {
  const client = clientFor(open.server.apiUrl);
  const before = (await open.portal.calls()).length;
  for (const input of ["rename task 4 to X", 42]) {
    const thread = await client.threads.create();
    await expect(client.runs.wait(thread.thread_id, GRAPH_ID, { input: input as never })).rejects.toThrow(
      /"error":"InvalidInput","message":"INVALID_INPUT: the run input must be an object/,
    );
  }
  expect((await open.portal.calls()).length).toBe(before);
});

describe("chat mode and the approval from Studio (open server)", () => {
  let threadId = "";
  let payload: ApprovalPayload;

  it("{messages: [...]} takes the last human message as the request and reaches the approval card", async () => {
    const client = clientFor(open.server.apiUrl);
    threadId = (await client.threads.create()).thread_id;
    const first = (await client.runs.wait(threadId, GRAPH_ID, {
      input: {
        messages: [
          { type: "human", content: "rename task 5 to Y" },
          { type: "ai", content: "Which task?" },
          { type: "human", content: "rename task 4 to X" },
        ],
        requestedBy: "demo-user",
      },
    })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
    payload = first.__interrupt__![0]!.value;
    expect(payload.kind).toBe("approval");
    expect(payload.envelope.object.id).toBe(4);
    expect(payload.envelope.params).toEqual({ TITLE: "X" });
    const values = (await client.threads.getState(threadId)).values as Record<string, any>;
    expect(values["request"]).toBe("rename task 4 to X");
    // The model's conversation starts from the request alone: the other chat messages were dropped.
    const humans = (values["messages"] as Array<{ type: string; content: string }>).filter(
      (m) => m.type === "human",
    );
    expect(humans.map((m) => m.content)).toEqual(["rename task 4 to X"]);
  });

  it("exampleResume names the field to fill; pasted unfilled it is refused and the approval keeps waiting", async () => {
    const client = clientFor(open.server.apiUrl);
    expect(payload.exampleResumeFill).toEqual([
      { path: "decisions[0].approver.id", with: expect.stringMatching(/approver id/) },
    ]);
    expect(payload.exampleResume).toEqual({
      decisions: [
        {
          type: "approve",
          envelopeHash: payload.envelopeHash,
          nonce: payload.nonce,
          approver: { id: "FILL-IN-your-approver-id" },
        },
      ],
    });
    await client.runs.wait(threadId, GRAPH_ID, { command: { resume: payload.exampleResume } });
    const again = await interruptOf(client, threadId);
    expect(again?.envelopeHash).toBe(payload.envelopeHash);
    expect(again?.lastRefusal?.code).toBe("APPROVER_NOT_ALLOWED");
    expect(again?.lastRefusal?.reason, again?.lastRefusal?.reason).toContain("FILL-IN-your-approver-id");
    expect(await open.portal.writes()).toEqual([]);
  });

  it("filled in, it approves: one write, VERIFIED, and each step reported back as an AI message", async () => {
    const client = clientFor(open.server.apiUrl);
    const filled = structuredClone(payload.exampleResume);
    (filled.decisions[0]!["approver"] as { id: string }).id = "demo-approver";
    const final = (await client.runs.wait(threadId, GRAPH_ID, { command: { resume: filled } })) as Record<
      string,
      any
    >;
    expect(final["outcome"]).toBe("VERIFIED");
    const writes = await open.portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "X" });
    const chat = (final["messages"] as Array<{ type: string; content: string }>).filter(
      (m) => m.type === "ai" && /^(Proposed|Approved|Pre-read|Sent|Fresh read|Outcome)/.test(m.content),
    );
    expect(chat.map((m) => m.content.split(/[ :]/)[0])).toEqual([
      "Proposed",
      "Approved",
      "Pre-read",
      "Sent",
      "Fresh",
      "Outcome",
    ]);
    expect(chat.at(-1)!.content).toMatch(/^Outcome: VERIFIED \(VERIFIED\)/);
  });

  it("a decision sent to the ended thread is refused visibly (THREAD_ENDED), audited, and changes nothing", async () => {
    const client = clientFor(open.server.apiUrl);
    const before = await client.threads.getState(threadId);
    const filled = structuredClone(payload.exampleResume);
    (filled.decisions[0]!["approver"] as { id: string }).id = "demo-approver";
    // The SDK's runs.wait throws the run's error: {"error": "LateResumeRefused", "message": "THREAD_ENDED: …"}.
    await expect(client.runs.wait(threadId, GRAPH_ID, { command: { resume: filled } })).rejects.toThrow(
      /"error":"LateResumeRefused","message":"THREAD_ENDED: this thread ended at .* with VERIFIED \(VERIFIED\)/,
    );
    const runs = await client.runs.list(threadId);
    expect(runs.filter((r) => r.status === "error")).toHaveLength(1);
    const after = await client.threads.getState(threadId);
    expect(after.values).toMatchObject({ outcome: "VERIFIED", reasonCode: "VERIFIED" });
    expect(after.checkpoint.checkpoint_id).toBe(before.checkpoint.checkpoint_id);
    expect(await open.portal.writes()).toHaveLength(1);
    const refusals = (await auditOf(open, threadId)).filter(
      (r) => r.event === "decision_refused" && r.refusal?.code === "THREAD_ENDED",
    );
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.approver).toMatchObject({ id: "demo-approver", verifiedBy: "unverified" });
  });

  it("a resume to a thread that never asked anything is refused (NOT_WAITING)", async () => {
    const client = clientFor(open.server.apiUrl);
    const thread = await client.threads.create();
    await expect(
      client.runs.wait(thread.thread_id, GRAPH_ID, {
        command: { resume: { decisions: [{ type: "approve" }] } },
      }),
    ).rejects.toThrow(/"error":"LateResumeRefused","message":"NOT_WAITING: /);
  });
});

describe("with a token file: chat from the requester, exampleResume pasted as it is by the approver", () => {
  it("requestedBy is the caller, the example names no approver, and pasting it approves as the authenticated approver", async () => {
    const as = (who: string) => clientFor(guarded.server.apiUrl, { Authorization: `Bearer ${tokens[who]}` });
    const dave = as("dave");
    const thread = await dave.threads.create();
    const first = (await dave.runs.wait(thread.thread_id, GRAPH_ID, {
      input: { messages: [{ type: "human", content: "rename task 4 to X" }] },
    })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
    const payload = first.__interrupt__![0]!.value;
    expect(
      ((await dave.threads.getState(thread.thread_id)).values as Record<string, unknown>)["requestedBy"],
    ).toBe("dave");
    expect(payload.exampleResumeFill).toEqual([]);
    expect(payload.exampleResume).toEqual({
      decisions: [{ type: "approve", envelopeHash: payload.envelopeHash, nonce: payload.nonce }],
    });

    const final = (await as("alice").runs.wait(thread.thread_id, GRAPH_ID, {
      command: { resume: payload.exampleResume },
    })) as Record<string, any>;
    expect(final["outcome"], JSON.stringify(final).slice(0, 2000)).toBe("VERIFIED");
    const writes = await guarded.portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "X" });
    const accepted = (await auditOf(guarded, thread.thread_id)).filter(
      (r) => r.event === "decision_accepted",
    );
    expect(accepted.map((r) => r.approver)).toEqual([
      expect.objectContaining({ id: "alice", verifiedBy: "authentication" }),
    ]);
  });
});

describe("chat while a structured question waits (open server): a chat message is the answer only when it validates; the model never sees it", () => {
  interface InputPayload {
    kind: string;
    question: string;
    askedAt: string;
    exampleResume: { answers: Record<string, unknown> };
    lastRefusal?: { code: string; reason: string };
  }
  const valuesOf = async (client: Client, threadId: string) =>
    (await client.threads.getState(threadId)).values as {
      agentSteps: number;
      messages: Array<{ type: string; content: unknown }>;
    };
  const said = (values: { messages: Array<{ content: unknown }> }) =>
    values.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));

  async function askedOver(client: Client) {
    const threadId = (await client.threads.create()).thread_id;
    await client.runs.wait(threadId, GRAPH_ID, {
      input: {
        messages: [{ type: "human", content: "rename the task to ANSWERED IN CHAT" }],
        requestedBy: "demo-user",
      },
    });
    const asked = (await interruptOf(client, threadId)) as unknown as InputPayload;
    expect(asked).toMatchObject({ kind: "input", exampleResume: { answers: { taskId: 0 } } });
    return { threadId, asked, steps: (await valuesOf(client, threadId)).agentSteps };
  }

  it('Studio\'s chat (a new run with input {messages}): refused with the fields and exampleResume, the question waits, no model turn; then "4" answers it and the approval follows', async () => {
    const client = clientFor(open.server.apiUrl);
    const { threadId, asked, steps } = await askedOver(client);

    await client.runs.wait(threadId, GRAPH_ID, {
      input: { messages: [{ type: "human", content: "the fourth one" }] },
    });
    const refused = (await interruptOf(client, threadId)) as unknown as InputPayload;
    expect(refused).toMatchObject({
      kind: "input",
      question: asked.question,
      askedAt: asked.askedAt,
      lastRefusal: { code: "INVALID_ANSWER" },
    });
    expect(refused.lastRefusal!.reason).toMatch(
      /the chat message "the fourth one" is not a valid answer to the waiting question .* it expects taskId: a number .* \{"answers":\{"taskId":0\}\}/,
    );
    let values = await valuesOf(client, threadId);
    expect(values.agentSteps).toBe(steps);
    expect(said(values)).not.toContain("the fourth one");

    await client.runs.wait(threadId, GRAPH_ID, { input: { messages: [{ type: "human", content: "4" }] } });
    const approval = await interruptOf(client, threadId);
    expect(approval).toMatchObject({
      kind: "approval",
      envelope: { object: { id: 4 }, params: { TITLE: "ANSWERED IN CHAT" } },
    });
    values = await valuesOf(client, threadId);
    // The model went on from the answer (as the request_input tool result), never from the chat messages.
    expect(values.agentSteps).toBeGreaterThan(steps);
    expect(said(values)).toContain(JSON.stringify({ taskId: 4 }));
    expect(values.messages.filter((m) => m.type === "human").map((m) => m.content)).toEqual([
      "rename the task to ANSWERED IN CHAT",
    ]);
  });

  it("the SDK's thread stream (run.start with {messages} on the interrupted thread, which the server folds into command.resume): the same rule", async () => {
    const client = clientFor(open.server.apiUrl);
    const { threadId, asked, steps } = await askedOver(client);
    const send = async (content: string) => {
      const stream = client.threads.stream(threadId, { assistantId: GRAPH_ID });
      try {
        const { run_id } = (await stream.run.start({
          input: { messages: [{ type: "human", content }] },
        })) as { run_id: string };
        const run = await client.runs.get(threadId, run_id);
        // The server turned the chat input into a resume: the interrupt was pending.
        expect((run as unknown as { kwargs?: Record<string, unknown> }).kwargs?.["command"]).toMatchObject({
          resume: { messages: [{ type: "human", content }] },
        });
        await client.runs.join(threadId, run_id);
      } finally {
        await stream.close();
      }
    };

    await send("four");
    const refused = (await interruptOf(client, threadId)) as unknown as InputPayload;
    expect(refused).toMatchObject({
      kind: "input",
      askedAt: asked.askedAt,
      lastRefusal: { code: "INVALID_ANSWER" },
    });
    expect(refused.lastRefusal!.reason).toMatch(/the chat message "four" is not a valid answer/);
    expect((await valuesOf(client, threadId)).agentSteps).toBe(steps);

    await send("4");
    expect(await interruptOf(client, threadId)).toMatchObject({
      kind: "approval",
      envelope: { object: { id: 4 } },
    });
    expect(said(await valuesOf(client, threadId))).not.toContain("four");
  });
});
