/** One tools/call to the MCP server and what it answered: a body, or a structured error whose outcome for a write is known or left open. */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { BITRIX24_ERROR_KINDS, type Bitrix24ErrorData, type Bitrix24ErrorKind } from "../bitrix24/errors.js";
import { jsonOf } from "../envelope/targets.js";
import { IDEMPOTENT_REPLAYED_META_KEY } from "./mcp-contract.js";

/** A tool's structured error: Bitrix24ErrorData, where an external server may leave the outcome unsaid. */
export interface McpCallError extends Omit<Bitrix24ErrorData, "outcomeUnknown"> {
  outcomeUnknown?: boolean;
}

export type McpCallResult =
  | {
      ok: true;
      body: unknown;
      text: string;
      /** The portal replayed its first answer to this Idempotency-Key. */ replayed?: boolean;
    }
  | { ok: false; error: McpCallError; text: string };

/** What the model is told when a read tool fails: one line, the portal's own error data kept as JSON. */
export function readFailureText(name: string, error: McpCallError, text: string): string {
  const what = `${error.kind}${error.code !== undefined ? ` ${error.code}` : ""}: ${error.description}`;
  return `Error: the read tool ${name} failed (${what}). Nothing was changed in Bitrix24.${text ? ` Raw answer: ${text.slice(0, 2000)}` : ""}`;
}

/** A read tool call the server answered with an error; the message is the structured error JSON. */
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
export async function callToolOnce(
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
  const parsed = jsonOf(text);
  const replayed =
    (result._meta as Record<string, unknown> | undefined)?.[IDEMPOTENT_REPLAYED_META_KEY] === true;
  if (parsed) return { ok: true, body: parsed.value, text, ...(replayed ? { replayed } : {}) };
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
  const parsed = jsonOf(text);
  const fromText = parsed
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
