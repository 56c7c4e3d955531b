/** The messages channel: the chat and the model's conversation, with run input that is not a chat message marked instead of failing the run. */
import { ReducedValue, messagesStateReducer } from "@langchain/langgraph";
import { HumanMessage, type BaseMessage, type BaseMessageLike } from "@langchain/core/messages";
import { z } from "zod";

/** Marks a message of the run input that is not a chat message; the agent ends the run INVALID_INPUT naming it. */
export const UNREADABLE_MESSAGE_KEY = "action_envelope_unreadable_input";

/**
 * messagesStateReducer, except that an item it cannot read as a message (run input such as
 * `{"messages": [{}]}`) becomes an empty human message marked with UNREADABLE_MESSAGE_KEY instead of
 * failing the run before any node: the agent then ends it with INVALID_INPUT naming the item.
 */
export function tolerantMessagesReducer(
  current: BaseMessage[],
  next: BaseMessageLike[] | BaseMessageLike,
): BaseMessage[] {
  try {
    return messagesStateReducer(current, next);
  } catch {
    const items: unknown[] = Array.isArray(next) ? next : [next];
    const readable = items.map((item, i) => {
      try {
        messagesStateReducer([], [item as BaseMessageLike]);
        return item as BaseMessageLike;
      } catch (err) {
        const why = {
          field: `messages.${i}`,
          message: `not a chat message: ${String((err as Error)?.message ?? err)
            .split("\n")[0]!
            .slice(0, 200)}`,
        };
        return new HumanMessage({ content: "", additional_kwargs: { [UNREADABLE_MESSAGE_KEY]: why } });
      }
    });
    return messagesStateReducer(current, readable);
  }
}

/** The messages channel: the model's conversation and, in Studio's chat mode, the chat. */
export const messages = new ReducedValue(z.any().default(() => []) as unknown as z.ZodType<BaseMessage[]>, {
  inputSchema: z.any() as unknown as z.ZodType<BaseMessageLike[]>,
  reducer: tolerantMessagesReducer as (a: BaseMessage[], b: BaseMessageLike[]) => BaseMessage[],
  jsonSchemaExtra: {
    langgraph_type: "messages",
    type: "array",
    items: { type: "object" },
    description:
      "Chat. As input (Studio's chat mode) the last human message is the request and the rest is not shown to the model; while a structured question waits, it is taken as the answer only if it validates as the question's single field (otherwise refused, naming the fields), and is never shown to the model; the run reports each step and the outcome back here as AI messages. Also the model's conversation: read tool calls, the proposal, error feedback.",
  },
});
