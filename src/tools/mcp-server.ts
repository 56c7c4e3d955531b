/** Serves the Bitrix24 MCP tools: over this process's stdio, or as the CLI asks (stdio or streamable HTTP). */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { Bitrix24Client } from "../bitrix24/client.js";
import { redactWebhook, type Bitrix24ClientOptions } from "../bitrix24/transport.js";
import { serveHttp, type HttpServeOptions } from "./mcp-http.js";
import { createMcpServer, type McpServerHandle } from "./mcp-tools.js";

export interface McpServerCliOptions {
  webhookUrl: string;
  /** Streamable HTTP on host:port instead of stdio. */
  http?: boolean;
  port?: number;
  host?: string;
  rate?: number;
  burst?: number;
  timeoutMs?: number;
  /** Where status lines go; never stdout, which carries the stdio protocol. Default: stderr. */
  log?: (line: string) => void;
}

/** Entry used by `mcp-stdio.ts` and the project CLI (`mcp [--http --port N]`). */
export async function runMcpServerCli(
  opts: McpServerCliOptions,
): Promise<McpServerHandle & { port?: number; url?: string }> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const clientOpts: Bitrix24ClientOptions = { webhookUrl: opts.webhookUrl };
  if (opts.rate !== undefined) clientOpts.rate = opts.rate;
  if (opts.burst !== undefined) clientOpts.burst = opts.burst;
  if (opts.timeoutMs !== undefined) clientOpts.timeoutMs = opts.timeoutMs;
  const client = new Bitrix24Client(clientOpts);
  if (opts.http) {
    const httpOpts: HttpServeOptions = { client };
    if (opts.port !== undefined) httpOpts.port = opts.port;
    if (opts.host !== undefined) httpOpts.host = opts.host;
    const handle = await serveHttp(httpOpts);
    log(`Bitrix24 MCP server on ${handle.url} (portal ${redactWebhook(opts.webhookUrl)})`);
    return handle;
  }
  // Over this process's stdin/stdout, so nothing else may write to stdout meanwhile. No status line
  // here: a stdio server is started by an MCP client, which owns our stderr too.
  const server = createMcpServer(client);
  await server.connect(new StdioServerTransport());
  return { close: () => server.close() };
}
