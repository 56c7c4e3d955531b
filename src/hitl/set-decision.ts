/**
 * A decision on a change set, against the journal's rows of the set and its members: judged in
 * src/envelope/decision-judgement.ts, claimed in one journal transaction for every member.
 */
import { DecisionSchema, type NameResolution } from "../envelope/index.js";
import { judgeSetDecisions, setEntitlementProblem, setShapeProblem } from "../envelope/decision-judgement.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionProgress, ActionRow } from "../store/action-machine.js";
import { decisionAcceptedEntry } from "./audit-records.js";
import { SystemDecisionSchema } from "./contract.js";
import { answeredBy, decide, judgeOf } from "./decision-claim.js";
import {
  judgedUpdate,
  rejected,
  type DecidingState,
  type DecisionUpdate,
  type Refuse,
} from "./decision-refusal.js";
import { resolveNamesIn } from "./people.js";
import { systemDecision } from "./system-decision.js";

/**
 * A decision on a change set: one for the whole set (approve or reject; cancel and expire too), or one
 * per action, each naming its action by id, all from one approver and all bound to the set's hash and
 * nonce. All approved: every action is decided in one journal transaction and the chain runs. All
 * rejected: the set ends (or goes back to the model with the feedback). Otherwise the approved and
 * edited actions become the next revision (build_envelope), which runs at once only when nothing was
 * edited and the policy lets every approved action's class run after a partial approval; else it is
 * shown again.
 */
export async function setDecision(
  deps: Deps,
  state: DecidingState,
  action: ActionRow,
  members: ActionRow[],
  decisions: unknown[],
  authUser: string | undefined,
  raw: unknown,
  refuse: Refuse,
): Promise<DecisionUpdate> {
  const { set, setHash } = action.set!;
  const now = deps.clock();
  // The set as one approval: its hash and nonce, its earliest expiry, every operation it covers.
  const asOne: ActionRow = {
    ...action,
    envelopeHash: setHash,
    revision: set.revision,
    envelope: { ...action.envelope, nonce: set.nonce, expiresAt: set.expiresAt, revision: set.revision },
  };
  const system = decisions.length === 1 ? SystemDecisionSchema.safeParse(decisions[0]) : undefined;
  if (system?.success) return systemDecision(deps, state, asOne, system.data, authUser, raw, refuse, members);

  const judge = judgeOf(deps, authUser, now);
  const answered = answeredBy(action);
  const s = {
    set,
    setHash,
    members: members.map((x) => ({ actionId: x.set!.actionId, envelope: x.envelope })),
  };
  const malformed = setShapeProblem(
    decisions,
    set.actions.map((x) => x.actionId),
  );
  if (malformed) return refuse(malformed.refused.code, malformed.refused.reason, malformed.refused.counted);
  const notEntitled = setEntitlementProblem(answered, s, judge, decisions);
  // Names typed in edits (RESPONSIBLE_ID "Bob Smith"), looked up only for an entitled approver's edits of this very set.
  let people: NameResolution[] = [];
  if (notEntitled === null) {
    const edited = decisions.flatMap((d) => {
      const p = DecisionSchema.safeParse(d);
      return p.success &&
        p.data.type === "edit" &&
        p.data.envelopeHash === setHash &&
        p.data.nonce === set.nonce
        ? [p.data.editedAction.args.fields]
        : [];
    });
    people = await resolveNamesIn(deps.tools, edited);
  }
  const judged = judgeSetDecisions(answered, s, decisions, judge, notEntitled, people, raw);
  if ("refused" in judged) return refuse(judged.refused.code, judged.refused.reason, judged.refused.counted);
  const { type, record, messages, setPlan } = judged;
  const revise =
    type === "reject" && messages.length > 0 && action.revision <= deps.config.limits.maxRevisions;
  const journalDecision: NonNullable<ActionProgress["decision"]> = {
    ...record,
    ...(type === "reject" ? { revise } : {}),
    ...(setPlan ? { setPlan } : {}),
  };
  const decided = await decide(
    deps,
    asOne,
    journalDecision,
    [decisionAcceptedEntry(action.envelope, setHash, record, people)],
    members,
  );
  if ("update" in decided) return { ...decided.update, pendingDecision: null };
  const base = judgedUpdate(decided.row, record, state);
  if (type === "approve" || type === "edit") return base;
  return rejected(deps, state, base, decided.row, {
    revise,
    feedback: `The reviewer rejected the change set: ${messages.join("; ")}.`,
    reason: `change set rejected by ${record.approverId}${messages.length ? `: ${messages.join("; ")}` : " (no message)"}`,
  });
}
