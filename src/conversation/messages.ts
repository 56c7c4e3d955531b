/**
 * The conversation's messages as the agent node reads and writes them: a model reply's text and tool
 * calls as the journal keeps them, a chat message sent while an approval waits, and the messages held
 * back while a question waits.
 */
import { RemoveMessage, isAIMessage, isHumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { State, Update } from "../graph/state.js";
import { askedOf } from "../hitl/input-request.js";
import type { ChatDecision } from "../hitl/text-decision.js";
import type { QuestionEntry, RecordedToolCall } from "../store/journal.js";

/** A model reply's tool calls as the journal keeps them (a call without an id gets its position's). */
export function toolCallsOf(reply: BaseMessage): RecordedToolCall[] {
  const calls = isAIMessage(reply) ? (reply.tool_calls ?? []) : [];
  return calls.map((c, i) => ({ id: c.id ?? `call_${i}`, name: c.name, args: c.args }));
}

/**
 * The chat message that arrived while an approval waits (the conversation's last message, a human
 * one, as agent-chat-ui and Studio send it), as check_decision's candidate: it is taken only if its
 * text is a complete decision (src/hitl/text-decision.ts); anything else is refused there, visibly.
 */
export function chatDecisionOf(state: Pick<State, "messages">): ChatDecision | undefined {
  const last = Array.isArray(state.messages) ? state.messages.at(-1) : undefined;
  if (!last || !isHumanMessage(last)) return undefined;
  return { chatDecision: last.text };
}

/** The text of a model reply as the NO_PROPOSAL reason quotes it: its content, or its content parts as JSON. */
export function replyText(reply: Pick<BaseMessage, "content">): string {
  return typeof reply.content === "string" ? reply.content : JSON.stringify(reply.content ?? "");
}

/**
 * The agent reached while the journal has an open question: messages that arrived after the model's
 * request_input call (Studio's chat while the question waited) are taken out of the conversation, so
 * the model never sees them and the call keeps its place right before its answer; the last human one
 * goes to check_input as a candidate answer (taken only if it validates as the question's single
 * field), and without one the question is asked again. The question comes from the journal.
 */
export function holdForQuestion(
  state: State,
  q: QuestionEntry,
  thread: { request: string; requestedBy: string },
): Update {
  const messages = Array.isArray(state.messages) ? state.messages : [];
  const asking = messages.findIndex(
    (m) => isAIMessage(m) && (m.tool_calls ?? []).some((c) => c.id === q.toolCallId),
  );
  // Without the call in state (rewritten outside the API), every human message but the request is taken out.
  const arrived =
    asking >= 0
      ? messages.slice(asking + 1)
      : messages.filter((m) => isHumanMessage(m) && m.text !== thread.request);
  const lastHuman = [...arrived].reverse().find((m) => isHumanMessage(m));
  return {
    messages: arrived
      .filter((m) => typeof m.id === "string" && m.id !== "")
      .map((m) => new RemoveMessage({ id: m.id! })),
    inputRequest: askedOf(q),
    pendingDecision: lastHuman ? { messages: [{ role: "user", content: lastHuman.text }] } : null,
    ...(state.request !== thread.request ? { request: thread.request, requestedBy: thread.requestedBy } : {}),
  };
}
