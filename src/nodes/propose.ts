import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { depsOf } from "../runtime/run-deps.js";
import { endRunInJournal, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { refuseUnsealedReply, writeAttemptRefused } from "../hitl/tool-boundary.js";
import { readProposalCalls } from "../conversation/proposal-calls.js";

/**
 * Interprets the model's non-read tool calls, as the journal recorded them from the model's last reply
 * (src/conversation/proposal-calls.ts). Only a single, well-formed propose_change passes; a
 * write-shaped call (update_task or anything unknown) is answered with an error and never reaches
 * Bitrix24, because nothing here holds a write handle. A call to a tool the model was not offered is a
 * boundary event: it is recorded in the audit log (tool name, sha256 of its arguments, time), and a run
 * that then ends without a proposal ends WRITE_ATTEMPT_REFUSED rather than with the model's own words.
 */
export async function propose(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  // Only where the journal lets the model propose (no action yet, or a rejection sent back for
  // revision): a tool call written into state while an approval waits, or after a write was sent,
  // must not record a question or end the run.
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "propose", state);
  if (refused) return refused;
  // The model's calls as the agent node recorded them in the journal when the model answered, never
  // state's messages: a rewritten or forked state cannot put a proposal in the model's mouth.
  const threadId = gate.threadId;
  const turns = await deps.journal.getThreadTurns(threadId);
  if (turns && !turns.lastReplySealValid)
    await refuseUnsealedReply(deps, threadId, gate.thread?.requestedBy ?? "");
  const read = await readProposalCalls(deps, state, threadId, turns?.lastToolCalls ?? []);
  if ("question" in read) return { inputRequest: read.question };
  const { accepted, replies, refusals, boundary } = read;
  if (accepted) return { messages: replies, proposal: accepted };
  // Counted in the journal's thread row (at most once per model turn), never taken from state.
  const invalid = await deps.journal.noteInvalidProposal(threadId);
  const refusedWrite = boundary.length ? writeAttemptRefused(boundary) : undefined;
  if (invalid > deps.config.limits.maxInvalidProposals) {
    return {
      messages: replies,
      invalidProposals: invalid,
      ...(await endRunInJournal(
        deps,
        gate,
        state,
        "INVALID_PROPOSAL",
        `the model made ${invalid} invalid proposals${refusedWrite ? `; ${refusedWrite}` : ""}; last: ${refusals.join("; ")}`,
      )),
    };
  }
  // Not an ending: the model is told and may still propose. If it ends without a proposal, finish
  // reads the boundary_refused records from the audit log and says why.
  return { messages: replies, invalidProposals: invalid };
}
