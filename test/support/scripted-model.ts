/**
 * A scripted tool-calling chat model for graph tests: a real BaseChatModel whose next reply is decided
 * by a function of the conversation. It records the tools it was bound to, so tests can assert that
 * no write tool was ever offered to the model.
 */
import { BaseChatModel, type BaseChatModelParams } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { StructuredToolInterface } from "@langchain/core/tools";

export type Script = (messages: BaseMessage[], toolNames: string[]) => AIMessage;

export class ScriptedChatModel extends BaseChatModel {
  boundToolNames: string[][] = [];
  calls = 0;

  constructor(
    private readonly script: Script,
    private readonly toolNames: string[] = [],
    fields: BaseChatModelParams = {},
  ) {
    super(fields);
  }

  _llmType(): string {
    return "scripted";
  }

  override bindTools(tools: StructuredToolInterface[]) {
    const names = tools.map((t) => t.name);
    this.boundToolNames.push(names);
    const bound = new ScriptedChatModel(this.script, names);
    bound.boundToolNames = this.boundToolNames;
    return bound as unknown as ReturnType<BaseChatModel["bindTools"] & {}>;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.calls += 1;
    const message = this.script(messages, this.toolNames);
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

let seq = 0;
export const call = (name: string, args: Record<string, unknown>) => ({
  name,
  args,
  id: `scripted_${++seq}`,
  type: "tool_call" as const,
});

/** Reads the task, then proposes the given fields: the common happy path of a well-behaved model. */
export function readThenPropose(taskId: number, fields: Record<string, unknown>, operation?: string): Script {
  return (messages) => {
    const readDone = messages.some(
      (m) => m.getType() === "tool" && (m as { name?: string }).name === "get_task_by_id",
    );
    const proposed = messages.some(
      (m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change",
    );
    if (proposed) return new AIMessage("Proposed; waiting for the human.");
    if (!readDone) return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId })] });
    return new AIMessage({
      content: "",
      tool_calls: [
        call("propose_change", {
          ...(operation ? { operation } : {}),
          taskId,
          fields,
          rationale: "requested by the user",
        }),
      ],
    });
  };
}

/**
 * Asks which task (request_input with `fields`, one of them `taskId`), reads the task the latest answer
 * names, then proposes `proposed` for it. A request_input result that is not an answer (a refusal
 * the tool returned) is passed over.
 */
export function askThenPropose(
  fields: Record<string, unknown>,
  proposed: Record<string, unknown>,
  question = "Which task do you mean?",
): Script {
  const chosenIn = (m: BaseMessage): number | undefined => {
    if (m.getType() !== "tool" || (m as { name?: string }).name !== "request_input") return undefined;
    try {
      const id = Number((JSON.parse(String(m.content)) as { taskId?: unknown }).taskId);
      return Number.isInteger(id) ? id : undefined;
    } catch {
      return undefined;
    }
  };
  return (messages) => {
    const answer = [...messages].reverse().find((m) => chosenIn(m) !== undefined);
    if (!answer)
      return new AIMessage({ content: "", tool_calls: [call("request_input", { question, fields })] });
    const chosen = chosenIn(answer)!;
    if (messages.at(-1) === answer)
      return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: chosen })] });
    return new AIMessage({
      content: "",
      tool_calls: [
        call("propose_change", { taskId: chosen, fields: proposed, rationale: "the human chose it" }),
      ],
    });
  };
}

/** A change set's action as the model proposes it. */
export type SetAction = { operation: string; taskId: number; fields: Record<string, unknown> };

/** Reads every task `actions` names (get_task_by_id), then proposes them as one change set; then says it is waiting. */
export function readThenProposeSet(
  actions: readonly SetAction[],
  rationale = "requested by the user",
): Script {
  return (messages) => {
    const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
    if (tools.includes("propose_change_set")) return new AIMessage("Proposed; waiting for the human.");
    if (!tools.includes("get_task_by_id"))
      return new AIMessage({
        content: "",
        tool_calls: [...new Set(actions.map((a) => a.taskId))].map((taskId) =>
          call("get_task_by_id", { taskId }),
        ),
      });
    return new AIMessage({ content: "", tool_calls: [call("propose_change_set", { actions, rationale })] });
  };
}

/** Reads deal `dealId` (get_deal), then proposes update_deal with `fields`; then says it is waiting. */
export function readDealThenPropose(dealId: number, fields: Record<string, unknown>): Script {
  return (messages) => {
    const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
    if (tools.includes("propose_change")) return new AIMessage("Proposed; waiting for the human.");
    if (!tools.includes("get_deal"))
      return new AIMessage({ content: "", tool_calls: [call("get_deal", { dealId })] });
    return new AIMessage({
      content: "",
      tool_calls: [
        call("propose_change", {
          operation: "update_deal",
          dealId,
          fields,
          rationale: "requested by the user",
        }),
      ],
    });
  };
}
