import { ToolMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import type { Deps } from "../runtime/deps.js";
import { depsOf } from "../runtime/run-deps.js";
import {
  ChangeSetArgsSchema,
  ProposalArgsSchema,
  RequestInputArgsSchema,
  objectIdOf,
} from "../tools/proposal-tools.js";
import { inputSpecProblem } from "../hitl/structured-input.js";
import { argumentsSha256, boundaryRefusedEntry, journalGuardEntry } from "../hitl/audit-records.js";
import { DecisionNotAcceptedError } from "../errors.js";
import { endRunInJournal, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";

/**
 * The model's recorded reply fails its seal (edited in the data directory, or recorded without one):
 * audited as tamper_detected and refused INTEGRITY_CHECK_FAILED, as the journal gate refuses an edited
 * row; none of its calls is acted on.
 */
async function refuseUnsealedReply(deps: Deps, threadId: string, requestedBy: string): Promise<never> {
  const reason = `the model's recorded reply on thread ${threadId} (its tool calls) does not verify against its seal: it was changed outside this program, or recorded without a seal. Nothing was proposed.`;
  const at = deps.clock().toISOString();
  await deps.audit.append(
    journalGuardEntry("tamper_detected", {
      threadId,
      action: undefined,
      requestedBy,
      discriminator: `model-reply:${at}`,
      at,
      code: "INTEGRITY_CHECK_FAILED",
      reason,
    }),
  );
  throw new DecisionNotAcceptedError(threadId, "INTEGRITY_CHECK_FAILED", reason);
}

/** Tools the model is offered besides the read tools; anything else it calls is refused at the boundary. */
const PROPOSAL_TOOL_NAMES = ["propose_change", "propose_change_set", "request_input"];

/**
 * Interprets the model's non-read tool calls, as the journal recorded them from the model's last reply. Only a single, well-formed propose_change passes; a
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
  const turns = await deps.journal.getThreadTurns(gate.threadId);
  if (turns && !turns.lastReplySealValid)
    await refuseUnsealedReply(deps, gate.threadId, gate.thread?.requestedBy ?? "");
  const calls = turns?.lastToolCalls ?? [];
  const refusals: string[] = [];
  let accepted: Update["proposal"] = null;
  const replies: ToolMessage[] = [];

  const only = calls.length === 1 ? calls[0] : undefined;
  if (only?.name === "request_input") {
    const parsed = RequestInputArgsSchema.safeParse(only.args);
    const problem = parsed.success
      ? inputSpecProblem(parsed.data.fields)
      : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    if (parsed.success && !problem) {
      // No tool reply yet: the human's answer becomes the reply once it passes validation.
      const inputRequest = {
        toolCallId: only.id ?? "request_input",
        question: parsed.data.question,
        fields: parsed.data.fields,
        askedAt: deps.clock().toISOString(),
      };
      // Indexed in the journal so the web inbox lists waiting questions without loading checkpoints.
      await deps.journal.recordQuestion({ threadId: gate.threadId, ...inputRequest });
      return { inputRequest };
    }
    refusals.push(`invalid request_input: ${problem}`);
    replies.push(
      new ToolMessage({
        tool_call_id: only.id ?? "request_input",
        name: "request_input",
        status: "error",
        content: `Error: invalid request_input: ${problem}`,
      }),
    );
  }

  const offered = offeredToolNames(deps);
  const boundary: Array<{ tool: string; argumentsSha256: string }> = [];
  const threadId = gate.threadId;
  for (const [index, call] of (only?.name === "request_input" ? [] : calls).entries()) {
    const id = call.id ?? `call_${replies.length}`;
    if (call.name !== "propose_change" && call.name !== "propose_change_set") {
      const isOffered = offered.includes(call.name);
      const why = isOffered
        ? `${call.name} must not be combined with propose_change in one turn; read first, then propose`
        : `${call.name} is not available: you can only read and propose; writes happen after human approval`;
      if (!isOffered) boundary.push(await auditBoundaryRefusal(deps, state, threadId, call, index, offered));
      refusals.push(why);
      replies.push(
        new ToolMessage({ tool_call_id: id, name: call.name, status: "error", content: `Error: ${why}` }),
      );
      continue;
    }
    if (calls.length > 1) {
      const why = "propose exactly one change per turn";
      refusals.push(why);
      replies.push(
        new ToolMessage({ tool_call_id: id, name: call.name, status: "error", content: `Error: ${why}` }),
      );
      continue;
    }
    if (call.name === "propose_change_set") {
      const set = ChangeSetArgsSchema.safeParse(call.args);
      if (!set.success) {
        const why = set.error.issues
          .map((i) => `${i.path.join(".") || "change set"}: ${i.message}`)
          .join("; ");
        refusals.push(why);
        replies.push(
          new ToolMessage({
            tool_call_id: id,
            name: call.name,
            status: "error",
            content: `Error: invalid change set: ${why}`,
          }),
        );
        continue;
      }
      const actions = set.data.actions.map((a) => ({
        operation: a.operation,
        taskId: objectIdOf(a),
        fields: a.fields,
      }));
      const first = actions[0]!;
      accepted = {
        operation: first.operation,
        taskId: first.taskId,
        fields: first.fields,
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
      const why = parsed.error.issues
        .map((i) => `${i.path.join(".") || "proposal"}: ${i.message}`)
        .join("; ");
      refusals.push(why);
      replies.push(
        new ToolMessage({
          tool_call_id: id,
          name: call.name,
          status: "error",
          content: `Error: invalid proposal: ${why}`,
        }),
      );
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

/** The reason a run gives when the model called tools it was not offered (from the boundary_refused records). */
export function writeAttemptRefused(boundary: Array<{ tool: string; argumentsSha256: string }>): string {
  return `the model tried to call ${boundary.map((b) => `${b.tool} (arguments ${b.argumentsSha256})`).join(", ")}, which it was not offered; the write attempt was refused and nothing was sent to Bitrix24`;
}

/** Every tool the model is offered: the read tools as configured, and the two that only record a wish. */
export function offeredToolNames(deps: Deps): string[] {
  return [...deps.tools.readTools.map((t) => t.name), ...PROPOSAL_TOOL_NAMES];
}

/**
 * Records one boundary event: the model called `call.name`, which it was not offered. Appended to the
 * audit log (tool name, sha256 of the arguments, time), keyed by the agent step and the call's
 * position so a re-run of the node cannot add it twice. Any node that receives the model's tool calls
 * (this one, or read_tools for a name that is not offered under a remapped configuration) calls it.
 */
export async function auditBoundaryRefusal(
  deps: Deps,
  state: State,
  threadId: unknown,
  call: { name: string; args?: unknown; id?: string | undefined },
  index: number,
  offered: string[] = offeredToolNames(deps),
): Promise<{ tool: string; argumentsSha256: string }> {
  if (typeof threadId === "string" && threadId !== "") {
    const thread = await deps.journal.getThread(threadId);
    // The model turn that made the call, as the journal counted it (state's mirror can be rewritten).
    const step = (await deps.journal.getThreadTurns(threadId))?.agentSteps ?? 0;
    await deps.audit.append(
      boundaryRefusedEntry(state, {
        threadId,
        ...(thread?.macValid ? { requestedBy: thread.requestedBy } : {}),
        policy: deps.policy,
        at: deps.clock().toISOString(),
        discriminator: `step${step}:${index}:${call.id ?? ""}`,
        tool: call.name,
        args: call.args,
        offered,
        reason: `the model called ${call.name}, a tool it was not offered (offered: ${offered.join(", ")}); refused without any call to Bitrix24`,
      }),
    );
  }
  return { tool: call.name, argumentsSha256: argumentsSha256(call.args) };
}
