import { ToolMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf, runNonce, sentWithThisRun } from "../runtime/run-deps.js";
import {
  answersFromChat,
  chatMessageText,
  validateAnswers,
  type InputRequestRecord,
} from "../hitl/structured-input.js";
import { endRunInJournal, ensureThread, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { answerRefusedEntry } from "../hitl/audit-records.js";
import { askedOf } from "../hitl/input-request.js";
import { boundedForEvidence } from "../hitl/bounds.js";
import { settledPending } from "../hitl/pending-value.js";

/**
 * Validates the answer against the question the journal recorded (the schema that was shown). An
 * invalid answer is refused and asked again; a valid one goes back to the model as the tool result.
 * A chat message in place of an answer is taken as the value of a single-field question when it
 * validates, and is otherwise refused the same way, with the fields and the example answer. A chosen
 * task id becomes part of the request's scope in the journal, because a human gave it, not the model.
 */
export async function checkInput(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  return settledPending(await checkedInput(state, config), state.pendingDecision);
}

async function checkedInput(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "check_input", state);
  if (refused) return { ...refused, pendingDecision: null };
  // The question as asked is the journal's; state only mirrors it. A question the journal never
  // recorded (written into state) is dropped, and the run goes where the journal says.
  const asked = await deps.journal.getQuestion(gate.threadId);
  if (!asked) return { needsResync: true, pendingDecision: null, inputRequest: null };
  const req: InputRequestRecord = askedOf(asked);
  // No answer at all (a goto here while the question waits): nothing is refused or counted, so gotos
  // cannot use up the question's refusals and end the thread; the question is asked again.
  if (state.pendingDecision == null && asked.status === "open")
    return state.inputRequest?.toolCallId !== req.toolCallId ? { inputRequest: req } : {};
  const at = deps.clock().toISOString();
  const audited = {
    threadId: gate.threadId,
    revision: gate.action?.revision ?? 0,
    requestedBy: gate.thread?.requestedBy ?? gate.action?.envelope.requestedBy ?? "",
    policy: deps.policy,
    at,
    toolCallId: req.toolCallId,
    raw: boundedForEvidence(state.pendingDecision),
  };
  // Only an answer sent with this run is judged: one a run continues from its checkpoint (recover, the
  // worker) may have been put there by whoever can write the data directory. It is refused, recorded,
  // not counted, and the question asked again.
  if (asked.status === "open" && !sentWithThisRun(config, state.pendingFrom)) {
    const reason =
      "the pending answer was found in the thread's checkpoint, not sent with this run (a run that continues a stopped one judges no answer it did not receive itself); send the answer again";
    await deps.audit.append(
      answerRefusedEntry({ ...audited, count: 0, reason, notSentIn: runNonce(config) ?? "" }),
    );
    return {
      refusals: [
        { code: "NOT_SENT_WITH_THIS_RUN", reason, at, envelopeHash: null, raw: state.pendingDecision },
      ],
      pendingDecision: null,
      ...(state.inputRequest?.toolCallId !== req.toolCallId ? { inputRequest: req } : {}),
    };
  }
  // A chat message (Studio's chat, or run input the API server folded into a resume) is the answer only
  // when it validates as the question's single field; it never reaches the model as a message.
  const chat = chatMessageText(state.pendingDecision);
  const result =
    chat !== undefined
      ? answersFromChat(req.question, req.fields, chat)
      : validateAnswers(req.fields, state.pendingDecision);
  if (!result.ok) {
    // A pause at a question the journal no longer holds open (a fork back to an answered question, a
    // recovery) has nothing to refuse an answer to: the question is dropped and the run goes where the
    // journal says. (The same answer re-validated after a crash, the question already answered, goes on below.)
    if (asked.status !== "open") return { needsResync: true, pendingDecision: null, inputRequest: null };
    const refusal = {
      code: "INVALID_ANSWER",
      reason: result.reason,
      at,
      envelopeHash: null,
      raw: state.pendingDecision,
    };
    // Counted, with its reason, in the journal's question row (state's refusals are a mirror anyone can
    // rewrite), and recorded in the audit log, where views read refusals from: both in one transaction.
    const recordOf = (count: number) => answerRefusedEntry({ ...audited, count, reason: result.reason });
    const count = await deps.journal.noteInvalidAnswer(gate.threadId, result.reason, (n) => [recordOf(n)]);
    // No open question to count against (closed meanwhile): the refusal is still recorded.
    if (count === 0) await deps.audit.append(recordOf(count));
    if (count >= deps.config.limits.maxRefusedDecisions) {
      await deps.journal.closeQuestion(gate.threadId, "closed", at);
      return {
        refusals: [refusal],
        pendingDecision: null,
        ...(await endRunInJournal(
          deps,
          gate,
          state,
          "TOO_MANY_REFUSED_DECISIONS",
          `${count} invalid answers; last: ${result.reason}`,
        )),
      };
    }
    return {
      refusals: [refusal],
      pendingDecision: null,
      ...(state.inputRequest?.toolCallId !== req.toolCallId ? { inputRequest: req } : {}),
    };
  }
  const thread = await ensureThread(deps, gate, state);
  // A task or deal the person names narrows a scope that named no object at all (never widens one): a
  // scope naming tasks reaches no deal, and one naming deals no task, so an id of the other kind added
  // to it would open that kind to the proposal.
  const named = (key: "taskId" | "dealId") => {
    const id = Number(result.answers[key]);
    return Number.isInteger(id) && id > 0 ? id : undefined;
  };
  const open = !thread.scope.taskIds?.length && !thread.scope.dealIds?.length;
  const task = open ? named("taskId") : undefined;
  const deal = open ? named("dealId") : undefined;
  if (task !== undefined || deal !== undefined) {
    await deps.journal.setThreadScope(thread.threadId, {
      ...thread.scope,
      ...(task !== undefined ? { taskIds: [task] } : {}),
      ...(deal !== undefined ? { dealIds: [deal] } : {}),
    });
  }
  await deps.journal.closeQuestion(thread.threadId, "answered", at);
  const after = await deps.journal.getThread(thread.threadId);
  return {
    messages: [
      new ToolMessage({
        tool_call_id: req.toolCallId,
        name: "request_input",
        content: JSON.stringify(result.answers),
      }),
    ],
    inputRequest: null,
    pendingDecision: null,
    scope: after?.scope ?? thread.scope,
  };
}
