import { request } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { serveHttp, type HttpMcpServerHandle } from "../src/tools/mcp-http.js";
import { runMcpServerCli } from "../src/tools/mcp-server.js";
import { createBitrix24Tools } from "../src/tools/bitrix24-tools.js";
import type { McpCallResult } from "../src/tools/mcp-call.js";

const CODE = "mcp-http-test-secret-code";

async function control(
  emu: RunningEmulator,
  path: string,
  method: "GET" | "POST",
  body?: unknown,
): Promise<unknown> {
  const res = await fetch(`${emu.baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? null : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`emulator control ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}
const updateCalls = async (emu: RunningEmulator) =>
  ((await control(emu, "/_emulator/calls", "GET")) as { calls: Array<{ method: string }> }).calls.filter(
    (c) => c.method === "tasks.task.update",
  );

function ok(res: McpCallResult): any {
  if (!res.ok) throw new Error(`expected ok, got ${JSON.stringify(res.error)}`);
  return res.body;
}

describe("MCP over Streamable HTTP, client in url mode", () => {
  let emu: RunningEmulator;
  let server: HttpMcpServerHandle;

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
    server = await serveHttp({
      port: 0,
      client: new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0 }),
    });
  });
  afterAll(async () => {
    await server?.close();
    await emu?.close();
  });
  beforeEach(async () => {
    await control(emu, "/_emulator/reset", "POST", {});
  });

  it("reads and writes through the HTTP server with the default tool names", async () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/mcp`);
    const tools = await createBitrix24Tools({ mode: "url", url: server.url, toolNames: {} });
    try {
      expect(tools.readTools.map((t) => t.name).sort()).toEqual([
        "get_deal",
        "get_task_by_id",
        "get_task_comment",
        "get_task_history",
        "get_users",
        "list_task_comments",
        "list_tasks",
        "search_deals",
      ]);
      expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.title).toBe(
        "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      );
      expect(ok(await tools.writeHandle.updateTask(4, { TITLE: "Over HTTP" })).result.task.title).toBe(
        "Over HTTP",
      );
      expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.title).toBe("Over HTTP");
      const missing = await tools.read("getTask", { taskId: 7 });
      expect(missing.ok).toBe(false);
      if (!missing.ok) expect(missing.error.kind).toBe("not_found");
      expect(await updateCalls(emu)).toHaveLength(1);
    } finally {
      await tools.close();
    }
  });

  it("refuses a mapping that points getTask at the update tool; no update reaches the portal", async () => {
    await expect(
      createBitrix24Tools({ mode: "url", url: server.url, toolNames: { getTask: "update_task" } }),
    ).rejects.toThrow(/getTask must name a read tool/);
    // Swapping the names so the roles look distinct: the server's own hints and declared method still refuse it.
    await expect(
      createBitrix24Tools({
        mode: "url",
        url: server.url,
        toolNames: { getTask: "update_task", updateTask: "get_task_by_id" },
      }),
    ).rejects.toThrow(/getTask/);
    await expect(
      createBitrix24Tools({ mode: "url", url: server.url, toolNames: { listTasks: "no_such_tool" } }),
    ).rejects.toThrow(/no such tool/);
    expect(await updateCalls(emu)).toHaveLength(0);
  });

  it("only serves POST /mcp and only to loopback Host names", async () => {
    const get = await fetch(server.url);
    expect(get.status).toBe(405);
    const other = await fetch(`http://127.0.0.1:${server.port}/other`, { method: "POST" });
    expect(other.status).toBe(404);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: server.port,
          path: "/mcp",
          method: "POST",
          headers: { host: "attacker.example", "content-type": "application/json" },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
    });
    expect(status).toBe(403);
  });

  it("runMcpServerCli --http serves the same tools and logs the portal without the code", async () => {
    const lines: string[] = [];
    const handle = await runMcpServerCli({
      http: true,
      port: 0,
      webhookUrl: emu.webhookUrl,
      rate: 0,
      log: (l) => lines.push(l),
    });
    try {
      expect(handle.port).toBeGreaterThan(0);
      expect(lines.join("\n")).toContain(`http://127.0.0.1:${handle.port}/mcp`);
      expect(lines.join("\n")).not.toContain(CODE);
      const tools = await createBitrix24Tools({ mode: "url", url: handle.url!, toolNames: {} });
      try {
        expect(ok(await tools.read("listTasks", { filter: { ID: 4 } })).result.tasks).toHaveLength(1);
      } finally {
        await tools.close();
      }
    } finally {
      await handle.close();
    }
  });
});
