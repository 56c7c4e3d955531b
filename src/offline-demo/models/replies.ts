/**
 * How the offline model words its answers: the decision it returns, and the text describing planned
 * changes and what was read for them.
 */
import type { TaskRecord, ToolOutcome } from "./tool-messages.js";
import { describeValue, TASK_FIELD_KEYS, type TaskField } from "./fields.js";
import { planRequest, type PlannedAction } from "./plan.js";

export type OfflineDecision =
  | { kind: "tool"; text: string; call: { id: string; name: string; args: Record<string, unknown> } }
  | { kind: "text"; text: string };

export const OFFLINE_PREFIX = "[offline model]";

/** A request the conversation may move on to: one supported change, or a plan of several. */
export function isActionableRequest(body: string): boolean {
  const plan = planRequest(body);
  return plan.kind === "multi" || (plan.kind === "single" && plan.parsed.ok);
}

export function distinctTaskIds(actions: readonly PlannedAction[]): number[] {
  return [...new Set(actions.map((a) => a.taskId))];
}

export function describeCount(n: number): string {
  return n === 1 ? "1 change" : `${n} changes`;
}

export function fieldEntries(action: PlannedAction): Array<[TaskField, string]> {
  return Object.entries(action.fields) as Array<[TaskField, string]>;
}

/** `set STATUS to "4" (awaiting control) and RESPONSIBLE_ID to "5" on task 4`, or `comment on task 4: "..."`. */
export function describeAction(action: PlannedAction): string {
  if (action.operation === "add_task_comment") {
    return `comment on task ${action.taskId}: ${describeValue("POST_MESSAGE", action.fields.POST_MESSAGE)}`;
  }
  const parts = fieldEntries(action).map(([f, v]) => `${f} to ${describeValue(f, v)}`);
  const listed = parts.length <= 1 ? parts.join("") : `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}`;
  return `set ${listed} on task ${action.taskId}`;
}

/** What was read for each task: its title and the current values of the fields that change. */
export function describeReads(
  actions: readonly PlannedAction[],
  tasks: ReadonlyMap<number, TaskRecord | undefined>,
): string {
  return distinctTaskIds(actions)
    .map((id) => {
      const task = tasks.get(id);
      if (task === undefined) return `task ${id} (not read)`;
      const changed = [
        ...new Set(
          actions
            .filter((a) => a.taskId === id && a.operation === "update_task")
            .flatMap((a) => fieldEntries(a).map(([f]) => f)),
        ),
      ];
      const current = changed.map((f) => `current ${f} ${describeValue(f, task[TASK_FIELD_KEYS[f]])}`);
      return [`task ${id} ${describeValue("TITLE", task.title)}`, ...current].join(", ");
    })
    .join("; ");
}

/** Why a get_task_by_id answer gives no task to propose `what` for: a failed read, none found, or no task in it. */
export function unreadTask(outcome: ToolOutcome, taskId: number, what: string): OfflineDecision {
  if (outcome.kind === "error")
    return text(`I cannot propose ${what}: reading task ${taskId} failed: ${outcome.reason}`);
  if (outcome.kind === "empty")
    return text(
      `I cannot propose ${what}: task ${taskId} was not found or is not accessible (get_task_by_id returned "result": []).`,
    );
  return text(`I cannot propose ${what}: the answer for task ${taskId} contains no task.`);
}

export function text(body: string): OfflineDecision {
  return { kind: "text", text: `${OFFLINE_PREFIX} ${body}` };
}
