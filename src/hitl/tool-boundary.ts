/**
 * The boundary around the model's tool calls: which tools it is offered, the audit record of a call to
 * one it was not offered, the reason a run gives for such calls, and the refusal of a recorded reply
 * whose seal fails.
 */
import type { Deps } from "../runtime/deps.js";
import { DecisionNotAcceptedError } from "../errors.js";
import { argumentsSha256, boundaryRefusedEntry, journalGuardEntry } from "./audit-records.js";
import type { ThreadMirror } from "./thread-mirror.js";

/** Tools the model is offered besides the read tools; anything else it calls is refused at the boundary. */
const PROPOSAL_TOOL_NAMES = ["propose_change", "propose_change_set", "request_input"];

/** One tool call refused at the boundary, as the run's reason names it. */
export interface BoundaryRefusal {
  tool: string;
  argumentsSha256: string;
}

/** Every tool the model is offered: the read tools as configured, and the ones that only record a wish. */
export function offeredToolNames(deps: Deps): string[] {
  return [...deps.tools.readTools.map((t) => t.name), ...PROPOSAL_TOOL_NAMES];
}

/** The reason a run gives when the model called tools it was not offered (from the boundary_refused records). */
export function writeAttemptRefused(boundary: BoundaryRefusal[]): string {
  return `the model tried to call ${boundary.map((b) => `${b.tool} (arguments ${b.argumentsSha256})`).join(", ")}, which it was not offered; the write attempt was refused and nothing was sent to Bitrix24`;
}

/**
 * Records one boundary event: the model called `call.name`, which it was not offered. Appended to the
 * audit log (tool name, sha256 of the arguments, time), keyed by the agent step and the call's
 * position so a re-run of the node cannot add it twice. Any node that receives the model's tool calls
 * (propose, or read_tools for a name that is not offered under a remapped configuration) calls it.
 */
export async function auditBoundaryRefusal(
  deps: Deps,
  state: ThreadMirror,
  threadId: unknown,
  call: { name: string; args?: unknown; id?: string | undefined },
  index: number,
  offered: string[] = offeredToolNames(deps),
): Promise<BoundaryRefusal> {
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

/**
 * The model's recorded reply fails its seal (edited in the data directory, or recorded without one):
 * audited as tamper_detected and refused INTEGRITY_CHECK_FAILED, as the journal gate refuses an edited
 * row; none of its calls is acted on.
 */
export async function refuseUnsealedReply(deps: Deps, threadId: string, requestedBy: string): Promise<never> {
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
