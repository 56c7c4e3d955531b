/**
 * The run told as a chat (Studio's chat view): one AI message per step that happened and one for the
 * outcome, all from the journal-derived evidence `finish` reports. Their ids are fixed per thread and
 * step, so a second pass through `finish` replaces them rather than adding copies.
 */
import { AIMessage } from "@langchain/core/messages";
import { proposedOn } from "../envelope/effect-labels.js";
import { objectNamed, operationSpec } from "../envelope/operations.js";
import type { ThreadMirror } from "./thread-mirror.js";

/** The run's steps and outcome as chat messages, one per step that happened. */
export function chatReport(threadId: string, e: ThreadMirror): AIMessage[] {
  const say = (step: string, text: string) =>
    new AIMessage({ id: `action-envelope:${threadId}:${step}`, content: text, name: "action-envelope" });
  const out: AIMessage[] = [];
  if (e.envelope && e.envelopeHash) {
    out.push(
      say(
        "proposal",
        `Proposed: ${e.envelope.operation} ${proposedOn(e.envelope)} with ${JSON.stringify(e.envelope.params)} (envelope ${e.envelopeHash}, revision ${e.envelope.revision}).`,
      ),
    );
  }
  const d = e.decision;
  if (d) {
    const verb = {
      approve: "Approved",
      edit: "Edited",
      reject: "Rejected",
      cancel: "Cancelled",
      expire: "Expired",
    }[d.type];
    out.push(
      say(
        "decision",
        `${verb} by ${d.approverId} (identity: ${d.verifiedBy}) at ${d.acceptedAt}${d.message ? `: ${d.message}` : ""}.`,
      ),
    );
  }
  if (e.preRead)
    out.push(say("pre-read", `Pre-read before the write: ${e.preRead.verdict}. ${e.preRead.reason}`));
  if (e.invocation) {
    const ack = e.acknowledgement;
    const a = e.invocation.args;
    const spec = operationSpec(e.invocation.tool);
    // A create's arguments name no object: it is a new one, with the id the verification found when known.
    const createdId = e.verification?.created?.type === spec?.creates ? e.verification?.created?.id : null;
    const object =
      spec?.effect === "create"
        ? `${objectNamed(spec.name, 0)}${createdId ? ` (created: ${spec.target} ${createdId})` : ""}`
        : a.dealId !== undefined
          ? `deal ${a.dealId}`
          : a.commentId !== undefined
            ? `comment ${a.commentId} of task ${a.taskId}`
            : `task ${a.taskId}`;
    // A delete sends no fields: it names only what it removes.
    const sent = a.fields !== undefined ? ` with ${JSON.stringify(a.fields)}` : "";
    out.push(
      say(
        "write",
        `Sent ${e.invocation.tool} once for ${object}${sent}; the target answered ${ack ? ack.status : "nothing recorded"}.`,
      ),
    );
  }
  if (e.verification)
    out.push(
      say("verification", `Fresh read after the write: ${e.verification.verdict}. ${e.verification.reason}`),
    );
  out.push(say("outcome", `Outcome: ${e.outcome} (${e.reasonCode})${e.reason ? `: ${e.reason}` : ""}`));
  return out;
}
