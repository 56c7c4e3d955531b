import {
  AIMessage,
  HumanMessage,
  RemoveMessage,
  isAIMessage,
  isHumanMessage,
  type BaseMessage,
} from "@langchain/core/messages";
import { REMOVE_ALL_MESSAGES, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { UNREADABLE_MESSAGE_KEY } from "../graph/messages-channel.js";
import { RequestInputSchema } from "../graph/request-input.js";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import { depsOf } from "../runtime/run-deps.js";
import { agentPrompt } from "../prompts.js";
import { proposeChangeSetTool, proposeChangeTool, requestInputTool } from "../tools/proposal-tools.js";
import { undoEndingCode, undoPlanFor, undoRequestOf, type UndoPlan } from "../hitl/compensation.js";
import { endRunInJournal, ensureThread, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import type { QuestionEntry, RecordedToolCall } from "../store/journal.js";
import { askedOf } from "../hitl/input-request.js";
import { verifyRequester } from "../hitl/requester.js";
import type { ChatDecision } from "../hitl/text-decision.js";
import {
  describeModelError,
  isModelProviderError,
  modelFailureLine,
  modelReasonCode,
} from "../models/model-errors.js";

export { MAX_REQUEST_CHARS } from "../graph/request-input.js";

/**
 * One model turn: the model sees read tools and propose_change, never the write tool. The thread's
 * request is recorded in the journal on the first turn and read back from there on every later one,
 * so new input sent to a thread cannot change what it is about. While an approval waits, a chat
 * message is not a new request: it goes to check_decision, which takes it only if it is a decision.
 *
 * First turn: the input is checked before anything is recorded or a model is called (INVALID_INPUT
 * naming the field). In chat mode (`{"messages": [...]}`, as Studio sends) the last human message is
 * the request and the requester is the authenticated caller; the conversation the model then sees is
 * that request alone, never the other messages of the input.
 */
export async function agent(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  // A chat message sent while an approval waits goes to check_decision as a candidate decision.
  const chat = gate.thread && gate.next === "await_approval" ? chatDecisionOf(state) : undefined;
  if (chat) return { pendingDecision: chat };
  const refused = await refuseUnlessAllowed(deps, gate, "agent", state);
  if (refused) return refused;
  let reset: Update["messages"] = [];
  let undo: UndoPlan | undefined;
  if (!gate.thread) {
    const caller = authenticatedIdentity(config.configurable);
    // Open mode: a chat client sends no requester; the configured default (self-declared) stands in for it.
    const input = runInput(state, caller, caller ? undefined : deps.config.defaultRequester);
    if (!input.ok) return endRunInJournal(deps, gate, state, "INVALID_INPUT", input.problem);
    const requester = verifyRequester(gate.threadId, input.value, caller, deps.publicKeys);
    if (!requester.ok) return endRunInJournal(deps, gate, state, "INVALID_INPUT", requester.problem);
    // The conversation starts from the request alone: chat input's other messages never reach the model.
    if (state.messages.length > 0) reset = [new RemoveMessage({ id: REMOVE_ALL_MESSAGES })];
    // `undo thread <id>`: an undo thread, registered with the verified action it restores.
    const undoOf = undoRequestOf(input.value.request);
    undo = undoOf === undefined ? undefined : await undoPlanFor(deps.journal, undoOf, undefined, deps.policy);
    // The requester's verification comes from the run's auth context or a requester signature checked
    // against the key registry, never from a claim in input or state: a token-authenticated caller is the
    // requester (runInput refuses another name); a valid signature verifies the name signed; anyone else named themselves.
    await ensureThread(
      deps,
      gate,
      { ...state, ...input.value },
      undo?.ok
        ? { compensates: { threadId: undoOf!, envelopeHash: undo.original.envelopeHash }, scope: undo.scope }
        : undefined,
      requester.verifiedBy,
    );
    if (undo && !undo.ok) return endRunInJournal(deps, gate, state, undoEndingCode(undo.code), undo.reason);
  }
  const thread = await ensureThread(deps, gate, state);
  // An undo thread: the proposal is the journal's (the recorded before-values of the verified action it
  // restores), built by build_envelope; the model is not asked.
  if (thread.compensates) {
    // Planned above when this turn registered the thread; read from the journal again on a later turn.
    const planned =
      undo?.ok && undo.original.envelopeHash === thread.compensates.envelopeHash
        ? undo
        : await undoPlanFor(
            deps.journal,
            thread.compensates.threadId,
            thread.compensates.envelopeHash,
            deps.policy,
          );
    if (!planned.ok) return endRunInJournal(deps, gate, state, undoEndingCode(planned.code), planned.reason);
    return {
      messages: [new AIMessage(`Undo proposed by code, not by the model: ${planned.proposal.rationale}.`)],
      proposal: planned.proposal,
    };
  }
  // A question is waiting (new input discarded LangGraph's pending ask_input, or a node was driven
  // here out of order): the model is not called; the question stays, and a chat message goes to it.
  const waiting = await deps.journal.getQuestion(gate.threadId);
  if (waiting?.status === "open") return holdForQuestion(state, waiting, thread);
  // The model's turns are counted in the journal's thread row, never taken from state (which any API
  // client can rewrite): the limit ends a run only after that many model calls were made.
  const taken = (await deps.journal.getThreadTurns(gate.threadId))?.agentSteps ?? 0;
  if (taken >= deps.config.limits.maxAgentSteps) {
    return {
      agentSteps: taken,
      ...(await endRunInJournal(
        deps,
        gate,
        state,
        "AGENT_STEP_LIMIT",
        `the model took ${taken} steps without a valid proposal (limit ${deps.config.limits.maxAgentSteps})`,
      )),
    };
  }
  const history = reset.length > 0 ? [] : state.messages;
  const opening = history.length === 0 ? [new HumanMessage(thread.request)] : [];
  const messages = [...history, ...opening];
  if (!deps.model.bindTools) throw new Error(`model ${deps.modelLabel} cannot call tools`);
  const model = deps.model.bindTools([
    ...deps.tools.readTools,
    proposeChangeTool,
    proposeChangeSetTool,
    requestInputTool,
  ]);
  const prompt = await agentPrompt.invoke({ messages, requestedBy: thread.requestedBy });
  // Counted before the call, not keyed by step: a re-run of this step (after a crash, or a replay or
  // fork of an older checkpoint) calls the model again and counts again. The count is the model calls
  // made, so no replay can call the model past the limit; a crashed turn may leave one counted call.
  const agentSteps = await deps.journal.noteAgentStep(gate.threadId);
  let reply;
  try {
    reply = await model.invoke(prompt);
  } catch (e) {
    // A provider failure (bad key, rate limit, no connection) ends the run with its own code and one
    // line saying what to fix; anything else is a bug and propagates.
    if (!isModelProviderError(e)) throw e;
    const failure = describeModelError(e);
    return endRunInJournal(
      deps,
      gate,
      state,
      modelReasonCode(failure),
      modelFailureLine(failure, { keyVariable: "GROQ_API_KEY" }),
    );
  }
  // The reply's text is kept in the journal: a run that ends without a proposal quotes it from there.
  // So are its tool calls: propose reads them from the journal, never from state's messages.
  await deps.journal.noteModelReply(gate.threadId, replyText(reply), toolCallsOf(reply));
  return {
    messages: [...reset, ...opening, reply],
    agentSteps,
    ...(state.inputRequest ? { inputRequest: null } : {}),
    ...(reset.length > 0 || state.request !== thread.request
      ? { request: thread.request, requestedBy: thread.requestedBy }
      : {}),
  };
}

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

export type RunInput =
  | {
      ok: true;
      value: { request: string; requestedBy: string; scope?: State["scope"]; requesterSignature?: string };
    }
  | { ok: false; problem: string };

/**
 * The request a run starts with, from `request` or (chat mode) the last human message; the requester:
 * the authenticated caller (a `requestedBy` naming anyone else is refused), else `requestedBy`, else
 * (open mode) the configured default requester.
 * Pure; never throws on any input shape.
 */
export function runInput(
  state: Pick<State, "request" | "requestedBy" | "scope" | "messages"> & { requesterSignature?: unknown },
  authenticatedCaller: string | undefined,
  defaultRequester?: string,
): RunInput {
  const messages: unknown[] = Array.isArray(state.messages) ? state.messages : [];
  const unreadable = messages
    .map(
      (m) =>
        (m as BaseMessage | undefined)?.additional_kwargs?.[UNREADABLE_MESSAGE_KEY] as
          { field?: unknown; message?: unknown } | undefined,
    )
    .find((x) => x !== undefined);
  if (unreadable)
    return { ok: false, problem: `input field "${String(unreadable.field)}": ${String(unreadable.message)}` };
  let request: unknown = state.request;
  if (request === undefined || request === null) {
    const lastHuman = [...messages].reverse().find((m) => isHumanMessage(m as BaseMessage)) as
      BaseMessage | undefined;
    if (lastHuman) {
      request = lastHuman.text;
      if (typeof request !== "string" || request.trim() === "") {
        return {
          ok: false,
          problem:
            'input field "messages": the last human message has no text; it is the request in chat mode and must say what should change',
        };
      }
    } else if (messages.length > 0) {
      return {
        ok: false,
        problem:
          'input field "messages" has no human message; in chat mode the last human message is the request (or send "request" instead)',
      };
    }
  }
  // With an authenticated caller the requester is the caller: a run naming anyone else is refused.
  if (
    authenticatedCaller !== undefined &&
    state.requestedBy !== undefined &&
    state.requestedBy !== null &&
    state.requestedBy !== authenticatedCaller
  ) {
    return {
      ok: false,
      problem: `REQUESTER_NOT_CALLER: input field "requestedBy" is ${JSON.stringify(state.requestedBy)}, but the run is authenticated as ${authenticatedCaller}; the requester is the caller (leave requestedBy out)`,
    };
  }
  const requestedBy = state.requestedBy ?? authenticatedCaller ?? defaultRequester;
  if (
    requestedBy === undefined &&
    authenticatedCaller === undefined &&
    messages.length > 0 &&
    (state.request === undefined || state.request === null)
  ) {
    return {
      ok: false,
      problem:
        'input field "requestedBy" is required, and a chat client sends only {"messages"}: set ACTION_ENVELOPE_DEFAULT_REQUESTER=<requester id> on this open server (recorded as self-declared), or require API tokens (ACTION_ENVELOPE_API_TOKENS; the requester is then the caller), or send {"request": "…", "requestedBy": "…"}',
    };
  }
  const parsed = RequestInputSchema.safeParse({
    request,
    requestedBy,
    ...(state.scope !== undefined && state.scope !== null ? { scope: state.scope } : {}),
    ...(state.requesterSignature !== undefined && state.requesterSignature !== null
      ? { requesterSignature: state.requesterSignature }
      : {}),
  });
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0]!;
  const field = issue.path.map(String).join(".") || "input";
  const message = issue.message.startsWith("input field")
    ? issue.message
    : `input field "${field}": ${issue.message}`;
  return { ok: false, problem: message };
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
