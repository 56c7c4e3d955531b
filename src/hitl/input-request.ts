import type { State } from "../graph/state.js";
import type { InputRequest } from "./contract.js";
import { answerJsonSchema, exampleAnswers } from "./structured-input.js";

/** Pure: the interrupt payload for a structured question. */
export function inputRequestFrom(state: State, threadId: string): InputRequest {
  const req = state.inputRequest;
  if (!req) throw new Error("ask_input reached without a question");
  const last = state.refusals.at(-1);
  const example = exampleAnswers(req.fields);
  return {
    kind: "input",
    question: req.question,
    answerSchema: answerJsonSchema(req.fields),
    threadId,
    askedAt: req.askedAt,
    ...(last && last.envelopeHash === null && last.at >= req.askedAt ? { lastRefusal: { code: last.code, reason: last.reason } } : {}),
    exampleResume: { answers: example },
  };
}
