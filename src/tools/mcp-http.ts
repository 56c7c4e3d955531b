/** The Bitrix24 MCP tools over streamable HTTP, stateless, with loopback servers guarded against DNS rebinding. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Bitrix24Client } from "../bitrix24/client.js";
import { createMcpServer, type McpServerHandle } from "./mcp-tools.js";

export interface HttpServeOptions {
  client: Bitrix24Client;
  /** 0 or undefined = a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
}

export interface HttpMcpServerHandle extends McpServerHandle {
  port: number;
  /** http://host:port/mcp */
  url: string;
}

/**
 * Streamable HTTP, stateless: a fresh McpServer and transport per POST /mcp, all sharing one
 * Bitrix24Client so its rate limiter sees every call.
 */
export async function serveHttp(opts: HttpServeOptions): Promise<HttpMcpServerHandle> {
  // Loaded here: the stdio server, started once per CLI process, never needs the HTTP transport.
  const { StreamableHTTPServerTransport } =
    await import("@modelcontextprotocol/sdk/server/streamableHttp.js");
  const host = opts.host ?? "127.0.0.1";
  let port = 0;
  const httpServer: Server = createServer((req, res) => {
    handleHttp(req, res, opts.client, host, port, StreamableHTTPServerTransport).catch((err) => {
      if (!res.headersSent)
        jsonRpcError(res, 500, -32603, `internal error: ${err instanceof Error ? err.message : String(err)}`);
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(opts.port ?? 0, host, () => {
      httpServer.off("error", reject);
      resolve();
    });
  });
  port = (httpServer.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    port,
    url: `http://${urlHost}:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        httpServer.close((err) => (err ? reject(err) : resolve()));
        httpServer.closeAllConnections();
      }),
  };
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

async function handleHttp(
  req: IncomingMessage,
  res: ServerResponse,
  client: Bitrix24Client,
  host: string,
  port: number,
  Transport: typeof import("@modelcontextprotocol/sdk/server/streamableHttp.js").StreamableHTTPServerTransport,
): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  if (path !== "/mcp") {
    jsonRpcError(res, 404, -32601, `expected requests at /mcp, got ${path}`);
    return;
  }
  // A browser page must not drive a loopback server through DNS rebinding: accept only loopback Host names.
  if (LOOPBACK_HOSTS.has(host) && !isLoopbackHostHeader(req.headers.host, port)) {
    jsonRpcError(
      res,
      403,
      -32600,
      `expected Host 127.0.0.1:${port} or localhost:${port}, got ${JSON.stringify(req.headers.host ?? "")}`,
    );
    return;
  }
  if (req.method !== "POST") {
    // Stateless mode has no session stream to GET and no session to DELETE.
    res.setHeader("allow", "POST");
    jsonRpcError(res, 405, -32000, `expected POST, got ${req.method}`);
    return;
  }
  const server = createMcpServer(client);
  const transport = new Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

function isLoopbackHostHeader(header: string | undefined, port: number): boolean {
  if (!header) return false;
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(header);
  if (!match) return false;
  const name = (match[1] ?? "").toLowerCase();
  return LOOPBACK_HOSTS.has(name) && (match[2] === undefined || Number(match[2]) === port);
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}
