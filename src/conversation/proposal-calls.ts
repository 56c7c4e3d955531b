/**
 * The model's non-read tool calls, as the journal recorded them from its last reply, read into a
 * proposal, a question, or refusals each answered with an error tool message. Only a single,
 * well-formed propose_change (or propose_change_set) passes; a write-shaped call is answered with an
 * error and never reaches Bitrix24, because nothing here holds a write handle.
 */
import { ToolMessage } from "@langchain/core/messages";
import type { ProposalRecord } from "../envelope/records.js";
import { auditBoundaryRefusal, offeredToolNames, type BoundaryRefusal } from "../hitl/tool-boundary.js";
import { inputSpecProblem, type InputRequestRecord } from "../hitl/structured-input.js";
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type { Deps } from "../runtime/deps.js";
import type { RecordedToolCall } from "../store/journal.js";
import {
  ChangeSetArgsSchema,
  ProposalArgsSchema,
  RequestInputArgsSchema,
  objectIdOf,
} from "../tools/proposal-tools.js";

/** A turn's calls, read: a question recorded in the journal, or the proposal (if any) with the model's replies. */
export type ProposalCalls =
  | { question: InputRequestRecord }
  | {
      accepted: ProposalRecord | null;
      replies: ToolMessage[];
      refusals: string[];
      /** The calls to tools the model was not offered, each audited as a boundary event. */
      boundary: BoundaryRefusal[];
    };

const errorReply = (id: string, name: string, content: string): ToolMessage =>
  new ToolMessage({ tool_call_id: id, name, status: "error", content });

const issuesOf = (issues: Array<{ path: PropertyKey[]; message: string }>, what: string): string =>
  issues.map((i) => `${i.path.join(".") || what}: ${i.message}`).join("; ");

/**
 * Reads the turn's calls. A valid request_input on its own is recorded as the thread's question (indexed
 * in the journal so the web inbox lists waiting questions without loading checkpoints); a call to a tool
 * the model was not offered is audited as a boundary event.
 */
export async function readProposalCalls(
  deps: Deps,
  state: ThreadMirror,
  threadId: string,
  calls: RecordedToolCall[],
): Promise<ProposalCalls> {
  const refusals: string[] = [];
  let accepted: ProposalRecord | null = null;
  const replies: ToolMessage[] = [];
  // A refused call: its reason for the run, and the error tool message that answers it (`what` prefixed).
  const refuse = (id: string, name: string, why: string, what = "") => {
    refusals.push(why);
    replies.push(errorReply(id, name, `Error: ${what}${why}`));
  };

  const only = calls.length === 1 ? calls[0] : undefined;
  if (only?.name === "request_input") {
    const parsed = RequestInputArgsSchema.safeParse(only.args);
    const problem = parsed.success ? inputSpecProblem(parsed.data.fields) : issuesOf(parsed.error.issues, "");
    if (parsed.success && !problem) {
      // No tool reply yet: the human's answer becomes the reply once it passes validation.
      const question = {
        toolCallId: only.id ?? "request_input",
        question: parsed.data.question,
        fields: parsed.data.fields,
        askedAt: deps.clock().toISOString(),
      };
      await deps.journal.recordQuestion({ threadId, ...question });
      return { question };
    }
    refuse(only.id ?? "request_input", "request_input", `invalid request_input: ${problem}`);
  }

  const offered = offeredToolNames(deps);
  const boundary: BoundaryRefusal[] = [];
  for (const [index, call] of (only?.name === "request_input" ? [] : calls).entries()) {
    const id = call.id ?? `call_${replies.length}`;
    if (call.name !== "propose_change" && call.name !== "propose_change_set") {
      const isOffered = offered.includes(call.name);
      const why = isOffered
        ? `${call.name} must not be combined with propose_change in one turn; read first, then propose`
        : `${call.name} is not available: you can only read and propose; writes happen after human approval`;
      if (!isOffered) boundary.push(await auditBoundaryRefusal(deps, state, threadId, call, index, offered));
      refuse(id, call.name, why);
      continue;
    }
    if (calls.length > 1) {
      refuse(id, call.name, "propose exactly one change per turn");
      continue;
    }
    if (call.name === "propose_change_set") {
      const set = ChangeSetArgsSchema.safeParse(call.args);
      if (!set.success) {
        refuse(id, call.name, issuesOf(set.error.issues, "change set"), "invalid change set: ");
        continue;
      }
      const actions = set.data.actions.map((a) => ({
        operation: a.operation,
        taskId: objectIdOf(a),
        fields: a.fields,
      }));
      // The first action's operation, object and fields stand for the set's.
      accepted = {
        ...actions[0]!,
        actions,
        rationale: set.data.rationale,
        source: "model",
      };
      replies.push(
        new ToolMessage({
          tool_call_id: id,
          name: call.name,
          content: `Change set of ${set.data.actions.length} actions received. It will be checked against policy and shown to a human for approval as one set.`,
        }),
      );
      continue;
    }
    const parsed = ProposalArgsSchema.safeParse(call.args);
    if (!parsed.success) {
      refuse(id, call.name, issuesOf(parsed.error.issues, "proposal"), "invalid proposal: ");
      continue;
    }
    // The object's id is kept as `taskId` whatever its kind; the operation says whether it is a task or a deal.
    accepted = {
      operation: parsed.data.operation,
      taskId: objectIdOf(parsed.data),
      fields: parsed.data.fields,
      rationale: parsed.data.rationale,
      source: "model",
    };
    replies.push(
      new ToolMessage({
        tool_call_id: id,
        name: call.name,
        content: "Proposal received. It will be checked against policy and shown to a human for approval.",
      }),
    );
  }
  return { accepted, replies, refusals, boundary };
}
