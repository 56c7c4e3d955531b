import type { ThreadMirror } from "./thread-mirror.js";
import type { InputRequest } from "./contract.js";
import { answerJsonSchema, exampleAnswers, type InputRequestRecord } from "./structured-input.js";
import type { QuestionEntry } from "../store/journal.js";

/** Pure: the interrupt payload for a structured question, from state (ask_input: nothing but the interrupt). */
export function inputRequestFrom(state: ThreadMirror, threadId: string): InputRequest {
  const req = state.inputRequest;
  if (!req) throw new Error("ask_input reached without a question");
  const last = state.refusals.at(-1);
  return inputRequestOf(
    req,
    threadId,
    last && last.envelopeHash === null && last.at >= req.askedAt
      ? { code: last.code, reason: last.reason }
      : undefined,
  );
}

/**
 * Pure: the payload for a question as recorded (the journal's row for what a reader is shown, state's
 * for the interrupt itself), with the last answer's refusal when there was one.
 */
export function inputRequestOf(
  req: InputRequestRecord,
  threadId: string,
  lastRefusal?: { code: string; reason: string },
): InputRequest {
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

/** The question as asked, from its journal row. */
export function askedOf(
  q: Pick<QuestionEntry, "toolCallId" | "question" | "fields" | "askedAt">,
): InputRequestRecord {
  return { toolCallId: q.toolCallId, question: q.question, fields: q.fields, askedAt: q.askedAt };
}

/** The journal's question while it is open, else none (what state's inputRequest mirrors). */
export function openAsked(q: QuestionEntry | undefined | null): InputRequestRecord | null {
  return q?.status === "open" ? askedOf(q) : null;
}

/** The payload a reader is shown for the journal's question row, with its last refused answer. */
export function inputRequestOfRow(q: QuestionEntry, threadId: string): InputRequest {
  return inputRequestOf(
    askedOf(q),
    threadId,
    q.lastRefusal !== null ? { code: "INVALID_ANSWER", reason: q.lastRefusal } : undefined,
  );
}
