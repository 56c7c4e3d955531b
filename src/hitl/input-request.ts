import type { State } from "../graph/state.js";
import type { InputRequest } from "./contract.js";
import { answerJsonSchema, exampleAnswers, type InputRequestRecord } from "./structured-input.js";

/** Pure: the interrupt payload for a structured question, from state (ask_input: nothing but the interrupt). */
export function inputRequestFrom(state: State, threadId: string): InputRequest {
  const req = state.inputRequest;
  if (!req) throw new Error("ask_input reached without a question");
  const last = state.refusals.at(-1);
  return inputRequestOf(req, threadId, last && last.envelopeHash === null && last.at >= req.askedAt ? { code: last.code, reason: last.reason } : undefined);
}

/**
 * Pure: the payload for a question as recorded (the journal's row for what a reader is shown, state's
 * for the interrupt itself), with the last answer's refusal when there was one.
 */
export function inputRequestOf(req: InputRequestRecord, threadId: string, lastRefusal?: { code: string; reason: string }): InputRequest {
  return {
    kind: "input",
    question: req.question,
    answerSchema: answerJsonSchema(req.fields),
    threadId,
    askedAt: req.askedAt,
    ...(lastRefusal ? { lastRefusal } : {}),
    exampleResume: { answers: exampleAnswers(req.fields) },
  };
}
