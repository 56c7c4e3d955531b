import { ToolMessage } from "@langchain/core/messages";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { validateAnswers } from "../hitl/structured-input.js";
import { endRun } from "./finish-with.js";

/**
 * Validates the answer against the schema that was shown. An invalid answer is refused and asked
 * again; a valid one goes back to the model as the tool result. A chosen task id becomes part of the
 * request's scope, because a human gave it, not the model.
 */
export async function checkInput(state: State): Promise<Update> {
  const deps = await getDeps();
  const req = state.inputRequest!;
  const at = deps.clock().toISOString();
  const result = validateAnswers(req.fields, state.pendingDecision);
  if (!result.ok) {
    const refusal = { code: "INVALID_ANSWER", reason: result.reason, at, envelopeHash: null, raw: state.pendingDecision };
    const count = state.refusals.filter((r) => r.code === "INVALID_ANSWER" && r.at >= req.askedAt).length + 1;
    if (count >= deps.config.limits.maxRefusedDecisions) {
      return { refusals: [refusal], pendingDecision: null, ...endRun("NOT_EXECUTED", "TOO_MANY_REFUSED_DECISIONS", `${count} invalid answers; last: ${result.reason}`) };
    }
    return { refusals: [refusal], pendingDecision: null };
  }
  const chosen = Number(result.answers["taskId"]);
  const scope =
    Number.isInteger(chosen) && chosen > 0 && !state.scope?.taskIds?.length ? { ...(state.scope ?? {}), taskIds: [chosen] } : state.scope;
  return {
    messages: [new ToolMessage({ tool_call_id: req.toolCallId, name: "request_input", content: JSON.stringify(result.answers) })],
    inputRequest: null,
    pendingDecision: null,
    scope,
  };
}
