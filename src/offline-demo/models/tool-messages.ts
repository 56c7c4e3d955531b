/**
 * Reading the conversation's messages for the offline model: the tool calls it made and what each tool answered.
 */
import type { BaseMessage } from "@langchain/core/messages";

export type TaskRecord = Record<string, unknown>;

export type ToolOutcome =
  | { kind: "task"; task: TaskRecord }
  | { kind: "tasks"; tasks: TaskRecord[] }
  | { kind: "empty" }
  | { kind: "error"; reason: string }
  | { kind: "other"; body: unknown };

export function toolCallsOf(
  m: BaseMessage,
): Array<{ id?: string; name: string; args: Record<string, unknown> }> {
  if (m.type !== "ai") return [];
  const calls = (m as { tool_calls?: Array<{ id?: string; name: string; args: unknown }> }).tool_calls ?? [];
  return calls.map((c) => ({ id: c.id, name: c.name, args: isRecord(c.args) ? c.args : {} }));
}

export function isReviewerFeedback(body: string): boolean {
  return /\brejected the (?:proposal|change set)\b/i.test(body);
}

export function isErrorToolMessage(m: BaseMessage): boolean {
  return (m as { status?: unknown }).status === "error";
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function clip(s: string, max = 400): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max)}…` : one;
}

/**
 * Reads a tool result: a Bitrix24 body (`{"result":{"task":{...}}}`, `{"result":{"tasks":[...]}}`,
 * `{"result":[]}`), an MCP error body (`{"error":{kind,description,...}}`), a Bitrix24 error body
 * (`{"error":"...","error_description":"..."}`) or plain error text from a ToolNode.
 */
export function readToolOutcome(m: BaseMessage): ToolOutcome {
  const raw = m.text;
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return isErrorToolMessage(m) || /^\s*error\b/i.test(raw)
      ? { kind: "error", reason: clip(raw) }
      : { kind: "other", body: raw };
  }
  if (isRecord(body) && body.error !== undefined) return { kind: "error", reason: describeError(body) };
  if (isErrorToolMessage(m)) return { kind: "error", reason: clip(raw) };
  if (!isRecord(body)) return { kind: "other", body };
  const result = body.result;
  if (Array.isArray(result) && result.length === 0) return { kind: "empty" };
  if (isRecord(result) && isRecord(result.task)) return { kind: "task", task: result.task };
  if (isRecord(result) && Array.isArray(result.tasks))
    return { kind: "tasks", tasks: result.tasks.filter(isRecord) };
  return { kind: "other", body };
}

function describeError(body: Record<string, unknown>): string {
  const e = body.error;
  if (isRecord(e)) {
    const parts = [e.kind, e.code, e.description ?? e.message].filter(
      (p) => p !== undefined && p !== null && p !== "",
    );
    return clip(parts.map(String).join(": ") || JSON.stringify(e));
  }
  const description = body.error_description;
  return clip(
    typeof description === "string" && description !== "" ? `${String(e)}: ${description}` : String(e),
  );
}
