/**
 * Turns an MCP tool result into the envelope core's ReadResult. A body that arrived but is not the
 * documented shape stays a successful read of unusable content (→ UNKNOWN), not a failed read
 * (→ ERROR): the two mean different things to whoever investigates.
 */
import type { ReadResult } from "../envelope/index.js";
import type { ReasonCode } from "../envelope/records.js";
import { TARGETS, type TargetType } from "../envelope/targets.js";
import type { McpCallResult } from "../tools/mcp-call.js";
import type { Bitrix24Tools } from "../tools/bitrix24-tools.js";

export function toReadResult(res: McpCallResult): ReadResult {
  if (res.ok) return { status: "ok", body: res.body };
  if (res.error.kind === "malformed_response") return { status: "ok", body: res.error.rawBody ?? res.text };
  return {
    status: "failed",
    error: {
      kind: res.error.kind,
      ...(res.error.code !== undefined ? { code: res.error.code } : {}),
      description: res.error.description,
    },
  };
}

/** The object an envelope's baseline is read from (an undo's part included), or why it is not one to build on. */
export type BaselineRead =
  { ok: true; object: Record<string, unknown> } | { ok: false; code: ReasonCode; reason: string };

/** A read that did not give the object to record as a baseline (`why`, when known), quoting the answer. */
export function unreadBaseline(what: string, res: McpCallResult, why?: string): BaselineRead {
  const answer = JSON.stringify(rawOf(res)).slice(0, 2000);
  const reason = `could not read ${what} to record its baseline${why !== undefined ? ` (${why})` : ""}: ${answer}`;
  return { ok: false, code: "BASELINE_READ_FAILED", reason };
}

/** Evidence form of a read: what the target returned, verbatim where possible. */
export function rawOf(res: McpCallResult): unknown {
  return res.ok ? res.body : { error: res.error };
}

/** The acting user's edit right as the portal reports it, or null when the answer does not say. */
export function canEditFrom(body: unknown): boolean | null {
  const task = (body as { result?: { task?: { action?: Record<string, unknown> } } } | null)?.result?.task;
  const edit = task?.action?.["edit"];
  return typeof edit === "boolean" ? edit : null;
}

/**
 * Task fields a right narrower than `action.edit` guards, as the portal names it in the task's `action`
 * map: a deadline needs changeDeadline, the planned dates edit.plan, the creator edit.originator.
 */
export const FIELD_RIGHTS: Readonly<Record<string, string>> = {
  DEADLINE: "changeDeadline",
  START_DATE_PLAN: "edit.plan",
  END_DATE_PLAN: "edit.plan",
  CREATED_BY: "edit.originator",
};

/** The fields of `fields` whose right the task answer reports as false, each with that right's name. */
export function deniedFieldRights(
  body: unknown,
  fields: readonly string[],
): Array<{ field: string; right: string }> {
  const action = (body as { result?: { task?: { action?: Record<string, unknown> } } } | null)?.result?.task
    ?.action;
  return fields.flatMap((f) => {
    const right = FIELD_RIGHTS[f];
    return right && action?.[right] === false ? [{ field: f, right }] : [];
  });
}

/**
 * Reads an action's object by code with the read tool its kind names (a task, or a deal) and returns
 * it as the envelope core sees it: the object itself when the answer is about it, else null.
 */
export async function readObject(
  tools: Pick<Bitrix24Tools, "read">,
  type: TargetType,
  id: number,
): Promise<{ res: McpCallResult; object: Record<string, unknown> | null }> {
  const t = TARGETS[type];
  const res = await tools.read(t.read.role, t.read.args(id));
  const x = res.ok ? t.extract(res.body, id) : null;
  return { res, object: x?.ok ? x.object : null };
}
