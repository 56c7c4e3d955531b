import { AIMessage, HumanMessage, isToolMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import { depsOf, receivedIn } from "../runtime/run-deps.js";
import { undoEndingCode, undoPlanFor, type UndoPlan } from "../hitl/compensation.js";
import { endRunInJournal, ensureThread, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { chatDecisionOf, holdForQuestion, replyText, toolCallsOf } from "../conversation/messages.js";
import { startThread } from "../conversation/first-turn.js";
import { boundToSender } from "../hitl/text-decision.js";
import { callModel } from "../conversation/model-turn.js";

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
  // A one-line decision in it is bound to this run's caller, who sent it (src/hitl/text-decision.ts).
  const chat = gate.thread && gate.next === "await_approval" ? chatDecisionOf(state) : undefined;
  if (chat)
    return {
      pendingDecision: boundToSender(chat, authenticatedIdentity(config.configurable)),
      pendingFrom: receivedIn(config) ?? null,
    };
  const refused = await refuseUnlessAllowed(deps, gate, "agent", state);
  if (refused) return refused;
  let reset: Update["messages"] = [];
  let undo: UndoPlan | undefined;
  if (!gate.thread) {
    const started = await startThread(deps, gate, state, authenticatedIdentity(config.configurable));
    if ("ended" in started) return started.ended;
    ({ reset, undo } = started);
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
  // So is one answered in this very step: a goto's node that ran beside the pause routed here, and
  // check_input, beside this node, closed the question and hands the answer to the next agent turn.
  // Whichever of the two read the journal first must not decide whether the model is called.
  const waiting = await deps.journal.getQuestion(gate.threadId);
  if (waiting?.status === "open" || (waiting && answeredBeside(state, waiting.toolCallId))) {
    const held = holdForQuestion(state, waiting, thread);
    return held.pendingDecision != null ? { ...held, pendingFrom: receivedIn(config) ?? null } : held;
  }
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
  const turn = await callModel(deps, gate.threadId, [...history, ...opening], thread.requestedBy);
  if ("failed" in turn) return endRunInJournal(deps, gate, state, turn.failed.code, turn.failed.reason);
  const { reply, agentSteps } = turn;
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

/** State still shows the question open and holds no answer to it: the answer was taken in this step. */
function answeredBeside(state: State, toolCallId: string): boolean {
  return (
    state.inputRequest?.toolCallId === toolCallId &&
    !state.messages.some((m) => isToolMessage(m) && m.tool_call_id === toolCallId)
  );
}
