/**
 * Cancel and expiry of an approval, judged in src/envelope/decision-judgement.ts: either consumes the
 * nonce; a cancel closes the action, an expiry escalates (a fresh envelope for the escalation group) or
 * closes it.
 */
import { judgeSystemDecision } from "../envelope/decision-judgement.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow } from "../store/action-machine.js";
import { decisionAcceptedEntry } from "./audit-records.js";
import type { SystemDecision } from "./contract.js";
import { answeredBy, decide, judgeOf } from "./decision-claim.js";
import { judgedUpdate, type DecidingState, type DecisionUpdate, type Refuse } from "./decision-refusal.js";
import { closeAction } from "./journal-gate.js";

/** Cancel and expiry (judged in src/envelope/decision-judgement.ts); both consume the nonce. */
export async function systemDecision(
  deps: Deps,
  state: DecidingState,
  action: ActionRow,
  d: SystemDecision,
  authUser: string | undefined,
  raw: unknown,
  refuse: Refuse,
  members?: ActionRow[],
): Promise<DecisionUpdate> {
  const { envelope, envelopeHash } = action;
  // Every operation the approval covers: for a change set, each of its actions'.
  const operations = members ? members.map((m) => m.envelope.operation) : [envelope.operation];
  const judged = judgeSystemDecision(answeredBy(action), d, judgeOf(deps, authUser), operations, raw);
  if ("refused" in judged) return refuse(judged.refused.code, judged.refused.reason, judged.refused.counted);
  const { record, escalateTo, notEscalated } = judged;
  const decided = await decide(
    deps,
    action,
    { ...record, ...(escalateTo ? { escalateTo } : {}) },
    [decisionAcceptedEntry(envelope, envelopeHash, record)],
    members,
  );
  if ("update" in decided) return { ...decided.update, pendingDecision: null };
  const base = judgedUpdate(decided.row, record, state);
  if (d.type === "cancel")
    return {
      ...base,
      ...(await closeAction(
        deps,
        decided.row,
        "NOT_EXECUTED",
        "CANCELLED",
        `cancelled by ${d.by.id}: ${d.reason}`,
      )),
    };
  if (escalateTo) return { ...base, escalatedTo: escalateTo };
  const after = action.escalatedTo ? ` after escalation to ${action.escalatedTo}` : "";
  const reason = `no decision before ${envelope.expiresAt}; closed by ${d.by.id}${after}${notEscalated}`;
  return {
    ...base,
    ...(await closeAction(deps, decided.row, "NOT_EXECUTED", "APPROVAL_EXPIRED", reason)),
    rejections: state.rejections,
  };
}
