/**
 * A decision on a single action, against the journal's row: who may decide it, the decision validated
 * (src/envelope/decision.ts), names typed in an edit looked up by code, the nonce claimed in one journal
 * transaction, and what follows: the write (approve), a new revision (edit), the model again with the
 * feedback, or the end (reject).
 */
import { DecisionSchema, validateDecision, type NameResolution } from "../envelope/index.js";
import {
  acceptedRecord,
  claimedApprover,
  decisionContext,
  entitlementProblem,
  identitiesShown,
  refusalOf,
  type DecisionRefusal,
} from "../envelope/decision-judgement.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionProgress, ActionRow } from "../store/action-machine.js";
import { decisionAcceptedEntry } from "./audit-records.js";
import { answeredBy, decide, judgeOf } from "./decision-claim.js";
import {
  judgedUpdate,
  rejected,
  type DecidingState,
  type DecisionUpdate,
  type Refuse,
} from "./decision-refusal.js";
import { resolveNamesIn } from "./people.js";

/**
 * Judges `candidate`, one decision on `action`. `names` receives the names the edit typed and what they
 * resolved to, so a refusal after the lookup records them too.
 */
export async function singleDecision(
  deps: Deps,
  state: DecidingState,
  action: ActionRow,
  candidate: unknown,
  authUser: string | undefined,
  now: Date,
  raw: unknown,
  refuse: Refuse,
  names: { people: NameResolution[] },
): Promise<DecisionUpdate> {
  const { envelope, envelopeHash } = action;
  const refuseWith = ({ refused: r }: DecisionRefusal) => refuse(r.code, r.reason, r.counted);
  // Who may decide this approval at all. The binding is still checked first (a decision for the wrong
  // envelope is refused as that, whoever sent it), but nothing a non-entitled caller sends counts
  // toward the refusal budget or can end the approval (not even a claim that it expired, which is
  // judged by this server's clock anyway).
  const judge = judgeOf(deps, authUser, now);
  const answered = answeredBy(action);
  const notEntitled = entitlementProblem(
    answered,
    judge,
    claimedApprover(candidate),
    (candidate as { type?: unknown } | null)?.type,
  );
  // A person named in an edit is looked up by code (user.get), only for a well-formed edit of this
  // very envelope from someone entitled to decide it; validateDecision then takes the id it resolved to
  // (exactly one active user) or refuses the edit, naming what was searched and the candidates.
  const parsed = DecisionSchema.safeParse(candidate);
  if (
    notEntitled === null &&
    parsed.success &&
    parsed.data.type === "edit" &&
    parsed.data.envelopeHash === envelopeHash &&
    parsed.data.nonce === envelope.nonce
  ) {
    names.people = await resolveNamesIn(deps.tools, [parsed.data.editedAction.args.fields]);
  }
  const result = validateDecision(
    envelope,
    candidate,
    decisionContext(answered, envelopeHash, judge, names.people),
  );
  if (!result.ok)
    return refuseWith(
      refusalOf(result, parsed.success, notEntitled, () => identitiesShown([candidate], answered, judge)),
    );
  if (notEntitled) return refuse("APPROVER_NOT_ALLOWED", notEntitled, false);

  const d = result.decision;
  const record = acceptedRecord(answered, result, judge, raw);
  const revise = d.type === "reject" && !!d.message && action.revision <= deps.config.limits.maxRevisions;
  const journalDecision: NonNullable<ActionProgress["decision"]> = {
    ...record,
    ...(d.type === "edit"
      ? {
          edit: {
            taskId: result.edit!.proposal.taskId,
            fields: result.edit!.proposal.fields,
            ...(names.people.length ? { names: names.people } : {}),
          },
        }
      : {}),
    ...(d.type === "reject" ? { revise } : {}),
  };
  const decided = await decide(deps, action, journalDecision, [
    decisionAcceptedEntry(envelope, envelopeHash, record, names.people),
  ]);
  if ("update" in decided) return { ...decided.update, pendingDecision: null };
  const base = judgedUpdate(decided.row, record, state);
  switch (d.type) {
    case "approve":
      return base;
    case "reject":
      return rejected(deps, state, base, decided.row, {
        revise,
        feedback: `The reviewer rejected the proposal: ${d.message}.`,
        reason: `rejected by ${record.approverId}${d.message ? `: ${d.message} (revision limit of ${deps.config.limits.maxRevisions} reached)` : " (no message)"}`,
      });
    case "edit":
      return {
        ...base,
        proposal: {
          ...journalDecision.edit!,
          rationale: `edited by ${record.approverId}`,
          source: "human_edit",
        },
      };
    default: {
      const never: never = d;
      throw new Error(`unhandled decision ${JSON.stringify(never)}`);
    }
  }
}
