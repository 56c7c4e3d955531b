/**
 * The whole graph with the real ChatGroq class as the agent's model, configured the way a user
 * configures it (MODEL, GROQ_API_KEY, GROQ_BASE_URL through loadConfig and the model factory), talking
 * over HTTP to a local server that speaks Groq's chat-completions protocol. The tools the model is
 * offered are read from the request bodies ChatGroq actually sent.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { MCP_TOOL_NAMES } from "../src/tools/mcp-contract.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import {
  CHAT_COMPLETIONS_PATH,
  startFakeGroq,
  type ChatCompletionRequest,
  type RunningFakeGroq,
} from "./support/fake-groq-server.js";

const MODEL_ID = "llama-3.3-70b-versatile";
const KEY = "test-key";
const READ_TOOLS = [
  MCP_TOOL_NAMES.getTask,
  MCP_TOOL_NAMES.listTasks,
  MCP_TOOL_NAMES.getHistory,
  MCP_TOOL_NAMES.getUsers,
  MCP_TOOL_NAMES.getDeal,
  MCP_TOOL_NAMES.listDeals,
  MCP_TOOL_NAMES.listTaskComments,
  MCP_TOOL_NAMES.getTaskComment,
];
/** Tools the agent may call that only record a proposal or a question for a human. */
const NON_EXECUTING = ["propose_change", "propose_change_set", "request_input"];

const toolReply = (body: ChatCompletionRequest, name: string) => {
  const callIds = new Set(
    body.messages.flatMap((m) =>
      (m.tool_calls ?? []).filter((c) => c.function.name === name).map((c) => c.id),
    ),
  );
  return body.messages.find(
    (m) => m.role === "tool" && m.tool_call_id !== undefined && callIds.has(m.tool_call_id),
  );
};

/** A well-behaved model: read the task, then propose the rename the user asked for. */
function readThenPropose(body: ChatCompletionRequest) {
  if (toolReply(body, "propose_change")) return { content: "Proposed the rename; waiting for approval." };
  const read = toolReply(body, "get_task_by_id");
  if (!read) return { toolCalls: [{ name: "get_task_by_id", args: { taskId: 4 } }] };
  return {
    toolCalls: [
      {
        name: "propose_change",
        args: { taskId: 4, fields: { TITLE: "X" }, rationale: "the user asked for this title" },
      },
    ],
  };
}

describe("the graph with ChatGroq over Groq's HTTP protocol", () => {
  let portal: Portal;
  let groq: RunningFakeGroq;
  let app: App | undefined;

  beforeEach(async () => {
    portal = await startPortal();
    groq = await startFakeGroq({ apiKey: KEY, script: readThenPropose });
    app = await openTestApp(portal, tempDir(), {
      env: { MODEL: `groq/${MODEL_ID}`, GROQ_API_KEY: KEY, GROQ_BASE_URL: groq.baseUrl },
    });
  });
  afterEach(async () => {
    await app?.close();
    await groq.close();
    await portal.emulator.close();
  });

  it("reads, proposes, waits for approval, and after approval writes once and verifies", async () => {
    expect(app!.deps.modelLabel).toBe(`groq/${MODEL_ID} via ${groq.baseUrl}`);
    const view = await startRun(app!, { request: "rename task 4 to X", requestedBy: "demo-user" });
    expect(view.status).toBe("awaiting_approval");
    const a = view.approval!;
    expect(a.envelope.params).toEqual({ TITLE: "X" });
    expect(await portal.writes()).toEqual([]);

    const done = await submitDecision(app!, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
      ],
    });
    expect(done.status).toBe("finished");
    expect(done.state?.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params["fields"]).toEqual(a.envelope.params);

    // What went over the wire: one completion to read, one to propose; each authenticated, none offering a write tool.
    const completions = groq.requests.filter((r) => r.path === CHAT_COMPLETIONS_PATH);
    expect(completions).toHaveLength(2);
    for (const r of completions) {
      expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(r.body?.model).toBe(MODEL_ID);
      const offered = (r.body?.tools ?? []).map((t) => t.function.name);
      expect(offered).toEqual(expect.arrayContaining([...READ_TOOLS, "propose_change"]));
      expect(offered).not.toContain(MCP_TOOL_NAMES.updateTask);
      // Anything else offered must be one of our non-executing tools (they only record a wish).
      for (const name of offered) expect([...READ_TOOLS, ...NON_EXECUTING]).toContain(name);
    }
    // The task the model saw came from the portal, through our MCP server.
    const readResult = toolReply(completions[1]!.body!, "get_task_by_id");
    expect(readResult?.content).toContain("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
  });

  it("a model that asks for the write tool itself never reaches the portal", async () => {
    await groq.close();
    groq = await startFakeGroq({
      apiKey: KEY,
      script: (body) =>
        toolReply(body, "update_task")
          ? { content: "I cannot write." }
          : { toolCalls: [{ name: "update_task", args: { taskId: 4, fields: { TITLE: "Y" } } }] },
    });
    await app?.close();
    app = await openTestApp(portal, tempDir(), {
      env: { MODEL: `groq/${MODEL_ID}`, GROQ_API_KEY: KEY, GROQ_BASE_URL: groq.baseUrl },
    });

    const view = await startRun(app, { request: "rename task 4 to Y", requestedBy: "demo-user" });
    expect(view.status).toBe("finished");
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(await portal.writes()).toEqual([]);
    const refusal = toolReply(groq.requests.at(-1)!.body!, "update_task");
    expect(refusal?.content).toMatch(/not available/);
  });
});
