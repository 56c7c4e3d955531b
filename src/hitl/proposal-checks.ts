/**
 * The checks a proposal passes before anyone is asked to approve it: policy and scope, a verified
 * requester where the policy needs one, a baseline read by code that shows the write can land, and a
 * change that changes something. A proposal stopped here is audited (proposal_denied) and never shown.
 */
import {
  checkProposal,
  requesterNotVerified,
  requesterVerificationOf,
  type Envelope,
  type OperationName,
} from "../envelope/index.js";
import type { ProposalRecord, ReasonCode } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import type { ThreadRecord } from "../store/action-machine.js";
import { proposalDeniedEntry } from "./audit-records.js";
import { noChangeOf, readBaseline } from "./change-sets.js";
import { proposalScope } from "./scope.js";
import type { ThreadMirror } from "./thread-mirror.js";

/** Appends the proposal_denied record of a proposal stopped before it was shown. */
export async function auditDenied(
  deps: Deps,
  state: ThreadMirror,
  thread: ThreadRecord,
  proposal: ProposalRecord,
  ctx: { threadId: string; revision: number; code: string; reasons: string[] },
): Promise<void> {
  const at = deps.clock().toISOString();
  await deps.audit.append(
    proposalDeniedEntry(
      { ...state, proposal, requestedBy: thread.requestedBy },
      { ...ctx, policy: deps.policy, at },
    ),
  );
}

/**
 * Checks `proposal` for revision `revision` and reads its baseline, or says why the run ends. An
 * undo's object was read and checked already (the state our write left, or what our run created):
 * that very read (`undoObject`) is the baseline. `earlier` holds the envelopes built before on this
 * thread: a delete is built again (an escalation) only from the same delete, unchanged.
 */
export async function checkBeforeShowing(
  deps: Deps,
  state: ThreadMirror,
  thread: ThreadRecord,
  proposal: ProposalRecord,
  ctx: {
    threadId: string;
    revision: number;
    undoObject: Record<string, unknown> | undefined;
    earlier: readonly Envelope[];
  },
): Promise<
  | { ok: true; operation: OperationName; task: Record<string, unknown> }
  | { ok: false; code: ReasonCode; reason: string }
> {
  const { threadId, revision } = ctx;
  const denied = (code: string, reasons: string[]) =>
    auditDenied(deps, state, thread, proposal, { threadId, revision, code, reasons });
  const operation = proposal.operation ?? "update_task";
  const verdict = checkProposal(deps.policy, proposalScope(thread.request, thread.scope), {
    operation,
    taskId: proposal.taskId,
    fields: proposal.fields,
  });
  if (!verdict.allowed) {
    await denied(verdict.code, verdict.reasons);
    return { ok: false, code: "DENIED_BY_POLICY", reason: `${verdict.code}: ${verdict.reasons.join("; ")}` };
  }
  // A change the policy lets only a verified requester ask for ends here, audited, before anything is
  // read or anyone is asked; the verification is the journal's thread record, never state.
  const unverified = requesterNotVerified(
    deps.policy,
    verdict.risk.level,
    thread.requestedBy,
    requesterVerificationOf(thread),
  );
  if (unverified) {
    await denied("REQUESTER_NOT_VERIFIED", [unverified]);
    return { ok: false, code: "REQUESTER_NOT_VERIFIED", reason: unverified };
  }
  const baseline = ctx.undoObject
    ? { ok: true as const, object: ctx.undoObject }
    : await readBaseline(
        deps.tools,
        { operation, taskId: proposal.taskId, fields: proposal.fields },
        ctx.earlier,
      );
  if (!baseline.ok) {
    // A write the envelope-time read already proves will be refused ends here, audited, and no one is asked.
    if (baseline.code === "NOT_PERMITTED" || baseline.code === "TARGET_NOT_FOUND")
      await denied(baseline.code, [baseline.reason]);
    return { ok: false, code: baseline.code, reason: baseline.reason };
  }
  // A change that changes nothing is not put in front of an approver (a comment always adds one).
  const same = noChangeOf({ operation, fields: proposal.fields }, baseline.object);
  if (same) {
    await denied("NO_CHANGE", [same]);
    return { ok: false, code: "NO_CHANGE", reason: same };
  }
  return { ok: true, operation, task: baseline.object };
}
