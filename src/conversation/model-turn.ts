/**
 * One call of the model, with the read tools and the proposal tools bound and never a write tool,
 * counted in the journal before it is made.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { agentPrompt } from "../prompts.js";
import type { ReasonCode } from "../envelope/records.js";
import {
  describeModelError,
  isModelProviderError,
  modelFailureLine,
  modelReasonCode,
} from "../models/model-errors.js";
import type { Deps } from "../runtime/deps.js";
import { proposeChangeSetTool, proposeChangeTool, requestInputTool } from "../tools/proposal-tools.js";

/**
 * Calls the model on `messages`: its reply, with the journal's count of model calls. A provider
 * failure (bad key, rate limit, no connection) comes back with its own code and one line saying what
 * to fix; anything else is a bug and propagates.
 */
export async function callModel(
  deps: Deps,
  threadId: string,
  messages: BaseMessage[],
  requestedBy: string,
): Promise<{ reply: BaseMessage; agentSteps: number } | { failed: { code: ReasonCode; reason: string } }> {
  if (!deps.model.bindTools) throw new Error(`model ${deps.modelLabel} cannot call tools`);
  const model = deps.model.bindTools([
    ...deps.tools.readTools,
    proposeChangeTool,
    proposeChangeSetTool,
    requestInputTool,
  ]);
  const prompt = await agentPrompt.invoke({ messages, requestedBy });
  // Counted before the call, not keyed by step: a re-run of this step (after a crash, or a replay or
  // fork of an older checkpoint) calls the model again and counts again. The count is the model calls
  // made, so no replay can call the model past the limit; a crashed turn may leave one counted call.
  const agentSteps = await deps.journal.noteAgentStep(threadId);
  try {
    return { reply: await model.invoke(prompt), agentSteps };
  } catch (e) {
    if (!isModelProviderError(e)) throw e;
    const failure = describeModelError(e);
    return {
      failed: {
        code: modelReasonCode(failure),
        reason: modelFailureLine(failure, { keyVariable: "GROQ_API_KEY" }),
      },
    };
  }
}
