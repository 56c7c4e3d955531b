/**
 * The kinds of object an envelope can target, as data: how a field name maps to the key the read
 * answer uses, which field is the object's own change marker, how the object is taken out of a read
 * answer (strictly: an answer about another object, or of another shape, yields nothing), and which
 * read tool reads it. The envelope, the comparison, the card and the nodes go through this table.
 */
import { describeReceived } from "./errors.js";
import {
  DEAL_FIELDS,
  TASK_FIELDS,
  fieldToTaskKey,
  normaliseId,
  taskKeyToField,
  type FieldSpec,
} from "./fields.js";

export const TARGET_TYPES = ["task", "deal"] as const;
export type TargetType = (typeof TARGET_TYPES)[number];

export type Extracted =
  | { ok: true; object: Record<string, unknown> }
  | {
      ok: false;
      reason: string;
      /** Set when the answer is definitely about another object: the id it named. */ otherId?: unknown;
    };

export interface TargetKind {
  type: TargetType;
  fields: Readonly<Record<string, FieldSpec>>;
  /** The field that moves on every change of the object: compared before every write. */
  changeMarker: string;
  /** "RESPONSIBLE_ID" → "responsibleId" for tasks; deals answer in UPPER_SNAKE, so the name is the key. */
  keyOf(field: string): string;
  fieldOf(key: string): string;
  /** The object's id key in a read answer. */
  idKey: string;
  /**
   * The object out of a read answer, where it sits (body.result.task for tasks, body.result for deals),
   * accepted only when its id is `id`. A string body is parsed as JSON first; text that is not JSON is unusable.
   */
  extract(body: unknown, id: number): Extracted;
  /** The read tool role and its arguments (src/tools/tool-roles.ts). */
  read: { role: "getTask" | "getDeal"; args(id: number): Record<string, unknown> };
}

function parsed(
  body: unknown,
  type: TargetType,
): { ok: true; value: Record<string, unknown> } | { ok: false; reason: string } {
  const json = jsonOf(body);
  if (!json) return { ok: false, reason: `the answer is text, not JSON: ${describeReceived(body)}` };
  const value = json.value;
  if (!isRecord(value))
    return { ok: false, reason: `the answer is not a JSON object: ${describeReceived(value)}` };
  if (!("result" in value)) {
    const err = value["error"];
    return {
      ok: false,
      reason:
        err !== undefined
          ? `the answer is an error, not a ${type}: ${describeReceived(err)} ${describeReceived(value["error_description"])}`
          : `the answer has no "result": ${describeReceived(value)}`,
    };
  }
  return { ok: true, value };
}

function identified(
  object: Record<string, unknown>,
  idKey: string,
  type: TargetType,
  id: number,
  where: string,
): Extracted {
  if (!(idKey in object))
    return { ok: false, reason: `"${where}" has no ${idKey}, so it cannot be tied to ${type} ${id}` };
  const answered = normaliseId(object[idKey]);
  if (answered === undefined)
    return {
      ok: false,
      reason: `"${where}.${idKey}" is ${describeReceived(object[idKey])}, not an id, so it cannot be tied to ${type} ${id}`,
    };
  if (answered !== String(id))
    return {
      ok: false,
      reason: `the answer is about ${type} ${describeReceived(object[idKey])}, not ${type} ${id}`,
      otherId: object[idKey],
    };
  return { ok: true, object };
}

export const TARGETS: Readonly<Record<TargetType, TargetKind>> = {
  task: {
    type: "task",
    fields: TASK_FIELDS,
    changeMarker: "CHANGED_DATE",
    keyOf: fieldToTaskKey,
    fieldOf: taskKeyToField,
    idKey: "id",
    extract(body, id) {
      const p = parsed(body, "task");
      if (!p.ok) return p;
      const result = p.value["result"];
      if (Array.isArray(result) && result.length === 0)
        return { ok: false, reason: `task ${id} not found or not accessible (result is [])` };
      if (!isRecord(result))
        return { ok: false, reason: `"result" is not an object: ${describeReceived(result)}` };
      const task = result["task"];
      if (!isRecord(task))
        return { ok: false, reason: `"result.task" is not an object: ${describeReceived(task)}` };
      return identified(task, "id", "task", id, "result.task");
    },
    read: { role: "getTask", args: (id) => ({ taskId: id }) },
  },
  deal: {
    type: "deal",
    fields: DEAL_FIELDS,
    changeMarker: "DATE_MODIFY",
    keyOf: (field) => field,
    fieldOf: (key) => key,
    idKey: "ID",
    extract(body, id) {
      const p = parsed(body, "deal");
      if (!p.ok) return p;
      const result = p.value["result"];
      if (!isRecord(result))
        return { ok: false, reason: `"result" is not a deal object: ${describeReceived(result)}` };
      return identified(result, "ID", "deal", id, "result");
    },
    read: { role: "getDeal", args: (id) => ({ dealId: id }) },
  },
};

/** An answer as JSON: parsed when it arrived as text; undefined when that text is not JSON. */
export function jsonOf(body: unknown): { value: unknown } | undefined {
  if (typeof body !== "string") return { value: body };
  try {
    return { value: JSON.parse(body) as unknown };
  } catch {
    return undefined;
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
