import { AIMessage, ToolMessage } from "@langchain/core/messages";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";
import { ProposalArgsSchema, RequestInputArgsSchema } from "../tools/proposal-tools.js";
import { inputSpecProblem } from "../hitl/structured-input.js";
import { endRun } from "./finish-with.js";

/**
 * Interprets the model's non-read tool calls. Only a single, well-formed propose_change passes; a
 * write-shaped call (update_task or anything unknown) is answered with an error and never reaches
 * Bitrix24, because nothing here holds a write handle.
 */
export async function propose(state: State): Promise<Update> {
  const deps = await getDeps();
  const last = state.messages.at(-1);
  const calls = last instanceof AIMessage || (last && "tool_calls" in last) ? ((last as AIMessage).tool_calls ?? []) : [];
  const refusals: string[] = [];
  let accepted: Update["proposal"] = null;
  const replies: ToolMessage[] = [];

  const only = calls.length === 1 ? calls[0] : undefined;
  if (only?.name === "request_input") {
    const parsed = RequestInputArgsSchema.safeParse(only.args);
    const problem = parsed.success ? inputSpecProblem(parsed.data.fields) : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    if (parsed.success && !problem) {
      // No tool reply yet: the human's answer becomes the reply once it passes validation.
      return { inputRequest: { toolCallId: only.id ?? "request_input", question: parsed.data.question, fields: parsed.data.fields, askedAt: deps.clock().toISOString() } };
    }
    refusals.push(`invalid request_input: ${problem}`);
    replies.push(new ToolMessage({ tool_call_id: only.id ?? "request_input", name: "request_input", status: "error", content: `Error: invalid request_input: ${problem}` }));
  }

  for (const call of only?.name === "request_input" ? [] : calls) {
    const id = call.id ?? `call_${replies.length}`;
    if (call.name !== "propose_change") {
      const why = deps.tools.readTools.some((t) => t.name === call.name)
        ? `${call.name} must not be combined with propose_change in one turn; read first, then propose`
        : `${call.name} is not available: you can only read and propose; writes happen after human approval`;
      refusals.push(why);
      replies.push(new ToolMessage({ tool_call_id: id, name: call.name, status: "error", content: `Error: ${why}` }));
      continue;
    }
    if (calls.length > 1) {
      const why = "propose exactly one change per turn";
      refusals.push(why);
      replies.push(new ToolMessage({ tool_call_id: id, name: call.name, status: "error", content: `Error: ${why}` }));
      continue;
    }
    const parsed = ProposalArgsSchema.safeParse(call.args);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => `${i.path.join(".") || "proposal"}: ${i.message}`).join("; ");
      refusals.push(why);
      replies.push(new ToolMessage({ tool_call_id: id, name: call.name, status: "error", content: `Error: invalid proposal: ${why}` }));
      continue;
    }
    accepted = { ...parsed.data, source: "model" };
    replies.push(new ToolMessage({ tool_call_id: id, name: call.name, content: "Proposal received. It will be checked against policy and shown to a human for approval." }));
  }

  if (accepted) return { messages: replies, proposal: accepted };
  const invalid = state.invalidProposals + 1;
  if (invalid > deps.config.limits.maxInvalidProposals) {
    return {
      messages: replies,
      invalidProposals: invalid,
      ...endRun("NOT_EXECUTED", "INVALID_PROPOSAL", `the model made ${invalid} invalid proposals; last: ${refusals.join("; ")}`),
    };
  }
  return { messages: replies, invalidProposals: invalid };
}
