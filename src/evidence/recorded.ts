/**
 * What a thread's audit records say about its run: the closing record, the settling decision, refusals and
 * evidence.
 */
import type { ThreadMirror } from "../hitl/thread-mirror.js";
import type { AuditRecord, OutcomeFlags } from "../store/audit.js";
import { outcomeFlags, type FlagInputs } from "../envelope/outcome-flags.js";
import type { Outcome, ReasonCode, Refusal } from "../envelope/records.js";
import type { ActionEvidence } from "../hitl/audit-records.js";

/** A run's closing record (src/hitl/audit-records.ts runEndedEntry): execution_outcome or run_ended. */
export const isClosingRecord = (r: AuditRecord): boolean =>
  r.event === "execution_outcome" || r.event === "run_ended";

/**
 * Whether a record is of the thread's run: every one but request_refused, which the API server's edge
 * appends under whatever thread a refused request's path names, whoever sent it (src/auth/routes.ts),
 * so it says nothing of the run's requester, action or policy.
 */
export const isRunRecord = (r: AuditRecord): boolean => r.event !== "request_refused";

/** The decision that settled the approval, as recorded: the last accepted one, an expiry or a cancel. */
export function settlingDecisionOf(records: readonly AuditRecord[]): AuditRecord | undefined {
  return records
    .filter(
      (r) =>
        (r.event === "decision_accepted" ||
          r.event === "approval_expired" ||
          r.event === "approval_cancelled") &&
        r.approver,
    )
    .at(-1);
}

/** Every refused decision and refused answer, in the order recorded. */
export function refusalsRecorded(records: readonly AuditRecord[]): Refusal[] {
  return records
    .filter((r) => (r.event === "decision_refused" || r.event === "answer_refused") && r.refusal)
    .map((r) => ({
      code: r.refusal!.code,
      reason: r.refusal!.reason,
      at: r.at,
      envelopeHash: r.what.envelopeHash,
      raw: r.received ?? null,
    }));
}

/**
 * The record holding the evidence of how a closed run's action ended: the closing record when it
 * carries it (a single action), else a change set's last action_ended record that does; none before
 * the run closed.
 */
export function evidenceRecordOf(
  closing: AuditRecord | undefined,
  records: readonly AuditRecord[],
): AuditRecord | undefined {
  if (!closing) return undefined;
  const carries = (r: AuditRecord) => {
    const ev = r.received as Partial<ActionEvidence> | undefined;
    return (
      ev !== undefined &&
      ev !== null &&
      (ev.preRead !== undefined || ev.invocation !== undefined || ev.verification !== undefined)
    );
  };
  return carries(closing) ? closing : records.filter((r) => r.event === "action_ended" && carries(r)).at(-1);
}

/**
 * Why the outcome's flags hold: from the closing record's own evidence when it carries it (a single
 * action), else from the evidence of the last action of a change set that ran (its state, which the
 * closing flags were computed from, mirrored that action), kept only when it gives the very flags the
 * closing record holds; from state alone while the thread has no record.
 */
export function explainedOutcome(
  closing: AuditRecord | undefined,
  records: readonly AuditRecord[],
  s: ThreadMirror | undefined,
): ReturnType<typeof outcomeFlags> | null {
  const o = closing?.outcome;
  if (!o) return s?.outcome ? outcomeFlags(s) : null;
  const from = evidenceRecordOf(closing, records);
  if (!from) return null;
  const ev = from.received as Partial<ActionEvidence>;
  const envelope = from.what.envelope as FlagInputs["envelope"] | null | undefined;
  const explained = outcomeFlags({
    preRead: ev.preRead ?? null,
    invocation: ev.invocation ?? null,
    acknowledgement: ev.acknowledgement ?? null,
    verification: ev.verification ?? null,
    outcome: o.outcome as Outcome,
    reasonCode: o.reasonCode as ReasonCode,
    envelope: envelope ?? null,
  });
  const same = (Object.keys(explained.flags) as Array<keyof OutcomeFlags>).every(
    (k) => explained.flags[k] === o.flags[k],
  );
  return from === closing || same ? explained : null;
}
