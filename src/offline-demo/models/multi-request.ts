/** The offline model on a request of several changes (planRequest kind "multi"): read each task once, then propose one action or a change set. */
import type { BaseMessage } from "@langchain/core/messages";
import { feedbackMessage } from "./feedback.js";
import type { PlannedAction, RequestPlan } from "./plan.js";
import {
  describeAction,
  describeCount,
  describeReads,
  distinctTaskIds,
  text,
  unreadTask,
  type OfflineDecision,
} from "./replies.js";
import { clip, isErrorToolMessage, isRecord, readToolOutcome, type TaskRecord } from "./tool-messages.js";
import { OFFLINE_TOOL_NAMES, type RecordedCall, type Transcript } from "./transcript.js";

/** A request of several changes, as planRequest gives it. */
export type MultiPlan = Extract<RequestPlan, { kind: "multi" }>;

/**
 * A multi-clause request: read each distinct task once, one call per turn, in the order the
 * tasks first appear; then propose. Two or more actions go to propose_change_set in request
 * order; clauses that merged into one action go to propose_change. Feedback is never revised.
 */
export function decideMulti(
  t: Transcript,
  plan: MultiPlan,
  requestMsg: BaseMessage,
  requestIndex: number,
): OfflineDecision {
  const last = t.msgs.at(-1);
  if (last === undefined || last === requestMsg) return nextMultiStep(t, plan, requestIndex);
  if (last.type === "tool") return onMultiToolResult(t, plan, last, requestIndex);
  if (last.type === "human") return onMultiFeedback(t, last, requestIndex);
  return text("I have nothing further to do for this request.");
}

function nextMultiStep(t: Transcript, plan: MultiPlan, requestIndex: number): OfflineDecision {
  const taskIds = distinctTaskIds(plan.actions);
  const unread = taskIds.find((id) => !t.hasTaskRead(id, requestIndex));
  if (unread !== undefined) {
    const which = taskIds.length > 1 ? ` (task ${taskIds.indexOf(unread) + 1} of ${taskIds.length})` : "";
    return t.callTool(
      "getTask",
      { taskId: unread },
      `Reading task ${unread}${which} before proposing ${describeCount(plan.actions.length)}.`,
      `I need to read task ${unread} before proposing a change, but no ${OFFLINE_TOOL_NAMES.getTask} tool is bound.`,
    );
  }
  const tasks = new Map(taskIds.map((id) => [id, t.lastTaskRead(id, requestIndex)] as const));
  const [only] = plan.actions;
  if (plan.actions.length === 1 && only !== undefined) return proposeMerged(t, only, plan, tasks);
  return proposeSet(t, plan, tasks);
}

function onMultiToolResult(
  t: Transcript,
  plan: MultiPlan,
  msg: BaseMessage,
  requestIndex: number,
): OfflineDecision {
  const asked = t.askedCall(msg);
  if ("stop" in asked) return asked.stop;
  const call = asked.call;
  const outcome = readToolOutcome(msg);
  switch (call.role) {
    case "getTask": {
      const taskId = Number(call.args.taskId);
      if (outcome.kind !== "task") return unreadTask(outcome, taskId, "these changes");
      return nextMultiStep(t, plan, requestIndex);
    }
    case "getHistory":
      return nextMultiStep(t, plan, requestIndex);
    case "proposeSet":
    case "propose":
      return onProposalResult(call, msg);
    default:
      return text(`I received a result from ${call.name}, which I do not use; stopping.`);
  }
}

/** The answer to our propose_change or propose_change_set call: the run ends either way; a refusal is not retried. */
export function onProposalResult(call: RecordedCall, msg: BaseMessage): OfflineDecision {
  const what =
    call.role === "proposeSet"
      ? `The change set of ${Array.isArray(call.args.actions) ? call.args.actions.length : 0} actions`
      : `The proposal for task ${String(call.args.taskId)}`;
  const body = clip(msg.text);
  if (isErrorToolMessage(msg)) return text(`${what} was refused: ${body}. I will not retry; stopping here.`);
  return text(`${what} was handled: ${body}`);
}

function onMultiFeedback(t: Transcript, msg: BaseMessage, requestIndex: number): OfflineDecision {
  const last = t.lastProposal(requestIndex);
  if (last === undefined) return text("There is no earlier proposal to revise; stopping.");
  if (last.role === "proposeSet") return stopAfterSetRejection(last, msg);
  const fields = isRecord(last.args.fields) ? Object.keys(last.args.fields) : [];
  return text(
    `The reviewer rejected the proposal for task ${String(last.args.taskId)} (${feedbackMessage(msg.text)}). ` +
      `It combined several changes from one request (${fields.join(", ")}), which I do not revise; stopping. ` +
      "Send a new request to propose different changes.",
  );
}

/** Change sets are not revised: a rejection ends the run, whatever the feedback asks for. */
export function stopAfterSetRejection(set: RecordedCall, msg: BaseMessage): OfflineDecision {
  const count = Array.isArray(set.args.actions) ? set.args.actions.length : 0;
  return text(
    `The reviewer rejected the change set of ${count} actions (${feedbackMessage(msg.text)}). ` +
      "I do not revise change sets, so nothing will be written and I am stopping here. " +
      "Send a new request to propose a different set.",
  );
}

function proposeSet(
  t: Transcript,
  plan: MultiPlan,
  tasks: ReadonlyMap<number, TaskRecord | undefined>,
): OfflineDecision {
  const actions = plan.actions.map((a) => ({
    operation: a.operation,
    taskId: a.taskId,
    fields: { ...a.fields },
  }));
  const rationale =
    `The user asked for ${describeCount(plan.actions.length)} in one request, to run in this order: ` +
    `${plan.actions.map((a, i) => `${i + 1}. ${describeAction(a)}`).join("; ")}. ` +
    `Read with ${OFFLINE_TOOL_NAMES.getTask}: ${describeReads(plan.actions, tasks)}.`;
  return t.callTool(
    "proposeSet",
    { actions, rationale },
    `Proposing a change set of ${plan.actions.length} actions: ${plan.actions.map(describeAction).join("; ")}.`,
    `I would propose a change set of ${plan.actions.length} actions (${plan.actions.map(describeAction).join("; ")}), but no ${OFFLINE_TOOL_NAMES.proposeSet} tool is bound.`,
  );
}

/** Several clauses merged into one action (updates of one task): a single proposal. */
function proposeMerged(
  t: Transcript,
  action: PlannedAction,
  plan: MultiPlan,
  tasks: ReadonlyMap<number, TaskRecord | undefined>,
): OfflineDecision {
  const rationale =
    `The user asked, in ${plan.clauses.length} clauses merged into one write, to ${describeAction(action)}. ` +
    `Read with ${OFFLINE_TOOL_NAMES.getTask}: ${describeReads([action], tasks)}.`;
  const args: Record<string, unknown> =
    action.operation === "update_task"
      ? { taskId: action.taskId, fields: { ...action.fields }, rationale }
      : { operation: action.operation, taskId: action.taskId, fields: { ...action.fields }, rationale };
  return t.callTool(
    "propose",
    args,
    `Proposing to ${describeAction(action)}.`,
    `I would propose to ${describeAction(action)}, but no ${OFFLINE_TOOL_NAMES.propose} tool is bound.`,
  );
}
