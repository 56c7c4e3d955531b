/** The Bitrix24 tools as the graph uses them: the MCP connection, the read tools handed to the model, and the one write handle. */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { callToolOnce, McpToolError, readFailureText, type McpCallResult } from "./mcp-call.js";
import {
  assertReadToolsOnly,
  checkServerTools,
  isWriteRole,
  OPTIONAL_ROLES,
  READ_ROLES,
  resolveRoles,
  WRITE_ROLES,
  type ReadRole,
  type RoleBinding,
  type ToolRole,
  type WriteRole,
} from "./tool-roles.js";
import { MCP_TOOL_NAMES } from "./mcp-contract.js";

export type McpConnectionConfig =
  | {
      mode: "stdio";
      /** Environment of the spawned server: BITRIX24_WEBHOOK_URL (required), BITRIX24_RATE, BITRIX24_BURST, BITRIX24_TIMEOUT_MS. */
      env: Record<string, string>;
      /** Budget for one tools/call round trip (default 120000 ms). */
      callTimeoutMs?: number;
    }
  | {
      mode: "url";
      /** Streamable HTTP endpoint of an MCP server, e.g. http://127.0.0.1:3391/mcp. */
      url: string;
      /** That server's tool name per role; roles left out use our own names (get_task_by_id, ...). */
      toolNames: Partial<Record<ToolRole, string>>;
      headers?: Record<string, string>;
      callTimeoutMs?: number;
    };
export interface Bitrix24Tools {
  /** Allowlisted by role and by Bitrix24 method: the read roles (READ_ROLES) the server offers, nothing else. */
  readTools: StructuredToolInterface[];
  /** Deterministic read for nodes. */
  read(role: ReadRole, args: Record<string, unknown>): Promise<McpCallResult>;
  /**
   * Only the execute node gets this. Each call = exactly one tools/call, never retried. With `idempotencyKey` the
   * key is passed to the tool as its `idempotencyKey` argument (our MCP server sends it as REST 3.0's
   * Idempotency-Key); a replayed answer comes back with `replayed: true`.
   */
  writeHandle: {
    /** The write tool of `role`, with `args` as its arguments (e.g. addTaskComment: {taskId, fields: {POST_MESSAGE}}). */
    call(
      role: WriteRole,
      args: Record<string, unknown>,
      opts?: { idempotencyKey?: string },
    ): Promise<McpCallResult>;
    /** Same as call("updateTask", {taskId, fields}, opts). */
    updateTask(
      taskId: number,
      fields: Record<string, unknown>,
      opts?: { idempotencyKey?: string },
    ): Promise<McpCallResult>;
  };
  /** The resolved role table, for evidence and for tests. */
  roles: Readonly<Record<ToolRole, RoleBinding>>;
  /**
   * Optional read roles the server does not offer (an external server without a user tool): not
   * handed to the model, and read() answers them with an error instead of calling anything.
   */
  missingRoles: readonly ReadRole[];
  /**
   * Optional write roles the server does not offer (every write role but updateTask is optional for an
   * external server): writeHandle.call answers them with an error instead of calling anything.
   */
  missingWriteRoles: readonly WriteRole[];
  close(): Promise<void>;
}

const SERVER_NAME = "bitrix24";
const DEFAULT_CALL_TIMEOUT_MS = 120_000;

const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const tsxBin = fileURLToPath(new URL("../../node_modules/.bin/tsx", import.meta.url));
/**
 * Compiled (dist/tools/*.js): the server runs from its compiled file on this node; from src/ (tsx):
 * through tsx. The test suite, which runs src/ in process, names the compiled server it has just built
 * (test/support/build-dist.ts) in ACTION_ENVELOPE_MCP_SERVER_JS, to skip tsx's start in every test.
 * Compiled, the bundled server is preferred: see scripts/build.mjs.
 */
const builtServer = process.env["ACTION_ENVELOPE_MCP_SERVER_JS"];
const compiled = import.meta.url.endsWith(".js") || Boolean(builtServer);
const stdioEntry =
  builtServer ||
  (import.meta.url.endsWith(".js")
    ? compiledServer()
    : fileURLToPath(new URL("./mcp-stdio.ts", import.meta.url)));

/**
 * The bundled server (scripts/build.mjs) where the build made it: it starts on about half the CPU.
 * Named from the repository root, not from this file, which may run from dist/tools/ or inside the
 * bundled CLI's chunks (dist/cli-bundle/).
 */
function compiledServer(): string {
  const bundle = path.join(repoRoot, "dist/tools/mcp-stdio.bundle.js");
  return existsSync(bundle) ? bundle : path.join(repoRoot, "dist/tools/mcp-stdio.js");
}

/**
 * Connects to our MCP server (spawned over stdio) or to an external one by URL, and splits its tools
 * into what the model may see (reads) and the single write handle.
 */
export async function createBitrix24Tools(config: McpConnectionConfig): Promise<Bitrix24Tools> {
  const roles = resolveRoles(config.mode === "url" ? config.toolNames : {});
  const callTimeoutMs = config.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const mcp = new MultiServerMCPClient({
    mcpServers: { [SERVER_NAME]: serverConnection(config) },
    throwOnLoadError: true,
    prefixToolNameWithServerName: false,
    useStandardContentBlocks: false,
    onConnectionError: "throw",
    defaultToolTimeout: callTimeoutMs,
  });
  try {
    const raw = await mcp.getClient(SERVER_NAME);
    if (!raw) throw new Error(`MCP server "${SERVER_NAME}" did not connect`);
    const serverTools = await listAllTools(raw);
    const absent = (role: ToolRole) =>
      OPTIONAL_ROLES.has(role) &&
      !(config.mode === "url" && config.toolNames[role] !== undefined) &&
      !serverTools.some((t) => t.name === roles[role].toolName);
    const missingRoles = READ_ROLES.filter(absent);
    const missingWriteRoles = WRITE_ROLES.filter(absent);
    checkServerTools(serverTools, roles, new Set<ToolRole>([...missingRoles, ...missingWriteRoles]));

    const call = (name: string, args: Record<string, unknown>, intent: "read" | "write") =>
      callToolOnce(raw, name, args, intent, callTimeoutMs);
    /** The answer for a role the server has no tool for: refused here, nothing called. */
    const noTool = (role: ToolRole, suffix = ""): Promise<McpCallResult> => {
      const description = `the MCP server offers no tool for ${roles[role].method} (no "${roles[role].toolName}"); name one with BITRIX24_MCP_TOOLS ${role}=<tool>${suffix}`;
      return Promise.resolve({
        ok: false,
        error: { kind: "invalid_request", description, outcomeUnknown: false },
        text: description,
      });
    };

    // The adapter supplies each tool's LLM-friendly schema; calls go through the same single-shot path
    // as read(), so the model sees exactly the Bitrix24 JSON text and never a duplicated structuredContent.
    const adapterTools = await mcp.getTools(SERVER_NAME);
    const readTools: StructuredToolInterface[] = [];
    for (const role of READ_ROLES) {
      if (missingRoles.includes(role)) continue;
      const serverName = roles[role].toolName;
      const adapterTool = adapterTools.find((tool) => tool.name === serverName);
      if (!adapterTool) throw new Error(`readTools: the MCP adapter did not load read tool "${serverName}"`);
      // The model is offered each read under our name for its role, whatever the server calls it
      // (BITRIX24_MCP_TOOLS), so the graph routes its calls to read_tools by one fixed list of names.
      const name = MCP_TOOL_NAMES[role];
      readTools.push(
        new DynamicStructuredTool({
          name,
          description: adapterTool.description,
          schema: adapterTool.schema,
          metadata: { ...adapterTool.metadata, role, bitrix24Method: roles[role].method },
          func: async (args: Record<string, unknown>, _run?: unknown, config?: object) => {
            const res = await call(serverName, args, "read");
            if (res.ok) return res.text;
            // Called by the model (a tool call with an id): the failure is its own error message, so no
            // framework text ("Please fix your mistakes.") is appended to what the portal said.
            const id = (config as { toolCall?: { id?: unknown } } | undefined)?.toolCall?.id;
            if (typeof id === "string" && id !== "")
              return new ToolMessage({
                status: "error",
                name,
                tool_call_id: id,
                content: readFailureText(name, res.error, res.text),
              });
            throw new McpToolError(name, res.error, res.text);
          },
        }),
      );
    }
    assertReadToolsOnly(readTools, roles, new Set(missingRoles));

    const write = (
      role: WriteRole,
      args: Record<string, unknown>,
      opts: { idempotencyKey?: string } = {},
    ): Promise<McpCallResult> => {
      if (!isWriteRole(role))
        throw new Error(
          `writeHandle.call(): expected one of ${WRITE_ROLES.join(", ")}, got ${JSON.stringify(role)}`,
        );
      if (missingWriteRoles.includes(role)) return noTool(role, "; nothing was sent");
      return call(
        roles[role].toolName,
        { ...args, ...(opts.idempotencyKey ? { idempotencyKey: opts.idempotencyKey } : {}) },
        "write",
      );
    };

    return {
      readTools,
      roles,
      missingRoles,
      missingWriteRoles,
      read(role, args) {
        if (!(READ_ROLES as readonly string[]).includes(role)) {
          throw new Error(`read(): expected one of ${READ_ROLES.join(", ")}, got ${JSON.stringify(role)}`);
        }
        if (missingRoles.includes(role)) return noTool(role);
        return call(roles[role].toolName, args, "read");
      },
      writeHandle: {
        call: write,
        updateTask: (taskId, fields, opts = {}) => write("updateTask", { taskId, fields }, opts),
      },
      close: () => mcp.close(),
    };
  } catch (err) {
    await mcp.close().catch(() => undefined);
    throw err;
  }
}

function serverConnection(config: McpConnectionConfig) {
  if (config.mode === "url") {
    return {
      transport: "http" as const,
      url: config.url,
      ...(config.headers ? { headers: config.headers } : {}),
    };
  }
  if (!config.env.BITRIX24_WEBHOOK_URL) {
    throw new Error(
      "MCP stdio mode: expected env.BITRIX24_WEBHOOK_URL (the inbound webhook the server calls), got none",
    );
  }
  if (!compiled && !existsSync(tsxBin))
    throw new Error(`MCP stdio mode: expected tsx at ${tsxBin}; run npm install`);
  return {
    transport: "stdio" as const,
    command: compiled ? process.execPath : tsxBin,
    args: [stdioEntry],
    cwd: repoRoot,
    // The child gets only what we pass plus PATH (tsx needs node on it); no other secrets leak in.
    env: {
      PATH: config.env.PATH ?? process.env.PATH ?? "",
      ...(process.env["ACTION_ENVELOPE_DEBUG"] === "1" ? { ACTION_ENVELOPE_DEBUG: "1" } : {}),
      ...config.env,
    },
    stderr: "inherit" as const,
  };
}

async function listAllTools(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}
