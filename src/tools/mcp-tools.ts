/** The Bitrix24 tools as one McpServer: each tool calls exactly one REST method and answers its body or a structured error. */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { Bitrix24Client } from "../bitrix24/client.js";
import { Bitrix24Error, type Bitrix24ErrorData } from "../bitrix24/errors.js";
import { BITRIX24_METHOD_META_KEY, IDEMPOTENT_REPLAYED_META_KEY, MCP_TOOL_NAMES } from "./mcp-contract.js";
import { ROLE_METHODS, type ReadRole, type ToolRole, type WriteRole } from "./tool-roles.js";
import {
  addTaskCommentInput,
  addTaskInput,
  deleteTaskCommentInput,
  deleteTaskInput,
  getDealInput,
  listTasksInput,
  searchDealsInput,
  taskCommentInput,
  taskIdInput,
  updateDealInput,
  updateTaskInput,
  usersInput,
} from "./mcp-tool-inputs.js";

const SERVER_INFO = { name: "action-envelope-bitrix24", version: "0.1.0" };

/**
 * The Bitrix24 tools: tasks, task comments, CRM deals and one user lookup. Each tool calls exactly one REST method, named in its `_meta`, so the
 * client side can allowlist read tools by method and not only by name.
 */
export function createMcpServer(client: Bitrix24Client): McpServer {
  const server = new McpServer(SERVER_INFO);
  const readHints = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true };

  /** Registers the tool of `role`, naming in its `_meta` the one REST method it calls. */
  const register = <S extends z.ZodType>(
    role: ToolRole,
    config: ToolConfig<S>,
    annotations: ToolAnnotations,
    handler: (args: z.infer<S>) => Promise<CallToolResult>,
  ) =>
    server.registerTool(
      MCP_TOOL_NAMES[role],
      {
        ...config,
        inputSchema: config.inputSchema as never,
        annotations,
        _meta: { [BITRIX24_METHOD_META_KEY]: ROLE_METHODS[role] },
      },
      handler as never,
    );

  /** A read tool: one REST call. */
  const readTool = <S extends z.ZodType>(
    role: ReadRole,
    { run, ...config }: ToolConfig<S> & { run: (args: z.infer<S>) => Promise<unknown> },
  ) => register(role, config, readHints, (args) => toToolResult(() => run(args), "read"));

  /** A write tool: one REST call, never retried when its outcome is unknown, a replayed answer marked in `_meta`. */
  const writeTool = <S extends z.ZodType>(
    role: WriteRole,
    {
      hints,
      run,
      ...config
    }: ToolConfig<S> & {
      hints: { destructiveHint: boolean; idempotentHint: boolean };
      run: (args: z.infer<S>, opts: { idempotencyKey?: string }) => Promise<object>;
    },
  ) =>
    register(role, config, { readOnlyHint: false, ...hints, openWorldHint: true }, async (args) => {
      let replayed = false;
      const key = (args as { idempotencyKey?: string }).idempotencyKey;
      const result = await toToolResult(async () => {
        const body = await run(args, key ? { idempotencyKey: key } : {});
        replayed = client.wasReplayed(body);
        return body;
      }, "write");
      return replayed ? { ...result, _meta: { [IDEMPOTENT_REPLAYED_META_KEY]: true } } : result;
    });

  readTool("getTask", {
    title: "Get Bitrix24 task",
    description:
      "Read one Bitrix24 task by id (tasks.task.get). Returns the full Bitrix24 body {result:{task:{...}}, time}.",
    inputSchema: taskIdInput,
    run: (args) => client.getTask(args.taskId),
  });

  readTool("listTasks", {
    title: "List Bitrix24 tasks",
    description:
      "List Bitrix24 tasks visible to the webhook user (tasks.task.list), 50 per page. Returns {result:{tasks:[...]}, total, next?, time}.",
    inputSchema: listTasksInput,
    run: (args) => client.listTasks({ ...pageArgs(args), ...(args.order ? { order: args.order } : {}) }),
  });

  readTool("getHistory", {
    title: "Get Bitrix24 task history",
    description:
      "Read the change history of one Bitrix24 task (tasks.task.history.list). Returns {result:{list:[...]}, time}.",
    inputSchema: taskIdInput,
    run: (args) => client.getTaskHistory(args.taskId),
  });

  readTool("getUsers", {
    title: "Find Bitrix24 users",
    description:
      "Read Bitrix24 users by filter (user.get): ids and names of people, e.g. who a task's RESPONSIBLE_ID is. Returns {result:[{ID, NAME, LAST_NAME, ACTIVE, ...}], total, next?, time}.",
    inputSchema: usersInput,
    run: (args) => client.getUsers(pageArgs(args)),
  });

  readTool("getDeal", {
    title: "Get Bitrix24 deal",
    description:
      "Read one Bitrix24 CRM deal by id (crm.deal.get). Returns the full Bitrix24 body {result:{ID, TITLE, STAGE_ID, OPPORTUNITY, ...}, time}.",
    inputSchema: getDealInput,
    run: (args) => client.getDeal(args.dealId),
  });

  readTool("listDeals", {
    title: "Search Bitrix24 deals",
    description:
      "List Bitrix24 CRM deals by filter (crm.deal.list), 50 per page. Returns {result:[{ID, TITLE, STAGE_ID, ...}], total, next?, time}.",
    inputSchema: searchDealsInput,
    run: (args) => client.listDeals(pageArgs(args)),
  });

  readTool("listTaskComments", {
    title: "List Bitrix24 task comments",
    description:
      "Read the comments of one Bitrix24 task (task.commentitem.getlist), newest first. Returns {result:[{ID, AUTHOR_ID, AUTHOR_NAME, POST_DATE, POST_MESSAGE, ...}], time}.",
    inputSchema: taskIdInput,
    run: (args) => client.listTaskComments(args.taskId),
  });

  readTool("getTaskComment", {
    title: "Get Bitrix24 task comment",
    description:
      "Read one comment of a Bitrix24 task (task.commentitem.get). Returns {result:{ID, AUTHOR_ID, AUTHOR_NAME, POST_DATE, POST_MESSAGE, ...}, time}.",
    inputSchema: taskCommentInput,
    run: (args) => client.getTaskComment(args.taskId, args.commentId),
  });

  writeTool("addTaskComment", {
    title: "Add Bitrix24 task comment",
    description:
      "Post a comment on one Bitrix24 task (task.commentitem.add). Returns {result: <new comment id>, time}. Never retried when the outcome is unknown.",
    inputSchema: addTaskCommentInput,
    hints: { destructiveHint: false, idempotentHint: false },
    run: (args, opts) => client.addTaskComment(args.taskId, args.fields, opts),
  });

  writeTool("addTask", {
    title: "Create Bitrix24 task",
    description:
      "Create one Bitrix24 task (tasks.task.add). Returns the full new task body {result:{task:{id, ...}}, time}. Never retried when the outcome is unknown.",
    inputSchema: addTaskInput,
    hints: { destructiveHint: false, idempotentHint: false },
    run: (args, opts) => client.addTask(args.fields, opts),
  });

  writeTool("updateDeal", {
    title: "Update Bitrix24 deal",
    description:
      "Change fields of one Bitrix24 CRM deal (crm.deal.update). Only the given fields change. Returns {result: true, time}; re-read the deal to see it. Never retried when the outcome is unknown.",
    inputSchema: updateDealInput,
    hints: { destructiveHint: false, idempotentHint: true },
    run: (args, opts) => client.updateDeal(args.dealId, args.fields, opts),
  });

  writeTool("deleteTaskComment", {
    title: "Delete Bitrix24 task comment",
    description:
      "Delete one comment of a Bitrix24 task (task.commentitem.delete). Returns {result: true, time}. Never retried when the outcome is unknown.",
    inputSchema: deleteTaskCommentInput,
    hints: { destructiveHint: true, idempotentHint: true },
    run: (args, opts) => client.deleteTaskComment(args.taskId, args.commentId, opts),
  });

  writeTool("deleteTask", {
    title: "Delete Bitrix24 task",
    description:
      "Delete one Bitrix24 task (tasks.task.delete). Returns {result:{task: true}, time}. Never retried when the outcome is unknown.",
    inputSchema: deleteTaskInput,
    hints: { destructiveHint: true, idempotentHint: true },
    run: (args, opts) => client.deleteTask(args.taskId, opts),
  });

  writeTool("updateTask", {
    title: "Update Bitrix24 task",
    description:
      "Change fields of one Bitrix24 task (tasks.task.update). Only the given fields change. Returns the full updated task body. Never retried when the outcome is unknown.",
    inputSchema: updateTaskInput,
    hints: { destructiveHint: false, idempotentHint: true },
    run: (args, opts) => client.updateTask(args.taskId, args.fields, opts),
  });

  return server;
}

/** What every tool declares besides its name and REST method (its role's): its title and description, its input. */
interface ToolConfig<S extends z.ZodType> {
  title: string;
  description: string;
  inputSchema: S;
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

/** A started server; close() stops it. */
export interface McpServerHandle {
  close(): Promise<void>;
}
