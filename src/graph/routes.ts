/**
 * Pure routers: each looks at state only and returns one of a closed set of node names. They are a
 * convenience, not a control: every node checks the journal before it acts, so a state rewritten to
 * steer a router only reaches a node that refuses (and then `resync`).
 */
import { isAIMessage } from "@langchain/core/messages";
import type { State } from "./state.js";
import type { JournalNext } from "../store/action-machine.js";
import { isChatDecision } from "../hitl/text-decision.js";
import { MCP_TOOL_NAMES } from "../tools/mcp-contract.js";
import { READ_ROLES } from "../tools/tool-roles.js";

/** Our read tools' names (the model is offered these; read_tools checks each call against what was offered). */
export const READ_TOOL_NAMES = new Set<string>(READ_ROLES.map((role) => MCP_TOOL_NAMES[role]));

export function afterAgent(
  state: State,
):
  | "read_tools"
  | "propose"
  | "ask_input"
  | "check_input"
  | "check_decision"
  | "build_envelope"
  | "finish"
  | "resync" {
  if (state.needsResync) return "resync";
  // A chat message sent while an approval waits: check_decision takes it only if it is a decision.
  if (isChatDecision(state.pendingDecision)) return "check_decision";
  if (state.outcome) return "finish";
  // An undo thread's proposal (built by code); build_envelope takes it from the journal, not from here.
  if (state.proposal?.source === "compensation") return "build_envelope";
  // The agent held back for a waiting question: a chat message goes to check_input as a candidate answer, else the question is asked again.
  if (state.inputRequest) return state.pendingDecision != null ? "check_input" : "ask_input";
  const last = state.messages.at(-1);
  const calls = last && isAIMessage(last) ? (last.tool_calls ?? []) : [];
  if (calls.length === 0) return "finish";
  return calls.every((c) => READ_TOOL_NAMES.has(c.name)) ? "read_tools" : "propose";
}

export function afterPropose(state: State): "agent" | "ask_input" | "build_envelope" | "finish" | "resync" {
  if (state.needsResync) return "resync";
  if (state.outcome) return "finish";
  if (state.inputRequest) return "ask_input";
  const last = state.messages.at(-1);
  const refused = last && "status" in last && (last as { status?: string }).status === "error";
  return refused || !state.proposal ? "agent" : "build_envelope";
}

export function afterCheckInput(state: State): "agent" | "ask_input" | "finish" | "resync" {
  if (state.needsResync) return "resync";
  if (state.outcome) return "finish";
  return state.inputRequest ? "ask_input" : "agent";
}

export function afterBuildEnvelope(state: State): "await_approval" | "carry_out" | "finish" | "resync" {
  if (state.needsResync) return "resync";
  if (state.outcome) return "finish";
  // A partial approval of a change set that the policy lets run at once was decided with the new
  // revision (carry_out checks that in the journal like any approval).
  return state.journalNext === "carry_out" ? "carry_out" : "await_approval";
}

export function afterAwaitApproval(state: State): "check_decision" | "resync" {
  return state.needsResync ? "resync" : "check_decision";
}

export function afterCheckDecision(
  state: State,
): "agent" | "await_approval" | "build_envelope" | "carry_out" | "finish" | "resync" {
  if (state.needsResync) return "resync";
  if (state.outcome) return "finish";
  const type = state.decision?.type;
  switch (type) {
    case "approve":
      // Into the executor, which takes every later step from the journal's phase table.
      return "carry_out";
    case "edit":
      return "build_envelope";
    case "reject":
      // A rejection that did not end the run carries feedback for the model to revise.
      return "agent";
    case "cancel":
      return "finish";
    case "expire":
      // An expired approval that did not end the run was escalated: a fresh envelope for the new group.
      return "build_envelope";
    case undefined:
      return "await_approval";
    default: {
      const never: never = type;
      throw new Error(`unknown decision type ${String(never)}`);
    }
  }
}

export function afterFinish(state: State): "resync" | "__end__" {
  return state.needsResync ? "resync" : "__end__";
}

/** Continues wherever the journal says the thread is (no action yet: the agent). */
export function afterResync(state: State): NonNullable<JournalNext> {
  return state.journalNext ?? "agent";
}
