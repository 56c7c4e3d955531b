/**
 * Structured input instead of yes/no: when the request cannot become one exact action, the graph asks
 * a question with a flat, typed answer schema (in the spirit of MCP elicitation). The answer is
 * validated here, in code, against the schema that was shown.
 */
import { z } from "zod";

export interface InputField {
  type: "string" | "number" | "enum";
  description?: string;
  choices?: string[];
}

export interface InputRequestRecord {
  toolCallId: string;
  question: string;
  fields: Record<string, InputField>;
  askedAt: string;
}

/** JSON Schema of the answer, as shown to whoever answers (flat object, typed fields, enum choices). */
export function answerJsonSchema(fields: Record<string, InputField>): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(fields)) {
    properties[name] =
      f.type === "enum"
        ? { type: "string", enum: f.choices ?? [], ...(f.description ? { description: f.description } : {}) }
        : { type: f.type, ...(f.description ? { description: f.description } : {}) };
  }
  return { type: "object", properties, required: Object.keys(fields), additionalProperties: false };
}

function fieldSchema(f: InputField) {
  switch (f.type) {
    case "string":
      return z.string().min(1);
    case "number":
      return z.coerce.number().refine(Number.isFinite, "a number");
    case "enum":
      return z.enum((f.choices ?? []) as [string, ...string[]]);
    default: {
      const never: never = f.type;
      throw new Error(`unknown field type ${String(never)}`);
    }
  }
}

/** A spec the model produced must itself be answerable: enums need choices. */
export function inputSpecProblem(fields: Record<string, InputField>): string | null {
  if (Object.keys(fields).length === 0) return "request_input needs at least one field";
  for (const [name, f] of Object.entries(fields)) {
    if (f.type === "enum" && !f.choices?.length) return `field ${name} is an enum without choices`;
  }
  return null;
}

export const AnswerResumeSchema = z.object({ answers: z.record(z.string(), z.unknown()) });

export function validateAnswers(
  fields: Record<string, InputField>,
  resume: unknown,
): { ok: true; answers: Record<string, string | number> } | { ok: false; reason: string } {
  const outer = AnswerResumeSchema.safeParse(resume);
  if (!outer.success)
    return {
      ok: false,
      reason: `expected {"answers": {${Object.keys(fields).join(", ")}}}; got ${JSON.stringify(resume)?.slice(0, 300)}`,
    };
  const shape = Object.fromEntries(Object.entries(fields).map(([n, f]) => [n, fieldSchema(f)]));
  const parsed = z.strictObject(shape).safeParse(outer.data.answers);
  if (!parsed.success) {
    return {
      ok: false,
      reason: parsed.error.issues.map((i) => `${i.path.join(".") || "answers"}: ${i.message}`).join("; "),
    };
  }
  return { ok: true, answers: parsed.data as Record<string, string | number> };
}

/** The example answer shown with a question (`exampleResume.answers`): each field's first choice, 0 or "…". */
export function exampleAnswers(fields: Record<string, InputField>): Record<string, string | number> {
  return Object.fromEntries(
    Object.entries(fields).map(([n, f]) => [
      n,
      f.type === "enum" ? (f.choices?.[0] ?? "") : f.type === "number" ? 0 : "…",
    ]),
  );
}

const HUMAN_ROLES = new Set(["human", "user"]);

/** The text of one chat message in any shape a client sends: {role|type, content}, a LangChain message or its serialised form. */
function humanText(m: unknown): string | undefined {
  if (typeof m !== "object" || m === null) return undefined;
  const o = m as Record<string, unknown>;
  let role: unknown = o["role"] ?? o["type"];
  let content: unknown = o["content"];
  // A LangChain message instance (getType) or its serialised form {lc, type: "constructor", id: [..., "HumanMessage"], kwargs}.
  if (typeof (o as { getType?: unknown }).getType === "function")
    role = (o as unknown as { getType(): string }).getType();
  else if (
    o["lc"] !== undefined &&
    Array.isArray(o["id"]) &&
    typeof o["kwargs"] === "object" &&
    o["kwargs"] !== null
  ) {
    role = String(o["id"].at(-1)) === "HumanMessage" ? "human" : "other";
    content = (o["kwargs"] as Record<string, unknown>)["content"];
  }
  if (typeof role !== "string" || !HUMAN_ROLES.has(role)) return undefined;
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    const parts = content.map((p) =>
      typeof p === "string"
        ? p
        : typeof p === "object" && p !== null && (p as { type?: unknown }).type === "text"
          ? String((p as { text?: unknown }).text ?? "")
          : "",
    );
    return parts.join("");
  }
  return undefined;
}

/**
 * A value that is a chat message rather than `{"answers": {...}}`: Studio's chat or the SDK sent a
 * message while a question was waiting. `{"messages": [...]}` (run input, which the API server folds
 * into a resume when an interrupt is pending), one message object, or a plain string. Gives the last
 * human message's text ("" when there is none), or undefined when the value is not a chat message.
 */
export function chatMessageText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const messages = (value as { messages?: unknown }).messages;
  if (Array.isArray(messages)) {
    for (let i = messages.length - 1; i >= 0; i--) {
      const text = humanText(messages[i]);
      if (text !== undefined) return text;
    }
    return "";
  }
  return humanText(value);
}

/**
 * A chat message taken as the answer: only a question with a single field can be answered by one line
 * of text, and only when the text validates as that field (a number, one of the choices, non-empty
 * text). Otherwise the reason says what the question expects, with the example to send instead.
 */
export function answersFromChat(
  question: string,
  fields: Record<string, InputField>,
  text: string,
): { ok: true; answers: Record<string, string | number> } | { ok: false; reason: string } {
  const names = Object.keys(fields);
  const example = JSON.stringify({ answers: exampleAnswers(fields) });
  const shown = JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
  const expects = names.map((n) => describeField(n, fields[n]!)).join("; ");
  if (text.trim() === "")
    return {
      ok: false,
      reason: `a chat message without text cannot answer the waiting question "${question}"; it expects ${expects}. Answer it (resume) with ${example}`,
    };
  if (names.length !== 1) {
    return {
      ok: false,
      reason: `the chat message ${shown} was not taken as the answer: the waiting question "${question}" has ${names.length} fields (${expects}), and a chat message can answer only a question with one. Answer it (resume) with ${example}`,
    };
  }
  const name = names[0]!;
  const result = validateAnswers(fields, { answers: { [name]: text.trim() } });
  if (result.ok) return result;
  return {
    ok: false,
    reason: `the chat message ${shown} is not a valid answer to the waiting question "${question}": it expects ${expects} (${result.reason}). Send just the value, or answer it (resume) with ${example}`,
  };
}

function describeField(name: string, f: InputField): string {
  const what =
    f.type === "enum"
      ? `one of ${(f.choices ?? []).map((c) => JSON.stringify(c)).join(", ")}`
      : f.type === "number"
        ? "a number"
        : "text";
  return `${name}: ${what}${f.description ? ` (${f.description})` : ""}`;
}
