/** Serves the Bitrix24 MCP tools: over this process's stdio, or as the CLI asks (stdio or streamable HTTP). */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { Bitrix24Client } from "../bitrix24/client.js";
import { redactWebhook } from "../bitrix24/transport.js";
import { serveHttp } from "./mcp-http.js";
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
  // An option left undefined takes the client's (or the HTTP server's) default.
  const { webhookUrl, rate, burst, timeoutMs } = opts;
  const client = new Bitrix24Client({ webhookUrl, rate, burst, timeoutMs });
  if (opts.http) {
    const handle = await serveHttp({ client, port: opts.port, host: opts.host });
    log(`Bitrix24 MCP server on ${handle.url} (portal ${redactWebhook(opts.webhookUrl)})`);
    return handle;
  }
  // Over this process's stdin/stdout, so nothing else may write to stdout meanwhile. No status line
  // here: a stdio server is started by an MCP client, which owns our stderr too.
  const server = createMcpServer(client);
  await server.connect(new StdioServerTransport());
  return { close: () => server.close() };
}
