import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { Bitrix24Client, redactWebhook, type Bitrix24ClientOptions } from "../bitrix24/client.js";
import { Bitrix24Error, type Bitrix24ErrorData } from "../bitrix24/errors.js";

/** Key in each tool's `_meta` naming the one Bitrix24 method the tool calls; the client checks it. */
export const BITRIX24_METHOD_META_KEY = "action-envelope/bitrix24-method";

export const MCP_TOOL_NAMES = {
  getTask: "get_task_by_id",
  listTasks: "list_tasks",
  getHistory: "get_task_history",
  getUsers: "get_users",
  getDeal: "get_deal",
  listDeals: "search_deals",
  listTaskComments: "list_task_comments",
  getTaskComment: "get_task_comment",
  updateTask: "update_task",
  addTaskComment: "add_task_comment",
  addTask: "add_task",
  updateDeal: "update_deal",
  deleteTaskComment: "delete_task_comment",
  deleteTask: "delete_task",
} as const;

const SERVER_INFO = { name: "action-envelope-bitrix24", version: "0.1.0" };

const taskId = z.number().int().positive().describe("Bitrix24 task id, a positive integer, e.g. 4");
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const fieldValue = z.union([scalar, z.array(z.union([z.string(), z.number()]))]);

const getTaskInput = z.strictObject({ taskId });
const listTasksInput = z.strictObject({
  filter: z
    .record(z.string().regex(/^[!<>=%]{0,2}[A-Za-z][A-Za-z0-9_]*$/), fieldValue)
    .optional()
    .describe(
      'tasks.task.list filter with UPPER_SNAKE keys and optional operator prefix, e.g. {"RESPONSIBLE_ID": 5, "%TITLE": "LAB"}',
    ),
  start: z
    .number()
    .int()
    .min(-1)
    .optional()
    .describe("Row offset; pages hold 50 tasks (use `next` of the previous page)"),
});
const historyInput = z.strictObject({ taskId });
const usersInput = z.strictObject({
  filter: z
    .record(
      z.string().regex(/^(!=%|!%=|!@|!%|!=|=%|%=|>=|<=|@|%|>|<|=|!)?[A-Za-z][A-Za-z0-9_]*$/),
      fieldValue,
    )
    .optional()
    .describe(
      'user.get filter with UPPER_SNAKE keys and optional prefix, e.g. {"@ID": [5, 7]} or {"NAME_SEARCH": "Bob Smith", "ACTIVE": true}',
    ),
  start: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Row offset; pages hold 50 users (use `next` of the previous page)"),
});
const idempotencyKey = z
  .string()
  .regex(/^[A-Za-z0-9_-]{8,128}$/)
  .optional()
  .describe(
    "Sent as the REST 3.0 Idempotency-Key header; a repeat with the same key gets the first answer back",
  );
/** A write's fields: UPPER_SNAKE keys, scalar or list values. */
const upperFields = (description: string) =>
  z.record(z.string().regex(/^[A-Z][A-Z0-9_]*$/), fieldValue).describe(description);
const updateTaskInput = z.strictObject({
  taskId,
  fields: upperFields(
    'Only the fields to change, UPPER_SNAKE keys, e.g. {"DEADLINE": "2026-06-01T18:00:00+03:00"}',
  ),
  idempotencyKey,
});

const dealId = z.number().int().positive().describe("Bitrix24 CRM deal id, a positive integer, e.g. 3");
const commentId = z
  .number()
  .int()
  .positive()
  .describe("Task comment id (task.commentitem), a positive integer");

const getDealInput = z.strictObject({ dealId });
const searchDealsInput = z.strictObject({
  filter: z
    .record(z.string().regex(/^(!@|!=|=%|%=|>=|<=|@|%|>|<|=|!)?[A-Za-z][A-Za-z0-9_]*$/), fieldValue)
    .optional()
    .describe(
      'crm.deal.list filter with UPPER_SNAKE keys and optional prefix, e.g. {"STAGE_ID": "NEW", ">OPPORTUNITY": 10000, "%TITLE": "licence"}',
    ),
  start: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Row offset; pages hold 50 deals (use `next` of the previous page)"),
});
const taskCommentsInput = z.strictObject({ taskId });
const taskCommentInput = z.strictObject({ taskId, commentId });
const addTaskCommentInput = z.strictObject({
  taskId,
  fields: z
    .strictObject({
      POST_MESSAGE: z.string().min(1).describe("The comment text"),
      AUTHOR_ID: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Post as this user; default the webhook user"),
    })
    .describe('task.commentitem.add FIELDS, e.g. {"POST_MESSAGE": "Checked, looks good"}'),
  idempotencyKey,
});
const addTaskInput = z.strictObject({
  fields: upperFields("tasks.task.add fields, UPPER_SNAKE keys; TITLE and RESPONSIBLE_ID are required"),
  idempotencyKey,
});
const updateDealInput = z.strictObject({
  dealId,
  fields: upperFields("Only the deal fields to change, UPPER_SNAKE keys; the portal ignores unknown keys"),
  idempotencyKey,
});
const deleteTaskCommentInput = z.strictObject({ taskId, commentId, idempotencyKey });
const deleteTaskInput = z.strictObject({ taskId, idempotencyKey });

/** `_meta` key of an update answer that the portal replayed for a repeated Idempotency-Key. */
export const IDEMPOTENT_REPLAYED_META_KEY = "action-envelope/idempotentReplayed";

/**
 * The Bitrix24 tools: tasks, task comments, CRM deals and one user lookup. Each tool calls exactly one REST method, named in its `_meta`, so the
 * client side can allowlist read tools by method and not only by name.
 */
export function createMcpServer(client: Bitrix24Client): McpServer {
  const server = new McpServer(SERVER_INFO);
  const readHints = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true };

  server.registerTool(
    MCP_TOOL_NAMES.getTask,
    {
      title: "Get Bitrix24 task",
      description:
        "Read one Bitrix24 task by id (tasks.task.get). Returns the full Bitrix24 body {result:{task:{...}}, time}.",
      inputSchema: getTaskInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "tasks.task.get" },
    },
    async (args) => toToolResult(() => client.getTask(args.taskId), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.listTasks,
    {
      title: "List Bitrix24 tasks",
      description:
        "List Bitrix24 tasks visible to the webhook user (tasks.task.list), 50 per page. Returns {result:{tasks:[...]}, total, next?, time}.",
      inputSchema: listTasksInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "tasks.task.list" },
    },
    async (args) => toToolResult(() => client.listTasks(pageArgs(args)), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.getHistory,
    {
      title: "Get Bitrix24 task history",
      description:
        "Read the change history of one Bitrix24 task (tasks.task.history.list). Returns {result:{list:[...]}, time}.",
      inputSchema: historyInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "tasks.task.history.list" },
    },
    async (args) => toToolResult(() => client.getTaskHistory(args.taskId), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.getUsers,
    {
      title: "Find Bitrix24 users",
      description:
        "Read Bitrix24 users by filter (user.get): ids and names of people, e.g. who a task's RESPONSIBLE_ID is. Returns {result:[{ID, NAME, LAST_NAME, ACTIVE, ...}], total, next?, time}.",
      inputSchema: usersInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "user.get" },
    },
    async (args) => toToolResult(() => client.getUsers(pageArgs(args)), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.getDeal,
    {
      title: "Get Bitrix24 deal",
      description:
        "Read one Bitrix24 CRM deal by id (crm.deal.get). Returns the full Bitrix24 body {result:{ID, TITLE, STAGE_ID, OPPORTUNITY, ...}, time}.",
      inputSchema: getDealInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "crm.deal.get" },
    },
    async (args) => toToolResult(() => client.getDeal(args.dealId), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.listDeals,
    {
      title: "Search Bitrix24 deals",
      description:
        "List Bitrix24 CRM deals by filter (crm.deal.list), 50 per page. Returns {result:[{ID, TITLE, STAGE_ID, ...}], total, next?, time}.",
      inputSchema: searchDealsInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "crm.deal.list" },
    },
    async (args) => toToolResult(() => client.listDeals(pageArgs(args)), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.listTaskComments,
    {
      title: "List Bitrix24 task comments",
      description:
        "Read the comments of one Bitrix24 task (task.commentitem.getlist), newest first. Returns {result:[{ID, AUTHOR_ID, AUTHOR_NAME, POST_DATE, POST_MESSAGE, ...}], time}.",
      inputSchema: taskCommentsInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "task.commentitem.getlist" },
    },
    async (args) => toToolResult(() => client.listTaskComments(args.taskId), "read"),
  );

  server.registerTool(
    MCP_TOOL_NAMES.getTaskComment,
    {
      title: "Get Bitrix24 task comment",
      description:
        "Read one comment of a Bitrix24 task (task.commentitem.get). Returns {result:{ID, AUTHOR_ID, AUTHOR_NAME, POST_DATE, POST_MESSAGE, ...}, time}.",
      inputSchema: taskCommentInput,
      annotations: readHints,
      _meta: { [BITRIX24_METHOD_META_KEY]: "task.commentitem.get" },
    },
    async (args) => toToolResult(() => client.getTaskComment(args.taskId, args.commentId), "read"),
  );

  /** A write tool: one REST call, never retried when its outcome is unknown, a replayed answer marked in `_meta`. */
  const writeTool = <S extends z.ZodType>(
    name: string,
    method: string,
    config: { title: string; description: string; inputSchema: S; destructive: boolean; idempotent: boolean },
    run: (args: z.infer<S>, opts: { idempotencyKey?: string }) => Promise<object>,
  ) => {
    server.registerTool(
      name,
      {
        title: config.title,
        description: config.description,
        inputSchema: config.inputSchema as never,
        annotations: {
          readOnlyHint: false,
          destructiveHint: config.destructive,
          idempotentHint: config.idempotent,
          openWorldHint: true,
        },
        _meta: { [BITRIX24_METHOD_META_KEY]: method },
      },
      (async (args: z.infer<S>) => {
        let replayed = false;
        const key = (args as { idempotencyKey?: string }).idempotencyKey;
        const result = await toToolResult(async () => {
          const body = await run(args, key ? { idempotencyKey: key } : {});
          replayed = client.wasReplayed(body);
          return body;
        }, "write");
        return replayed ? { ...result, _meta: { [IDEMPOTENT_REPLAYED_META_KEY]: true } } : result;
      }) as never,
    );
  };

  writeTool(
    MCP_TOOL_NAMES.addTaskComment,
    "task.commentitem.add",
    {
      title: "Add Bitrix24 task comment",
      description:
        "Post a comment on one Bitrix24 task (task.commentitem.add). Returns {result: <new comment id>, time}. Never retried when the outcome is unknown.",
      inputSchema: addTaskCommentInput,
      destructive: false,
      idempotent: false,
    },
    (args, opts) => client.addTaskComment(args.taskId, args.fields, opts),
  );

  writeTool(
    MCP_TOOL_NAMES.addTask,
    "tasks.task.add",
    {
      title: "Create Bitrix24 task",
      description:
        "Create one Bitrix24 task (tasks.task.add). Returns the full new task body {result:{task:{id, ...}}, time}. Never retried when the outcome is unknown.",
      inputSchema: addTaskInput,
      destructive: false,
      idempotent: false,
    },
    (args, opts) => client.addTask(args.fields, opts),
  );

  writeTool(
    MCP_TOOL_NAMES.updateDeal,
    "crm.deal.update",
    {
      title: "Update Bitrix24 deal",
      description:
        "Change fields of one Bitrix24 CRM deal (crm.deal.update). Only the given fields change. Returns {result: true, time}; re-read the deal to see it. Never retried when the outcome is unknown.",
      inputSchema: updateDealInput,
      destructive: false,
      idempotent: true,
    },
    (args, opts) => client.updateDeal(args.dealId, args.fields, opts),
  );

  writeTool(
    MCP_TOOL_NAMES.deleteTaskComment,
    "task.commentitem.delete",
    {
      title: "Delete Bitrix24 task comment",
      description:
        "Delete one comment of a Bitrix24 task (task.commentitem.delete). Returns {result: true, time}. Never retried when the outcome is unknown.",
      inputSchema: deleteTaskCommentInput,
      destructive: true,
      idempotent: true,
    },
    (args, opts) => client.deleteTaskComment(args.taskId, args.commentId, opts),
  );

  writeTool(
    MCP_TOOL_NAMES.deleteTask,
    "tasks.task.delete",
    {
      title: "Delete Bitrix24 task",
      description:
        "Delete one Bitrix24 task (tasks.task.delete). Returns {result:{task: true}, time}. Never retried when the outcome is unknown.",
      inputSchema: deleteTaskInput,
      destructive: true,
      idempotent: true,
    },
    (args, opts) => client.deleteTask(args.taskId, opts),
  );

  writeTool(
    MCP_TOOL_NAMES.updateTask,
    "tasks.task.update",
    {
      title: "Update Bitrix24 task",
      description:
        "Change fields of one Bitrix24 task (tasks.task.update). Only the given fields change. Returns the full updated task body. Never retried when the outcome is unknown.",
      inputSchema: updateTaskInput,
      destructive: false,
      idempotent: true,
    },
    (args, opts) => client.updateTask(args.taskId, args.fields, opts),
  );

  return server;
}

/** The optional filter and start of a list tool, as the client's list methods take them. */
function pageArgs(args: { filter?: Record<string, unknown> | undefined; start?: number | undefined }): {
  filter?: Record<string, unknown>;
  start?: number;
} {
  return {
    ...(args.filter !== undefined ? { filter: args.filter } : {}),
    ...(args.start !== undefined ? { start: args.start } : {}),
  };
}

async function toToolResult(run: () => Promise<unknown>, intent: "read" | "write"): Promise<CallToolResult> {
  try {
    const body = await run();
    return {
      content: [{ type: "text", text: JSON.stringify(body) }],
      structuredContent: body as Record<string, unknown>,
    };
  } catch (err) {
    const error = toErrorData(err, intent);
    const payload = { error };
    return {
      isError: true,
      content: [{ type: "text", text: JSON.stringify(payload) }],
      structuredContent: payload,
    };
  }
}

function toErrorData(err: unknown, intent: "read" | "write"): Bitrix24ErrorData {
  if (err instanceof Bitrix24Error) return err.toData();
  // Not a portal answer: a bug on our side. For a write we cannot tell whether the request left.
  const description = `unexpected failure in the MCP server: ${err instanceof Error ? err.message : String(err)}`;
  return intent === "write"
    ? { kind: "transport_timeout", description, outcomeUnknown: true }
    : { kind: "target_rejected", description, outcomeUnknown: false };
}

export interface McpServerHandle {
  close(): Promise<void>;
}

/** Serves the tools over this process's stdin/stdout. Nothing else may write to stdout meanwhile. */
export async function serveStdio(config: { client: Bitrix24Client }): Promise<McpServerHandle> {
  const server = createMcpServer(config.client);
  const transport = new StdioServerTransport();
  await server.connect(transport);
  return { close: () => server.close() };
}

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
  // No status line here: a stdio server is started by an MCP client, which owns our stderr too.
  return serveStdio({ client });
}
