/**
 * The offline model's next step as a pure function of the conversation and the bound tool
 * names. Everything it knows comes from the messages, so replaying the same conversation
 * (a resumed thread, a retried node) gives the same answer and the same tool call ids.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { describeValue, normaliseValue, operationFor, TASK_FIELD_KEYS, type TaskField } from "./fields.js";
import { parseFeedbackValue } from "./feedback.js";
import { parseDealRequest } from "./deal-request.js";
import { SUPPORTED_PHRASINGS, type ChangeIntent } from "./intent.js";
import { decideMulti, onProposalResult, stopAfterSetRejection } from "./multi-request.js";
import { parseNewTaskRequest } from "./new-task-request.js";
import { planRequest } from "./plan.js";
import { text, unreadTask, type OfflineDecision } from "./replies.js";
import {
  clip,
  isErrorToolMessage,
  isRecord,
  readToolOutcome,
  type TaskRecord,
  type ToolOutcome,
} from "./tool-messages.js";
import { OFFLINE_TOOL_NAMES, Transcript } from "./transcript.js";

/**
 * Decides the next step.
 * @param boundToolNames names of the tools bound with `bindTools`; undefined when none were bound.
 */
export function decideNextStep(
  messages: readonly BaseMessage[],
  boundToolNames: readonly string[] | undefined,
): OfflineDecision {
  return new Conversation(messages, boundToolNames ?? []).decide();
}

/** The single-task, deal and new-task paths; a request of several changes goes to decideMulti. */
class Conversation extends Transcript {
  decide(): OfflineDecision {
    const requestIndex = this.requestIndex();
    const requestMsg = requestIndex === undefined ? undefined : this.msgs[requestIndex];
    if (requestMsg === undefined)
      return text("There is no request to work on: the conversation has no user message.");
    const deal = parseDealRequest(requestMsg.text);
    if (deal) return this.decideDeal(deal, requestMsg);
    const newTask = parseNewTaskRequest(requestMsg.text);
    if (newTask) return this.decideNewTask(newTask, requestMsg);
    const plan = planRequest(requestMsg.text);
    if (plan.kind === "refused") return text(plan.message);
    if (plan.kind === "multi") return decideMulti(this, plan, requestMsg, requestIndex ?? 0);
    const parsed = plan.parsed;
    if (!parsed.ok) {
      if (parsed.kind === "invalid_value") {
        return text(
          `I understood a change of ${parsed.field}, but "${parsed.rawValue}" is not a value I can propose: ${parsed.reason}.`,
        );
      }
      return text(
        `I did not recognise a supported request. Supported phrasings:\n- ${SUPPORTED_PHRASINGS.join("\n- ")}`,
      );
    }
    const intent = parsed.intent;
    const last = this.msgs.at(-1);
    if (last === undefined || last === requestMsg) return this.start(intent);
    if (last.type === "tool") return this.onToolResult(intent, last, requestIndex ?? 0);
    if (last.type === "human") return this.onFeedback(intent, last, requestIndex ?? 0);
    return text("I have nothing further to do for this request.");
  }

  /** A new task: nothing to read; propose add_task with the title, the responsible user and the deadline given. */
  private decideNewTask(
    req: NonNullable<ReturnType<typeof parseNewTaskRequest>>,
    requestMsg: BaseMessage,
  ): OfflineDecision {
    if (!req.ok) return text(`I understood a request for a new task, but cannot propose it: ${req.reason}.`);
    const last = this.msgs.at(-1);
    if (last !== undefined && last !== requestMsg) {
      if (last.type === "human")
        return text("The reviewer answered the proposal for the new task; I do not revise it. Stopping.");
      return text(`The proposal for the new task was handled: ${last.text.slice(0, 500)}`);
    }
    const { title, responsibleId, deadline } = req.intent;
    const fields = {
      TITLE: title,
      RESPONSIBLE_ID: responsibleId,
      ...(deadline ? { DEADLINE: deadline } : {}),
    };
    return this.callTool(
      "propose",
      {
        operation: "add_task",
        fields,
        rationale: `The user asked for a new task "${title}" for user ${responsibleId}${deadline ? `, due ${deadline}` : ""}.`,
      },
      `Proposing a new task "${title}" for user ${responsibleId}.`,
      `I would propose a new task "${title}", but no ${OFFLINE_TOOL_NAMES.propose} tool is bound.`,
    );
  }

  /** A deal request: read the deal once with get_deal, then propose update_deal; feedback stops it. */
  private decideDeal(
    deal: NonNullable<ReturnType<typeof parseDealRequest>>,
    requestMsg: BaseMessage,
  ): OfflineDecision {
    if (!deal.ok)
      return text(
        `I understood a change of deal field ${deal.field}, but "${deal.rawValue}" is not a value I can propose: ${deal.reason}.`,
      );
    const { dealId, field, value } = deal.intent;
    const last = this.msgs.at(-1);
    if (last === undefined || last === requestMsg) {
      return this.callTool(
        "getDeal",
        { dealId },
        `Reading deal ${dealId} before proposing to set ${field}.`,
        `No ${OFFLINE_TOOL_NAMES.getDeal} tool is bound, so deal ${dealId} cannot be read; stopping.`,
      );
    }
    if (last.type === "human")
      return text(
        `The reviewer answered the proposal for deal ${dealId}; I do not revise deal changes. Stopping.`,
      );
    if (last.type !== "tool") return text("I have nothing further to do for this request.");
    const role = this.roleOf((last as { name?: string }).name ?? "");
    if (role === "propose")
      return text(`The proposal for deal ${dealId} was handled: ${last.text.slice(0, 500)}`);
    let body: unknown;
    try {
      body = JSON.parse(last.text);
    } catch {
      body = undefined;
    }
    const current = isRecord(body) && isRecord(body["result"]) ? body["result"] : undefined;
    if (!current) return text(`Deal ${dealId} could not be read (${last.text.slice(0, 300)}); stopping.`);
    const rationale = `The user asked to set ${field} of deal ${dealId} to "${value}". Current ${field} (read with ${OFFLINE_TOOL_NAMES.getDeal}): ${JSON.stringify(current[field] ?? null)}.`;
    return this.callTool(
      "propose",
      { operation: "update_deal", dealId, fields: { [field]: value }, rationale },
      `Proposing to set ${field} of deal ${dealId} from ${JSON.stringify(current[field] ?? null)} to "${value}".`,
      `I would propose setting ${field} of deal ${dealId} to "${value}", but no ${OFFLINE_TOOL_NAMES.propose} tool is bound.`,
    );
  }

  private start(intent: ChangeIntent): OfflineDecision {
    const target = intent.target;
    if (target.kind === "id") return this.readTask(target.taskId, intent);
    if (target.kind === "title") {
      return this.callTool(
        "listTasks",
        { filter: { "%TITLE": target.fragment } },
        `Looking for the task whose title contains "${target.fragment}".`,
        `The request names the task by title ("${target.fragment}"), but no ${OFFLINE_TOOL_NAMES.listTasks} tool is bound to search for it. Please give the task id.`,
      );
    }
    return this.callTool(
      "requestInput",
      {
        question: `Which task should I change (set ${intent.field} to ${describeValue(intent.field, intent.value)})?`,
        fields: { taskId: { type: "number", description: "Bitrix24 task id" } },
      },
      "The request does not say which task to change, so I am asking.",
      'The request does not say which task to change. Please name it, e.g. "rename task 4 to ...".',
    );
  }

  private readTask(taskId: number, intent: ChangeIntent): OfflineDecision {
    return this.callTool(
      "getTask",
      { taskId },
      `Reading task ${taskId} before proposing to set ${intent.field}.`,
      `I need to read task ${taskId} before proposing a change, but no ${OFFLINE_TOOL_NAMES.getTask} tool is bound.`,
    );
  }

  private onToolResult(intent: ChangeIntent, msg: BaseMessage, requestIndex: number): OfflineDecision {
    const asked = this.askedCall(msg);
    if ("stop" in asked) return asked.stop;
    const call = asked.call;
    const outcome = readToolOutcome(msg);
    switch (call.role) {
      case "getTask": {
        const taskId = Number(call.args.taskId);
        if (outcome.kind !== "task") return unreadTask(outcome, taskId, "a change");
        return this.propose(taskId, intent.field, intent.value, outcome.task, this.requestRationale(intent));
      }
      case "listTasks":
        return this.onList(intent, outcome);
      case "requestInput":
        return this.onAnswer(intent, msg, outcome);
      case "proposeSet":
      case "propose":
        return onProposalResult(call, msg);
      case "getHistory": {
        const taskId = Number(call.args.taskId);
        return this.hasTaskRead(taskId, requestIndex)
          ? text(`I read the history of task ${taskId}; I have nothing further to do.`)
          : this.readTask(taskId, intent);
      }
      default:
        return text(`I received a result from ${call.name}, which I do not use; stopping.`);
    }
  }

  private onList(intent: ChangeIntent, outcome: ToolOutcome): OfflineDecision {
    const fragment = intent.target.kind === "title" ? intent.target.fragment : "";
    if (outcome.kind === "error")
      return text(`I cannot propose a change: searching for "${fragment}" failed: ${outcome.reason}`);
    const tasks = outcome.kind === "tasks" ? outcome.tasks : [];
    // The filter already asks for a LIKE match; re-checking keeps a loose search from picking a wrong task.
    const needle = fragment.toLowerCase();
    const matches = tasks.filter((t) =>
      String(t.title ?? "")
        .toLowerCase()
        .includes(needle),
    );
    if (matches.length === 0)
      return text(`No task title contains "${fragment}", so I cannot propose a change.`);
    const first = matches[0];
    if (matches.length === 1 && first !== undefined) return this.readTask(Number(first.id), intent);
    const listing = matches.map((t) => `${String(t.id)}: ${String(t.title ?? "")}`);
    return this.callTool(
      "requestInput",
      {
        question: "Which task do you mean?",
        fields: {
          taskId: {
            type: "enum",
            description: `Tasks whose title contains "${fragment}": ${listing.join("; ")}`,
            choices: matches.map((t) => String(t.id)),
          },
        },
      },
      `${matches.length} tasks match "${fragment}"; asking which one is meant.`,
      `${matches.length} tasks match "${fragment}" (${listing.join("; ")}). Please name the task id.`,
    );
  }

  private onAnswer(intent: ChangeIntent, msg: BaseMessage, outcome: ToolOutcome): OfflineDecision {
    if (isErrorToolMessage(msg)) return text(`No task was chosen (${clip(msg.text)}); stopping.`);
    const body = outcome.kind === "other" ? outcome.body : undefined;
    const answer = isRecord(body) ? body.taskId : undefined;
    const taskId =
      typeof answer === "number"
        ? answer
        : typeof answer === "string" && /^\d+$/.test(answer.trim())
          ? Number(answer)
          : NaN;
    if (!Number.isInteger(taskId) || taskId <= 0) {
      return text(`The answer does not name a task id (${clip(msg.text)}); stopping.`);
    }
    return this.readTask(taskId, intent);
  }

  private onFeedback(intent: ChangeIntent, msg: BaseMessage, requestIndex: number): OfflineDecision {
    const last = this.lastProposal(requestIndex);
    if (last === undefined) return text("There is no earlier proposal to revise; stopping.");
    if (last.role === "proposeSet") return stopAfterSetRejection(last, msg);
    const fields = isRecord(last.args.fields) ? last.args.fields : {};
    const field = (Object.keys(fields)[0] as TaskField | undefined) ?? intent.field;
    const taskId = Number(last.args.taskId);
    const wanted = parseFeedbackValue(msg.text);
    if (wanted === undefined) {
      return text(
        `The reviewer rejected the proposal for task ${taskId} without naming another value; stopping.`,
      );
    }
    const normalised = normaliseValue(field, wanted);
    if (!normalised.ok) {
      return text(
        `The reviewer asked for "${wanted}", which is not a valid ${field}: ${normalised.reason}; stopping.`,
      );
    }
    if (normalised.value === fields[field]) {
      return text(
        `The reviewer asked for ${describeValue(field, normalised.value)}, which is what I already proposed; stopping.`,
      );
    }
    const task = this.lastTaskRead(taskId, requestIndex);
    return this.propose(
      taskId,
      field,
      normalised.value,
      task,
      `Revised after reviewer feedback, which asked for ${describeValue(field, normalised.value)}.`,
    );
  }

  private propose(
    taskId: number,
    field: TaskField,
    value: string,
    task: TaskRecord | undefined,
    why: string,
  ): OfflineDecision {
    if (operationFor(field) === "add_task_comment") {
      const rationale = `${why} Task ${taskId} ${task === undefined ? "was not read" : `was read with ${OFFLINE_TOOL_NAMES.getTask}`}; proposed comment: ${describeValue(field, value)}.`;
      return this.callTool(
        "propose",
        { operation: "add_task_comment", taskId, fields: { POST_MESSAGE: value }, rationale },
        `Proposing to comment on task ${taskId}: ${describeValue(field, value)}.`,
        `I would propose commenting on task ${taskId}: ${describeValue(field, value)}, but no ${OFFLINE_TOOL_NAMES.propose} tool is bound.`,
      );
    }
    const current = task === undefined ? "not read" : describeValue(field, task[TASK_FIELD_KEYS[field]]);
    const rationale = `${why} Current ${field} of task ${taskId} (read with ${OFFLINE_TOOL_NAMES.getTask}): ${current}; proposed: ${describeValue(field, value)}.`;
    return this.callTool(
      "propose",
      { taskId, fields: { [field]: value }, rationale },
      `Proposing to set ${field} of task ${taskId} from ${current} to ${describeValue(field, value)}.`,
      `I would propose setting ${field} of task ${taskId} to ${describeValue(field, value)}, but no ${OFFLINE_TOOL_NAMES.propose} tool is bound.`,
    );
  }

  // ---- Several changes in one request (planRequest kind "multi") ----
  private requestRationale(intent: ChangeIntent): string {
    const how =
      intent.target.kind === "title"
        ? ` (task found by its title containing "${intent.target.fragment}")`
        : "";
    if (intent.field === "POST_MESSAGE") return `The user asked to comment on the task${how}.`;
    return `The user asked to set ${intent.field} to ${describeValue(intent.field, intent.value)}${how}.`;
  }
}
