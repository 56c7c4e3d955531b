import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { createBitrix24Tools, type Bitrix24Tools } from "../src/tools/bitrix24-tools.js";
import { McpToolError, type McpCallResult } from "../src/tools/mcp-call.js";
import { readMcpServerEnv } from "../src/tools/mcp-stdio.js";
import { serveMcpOverHttp, type McpHttpServer } from "./support/mcp-http.js";

const CODE = "mcp-test-secret-code";
const READ_TOOL_NAMES = [
  "get_deal",
  "get_task_by_id",
  "get_task_comment",
  "get_task_history",
  "get_users",
  "list_task_comments",
  "list_tasks",
  "search_deals",
];

interface CallRow {
  method: string;
  params: Record<string, unknown>;
  status: number;
}

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
const arm = (emu: RunningEmulator, fault: Record<string, unknown>) =>
  control(emu, "/_emulator/faults", "POST", fault);
const calls = async (emu: RunningEmulator, method?: string) => {
  const all = ((await control(emu, "/_emulator/calls", "GET")) as { calls: CallRow[] }).calls;
  return method ? all.filter((c) => c.method === method) : all;
};

function ok(res: McpCallResult): any {
  if (!res.ok) throw new Error(`expected ok, got ${JSON.stringify(res.error)}`);
  expect(JSON.parse(res.text)).toEqual(res.body);
  return res.body;
}
function failed(res: McpCallResult) {
  if (res.ok) throw new Error(`expected an error, got ${res.text.slice(0, 200)}`);
  expect(res.text).not.toContain(CODE);
  return res.error;
}

describe("MCP over stdio against the emulator over HTTP", () => {
  let emu: RunningEmulator;
  let tools: Bitrix24Tools;

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
    tools = await createBitrix24Tools({
      mode: "stdio",
      env: { BITRIX24_WEBHOOK_URL: emu.webhookUrl, BITRIX24_TIMEOUT_MS: "1500", BITRIX24_RATE: "0" },
    });
  });
  afterAll(async () => {
    await tools?.close();
    await emu?.close();
  });
  beforeEach(async () => {
    await control(emu, "/_emulator/reset", "POST", {});
  });

  it("readTools are exactly the read tools, all read-only by role and method", () => {
    expect(tools.readTools.map((t) => t.name).sort()).toEqual(READ_TOOL_NAMES);
    expect(tools.readTools.find((t) => t.name === "update_task")).toBeUndefined();
    expect(tools.roles.updateTask).toEqual({
      toolName: "update_task",
      method: "tasks.task.update",
      readOnly: false,
    });
    for (const role of [
      "getTask",
      "listTasks",
      "getHistory",
      "getUsers",
      "getDeal",
      "listDeals",
      "listTaskComments",
      "getTaskComment",
    ] as const) {
      expect(tools.roles[role].readOnly).toBe(true);
    }
    for (const role of [
      "updateTask",
      "addTaskComment",
      "addTask",
      "updateDeal",
      "deleteTaskComment",
      "deleteTask",
    ] as const) {
      expect(tools.roles[role].readOnly).toBe(false);
      expect(tools.readTools.map((t) => t.name)).not.toContain(tools.roles[role].toolName);
    }
    expect(tools.missingRoles).toEqual([]);
    expect(tools.missingWriteRoles).toEqual([]);
  });

  it("read getTask returns the full Bitrix24 body", async () => {
    const body = ok(await tools.read("getTask", { taskId: 4 }));
    expect(body.result.task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect(body.result.task.responsibleId).toBe("5");
    expect(body.result.task.action.edit).toBe(true);
    expect(body.time).toBeTypeOf("object");
  });

  it("read listTasks and getHistory return the documented shapes", async () => {
    const list = ok(await tools.read("listTasks", { filter: { ID: 4 } }));
    expect(list.result.tasks.map((t: { id: string }) => t.id)).toEqual(["4"]);
    expect(typeof list.total).toBe("number");
    const history = ok(await tools.read("getHistory", { taskId: 4 }));
    expect(Array.isArray(history.result.list)).toBe(true);
  });

  it("a read tool handed to the model answers with the same JSON text", async () => {
    const tool = tools.readTools.find((t) => t.name === "get_task_by_id")!;
    const text = await tool.invoke({ taskId: 4 });
    expect(typeof text).toBe("string");
    expect(JSON.parse(text as string).result.task.id).toBe("4");
    // As a ToolMessage (what the agent loop sees): the Bitrix24 JSON text, nothing else.
    const message = (await tool.invoke({
      name: "get_task_by_id",
      args: { taskId: 4 },
      id: "call-1",
      type: "tool_call",
    })) as { content: unknown };
    expect(typeof message.content).toBe("string");
    expect(JSON.parse(message.content as string).result).toEqual(JSON.parse(text as string).result);
    const failure = await tool.invoke({ taskId: 7 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(McpToolError);
    expect((failure as McpToolError).error.kind).toBe("not_found");
    expect(JSON.parse((failure as McpToolError).message).error.kind).toBe("not_found");
  });

  it("updateTask changes the task once, and the change shows in a fresh get and in history", async () => {
    const body = ok(await tools.writeHandle.updateTask(4, { TITLE: "Changed over MCP", PRIORITY: "2" }));
    expect(body.result.task.title).toBe("Changed over MCP");
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    const fresh = ok(await tools.read("getTask", { taskId: 4 }));
    expect(fresh.result.task.title).toBe("Changed over MCP");
    expect(fresh.result.task.priority).toBe("2");
    const history = ok(await tools.read("getHistory", { taskId: 4 }));
    const fields = history.result.list.map((r: { field: string }) => r.field);
    expect(fields).toContain("TITLE");
    expect(fields).toContain("PRIORITY");
  });

  it("errors arrive as structured isError results with their kind", async () => {
    const notFound = failed(await tools.read("getTask", { taskId: 7 }));
    expect(notFound.kind).toBe("not_found");
    const denied = failed(await tools.writeHandle.updateTask(6, { TITLE: "no rights" }));
    expect(denied).toMatchObject({
      kind: "access_denied",
      code: "0",
      httpStatus: 400,
      outcomeUnknown: false,
    });
    const empty = failed(await tools.writeHandle.updateTask(4, {}));
    expect(empty).toMatchObject({ kind: "invalid_request", code: "100" });
  });

  it("faults through MCP: error, malformed and rate_limited keep their kind and evidence", async () => {
    await arm(emu, {
      method: "tasks.task.get",
      kind: "error",
      status: 401,
      error: "NO_AUTH_FOUND",
      description: "Wrong authorization data",
    });
    expect(failed(await tools.read("getTask", { taskId: 4 }))).toMatchObject({
      kind: "auth",
      code: "NO_AUTH_FOUND",
      httpStatus: 401,
    });

    await arm(emu, { method: "tasks.task.get", kind: "malformed", body: "<html>gateway</html>" });
    expect(failed(await tools.read("getTask", { taskId: 4 }))).toMatchObject({
      kind: "malformed_response",
      rawBody: "<html>gateway</html>",
    });

    // OVERLOAD_LIMIT: the portal blocked the REST API and did not run the call, so the outcome is known.
    await arm(emu, {
      method: "tasks.task.update",
      kind: "error",
      status: 503,
      error: "OVERLOAD_LIMIT",
      description: "REST API is blocked due to overload.",
      times: 1,
    });
    expect(failed(await tools.writeHandle.updateTask(4, { TITLE: "x" }))).toMatchObject({
      kind: "target_rejected",
      httpStatus: 503,
      outcomeUnknown: false,
    });
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);

    // Any other 5xx to a write may come while the portal is carrying it out: outcome unknown.
    await arm(emu, {
      method: "tasks.task.update",
      kind: "error",
      status: 502,
      error: "BAD_GATEWAY",
      description: "upstream",
      times: 1,
    });
    expect(failed(await tools.writeHandle.updateTask(4, { TITLE: "x" }))).toMatchObject({
      kind: "target_rejected",
      httpStatus: 502,
      outcomeUnknown: true,
    });
    expect(await calls(emu, "tasks.task.update")).toHaveLength(2);
  });

  it("apply_then_timeout through MCP: outcome unknown, exactly one update reached the portal", async () => {
    await arm(emu, { method: "tasks.task.update", kind: "apply_then_timeout" });
    const error = failed(await tools.writeHandle.updateTask(4, { TITLE: "Maybe applied" }));
    expect(error).toMatchObject({ kind: "transport_timeout", outcomeUnknown: true });
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
  });

  it("ack_without_apply and side_effect are visible only on a fresh read", async () => {
    await arm(emu, { method: "tasks.task.update", kind: "ack_without_apply" });
    ok(await tools.writeHandle.updateTask(4, { TITLE: "Only acknowledged" }));
    expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.title).toBe(
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    );

    await arm(emu, { method: "tasks.task.update", kind: "side_effect", field: "RESPONSIBLE_ID", value: "1" });
    ok(await tools.writeHandle.updateTask(4, { TITLE: "With side effect" }));
    const fresh = ok(await tools.read("getTask", { taskId: 4 })).result.task;
    expect(fresh.title).toBe("With side effect");
    expect(fresh.responsibleId).toBe("1");
  });

  it("the read path cannot reach tasks.task.update", async () => {
    // Crafted arguments on a read tool: strict schemas refuse them before any handler runs.
    const crafted = failed(await tools.read("getTask", { taskId: 4, fields: { TITLE: "smuggled" } }));
    expect(crafted.kind).toBe("invalid_request");
    expect(failed(await tools.read("getTask", { taskId: -4 })).kind).toBe("invalid_request");
    expect(
      failed(await tools.read("listTasks", { filter: { ID: 4 }, method: "tasks.task.update" })).kind,
    ).toBe("invalid_request");

    // The role is checked at run time too, for callers that bypass the types.
    expect(() => tools.read("updateTask" as never, { taskId: 4, fields: { TITLE: "smuggled" } })).toThrow(
      /expected one of/,
    );

    // A model-facing read tool with crafted args fails as well.
    const getTool = tools.readTools.find((t) => t.name === "get_task_by_id")!;
    await expect(getTool.invoke({ taskId: 4, fields: { TITLE: "smuggled" } } as never)).rejects.toThrow();

    expect(await calls(emu, "tasks.task.update")).toHaveLength(0);
    expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.title).toBe(
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    );
  });
});

describe("mcp-stdio entry", () => {
  const tsx = fileURLToPath(new URL("../node_modules/.bin/tsx", import.meta.url));
  const entry = fileURLToPath(new URL("../src/tools/mcp-stdio.ts", import.meta.url));

  it("reads its settings from the given environment", () => {
    expect(
      readMcpServerEnv({
        BITRIX24_WEBHOOK_URL: "http://127.0.0.1:1/rest/1/x/",
        BITRIX24_RATE: "5",
        BITRIX24_BURST: "250",
        BITRIX24_TIMEOUT_MS: "900",
      }),
    ).toEqual({
      webhookUrl: "http://127.0.0.1:1/rest/1/x/",
      rate: 5,
      burst: 250,
      timeoutMs: 900,
    });
    expect(() => readMcpServerEnv({})).toThrow(/BITRIX24_WEBHOOK_URL is required/);
    expect(() =>
      readMcpServerEnv({ BITRIX24_WEBHOOK_URL: "http://127.0.0.1:1/rest/1/x/", BITRIX24_TIMEOUT_MS: "soon" }),
    ).toThrow(/BITRIX24_TIMEOUT_MS/);
  });

  it("exits with a clear message when BITRIX24_WEBHOOK_URL is missing", async () => {
    const child = spawn(tsx, [entry], {
      env: { PATH: process.env.PATH ?? "" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += String(d)));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/BITRIX24_WEBHOOK_URL is required/);
  });
});

/**
 * scripts/build.mjs bundles the compiled server into one file, and compiled code spawns the bundle
 * (src/tools/bitrix24-tools.ts). Both builds must be the same server: same tools, same schemas, same
 * answer to a read against the emulator.
 */
describe("the bundled MCP server", () => {
  const dist = (file: string) => fileURLToPath(new URL(`../dist/tools/${file}`, import.meta.url));

  it("lists the same tools with the same schemas as the module tree tsc wrote, and answers a read the same", async () => {
    const emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
    try {
      const seen: Array<{ tools: unknown; task: unknown }> = [];
      for (const file of ["mcp-stdio.js", "mcp-stdio.bundle.js"]) {
        const transport = new StdioClientTransport({
          command: process.execPath,
          args: [dist(file)],
          env: { PATH: process.env.PATH ?? "", BITRIX24_WEBHOOK_URL: emu.webhookUrl },
        });
        const client = new Client({ name: "bundle-check", version: "1" });
        await client.connect(transport);
        try {
          const { tools } = await client.listTools();
          const answer = await client.callTool({ name: "get_task_by_id", arguments: { taskId: 4 } });
          // The portal's timing block differs from call to call; the task itself must not.
          seen.push({ tools, task: (answer.structuredContent as { result?: unknown } | undefined)?.result });
        } finally {
          await client.close();
        }
      }
      expect((seen[0]!.tools as unknown[]).length).toBeGreaterThan(READ_TOOL_NAMES.length);
      expect(seen[1]).toEqual(seen[0]);
      expect(seen[0]!.task).toMatchObject({ task: { id: "4" } });
    } finally {
      await emu.close();
    }
  });
});

describe("createBitrix24Tools configuration", () => {
  it("refuses stdio mode without a webhook URL", async () => {
    await expect(createBitrix24Tools({ mode: "stdio", env: {} })).rejects.toThrow(/BITRIX24_WEBHOOK_URL/);
  });
});

/**
 * An external MCP server says less than ours: a plain-text error, a structured error without
 * `outcomeUnknown`, a success whose text is not JSON. Its update_task tool really writes to the
 * emulator (so the change lands) and then answers with the crafted result: for a write, such an answer
 * must leave the outcome open, never read as "refused" or "not applied".
 */
describe("an external MCP server's answers to a write", () => {
  let emu: RunningEmulator;
  let http: McpHttpServer | undefined;
  let tools: Bitrix24Tools;
  /** What the next update_task call answers after it has (or has not) written. */
  let next: { apply: boolean; result: CallToolResult };
  const text = (body: unknown): CallToolResult => ({
    content: [{ type: "text", text: JSON.stringify(body) }],
  });

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
    const client = new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0 });
    const build = () => {
      const s = new McpServer({ name: "terse-external", version: "0.0.1" });
      s.registerTool("get_task_by_id", { inputSchema: { taskId: z.number() } }, async (a) =>
        a.taskId === 99
          ? { isError: true, content: [{ type: "text", text: "Something went wrong" }] }
          : text(await client.getTask(a.taskId)),
      );
      s.registerTool("list_tasks", { inputSchema: {} }, async () => text(await client.listTasks()));
      s.registerTool("get_task_history", { inputSchema: { taskId: z.number() } }, async (a) =>
        text(await client.getTaskHistory(a.taskId)),
      );
      s.registerTool(
        "update_task",
        { inputSchema: { taskId: z.number(), fields: z.record(z.string(), z.unknown()) } },
        async (a) => {
          if (next.apply) await client.updateTask(a.taskId, a.fields);
          return next.result;
        },
      );
      return s;
    };
    http = await serveMcpOverHttp(build);
    tools = await createBitrix24Tools({ mode: "url", url: http.url, toolNames: {} });
  });
  afterAll(async () => {
    await tools?.close();
    await http?.close();
    await emu?.close();
  });
  beforeEach(async () => {
    await control(emu, "/_emulator/reset", "POST", {});
  });

  const title = async () => ok(await tools.read("getTask", { taskId: 4 })).result.task.title as string;

  it("a plain-text error to a write is outcome unknown (the write did land)", async () => {
    next = {
      apply: true,
      result: { isError: true, content: [{ type: "text", text: "Something went wrong" }] },
    };
    const error = failed(await tools.writeHandle.updateTask(4, { TITLE: "Landed behind a plain error" }));
    expect(error).toMatchObject({ kind: "target_rejected", outcomeUnknown: true });
    expect(error.description).toMatch(/may or may not have been applied/);
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    expect(await title()).toBe("Landed behind a plain error");
  });

  it("a structured error without outcomeUnknown to a write is outcome unknown, unless its kind means the call was not run", async () => {
    next = {
      apply: true,
      result: {
        isError: true,
        ...text({ error: { kind: "target_rejected", description: "HTTP 504 from the portal" } }),
      },
    };
    expect(failed(await tools.writeHandle.updateTask(4, { TITLE: "Landed behind a 504" }))).toMatchObject({
      kind: "target_rejected",
      outcomeUnknown: true,
    });
    expect(await title()).toBe("Landed behind a 504");

    next = {
      apply: false,
      result: { isError: true, ...text({ error: { kind: "access_denied", description: "Access denied" } }) },
    };
    expect(failed(await tools.writeHandle.updateTask(4, { TITLE: "x" }))).toMatchObject({
      kind: "access_denied",
      outcomeUnknown: false,
    });
    // An explicit outcomeUnknown: false is taken at its word.
    next = {
      apply: false,
      result: {
        isError: true,
        ...text({ error: { kind: "target_rejected", description: "refused", outcomeUnknown: false } }),
      },
    };
    expect(failed(await tools.writeHandle.updateTask(4, { TITLE: "x" }))).toMatchObject({
      kind: "target_rejected",
      outcomeUnknown: false,
    });
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
  });

  it("a success whose text is not JSON, to a write, is outcome unknown (the write did land)", async () => {
    next = { apply: true, result: { content: [{ type: "text", text: "Task updated." }] } };
    const error = failed(await tools.writeHandle.updateTask(4, { TITLE: "Landed behind plain text" }));
    expect(error).toMatchObject({
      kind: "malformed_response",
      outcomeUnknown: true,
      rawBody: "Task updated.",
    });
    expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    expect(await title()).toBe("Landed behind plain text");
  });

  it("a plain-text error to a read is only a failed read (a read changes nothing)", async () => {
    expect(failed(await tools.read("getTask", { taskId: 99 }))).toMatchObject({
      kind: "target_rejected",
      outcomeUnknown: false,
    });
  });
});
