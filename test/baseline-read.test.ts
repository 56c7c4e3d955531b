/**
 * The baseline read behind a change set's envelopes, through an external MCP server that passes the
 * portal's answers on as they are (Streamable HTTP, the emulator behind it). Bitrix24 has no "not found"
 * code for a task: tasks.task.get answers 200 with `result: []` for an id that does not exist or that
 * the acting user cannot see, and such a read is the proof the action is doomed (TARGET_NOT_FOUND),
 * not a failed read. Our own server turns that answer into an error; this one does not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { createBitrix24Tools, type Bitrix24Tools } from "../src/tools/bitrix24-tools.js";
import { readBaseline } from "../src/hitl/change-sets.js";
import { serveMcpOverHttp, type McpHttpServer } from "./support/mcp-http.js";

let emu: RunningEmulator;
let http: McpHttpServer | undefined;
let tools: Bitrix24Tools;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, rate: 0 });
  // The portal's answer to tasks.task.get, verbatim, as the tool's text.
  const rawGet = async (taskId: number) => {
    const res = await fetch(`${emu.webhookUrl}tasks.task.get.json`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ taskId }),
    });
    return { content: [{ type: "text" as const, text: await res.text() }] };
  };
  http = await serveMcpOverHttp(() => {
    const server = new McpServer({ name: "raw-tasks", version: "0.0.1" });
    server.registerTool("get_task_by_id", { inputSchema: { taskId: z.number() } }, (a) => rawGet(a.taskId));
    server.registerTool("list_tasks", { inputSchema: {} }, () => rawGet(0));
    server.registerTool("get_task_history", { inputSchema: { taskId: z.number() } }, (a) => rawGet(a.taskId));
    // The one write role a server must offer; this test never writes (the call log says so).
    server.registerTool(
      "update_task",
      { inputSchema: { taskId: z.number(), fields: z.record(z.string(), z.unknown()) } },
      () => ({ content: [{ type: "text" as const, text: "not used" }], isError: true }),
    );
    return server;
  });
  const url = http.url;
  tools = await createBitrix24Tools({ mode: "url", url, toolNames: {} });
});

afterAll(async () => {
  await tools?.close();
  await http?.close();
  await emu?.close();
});

describe("a change set's baseline read through a server that passes the portal's answer on", () => {
  it("result: [] for a task that does not exist is TARGET_NOT_FOUND, naming the answer; an existing task is its baseline", async () => {
    const update = (taskId: number) => ({
      operation: "update_task" as const,
      taskId,
      fields: { TITLE: "x" },
    });
    expect(await readBaseline(tools, update(99), [])).toEqual({
      ok: false,
      code: "TARGET_NOT_FOUND",
      reason:
        "task 99 does not exist or the acting user cannot see it (the portal answered result: []); nothing to approve",
    });
    const found = await readBaseline(tools, update(4), []);
    expect(found).toMatchObject({ ok: true, object: { id: "4" } });
    const calls = (await (await fetch(`${emu.baseUrl}/_emulator/calls`)).json()) as {
      calls: Array<{ method: string }>;
    };
    expect(calls.calls.map((c) => c.method)).toEqual(["tasks.task.get", "tasks.task.get"]);
  });
});
