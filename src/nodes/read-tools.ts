import { ToolMessage, isAIMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { auditBoundaryRefusal } from "../hitl/tool-boundary.js";
import { openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";

/**
 * Runs the model's read tool calls. It is built from the read allowlist only; it cannot write. The
 * router sends calls here by the default read-tool names; under a remapped configuration such a name
 * may not be one the model was offered, so each call is checked against the tools actually offered,
 * and one that was not is refused as a boundary event (audited) instead of being run.
 */
export async function readTools(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  // Reached out of order (a goto while a question or an approval waits): nothing is run or answered.
  const refusedHere = await refuseUnlessAllowed(
    deps,
    await openGate(deps, config, state),
    "read_tools",
    state,
  );
  if (refusedHere) return refusedHere;
  const offered = new Set(deps.tools.readTools.map((t) => t.name));
  const last = state.messages.at(-1);
  const calls = last && isAIMessage(last) ? (last.tool_calls ?? []) : [];
  const refused: ToolMessage[] = [];
  for (const [i, call] of calls.entries()) {
    if (offered.has(call.name)) continue;
    await auditBoundaryRefusal(deps, state, config.configurable?.["thread_id"], call, i);
    refused.push(
      new ToolMessage({
        tool_call_id: call.id ?? `call_${i}`,
        name: call.name,
        status: "error",
        content: `Error: ${call.name} is not available: you can only read with ${[...offered].join(", ")} and propose; writes happen after human approval`,
      }),
    );
  }
  if (refused.length > 0) {
    // Nothing of this turn is run when any of its calls was not offered; the model gets every refusal.
    const answered = calls
      .filter((c) => offered.has(c.name))
      .map(
        (c, i) =>
          new ToolMessage({
            tool_call_id: c.id ?? `ok_${i}`,
            name: c.name,
            status: "error",
            content: "Error: not run, because another call of this turn was refused",
          }),
      );
    return { messages: [...refused, ...answered] };
  }
  const node = new ToolNode(deps.tools.readTools, { handleToolErrors: true });
  const result = (await node.invoke({ messages: state.messages })) as { messages: Update["messages"] };
  return { messages: result.messages ?? [] };
}
