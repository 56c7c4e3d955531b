/**
 * External MCP servers over Streamable HTTP for tests: any server a test builds, or one with task
 * tools only (like most public Bitrix24 MCP servers: no user, deal or comment tools), answered by a
 * Bitrix24-compatible portal over HTTP, its tools named as the test says.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Bitrix24Client } from "../../src/bitrix24/client.js";

export interface TaskToolNames {
  get: string;
  list: string;
  history: string;
  update: string;
}

export interface McpHttpServer {
  /** The server's MCP endpoint. */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves MCP over Streamable HTTP, stateless and with JSON responses: each request gets a server from
 * `build` and its own transport, both closed when the response is.
 */
export async function serveMcpOverHttp(build: () => McpServer): Promise<McpHttpServer> {
  const http = createServer(async (req, res) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => void transport.close().then(() => server.close()));
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** Task tools only, named as given, answered by the portal at `webhookUrl`. */
export function startTaskMcpServer(webhookUrl: string, names: TaskToolNames): Promise<McpHttpServer> {
  const client = new Bitrix24Client({ webhookUrl, rate: 0 });
  const text = (body: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(body) }] });
  return serveMcpOverHttp(() => {
    const s = new McpServer({ name: "tasks-only", version: "0.0.1" });
    s.registerTool(names.get, { inputSchema: { taskId: z.number() } }, async (a) =>
      text(await client.getTask(a.taskId)),
    );
    s.registerTool(names.list, { inputSchema: {} }, async () => text(await client.listTasks()));
    s.registerTool(names.history, { inputSchema: { taskId: z.number() } }, async (a) =>
      text(await client.getTaskHistory(a.taskId)),
    );
    s.registerTool(
      names.update,
      { inputSchema: { taskId: z.number(), fields: z.record(z.string(), z.unknown()) } },
      async (a) => text(await client.updateTask(a.taskId, a.fields)),
    );
    return s;
  });
}
