/**
 * What check_decision writes after judging a decision, and how it refuses one: the refusal noted in the
 * journal (counted only for an entitled caller whose identity is established), audited, answered in the
 * conversation, and the approval closed when the refusal expired it or used up its refusal budget.
 */
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { NameResolution } from "../envelope/index.js";
import type { DecisionRecord, ProposalRecord, Refusal } from "../envelope/records.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow } from "../store/action-machine.js";
import { decisionRefusedEntry } from "./audit-records.js";
import { closeAction } from "./journal-gate.js";
import { howToDecide } from "./text-decision.js";
import type { MirrorUpdate, ThreadMirror } from "./thread-mirror.js";
import { registeredFor, viewOf, type RegisteredView } from "./thread-view.js";

/** The state a decision is judged beside: the mirror, and the rejections sent back to the model so far. */
export type DecidingState = ThreadMirror & { rejections: number };

/** What check_decision writes into state: the decision or refusal, the registered mirror, any ending. */
export type DecisionUpdate = MirrorUpdate &
  Partial<RegisteredView> & {
    refusals?: Refusal[];
    pendingDecision?: null;
    decision?: DecisionRecord | null;
    messages?: BaseMessage[];
    proposal?: ProposalRecord | null;
    rejections?: number;
    escalatedTo?: string | null;
  };

/** Refuses the decision being checked with a code and reason; `counted` only for an entitled, established caller. */
export type Refuse = (code: string, reason: string, counted: boolean) => Promise<DecisionUpdate>;

/** What judging a decision writes into state: the accepted record (null for a refusal), and the registered mirror where state's differs. */
export function judgedUpdate(
  row: ActionRow,
  record: DecisionRecord | null,
  state: ThreadMirror,
): DecisionUpdate {
  return { decision: record, pendingDecision: null, ...registeredFor(viewOf({ action: row }), state) };
}

/**
 * An accepted rejection: with feedback and a revision left (`revise`), the feedback goes back to the
 * model, and whatever it proposes next is a new envelope with its own approval; else the action is
 * closed REJECTED_BY_HUMAN with `reason`.
 */
export async function rejected(
  deps: Deps,
  state: DecidingState,
  base: DecisionUpdate,
  row: ActionRow,
  r: { revise: boolean; feedback: string; reason: string },
): Promise<DecisionUpdate> {
  if (r.revise)
    return {
      ...base,
      proposal: null,
      rejections: state.rejections + 1,
      messages: [new HumanMessage(`${r.feedback} Propose a revised change or stop.`)],
    };
  return { ...base, ...(await closeAction(deps, row, "NOT_EXECUTED", "REJECTED_BY_HUMAN", r.reason)) };
}

/**
 * The refusal of a decision on `action`. `names` holds the names an edit typed for user fields
 * (RESPONSIBLE_ID "Bob Smith") and what user.get resolved them to, once they are looked up.
 */
export function refuserFor(
  deps: Deps,
  ctx: {
    action: ActionRow;
    state: ThreadMirror;
    raw: unknown;
    now: Date;
    authUser: string | undefined;
    /** What a decision for this pause names (approvalBinding): a change set's hash and nonce, or the envelope's. */
    bound: { envelopeHash: string; nonce: string };
    names: { people: NameResolution[] };
  },
): Refuse {
  const { action, state, raw, now, authUser, bound } = ctx;
  const { envelope, envelopeHash } = action;
  return async (code, reason, counted) => {
    const at = now.toISOString();
    const refusal: Refusal = { code, reason, at, envelopeHash, raw };
    const recordOf = (r: ActionRow) =>
      decisionRefusedEntry(envelope, envelopeHash, refusal, r.progress.refusalsSeen, ctx.names.people);
    // The count and its decision_refused record commit together; with no row to count in, only the record.
    const noted = await deps.journal.noteRefusal(envelopeHash, { code, reason, at }, counted, (r) => [
      recordOf(r),
    ]);
    if (!noted) await deps.audit.append(recordOf(action));
    const row = noted ?? action;
    // Every refusal is answered in the conversation too: chat clients show no interrupt field, and a
    // button's refusal would otherwise be a passing toast. It names exactly what would decide.
    const answer = (ended: string | undefined) =>
      new AIMessage(
        `Decision refused (${code}): ${reason}. ${ended ?? `Nothing was approved or written; the approval is still waiting. ${howToDecide(bound.envelopeHash, bound.nonce, authUser)}`}`,
      );
    const base: DecisionUpdate = { refusals: [refusal], ...judgedUpdate(row, null, state) };
    // Only an entitled caller can close the approval by a refused decision; anyone else is ignored.
    if (counted && code === "EXPIRED")
      return {
        ...base,
        messages: [answer("The approval has expired and the run ended; nothing was written.")],
        ...(await closeAction(deps, row, "NOT_EXECUTED", "APPROVAL_EXPIRED", reason)),
      };
    if (counted && row.progress.refusalsCounted >= deps.config.limits.maxRefusedDecisions) {
      return {
        ...base,
        messages: [
          answer(
            `Refused decisions for this approval reached the limit (${row.progress.refusalsCounted}): the run ended and nothing was written.`,
          ),
        ],
        ...(await closeAction(
          deps,
          row,
          "NOT_EXECUTED",
          "TOO_MANY_REFUSED_DECISIONS",
          `${row.progress.refusalsCounted} decisions refused for this envelope; last: ${code}: ${reason}`,
        )),
      };
    }
    return { ...base, messages: [answer(undefined)] };
  };
}
