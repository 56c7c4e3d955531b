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
  if (!outer.success) return { ok: false, reason: `expected {"answers": {${Object.keys(fields).join(", ")}}}; got ${JSON.stringify(resume)?.slice(0, 300)}` };
  const shape = Object.fromEntries(Object.entries(fields).map(([n, f]) => [n, fieldSchema(f)]));
  const parsed = z.strictObject(shape).safeParse(outer.data.answers);
  if (!parsed.success) {
    return { ok: false, reason: parsed.error.issues.map((i) => `${i.path.join(".") || "answers"}: ${i.message}`).join("; ") };
  }
  return { ok: true, answers: parsed.data as Record<string, string | number> };
}
