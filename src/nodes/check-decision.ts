import { AIMessage, HumanMessage } from "@langchain/core/messages";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { State, Update } from "../graph/state.js";
import { authenticatedIdentity } from "../auth/identity.js";
import type { Deps } from "../runtime/deps.js";
import { depsOf } from "../runtime/run-deps.js";
import { DecisionSchema, validateDecision, type NameResolution } from "../envelope/index.js";
import {
  acceptedRecord,
  claimedApprover,
  decisionContext,
  entitlementProblem,
  identitiesShown,
  judgeSetDecisions,
  judgeSystemDecision,
  refusalOf,
  setEntitlementProblem,
  setShapeProblem,
  type DecisionRefusal,
} from "../envelope/decision-judgement.js";
import { ResumeSchema, SystemDecisionSchema, type SystemDecision } from "../hitl/contract.js";
import type { Refusal } from "../envelope/records.js";
import { decisionAcceptedEntry, decisionRefusedEntry } from "../hitl/audit-records.js";
import type { ActionProgress, ActionRow } from "../store/action-machine.js";
import { closeAction, noteStateDrift, openGate, refuseUnlessAllowed } from "../hitl/journal-gate.js";
import { registeredFor, viewOf } from "../hitl/thread-view.js";
import { boundedForEvidence, checkBounds, isOutOfBounds } from "../hitl/bounds.js";
import { resolveNamesIn } from "../hitl/people.js";
import { answeredBy, decide, judgeOf } from "../hitl/decision-claim.js";
import { decisionFromClient, howToDecide } from "../hitl/text-decision.js";

/**
 * Deterministic validation of the human's answer against the action the journal registered — its
 * envelope, hash, nonce, scope, escalation group — never against graph state: exact hash, nonce,
 * entitled approver, expiry by this server's clock, single use, signature when required. The nonce is
 * consumed and the action moved to `decided` in one journal transaction, so a replayed or forked
 * checkpoint can never spend the same approval twice.
 *
 * A decision from someone who may not decide this approval is refused and audited, but it never
 * ends, expires or uses up the approval: only refusals of entitled callers whose identity is
 * established (authenticated, a valid signature, or self-declared where the policy accepts that)
 * count toward the budget. A decision that merely names an entitled approver counts for nothing.
 */
export async function checkDecision(state: State, config: LangGraphRunnableConfig): Promise<Update> {
  const deps = depsOf(config);
  const gate = await openGate(deps, config, state);
  const refused = await refuseUnlessAllowed(deps, gate, "check_decision", state);
  if (refused) return { ...refused, pendingDecision: null };
  const action = gate.action!;
  await noteStateDrift(deps, gate, "check_decision", state);
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  const now = deps.clock();
  const authUser = authenticatedIdentity(config.configurable);
  const incoming: unknown = state.pendingDecision;
  // await_approval admitted only a summary of a value past the bounds; anything else is checked here too.
  const bounds = isOutOfBounds(incoming)
    ? { ok: false as const, reason: incoming.outOfBounds }
    : checkBounds(incoming);
  const raw = isOutOfBounds(incoming) ? incoming.evidence : boundedForEvidence(incoming, bounds);

  // Names an edit typed for user fields (RESPONSIBLE_ID "Bob Smith") and what user.get resolved them to.
  let people: NameResolution[] = [];
  const refuse = async (code: string, reason: string, counted: boolean): Promise<Update> => {
    const at = now.toISOString();
    const row = (await deps.journal.noteRefusal(envelopeHash, { code, reason, at }, counted)) ?? action;
    const refusal: Refusal = { code, reason, at, envelopeHash, raw };
    await deps.audit.append(
      decisionRefusedEntry(envelope, envelopeHash, refusal, row.progress.refusalsSeen, people),
    );
    // Every refusal is answered in the conversation too: chat clients show no interrupt field, and a
    // button's refusal would otherwise be a passing toast. It names exactly what would decide.
    const answer = (ended: string | undefined) =>
      new AIMessage(
        `Decision refused (${code}): ${reason}. ${ended ?? `Nothing was approved or written; the approval is still waiting. ${howToDecide(bound.hash, bound.nonce, authUser)}`}`,
      );
    const base: Update = {
      refusals: [refusal],
      pendingDecision: null,
      decision: null,
      ...registeredFor(viewOf({ action: row }), state),
    };
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
  const refuseWith = ({ refused: r }: DecisionRefusal) => refuse(r.code, r.reason, r.counted);
  // What a decision for this pause names: a change set's hash and nonce, or the envelope's.
  const bound =
    action.set && gate.members
      ? { hash: action.set.setHash, nonce: action.set.set.nonce }
      : { hash: envelopeHash, nonce: envelope.nonce };

  if (!bounds.ok) return refuse("MALFORMED", `the resume value was not read: ${bounds.reason}`, false);
  // A chat message or an Agent Inbox response is read as the decision its text holds (src/hitl/text-decision.ts).
  const fromClient = decisionFromClient(incoming, authUser);
  if ("refused" in fromClient) return refuse(fromClient.refused.code, fromClient.refused.reason, false);
  const outer = ResumeSchema.safeParse(fromClient.value);
  if (!outer.success) {
    return refuse(
      "MALFORMED",
      `expected {"decisions":[<one decision>]}; got ${JSON.stringify(fromClient.value)?.slice(0, 500)}: ${outer.error.issues[0]?.message}`,
      false,
    );
  }
  if (action.set && gate.members)
    return setDecision(deps, state, action, gate.members, outer.data.decisions, authUser, raw, refuse);
  if (outer.data.decisions.length !== 1)
    return refuse(
      "MALFORMED",
      `exactly one decision per approval request; got ${outer.data.decisions.length}`,
      false,
    );
  const candidate = outer.data.decisions[0];
  const system = SystemDecisionSchema.safeParse(candidate);
  if (system.success) return systemDecision(deps, state, action, system.data, authUser, raw, refuse);

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
    people = await resolveNamesIn(deps.tools, [parsed.data.editedAction.args.fields]);
  }
  const result = validateDecision(
    envelope,
    candidate,
    decisionContext(answered, envelopeHash, judge, people),
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
            ...(people.length ? { names: people } : {}),
          },
        }
      : {}),
    ...(d.type === "reject" ? { revise } : {}),
  };
  const decided = await decide(deps, action, journalDecision, [
    decisionAcceptedEntry(envelope, envelopeHash, record, people),
  ]);
  if ("update" in decided) return { ...decided.update, pendingDecision: null };
  const base: Update = {
    decision: record,
    pendingDecision: null,
    ...registeredFor(viewOf({ action: decided.row }), state),
  };
  switch (d.type) {
    case "approve":
      return base;
    case "reject":
      if (revise) {
        // Feedback goes back to the model; whatever it proposes next is a new envelope with its own approval.
        return {
          ...base,
          proposal: null,
          rejections: state.rejections + 1,
          messages: [
            new HumanMessage(
              `The reviewer rejected the proposal: ${d.message}. Propose a revised change or stop.`,
            ),
          ],
        };
      }
      return {
        ...base,
        ...(await closeAction(
          deps,
          decided.row,
          "NOT_EXECUTED",
          "REJECTED_BY_HUMAN",
          `rejected by ${record.approverId}${d.message ? `: ${d.message} (revision limit of ${deps.config.limits.maxRevisions} reached)` : " (no message)"}`,
        )),
      };
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

type Refuse = (code: string, reason: string, counted: boolean) => Promise<Update>;

/**
 * A decision on a change set: one for the whole set (approve or reject; cancel and expire too), or one
 * per action, each naming its action by id, all from one approver and all bound to the set's hash and
 * nonce. All approved: every action is decided in one journal transaction and the chain runs. All
 * rejected: the set ends (or goes back to the model with the feedback). Otherwise the approved and
 * edited actions become the next revision (build_envelope), which runs at once only when nothing was
 * edited and the policy lets every approved action's class run after a partial approval; else it is
 * shown again.
 */
async function setDecision(
  deps: Deps,
  state: State,
  action: ActionRow,
  members: ActionRow[],
  decisions: unknown[],
  authUser: string | undefined,
  raw: unknown,
  refuse: Refuse,
): Promise<Update> {
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
  const base: Update = {
    decision: record,
    pendingDecision: null,
    ...registeredFor(viewOf({ action: decided.row }), state),
  };
  if (type === "approve" || type === "edit") return base;
  if (revise) {
    return {
      ...base,
      proposal: null,
      rejections: state.rejections + 1,
      messages: [
        new HumanMessage(
          `The reviewer rejected the change set: ${messages.join("; ")}. Propose a revised change or stop.`,
        ),
      ],
    };
  }
  return {
    ...base,
    ...(await closeAction(
      deps,
      decided.row,
      "NOT_EXECUTED",
      "REJECTED_BY_HUMAN",
      `change set rejected by ${record.approverId}${messages.length ? `: ${messages.join("; ")}` : " (no message)"}`,
    )),
  };
}

/** Cancel and expiry (judged in src/envelope/decision-judgement.ts); both consume the nonce. */
async function systemDecision(
  deps: Deps,
  state: State,
  action: ActionRow,
  d: SystemDecision,
  authUser: string | undefined,
  raw: unknown,
  refuse: Refuse,
  members?: ActionRow[],
): Promise<Update> {
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
  const base: Update = {
    decision: record,
    pendingDecision: null,
    ...registeredFor(viewOf({ action: decided.row }), state),
  };
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
