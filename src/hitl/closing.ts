/**
 * How an action or a thread ends when `finish` closes it: a change set's actions each with their own
 * outcome (the chain rule), an action that reached the end of its run unclosed, and a run that ended
 * with no proposal. Every ending is derived from journal rows and audit records, never from state.
 */
import { chainOutcome, type ActionOutcome } from "../envelope/index.js";
import { leftUnchecked } from "../envelope/effect-labels.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow, ClosedRecord } from "../store/action-machine.js";
import { sealFails, type SealCheck } from "../envelope/seal-check.js";
import { actionEndedEntry } from "./audit-records.js";
import { rowAfter } from "./journal-gate.js";
import { actionOutcomeOf } from "./thread-view.js";
import { writeAttemptRefused } from "./tool-boundary.js";

/**
 * Closes every action of a change set that is still open, in set order: a verified one with its
 * verdict; an approved one after the action where the chain stopped as NOT_EXECUTED (CHAIN_STOPPED,
 * naming that action); any other with its own ending (rejected, cancelled, expired). The set's
 * outcome is derived from the actions' (change-set.ts chainOutcome).
 */
export async function closeSet(
  deps: Deps,
  members: ActionRow[],
  at: string,
): Promise<{ outcomes: ActionOutcome[]; closing: ClosedRecord }> {
  const outcomes: ActionOutcome[] = [];
  let stop: ActionOutcome | undefined;
  for (const m of members) {
    let row = m;
    const entry = await deps.journal.findExecution(row.envelopeHash);
    // Each action's own ending, with its evidence from the journal, in the hash-chained log (keyed:
    // once), appended by the close itself.
    const ended = (r: ActionRow) => [actionEndedEntry(r, entry)];
    let recorded = false;
    if (!row.progress.closed && row.phase !== "superseded") {
      const approvedNotRun =
        stop &&
        row.progress.decision?.type === "approve" &&
        (row.phase === "decided" || row.phase === "registered");
      const c = approvedNotRun
        ? notExecuted(
            "CHAIN_STOPPED",
            `not run: ${stop!.actionId} ended ${stop!.outcome} (${stop!.reasonCode}), and a change set stops at the first action that is not VERIFIED`,
            at,
          )
        : closingOf(row, at);
      const moved = await deps.journal.moveAction(row.envelopeHash, "closed", { closed: c }, ended);
      recorded = moved.ok;
      row = await rowAfter(deps, row, moved);
    }
    const closedRow = row.progress.closed
      ? row
      : { ...row, progress: { ...row.progress, closed: closingOf(row, at) } };
    if (!recorded) await deps.audit.append(actionEndedEntry(closedRow, entry));
    const o = actionOutcomeOf(closedRow, entry)!;
    outcomes.push(o);
    if (!stop && o.outcome !== "VERIFIED") stop = o;
  }
  const derived = chainOutcome(outcomes);
  return {
    outcomes,
    closing: {
      outcome: derived.outcome as ClosedRecord["outcome"],
      reasonCode: derived.reasonCode as ClosedRecord["reasonCode"],
      reason: derived.reason,
      at,
    },
  };
}

/**
 * Why the journal's pre-read cannot be compared with (its seal does not hold: changed outside this
 * program since the move to pre_read, or sealed by a version that sealed only its verdict); null when
 * it can, or when there is none.
 */
export function unusablePreRead(action: ActionRow): string | null {
  if (!action.progress.preRead) return null;
  const failed = sealFailure(
    "pre-read of this action",
    action.preReadSeal,
    "changed outside this program since it was recorded, or recorded by a version that sealed its verdict alone",
  );
  return failed && `${failed}, so what the object looked like before the write cannot be told`;
}

/**
 * What is wrong with a recorded part whose seal does not hold (`check` invalid or unsealed), naming
 * `part` and why it may be so; null when the seal holds or was not checked.
 */
export function sealFailure(
  part: string,
  check: SealCheck,
  why = "changed outside this program since it was recorded",
): string | null {
  if (!sealFails(check)) return null;
  return `the journal's ${part} ${check === "unsealed" ? "carries no seal" : "does not match its seal under the journal key"} (${why})`;
}

/** The outcome of an action that reached the end of its run without being closed on the way. */
export function closingOf(a: ActionRow, at: string): ClosedRecord {
  const v = a.progress.verification;
  const d = a.progress.decision;
  if (a.progress.closed) return a.progress.closed;
  // After the write went out: a pre-read the verification compares with, edited since it was recorded.
  const preRead = v || a.phase === "intent" || a.phase === "acknowledged" ? unusablePreRead(a) : null;
  if (preRead)
    return {
      outcome: "INCONCLUSIVE",
      reasonCode: "OUTCOME_TAMPERED",
      reason: `${preRead}; no outcome is taken from the verification`,
      at,
    };
  // A verification the close would take its outcome from, edited since it was recorded (or unsealed).
  const verification = v ? sealFailure("verification of this action", a.verificationSeal) : null;
  if (verification) {
    return {
      outcome: "INCONCLUSIVE",
      reasonCode: "OUTCOME_TAMPERED",
      reason: `${verification}; what it says (${String(v!.verdict)}) is not taken as the outcome`,
      at,
    };
  }
  if (v) {
    const ack = a.progress.acknowledgement;
    if (
      ack?.status === "ERROR" &&
      ack.error?.outcomeUnknown !== true &&
      v.verdict === "VERIFICATION_FAILED"
    ) {
      const e = ack.error;
      // A connection that never opened did not reach the target; anything else is its answer.
      const what =
        e?.kind === "transport_timeout"
          ? `the write never reached the target (${e.description})`
          : `the target refused the write (${e?.code ?? e?.kind}: ${e?.description})`;
      return {
        outcome: "REJECTED_BY_TARGET",
        reasonCode: "REJECTED_BY_TARGET",
        reason: `${what}; ${v.reason}`,
        at,
      };
    }
    return { outcome: v.verdict, reasonCode: v.verdict, reason: v.reason, at };
  }
  if (a.phase === "intent" || a.phase === "acknowledged") {
    return {
      outcome: "INCONCLUSIVE",
      reasonCode: "INCONCLUSIVE",
      reason: `the write was sent but no verification was recorded; ${leftUnchecked(a.envelope)} was not checked`,
      at,
    };
  }
  switch (d?.type) {
    case "reject":
      return notExecuted(
        "REJECTED_BY_HUMAN",
        `rejected by ${d.approverId}: ${d.message ?? ""}; the model proposed no revision`,
        at,
      );
    case "cancel":
      return notExecuted("CANCELLED", `cancelled by ${d.approverId}: ${d.message ?? ""}`, at);
    case "expire":
      return notExecuted("APPROVAL_EXPIRED", `no decision before ${a.envelope.expiresAt}`, at);
    case "approve":
    case "edit":
    case undefined:
      return notExecuted("NO_PROPOSAL", "the run ended before this action was executed", at);
    default: {
      const never: never = d!.type;
      throw new Error(`unknown decision ${String(never)}`);
    }
  }
}

/**
 * A run that reached its end with no action and no ending recorded in the journal: the model stopped
 * without a proposal. If it had tried tools it was not offered (boundary_refused in the audit log),
 * that is the reason; otherwise the model's last reply as the journal recorded it, labelled as such
 * (or no quote when the journal has none). Nothing here comes from a reason code or a message in
 * state, which any API client could have written.
 */
export async function noProposalClosing(deps: Deps, threadId: string, at: string): Promise<ClosedRecord> {
  const boundary = (await deps.audit.records({ threadId, events: ["boundary_refused"] })).map(
    (r) => r.received as { tool: string; argumentsSha256: string },
  );
  if (boundary.length > 0) return notExecuted("WRITE_ATTEMPT_REFUSED", writeAttemptRefused(boundary), at);
  // The model's last reply as the agent recorded it in the journal, never state's last message.
  const said = (await deps.journal.getThreadTurns(threadId))?.lastReply;
  return notExecuted(
    "NO_PROPOSAL",
    `the model ended without proposing a change${said == null ? "" : `: ${said}`}`,
    at,
  );
}

function notExecuted(reasonCode: ClosedRecord["reasonCode"], reason: string, at: string): ClosedRecord {
  return { outcome: "NOT_EXECUTED", reasonCode, reason, at };
}
