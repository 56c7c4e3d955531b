/** What the offline model reads from a conversation: the messages, the tool calls it made, and the tool names bound to it. */
import type { BaseMessage } from "@langchain/core/messages";
import { isActionableRequest, OFFLINE_PREFIX, text, type OfflineDecision } from "./replies.js";
import { isReviewerFeedback, readToolOutcome, toolCallsOf, type TaskRecord } from "./tool-messages.js";

/** The tool the offline model calls for each role, by its base name (an MCP adapter may prefix it). */
export const OFFLINE_TOOL_NAMES = {
  getTask: "get_task_by_id",
  listTasks: "list_tasks",
  getHistory: "get_task_history",
  getDeal: "get_deal",
  propose: "propose_change",
  proposeSet: "propose_change_set",
  requestInput: "request_input",
} as const;

/** A tool the offline model calls, by its role. */
export type OfflineToolRole = keyof typeof OFFLINE_TOOL_NAMES;

/** A tool call of ours found in the conversation. */
export interface RecordedCall {
  role: OfflineToolRole | undefined;
  name: string;
  args: Record<string, unknown>;
}

/**
 * The conversation minus system messages, with every tool call it holds recorded by id. The next call id
 * counts the calls already made, so replaying the same conversation gives the same ids.
 */
export class Transcript {
  readonly msgs: BaseMessage[];
  private readonly calls = new Map<string, RecordedCall>();
  private readonly callCount: number;

  constructor(
    messages: readonly BaseMessage[],
    private readonly bound: readonly string[],
  ) {
    this.msgs = messages.filter((m) => m.type !== "system");
    let count = 0;
    for (const m of this.msgs) {
      for (const tc of toolCallsOf(m)) {
        count += 1;
        if (tc.id) this.calls.set(tc.id, { role: this.roleOf(tc.name), name: tc.name, args: tc.args });
      }
    }
    this.callCount = count;
  }

  /**
   * The request is the first user message, unless a later user message is itself a supported
   * request that is not reviewer feedback; then the conversation has moved on to that request.
   */
  requestIndex(): number | undefined {
    let index: number | undefined;
    this.msgs.forEach((m, i) => {
      if (m.type !== "human") return;
      if (index === undefined) {
        index = i;
        return;
      }
      if (!isReviewerFeedback(m.text) && isActionableRequest(m.text)) index = i;
    });
    return index;
  }

  /** The call a tool result answers, or the reply that stops the run when it answers none of ours. */
  askedCall(msg: BaseMessage): { call: RecordedCall } | { stop: OfflineDecision } {
    const callId = (msg as { tool_call_id?: unknown }).tool_call_id;
    const call = typeof callId === "string" ? this.calls.get(callId) : undefined;
    return call
      ? { call }
      : {
          stop: text(
            `I received a tool result I did not ask for (tool_call_id ${String(callId)}); stopping.`,
          ),
        };
  }

  /** A call of `role`'s tool with `note` as the turn's text; `unbound` is the reply when no such tool is bound. */
  callTool(
    role: OfflineToolRole,
    args: Record<string, unknown>,
    note: string,
    unbound: string,
  ): OfflineDecision {
    const name = this.boundName(role);
    if (name === undefined) return text(unbound);
    return {
      kind: "tool",
      text: `${OFFLINE_PREFIX} ${note}`,
      call: { id: `offline_call_${this.callCount + 1}`, name, args },
    };
  }

  /** MCP adapters may prefix tool names with the server name (`tasks__get_task_by_id`). */
  private boundName(role: OfflineToolRole): string | undefined {
    const base = OFFLINE_TOOL_NAMES[role];
    return this.bound.find((n) => n === base) ?? this.bound.find((n) => n.endsWith(`__${base}`));
  }

  roleOf(name: string): OfflineToolRole | undefined {
    const entry = Object.entries(OFFLINE_TOOL_NAMES).find(
      ([, base]) => name === base || name.endsWith(`__${base}`),
    );
    return entry?.[0] as OfflineToolRole | undefined;
  }

  lastProposal(requestIndex: number): RecordedCall | undefined {
    let found: RecordedCall | undefined;
    this.msgs.slice(requestIndex).forEach((m) => {
      for (const tc of toolCallsOf(m)) {
        const role = this.roleOf(tc.name);
        if (role === "propose" || role === "proposeSet") found = { role, name: tc.name, args: tc.args };
      }
    });
    return found;
  }

  lastTaskRead(taskId: number, requestIndex: number): TaskRecord | undefined {
    let task: TaskRecord | undefined;
    for (const m of this.msgs.slice(requestIndex)) {
      if (m.type !== "tool") continue;
      const id = (m as { tool_call_id?: unknown }).tool_call_id;
      const call = typeof id === "string" ? this.calls.get(id) : undefined;
      if (call?.role !== "getTask" || Number(call.args.taskId) !== taskId) continue;
      const outcome = readToolOutcome(m);
      if (outcome.kind === "task") task = outcome.task;
    }
    return task;
  }

  hasTaskRead(taskId: number, requestIndex: number): boolean {
    return this.lastTaskRead(taskId, requestIndex) !== undefined;
  }
}
