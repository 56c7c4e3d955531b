import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { BITRIX24_ERROR_KINDS, type Bitrix24ErrorKind } from "../bitrix24/errors.js";
import { BITRIX24_METHOD_META_KEY, IDEMPOTENT_REPLAYED_META_KEY, MCP_TOOL_NAMES } from "./mcp-server.js";

export type ReadRole =
  | "getTask"
  | "listTasks"
  | "getHistory"
  | "getUsers"
  | "getDeal"
  | "listDeals"
  | "listTaskComments"
  | "getTaskComment";
/** Roles that change the portal: never handed to the model, called only through writeHandle. */
export type WriteRole =
  "updateTask" | "addTaskComment" | "addTask" | "updateDeal" | "deleteTaskComment" | "deleteTask";
export type ToolRole = ReadRole | WriteRole;

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

export interface McpCallError {
  kind: Bitrix24ErrorKind;
  code?: string;
  description: string;
  httpStatus?: number;
  outcomeUnknown?: boolean;
  rawBody?: string;
  /** operation_time_limit: when the portal unblocks the method (unix seconds). */
  operatingResetAt?: number;
}

export type McpCallResult =
  | {
      ok: true;
      body: unknown;
      text: string;
      /** The portal replayed its first answer to this Idempotency-Key. */ replayed?: boolean;
    }
  | { ok: false; error: McpCallError; text: string };

/** How a role is served: which tool, which Bitrix24 method that tool calls, and whether it may be handed to the model. */
export interface RoleBinding {
  toolName: string;
  method: string;
  readOnly: boolean;
}

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

/**
 * The one place deciding what is a read. A method is a read only if it is listed here; anything else
 * (tasks.task.update, tasks.task.add, tasks.task.delete, batch, ...) counts as a write.
 */
export const READ_METHODS: ReadonlySet<string> = new Set([
  "tasks.task.get",
  "tasks.task.list",
  "tasks.task.history.list",
  "user.current",
  "user.get",
  "crm.deal.get",
  "crm.deal.list",
  "task.commentitem.get",
  "task.commentitem.getlist",
]);

export function isReadMethod(method: string): boolean {
  return READ_METHODS.has(method.toLowerCase());
}

/** Role → Bitrix24 method; fixed, whatever server or tool names are configured. */
export const ROLE_METHODS: Readonly<Record<ToolRole, string>> = {
  getTask: "tasks.task.get",
  listTasks: "tasks.task.list",
  getHistory: "tasks.task.history.list",
  getUsers: "user.get",
  getDeal: "crm.deal.get",
  listDeals: "crm.deal.list",
  listTaskComments: "task.commentitem.getlist",
  getTaskComment: "task.commentitem.get",
  updateTask: "tasks.task.update",
  addTaskComment: "task.commentitem.add",
  addTask: "tasks.task.add",
  updateDeal: "crm.deal.update",
  deleteTaskComment: "task.commentitem.delete",
  deleteTask: "tasks.task.delete",
};

export const READ_ROLES: readonly ReadRole[] = [
  "getTask",
  "listTasks",
  "getHistory",
  "getUsers",
  "getDeal",
  "listDeals",
  "listTaskComments",
  "getTaskComment",
];
export const WRITE_ROLES: readonly WriteRole[] = [
  "updateTask",
  "addTaskComment",
  "addTask",
  "updateDeal",
  "deleteTaskComment",
  "deleteTask",
];
/**
 * Read roles an external server may lack without failing the connection (unless its tool is named
 * explicitly): people's names on the card and in edits are then unavailable, nothing else changes.
 */
const OPTIONAL_ROLES: ReadonlySet<ToolRole> = new Set<ToolRole>([
  "getUsers",
  "getDeal",
  "listDeals",
  "listTaskComments",
  "getTaskComment",
  // Write roles beyond updateTask: a server without them still serves task renames.
  "addTaskComment",
  "addTask",
  "updateDeal",
  "deleteTaskComment",
  "deleteTask",
]);
const ALL_ROLES: readonly ToolRole[] = [...READ_ROLES, ...WRITE_ROLES];
const isWriteRole = (role: string): role is WriteRole => (WRITE_ROLES as readonly string[]).includes(role);
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
  const roles = resolveRoles(config);
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

    // The adapter supplies each tool's LLM-friendly schema; calls go through the same single-shot path
    // as read(), so the model sees exactly the Bitrix24 JSON text and never a duplicated structuredContent.
    const adapterTools = await mcp.getTools(SERVER_NAME);
    const readTools: StructuredToolInterface[] = [];
    for (const role of READ_ROLES) {
      if (missingRoles.includes(role)) continue;
      const name = roles[role].toolName;
      const adapterTool = adapterTools.find((tool) => tool.name === name);
      if (!adapterTool) throw new Error(`readTools: the MCP adapter did not load read tool "${name}"`);
      readTools.push(
        new DynamicStructuredTool({
          name,
          description: adapterTool.description,
          schema: adapterTool.schema,
          metadata: { ...adapterTool.metadata, role, bitrix24Method: roles[role].method },
          func: async (args: Record<string, unknown>, _run?: unknown, config?: object) => {
            const res = await call(name, args, "read");
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
      if (missingWriteRoles.includes(role)) {
        const description = `the MCP server offers no tool for ${roles[role].method} (no "${roles[role].toolName}"); name one with BITRIX24_MCP_TOOLS ${role}=<tool>; nothing was sent`;
        return Promise.resolve({
          ok: false,
          error: { kind: "invalid_request", description, outcomeUnknown: false },
          text: description,
        });
      }
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
        if (missingRoles.includes(role)) {
          const description = `the MCP server offers no tool for ${roles[role].method} (no "${roles[role].toolName}"); name one with BITRIX24_MCP_TOOLS ${role}=<tool>`;
          return Promise.resolve({
            ok: false,
            error: { kind: "invalid_request", description, outcomeUnknown: false },
            text: description,
          });
        }
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

function resolveRoles(config: McpConnectionConfig): Record<ToolRole, RoleBinding> {
  const names: Record<ToolRole, string> = { ...MCP_TOOL_NAMES };
  if (config.mode === "url") {
    for (const role of ALL_ROLES) {
      const name = config.toolNames[role];
      if (name !== undefined) names[role] = name;
    }
  }
  const roles = {} as Record<ToolRole, RoleBinding>;
  for (const role of ALL_ROLES) {
    const method = ROLE_METHODS[role];
    roles[role] = { toolName: names[role], method, readOnly: !isWriteRole(role) && isReadMethod(method) };
  }
  for (const role of READ_ROLES) {
    for (const writeRole of WRITE_ROLES) {
      if (roles[role].toolName === roles[writeRole].toolName) {
        throw new Error(
          `MCP tool mapping: ${role} must name a read tool, but it names "${roles[role].toolName}", the ${writeRole} tool; refusing to hand a write tool to the read path`,
        );
      }
    }
  }
  return roles;
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

/**
 * The server's own description of each mapped tool must not contradict the role: a read role must not
 * point at a tool the server marks as writing, or whose declared Bitrix24 method is not a read.
 * Names and hints can only take a tool out of the read path, never put one in.
 */
function checkServerTools(
  tools: Tool[],
  roles: Record<ToolRole, RoleBinding>,
  missing: ReadonlySet<ToolRole>,
): void {
  const byName = new Map(tools.map((t) => [t.name, t]));
  for (const role of ALL_ROLES) {
    if (missing.has(role)) continue;
    const binding = roles[role];
    const tool = byName.get(binding.toolName);
    if (!tool) {
      throw new Error(
        `MCP tool mapping: ${role} → "${binding.toolName}", but the server has no such tool (it has: ${[...byName.keys()].join(", ") || "none"})`,
      );
    }
    const declared = tool._meta?.[BITRIX24_METHOD_META_KEY];
    if (
      declared !== undefined &&
      (typeof declared !== "string" || declared.toLowerCase() !== binding.method)
    ) {
      throw new Error(
        `MCP tool mapping: ${role} expects a tool calling ${binding.method}, but "${tool.name}" declares ${JSON.stringify(declared)}`,
      );
    }
    if (binding.readOnly) {
      const hints = tool.annotations;
      if (hints?.readOnlyHint === false || hints?.destructiveHint === true) {
        throw new Error(
          `MCP tool mapping: ${role} must be a read tool, but the server marks "${tool.name}" as writing (readOnlyHint false or destructiveHint true)`,
        );
      }
    }
  }
}

function assertReadToolsOnly(
  readTools: StructuredToolInterface[],
  roles: Record<ToolRole, RoleBinding>,
  missing: ReadonlySet<ToolRole>,
): void {
  const allowed = new Map(
    READ_ROLES.filter((role) => !missing.has(role)).map((role) => [roles[role].toolName, roles[role]]),
  );
  const writeNames = new Set(WRITE_ROLES.map((role) => roles[role].toolName));
  for (const tool of readTools) {
    const binding = allowed.get(tool.name);
    if (!binding || !binding.readOnly || !isReadMethod(binding.method) || writeNames.has(tool.name)) {
      throw new Error(`readTools: "${tool.name}" is not an allowlisted read tool`);
    }
  }
  for (const [name] of allowed) {
    if (!readTools.some((t) => t.name === name))
      throw new Error(`readTools: the MCP adapter did not load read tool "${name}"`);
  }
}

/** A read tool call the server answered with an error; the message is the structured error JSON. */
/** What the model is told when a read tool fails: one line, the portal's own error data kept as JSON. */
export function readFailureText(name: string, error: McpCallError, text: string): string {
  const what = `${error.kind}${error.code !== undefined ? ` ${error.code}` : ""}: ${error.description}`;
  return `Error: the read tool ${name} failed (${what}). Nothing was changed in Bitrix24.${text ? ` Raw answer: ${text.slice(0, 2000)}` : ""}`;
}

export class McpToolError extends Error {
  constructor(
    readonly toolName: string,
    readonly error: McpCallError,
    text: string,
  ) {
    super(text || `tool "${toolName}" failed: ${error.kind}: ${error.description}`);
    this.name = "McpToolError";
  }
}

/** Exactly one tools/call; the raw CallToolResult, so an isError answer is data and not a thrown ToolException. */
async function callToolOnce(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  intent: "read" | "write",
  timeoutMs: number,
): Promise<McpCallResult> {
  let result: Awaited<ReturnType<Client["callTool"]>>;
  try {
    result = await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs });
  } catch (err) {
    const error = callFailure(err, name, intent);
    return { ok: false, error, text: error.description };
  }
  const content = Array.isArray(result.content)
    ? (result.content as Array<{ type: string; text?: unknown }>)
    : [];
  const text = content
    .filter((block) => block.type === "text" && typeof block.text === "string")
    .map((block) => block.text as string)
    .join("\n");
  const structured = result.structuredContent as Record<string, unknown> | undefined;
  if (result.isError) return { ok: false, error: errorFromResult(text, structured, name, intent), text };
  const parsed = parseJson(text);
  const replayed =
    (result._meta as Record<string, unknown> | undefined)?.[IDEMPOTENT_REPLAYED_META_KEY] === true;
  if (parsed.ok) return { ok: true, body: parsed.value, text, ...(replayed ? { replayed } : {}) };
  if (structured !== undefined) return { ok: true, body: structured, text };
  // A success whose text is not JSON: for a write the tool ran, but what it did cannot be read.
  const write = intent === "write";
  return {
    ok: false,
    text,
    error: {
      kind: "malformed_response",
      description: `tool "${name}" answered text that is not JSON${write ? "; the write may or may not have been applied" : ""}`,
      rawBody: text,
      outcomeUnknown: write,
    },
  };
}

/**
 * Error kinds that mean the call was refused before it was carried out: the portal's rate limit or
 * time budget, the webhook not allowed, the user not permitted, the object not there, the request
 * itself invalid. Any other error to a write (target_rejected, transport_timeout, malformed_response,
 * or an error we cannot read) leaves its outcome open unless the server says `outcomeUnknown: false`.
 */
const NOT_RUN_KINDS: ReadonlySet<Bitrix24ErrorKind> = new Set<Bitrix24ErrorKind>([
  "rate_limited",
  "operation_time_limit",
  "auth",
  "access_denied",
  "not_found",
  "invalid_request",
]);

/**
 * The error of an isError tool result. For a read, an error is only a failed read. For a write (an
 * external server may say less than ours does), the outcome is unknown unless the error says
 * explicitly that it is known (`outcomeUnknown: false`) or is of a kind that means "not run".
 */
export function errorFromResult(
  text: string,
  structured: Record<string, unknown> | undefined,
  name: string,
  intent: "read" | "write" = "read",
): McpCallError {
  const parsed = parseJson(text);
  const fromText = parsed.ok
    ? toCallError((parsed.value as { error?: unknown } | null)?.error, intent)
    : undefined;
  const fromStructured = toCallError(structured?.error, intent);
  const known = fromText ?? fromStructured;
  if (known) return known;
  // The SDK answers bad arguments and unknown tools with plain text before any handler runs.
  if (/input validation error|invalid arguments|tool .* not found|-32602/i.test(text)) {
    return {
      kind: "invalid_request",
      description: text || `tool "${name}" rejected its arguments`,
      outcomeUnknown: false,
    };
  }
  const said = text || `tool "${name}" reported an error without text`;
  if (intent === "write") {
    return {
      kind: "target_rejected",
      description: `${said} — an error without a structured kind or outcome; the write may or may not have been applied`,
      outcomeUnknown: true,
    };
  }
  return { kind: "target_rejected", description: said, outcomeUnknown: false };
}

function toCallError(value: unknown, intent: "read" | "write"): McpCallError | undefined {
  if (!value || typeof value !== "object") return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.kind !== "string" || !(BITRIX24_ERROR_KINDS as readonly string[]).includes(v.kind))
    return undefined;
  const kind = v.kind as Bitrix24ErrorKind;
  // A write's error is outcome unknown unless it says otherwise or its kind means "not run".
  const unknown =
    v.outcomeUnknown === true ||
    (intent === "write" && v.outcomeUnknown !== false && !NOT_RUN_KINDS.has(kind));
  const error: McpCallError = {
    kind,
    description: typeof v.description === "string" ? v.description : "",
    outcomeUnknown: unknown,
  };
  if (v.code !== undefined && v.code !== null) error.code = String(v.code);
  if (typeof v.httpStatus === "number") error.httpStatus = v.httpStatus;
  if (typeof v.rawBody === "string") error.rawBody = v.rawBody;
  if (typeof v.operatingResetAt === "number") error.operatingResetAt = v.operatingResetAt;
  return error;
}

function callFailure(err: unknown, name: string, intent: "read" | "write"): McpCallError {
  const message = err instanceof Error ? err.message : String(err);
  if (
    err instanceof McpError &&
    (err.code === ErrorCode.InvalidParams || err.code === ErrorCode.MethodNotFound)
  ) {
    return { kind: "invalid_request", description: `tool "${name}": ${message}`, outcomeUnknown: false };
  }
  if (
    err instanceof McpError &&
    err.code !== ErrorCode.RequestTimeout &&
    err.code !== ErrorCode.ConnectionClosed &&
    intent === "read"
  ) {
    return { kind: "target_rejected", description: `tool "${name}": ${message}`, outcomeUnknown: false };
  }
  // No answer from the MCP server: for a write we cannot know whether it reached the portal.
  return {
    kind: "transport_timeout",
    description: `tool "${name}" gave no answer: ${message}${intent === "write" ? "; the write may or may not have been applied" : ""}`,
    outcomeUnknown: true,
  };
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}
