/**
 * The four claims an investigator may or may not make about a run's side effect, each with the
 * reason it is allowed or not. They are derived from the separate evidence objects, never from the
 * outcome word alone, because the same outcome can rest on very different evidence.
 */
import type {
  AcknowledgementRecord,
  InvocationRecord,
  Outcome,
  PreReadRecord,
  ReasonCode,
  VerificationRecord,
} from "./records.js";
import { deletedLabelOf } from "./delete-subjects.js";
import { objectNamed, operationSpec } from "./operations.js";
import type { TargetType } from "./targets.js";

/** The four claims, as the closing audit record keeps them. */
export interface OutcomeFlags {
  sideEffectAttempted: boolean;
  sideEffectVerified: boolean;
  causalClaimAllowed: boolean;
  duplicateClaimAllowed: boolean;
}

export interface FlagInputs {
  preRead: PreReadRecord | null;
  invocation: InvocationRecord | null;
  acknowledgement: AcknowledgementRecord | null;
  verification: VerificationRecord | null;
  outcome: Outcome | null;
  reasonCode: ReasonCode | null;
  /**
   * The envelope the run acted on (its operation and object), so the reasons name the object by its
   * kind: "the task" for a task, "deal 3" for a deal. Absent or null: the task wording. A delete is
   * said to leave its object gone (named by its params' COMMENT_ID when they are given), not to hold
   * approved values: it approves none.
   */
  envelope?: {
    operation: string;
    object: { type: TargetType; id: number };
    params?: Record<string, unknown>;
  } | null;
}

export interface ExplainedFlags {
  flags: OutcomeFlags;
  /** One sentence per flag saying why it has its value. */
  because: Record<keyof OutcomeFlags, string>;
}

export function outcomeFlags(s: FlagInputs): ExplainedFlags {
  const attempted = s.invocation !== null;
  const verified = s.verification?.verdict === "VERIFIED";
  const ackLost = s.acknowledgement?.status === "MISSING";
  // How the reasons name the object: a task keeps "the task"; another kind is named with its id ("deal 3").
  const kind = s.envelope?.object.type ?? "task";
  const it =
    kind === "task" || !s.envelope ? "the task" : objectNamed(s.envelope.operation, s.envelope.object.id);
  const its = `${it}'s`;
  // A delete approves no values: what its fresh read shows is the object gone.
  const gone = s.envelope ? goneObject(s.envelope) : undefined;

  // A block or result may only be blamed on one cause when the evidence excludes the others.
  let causal = true;
  let causalWhy = "the evidence points to a single cause";
  if (s.preRead?.verdict === "UNKNOWN") {
    causal = false;
    causalWhy = `the pre-read could not tell whether ${it} changed; the block may be a changed ${kind}, an unexpected answer shape or missing data`;
  } else if (ackLost) {
    causal = false;
    causalWhy =
      "the acknowledgement was lost; the observed state may come from our write, a later one, or none";
  } else if (s.verification?.verdict === "INCONCLUSIVE" || s.outcome === "INCONCLUSIVE") {
    causal = false;
    causalWhy = `verification was inconclusive; ${its} state cannot be tied to the write`;
  } else if (s.verification?.verdict === "INVARIANT_VIOLATION") {
    causal = false;
    causalWhy = "fields that were not to change did; our write or a concurrent change could have done it";
  } else if (s.verification?.verdict === "VERIFICATION_FAILED" && s.acknowledgement?.status === "OK") {
    causal = false;
    causalWhy = gone
      ? `the target acknowledged the delete but a fresh read still shows ${gone}; it was not applied, or the object was made again afterwards`
      : `the target acknowledged the write but ${it} does not hold it; it was not applied or was overwritten afterwards`;
  } else if (verified) {
    causalWhy = gone
      ? `the target acknowledged the delete and a fresh read shows ${gone} gone`
      : "the target acknowledged the write and a fresh read shows exactly the approved values";
  } else if (!attempted) {
    causalWhy = `nothing was sent; the run stopped at ${s.reasonCode ?? "an early step"}`;
  }

  return {
    flags: {
      sideEffectAttempted: attempted,
      sideEffectVerified: verified,
      causalClaimAllowed: causal,
      duplicateClaimAllowed: !ackLost,
    },
    because: {
      sideEffectAttempted: attempted
        ? `${s.invocation!.tool} was sent at ${s.invocation!.sentAt} (idempotency key ${s.invocation!.idempotencyKey})`
        : "no write was sent",
      sideEffectVerified: verified
        ? gone
          ? `the post-write read at ${s.verification!.at} shows ${gone} gone`
          : `the post-write read at ${s.verification!.at} shows the approved values`
        : s.verification
          ? `the post-write read says ${s.verification.verdict}`
          : "there was no post-write read",
      causalClaimAllowed: causalWhy,
      duplicateClaimAllowed: ackLost
        ? "the acknowledgement was lost, so whether the target applied the write once, not at all, or later cannot be stated"
        : attempted
          ? "the target answered the one request sent; it was never re-sent"
          : "nothing was sent",
    },
  };
}

/** What a delete removes, for a person ("comment 5 of task 4", "task 9"); undefined for any other operation. */
function goneObject(e: NonNullable<FlagInputs["envelope"]>): string | undefined {
  // Inputs without params (older records) cannot name the comment: it is the task's comment.
  if (operationSpec(e.operation)?.deletes === "task_comment" && e.params?.["COMMENT_ID"] === undefined)
    return `the comment of task ${e.object.id}`;
  return deletedLabelOf({ ...e, params: e.params ?? {} });
}
