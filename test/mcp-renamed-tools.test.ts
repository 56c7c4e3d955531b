/**
 * An external MCP server whose tools carry other names (BITRIX24_MCP_TOOLS getTask=t_get, …), end to
 * end: the graph with a scripted model, that server over Streamable HTTP and the emulator over HTTP.
 * The model is offered the reads under our names for their roles, so its read calls are routed to
 * read_tools and answered through the server's own tools; the approved write goes through the
 * server's update tool. Writes are counted in the emulator's call log.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";
import { startTaskMcpServer, type McpHttpServer } from "./support/mcp-http.js";

const TITLE = "RENAMED-TOOLS quarterly review";
let portal: Portal;
let mcp: McpHttpServer;

beforeAll(async () => {
  portal = await startPortal();
  mcp = await startTaskMcpServer(portal.emulator.webhookUrl, {
    get: "t_get",
    list: "t_list",
    history: "t_history",
    update: "t_update",
  });
});

afterAll(async () => {
  await mcp.close();
  await portal.emulator.close();
});

it("with getTask=t_get, listTasks=t_list, getHistory=t_history, updateTask=t_update: the model's read goes through t_get, the approval waits, and the approved rename is written once through t_update and VERIFIED", async () => {
  const app = await openTestApp(portal, tempDir(), {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE }, "update_task")),
    env: {
      BITRIX24_MCP_URL: mcp.url,
      BITRIX24_MCP_TOOLS: "getTask=t_get,listTasks=t_list,getHistory=t_history,updateTask=t_update",
    },
  });
  try {
    expect(app.deps.tools.readTools.map((t) => t.name).sort()).toEqual([
      "get_task_by_id",
      "get_task_history",
      "list_tasks",
    ]);
    const before = (await portal.calls()).length;
    const view = await startRun(app, { request: `rename task 4 to ${TITLE}`, requestedBy: "demo-user" });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    expect(view.approval!.envelope.params).toEqual({ TITLE });
    // The model's read, then the baseline read by code: both tasks.task.get, through t_get.
    expect((await portal.calls()).slice(before).map((c) => c.method)).toEqual([
      "tasks.task.get",
      "tasks.task.get",
    ]);
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
      ],
    });
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect((await portal.writes()).map((w) => [w.method, w.params["taskId"]])).toEqual([
      ["tasks.task.update", 4],
    ]);
    expect((await portal.task(4))["title"]).toBe(TITLE);
  } finally {
    await app.close();
  }
});
