import {
  BaseChatModel,
  type BaseChatModelCallOptions,
  type BaseChatModelParams,
  type BindToolsInput,
} from "@langchain/core/language_models/chat_models";
import type { BaseLanguageModelInput, ToolDefinition } from "@langchain/core/language_models/base";
import { AIMessage, type AIMessageChunk, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { decideNextStep } from "./decision.js";

export const OFFLINE_MODEL_LABEL = "offline (deterministic, no LLM)";

export type OfflineTaskModelCallOptions = BaseChatModelCallOptions & {
  /** Set by `bindTools`; the model only ever calls tools named here. */
  tools?: ToolDefinition[];
};

/**
 * A deterministic stand-in for an LLM that drives the task-change agent without a network:
 * it reads the request, calls the read tools, then proposes the change (see intent.ts
 * for the phrasings it understands). It is a real `BaseChatModel`, so the graph binds tools
 * and invokes it exactly as it does ChatGroq.
 */
export class OfflineTaskModel extends BaseChatModel<OfflineTaskModelCallOptions, AIMessageChunk> {
  static override lc_name(): string {
    return "OfflineTaskModel";
  }

  constructor(fields: BaseChatModelParams = {}) {
    super(fields);
  }

  _llmType(): string {
    return "offline-task-model";
  }

  override bindTools(
    tools: BindToolsInput[],
    kwargs?: Partial<OfflineTaskModelCallOptions>,
  ): Runnable<BaseLanguageModelInput, AIMessageChunk, OfflineTaskModelCallOptions> {
    // Same shape as ChatGroq: tools travel as call options, so one model instance serves any tool set.
    return this.withConfig({ ...kwargs, tools: tools.map((t) => convertToOpenAITool(t)) });
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"]): Promise<ChatResult> {
    const bound = options.tools?.map((t) => t.function.name);
    const decision = decideNextStep(messages, bound);
    const message =
      decision.kind === "tool"
        ? new AIMessage({
            content: decision.text,
            tool_calls: [{ ...decision.call, type: "tool_call" }],
          })
        : new AIMessage({ content: decision.text });
    return { generations: [{ text: decision.text, message }] };
  }
}
