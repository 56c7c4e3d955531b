import { ToolNode } from "@langchain/langgraph/prebuilt";
import type { State, Update } from "../graph/state.js";
import { getDeps } from "../runtime/deps.js";

/** Runs the model's read tool calls. It is built from the read allowlist only; it cannot write. */
export async function readTools(state: State): Promise<Update> {
  const deps = await getDeps();
  const node = new ToolNode(deps.tools.readTools, { handleToolErrors: true });
  const result = (await node.invoke({ messages: state.messages })) as { messages: Update["messages"] };
  return { messages: result.messages ?? [] };
}
