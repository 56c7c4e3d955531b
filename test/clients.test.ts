/**
 * agent-chat-ui and Agent Inbox against `npm run dev` (open mode), replaying each client's exact calls
 * through @langchain/langgraph-sdk on one real dev server, with the settings docs/clients.md gives:
 * ACTION_ENVELOPE_API_ORIGINS=http://localhost:3000 (the chat UI's origin) and
 * ACTION_ENVELOPE_DEFAULT_REQUESTER=demo-user. Request → card → every bare button refused visibly with
 * the approval still waiting and no refusal counted → the pasted decision → VERIFIED with exactly one
 * write in the emulator's call log. The client source lines followed are quoted where they are used
 * (agent-chat-ui fdc87e6, agent-inbox f38301b, the installed @langchain/langgraph-sdk).
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client, type Checkpoint } from "@langchain/langgraph-sdk";
import { ROOT, envFor, startPortal, tempDir, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";

const GRAPH_ID = "bitrix24_task_agent";
/** agent-chat-ui's dev server (`next dev`), the origin its browser page calls the API from. */
const CHAT_UI = "http://localhost:3000";
/** Two counted refusals would end the approval: the four bare decisions below prove none is counted. */
const MAX_REFUSED = "2";

interface ApprovalPayload {
  kind: "approval";
  envelopeHash: string;
  nonce: string;
  actionRequests: Array<{ name: string; args: Record<string, unknown>; description: string }>;
  reviewConfigs: Array<{ actionName: string; action_name: string; allowedDecisions: string[] }>;
  exampleResume: { decisions: Array<Record<string, unknown>> };
  lastRefusal?: { code: string; reason: string };
  action_request: { action: string; args: Record<string, unknown> };
  config: Record<string, boolean>;
  description: string;
}

let portal: Portal;
let server: RunningDevServer;
let client: Client;

/**
 * docs/clients.md shows one command; this is how the test runs it: its variables, then `npm run dev`,
 * whose script builds dist/ if stale and runs `node dist/cli/dev-server.js`, which startDevServer runs (on an isolated copy of
 * langgraph.json, so the test's state stays out of the repo).
 */
function documentedCommand(): Record<string, string> {
  const doc = fs.readFileSync(path.join(ROOT, "docs/clients.md"), "utf8");
  const blocks = [...doc.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
  expect(blocks).toHaveLength(1);
  const words = blocks[0]!.split(/\s+/);
  expect(words.slice(-3)).toEqual(["npm", "run", "dev"]);
  expect(
    (
      JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
        scripts: Record<string, string>;
      }
    ).scripts["dev"],
  ).toBe("node scripts/build.mjs --if-stale && node dist/cli/dev-server.js");
  return Object.fromEntries(words.slice(0, -3).map((w) => w.split("=") as [string, string]));
}

beforeAll(async () => {
  const documented = documentedCommand();
  expect(documented).toEqual({
    ACTION_ENVELOPE_API_ORIGINS: CHAT_UI,
    ACTION_ENVELOPE_DEFAULT_REQUESTER: "demo-user",
  });
  portal = await startPortal();
  server = await startDevServer(
    envFor(portal, tempDir("ae-clients-"), {
      ...documented,
      ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: MAX_REFUSED,
    }),
  );
  // agent-chat-ui src/providers/Stream.tsx: `apiKey: apiKey ?? undefined` (no key in open mode).
  client = new Client({ apiUrl: server.apiUrl, apiKey: null, callerOptions: { maxRetries: 0 } });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

/** A raw request, so that Origin is exactly what the browser sends. */
function send(
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  const url = new URL(path, server.apiUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method,
        headers: { host: url.host, ...headers },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/**
 * One useStream submit, as the installed SDK's react/stream.lgp.js submitToThread makes it:
 *   `if (checkpoint != null) delete checkpoint.thread_id;`
 *   `return client.runs.stream(usableThreadId, options.assistantId, { input: values, config: ..., command: submitOptions?.command, ...
 *      onDisconnect: submitOptions?.onDisconnect ?? (streamResumable ? "continue" : "cancel"), signal, checkpoint, streamMode, streamSubgraphs, streamResumable, ... })`
 * with `checkpoint` the thread head's. Earlier SDK releases (such as agent-chat-ui's ^1.8.10, which sets
 * `fetchStateHistory: true`) attach it to every submit on an existing thread:
 *   `let checkpoint = submitOptions?.checkpoint ?? (includeImplicitBranch ? branchContext.threadHead?.checkpoint : void 0) ?? void 0;`
 * The stream is read to its end.
 */
async function submit(
  threadId: string,
  values: Record<string, unknown>,
  opts: { command?: { resume: unknown }; head?: boolean } = {},
): Promise<Array<{ event: string; data: unknown }>> {
  let checkpoint: Omit<Checkpoint, "thread_id"> | undefined;
  if (opts.head) {
    const head = { ...(await client.threads.getState(threadId)).checkpoint } as Partial<Checkpoint>;
    delete head.thread_id;
    checkpoint = head as Omit<Checkpoint, "thread_id">;
  }
  const events: Array<{ event: string; data: unknown }> = [];
  // agent-chat-ui src/components/thread/index.tsx: `stream.submit({ messages: [...toolMessages, newHumanMessage], context },
  //   { streamMode: ["values"], streamSubgraphs: true, streamResumable: true, ... })`
  for await (const part of client.runs.stream(threadId, GRAPH_ID, {
    input: values,
    ...(opts.command ? { command: opts.command } : {}),
    ...(checkpoint ? { checkpoint } : {}),
    streamMode: ["values"],
    streamSubgraphs: true,
    streamResumable: true,
    onDisconnect: "continue",
  })) {
    events.push(part as { event: string; data: unknown });
  }
  const error = events.find((e) => e.event === "error");
  expect(error, JSON.stringify(error?.data)).toBeUndefined();
  return events;
}

type Msg = { type: string; id?: string; tool_calls?: Array<{ id?: string; name: string }> };

/**
 * What agent-chat-ui's chat box sends: `{ messages: [...toolMessages, newHumanMessage], context }` with
 * `newHumanMessage = { id: uuidv4(), type: "human", content: [{ type: "text", text: input }] }` and
 * `toolMessages = ensureToolCallsHaveResponses(stream.messages)` (src/lib/ensure-tool-responses.ts):
 * for an AI message whose tool calls are not followed by a tool message,
 *   `{ type: "tool", tool_call_id: tc.id ?? "", id: `${DO_NOT_RENDER_ID_PREFIX}${uuidv4()}`, name: tc.name, content: "Successfully handled tool call." }`.
 */
async function human(threadId: string | undefined, text: string): Promise<Record<string, unknown>> {
  const shown = threadId
    ? (((await client.threads.getState(threadId)).values as { messages?: Msg[] }).messages ?? [])
    : [];
  const toolMessages = shown.flatMap((m, i) =>
    m.type !== "ai" || !m.tool_calls?.length || shown[i + 1]?.type === "tool"
      ? []
      : m.tool_calls.map((tc) => ({
          type: "tool",
          tool_call_id: tc.id ?? "",
          id: `do-not-render-${randomUUID()}`,
          name: tc.name,
          content: "Successfully handled tool call.",
        })),
  );
  return {
    messages: [...toolMessages, { id: randomUUID(), type: "human", content: [{ type: "text", text }] }],
  };
}

async function waiting(threadId: string): Promise<ApprovalPayload> {
  const state = await client.threads.getState(threadId);
  expect(state.next).toEqual(["await_approval"]);
  const value = state.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as ApprovalPayload | undefined;
  expect(value?.kind).toBe("approval");
  return value!;
}

async function lastAiText(threadId: string): Promise<string> {
  const messages = (
    (await client.threads.getState(threadId)).values as {
      messages: Array<{ type: string; content: unknown }>;
    }
  ).messages;
  const ai = messages.filter((m) => m.type === "ai").at(-1);
  return typeof ai?.content === "string" ? ai.content : JSON.stringify(ai?.content);
}

const filled = (p: ApprovalPayload) =>
  JSON.stringify({ decisions: [{ ...p.exampleResume.decisions[0], approver: { id: "demo-approver" } }] });

describe("one setting opens the server to the chat UI's origin", () => {
  it("the CORS preflight and the response name the origin listed in ACTION_ENVELOPE_API_ORIGINS", async () => {
    const pre = await send("OPTIONS", "/threads/search", {
      origin: CHAT_UI,
      "access-control-request-method": "POST",
      "access-control-request-headers": "content-type,x-api-key",
    });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(CHAT_UI);
    expect(String(pre.headers["access-control-allow-headers"]).toLowerCase()).toContain("x-api-key");
    const info = await send("GET", "/info", { origin: CHAT_UI });
    expect(info.status).toBe(200);
    expect(info.headers["access-control-allow-origin"]).toBe(CHAT_UI);
    // Another origin still gets neither (GET /info is answered without the auth handler, a thread is not).
    const other = await send("GET", `/threads/${randomUUID()}`, { origin: "http://localhost:3001" });
    expect(other.status).toBe(403);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    expect(server.output()).toContain(
      `browser origins (ACTION_ENVELOPE_API_ORIGINS, CORS and origin check): ${CHAT_UI}`,
    );
  });
});

describe("agent-chat-ui: request, card, buttons, pasted decision", () => {
  let threadId = "";
  let card: ApprovalPayload;

  it("a request sent as {messages} alone starts with the default requester and reaches the card, which the chat UI can render", async () => {
    // useStream creates the thread first: `client.threads.create({ threadId: submitOptions?.threadId, metadata: submitOptions?.metadata, signal })`.
    threadId = (await client.threads.create()).thread_id;
    await submit(threadId, await human(undefined, "rename task 4 to Quarterly plan"));
    card = await waiting(threadId);
    expect(((await client.threads.getState(threadId)).values as { requestedBy: string }).requestedBy).toBe(
      "demo-user",
    );
    // agent-chat-ui src/lib/agent-inbox-interrupt.ts isAgentInboxInterruptSchema reads, after the SDK's
    // normaliser has aliased actionRequests/allowedDecisions to snake_case:
    //   `"action_name" in config && typeof config.action_name === "string" && "allowed_decisions" in config && Array.isArray(config.allowed_decisions)`
    //   and each action request `"name" in request && typeof request.name === "string" && "args" in request && request.args !== null && typeof request.args === "object"`.
    expect(card.reviewConfigs).toEqual([
      {
        actionName: "update_task",
        action_name: "update_task",
        allowedDecisions: ["approve", "edit", "reject"],
      },
    ]);
    expect(card.actionRequests[0]).toMatchObject({
      name: "update_task",
      args: { taskId: 4, fields: { TITLE: "Quarterly plan" } },
    });
    expect(card.description).toContain(card.envelopeHash);
    expect(card.description).toContain(card.nonce);
    expect(card.description).toContain(card.actionRequests[0]!.description);
    // The default requester is shown as what it is: every id on this open server is self-declared.
    expect(card.actionRequests[0]!.description).toContain("Requested by: demo-user");
    expect(card.description).toMatch(/identities on this server are self-declared/);
  });

  it('each button (Approve, Reject, Edit) and a typed "approve" is refused as an AI message naming what to send; the approval waits, nothing counted or written', async () => {
    // agent-chat-ui src/components/thread/agent-inbox/hooks/use-interrupted-actions.tsx resumeRun:
    //   `thread.submit({}, { command: { resume: { decisions } } })`, with decisions from utils.ts buildDecisionFromState:
    //   `{ decision: { type: "approve" } }`, `{ decision: { type: "reject", message } }`, `{ type: "edit", edited_action: selectedDecision.edited_action }`.
    const buttons: Array<Record<string, unknown>> = [
      { type: "approve" },
      { type: "reject", message: "not now" },
      {
        type: "edit",
        edited_action: { name: "update_task", args: { taskId: 4, fields: { TITLE: "Other plan" } } },
      },
    ];
    for (const decision of buttons) {
      await submit(threadId, {}, { command: { resume: { decisions: [decision] } }, head: true });
      const again = await waiting(threadId);
      expect(again.envelopeHash).toBe(card.envelopeHash);
      expect(again.lastRefusal?.code, JSON.stringify(decision)).toBeDefined();
      const answer = await lastAiText(threadId);
      expect(answer).toMatch(/^Decision refused \(/);
      expect(answer).toContain("the approval is still waiting");
      expect(answer).toContain(JSON.stringify(card.exampleResume));
    }
    await submit(threadId, await human(threadId, "approve"), { head: true });
    await waiting(threadId);
    expect(await lastAiText(threadId)).toMatch(
      /^Decision refused \(MALFORMED\): the message "approve" is not a decision: a decision names the envelope's hash and nonce\..*To decide, send this as a chat message/s,
    );
    expect(await portal.writes()).toEqual([]);
  });

  it("a run naming an older checkpoint than the head is still refused as a fork", async () => {
    const history = await client.threads.getHistory(threadId, { limit: 50 });
    const older = history.at(-1)!.checkpoint;
    await expect(
      client.runs.wait(threadId, GRAPH_ID, {
        input: {},
        command: { resume: { decisions: [{ type: "approve" }] } },
        checkpoint: { checkpoint_id: older.checkpoint_id!, checkpoint_ns: "", checkpoint_map: {} },
      }),
    ).rejects.toThrow(/fork or replay/);
    await waiting(threadId);
  });

  it("the card's decision, pasted as a chat message with the approver filled in, is the decision: VERIFIED, exactly one write", async () => {
    await submit(threadId, await human(threadId, filled(card)), { head: true });
    const state = await client.threads.getState(threadId);
    expect((state.values as { outcome?: string }).outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(Number(writes[0]!.params["taskId"])).toBe(4);
    expect(writes[0]!.params["fields"]).toEqual({ TITLE: "Quarterly plan" });
  });
});

describe("Agent Inbox: the thread's interrupt, its buttons, its response box", () => {
  let threadId = "";
  let card: ApprovalPayload;

  /**
   * agent-inbox src/components/agent-inbox/contexts/ThreadContext.tsx sendHumanResponse:
   *   `return client.runs.create(threadId, graphId, { command: { resume: response } })`; the inbox then reloads the thread.
   */
  async function respond(response: unknown[]): Promise<void> {
    const run = await client.runs.create(threadId, GRAPH_ID, { command: { resume: response } });
    await client.runs.join(threadId, run.run_id);
  }

  it("reads our interrupt as a HumanInterrupt (action_request, config, markdown description with hash and nonce)", async () => {
    threadId = (await client.threads.create()).thread_id;
    await submit(threadId, await human(undefined, "rename task 4 to Inbox plan"));
    card = await waiting(threadId);
    // agent-inbox src/components/agent-inbox/contexts/utils.ts getInterruptFromThread: for each of
    // `Object.values(thread.interrupts)`, `interrupt[0]?.value` that is not the middleware's snake_case
    // `action_requests` is taken when `"action_request" in value && "config" in value`.
    const thread = await client.threads.get(threadId);
    const values = Object.values(thread.interrupts ?? {}).map(
      (list) => (list as Array<{ value?: ApprovalPayload }>)[0]?.value,
    );
    expect(values).toHaveLength(1);
    const value = values[0]!;
    expect("action_requests" in value).toBe(false);
    expect(value.action_request).toEqual({
      action: "update_task",
      args: { taskId: 4, fields: { TITLE: "Inbox plan" } },
    });
    expect(value.config).toEqual({
      allow_ignore: false,
      allow_respond: true,
      allow_edit: false,
      allow_accept: false,
    });
    expect(value.description).toContain(`**Hash:** \`${card.envelopeHash}\``);
    expect(value.description).toContain(`**Nonce:** \`${card.nonce}\``);
  });

  it("accept, ignore and edit carry no hash: each refused as an AI message, the approval waits, nothing written", async () => {
    // agent-inbox HumanResponse values: `{ type: "accept", args: null }`, `{ type: "ignore", args: null }`, `{ type: "edit", args: ActionRequest }`.
    const before = (await portal.writes()).length;
    for (const response of [
      { type: "accept", args: null },
      { type: "ignore", args: null },
      { type: "edit", args: { action: "update_task", args: { taskId: 4, fields: { TITLE: "X" } } } },
    ]) {
      await respond([response]);
      const again = await waiting(threadId);
      expect(again.lastRefusal?.code).toBe("MALFORMED");
      expect(await lastAiText(threadId)).toContain(
        `Agent Inbox's "${response.type}" carries no envelope hash or nonce`,
      );
    }
    expect((await portal.writes()).length).toBe(before);
  });

  it("the card's decision typed into the response box is the decision: VERIFIED, exactly one write", async () => {
    const before = (await portal.writes()).length;
    await respond([{ type: "response", args: filled(card) }]);
    expect(((await client.threads.getState(threadId)).values as { outcome?: string }).outcome).toBe(
      "VERIFIED",
    );
    const writes = await portal.writes();
    expect(writes.length - before).toBe(1);
    expect(writes.at(-1)!.params["fields"]).toEqual({ TITLE: "Inbox plan" });
  });
});
