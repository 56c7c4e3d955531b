/**
 * What waits for one signed-in person, read from the journal (the authority), so threads started from
 * the CLI, the LangGraph API or Studio all appear: every pending approval whose registered action is
 * intact and still waiting, that this person may approve (policy approvers, narrowed to the
 * escalation group once escalated) or cancel (their own request). Soonest expiry first.
 */
import type { App } from "../app/open-app.js";
import { allowedApprovers, hasRole, levelRank } from "../envelope/policy.js";
import { requesterVerificationOf, type RequesterVerification } from "../envelope/envelope.js";
import { changeLines, objectTitle, type ChangeLine } from "./summary.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import type { QuestionEntry } from "../store/journal.js";
import { membersOf } from "../hitl/journal-gate.js";
import { sha256Hex } from "../auth/tokens.js";

/** One action of a change set as the list shows it. */
export interface InboxSetAction {
  actionId: string;
  operation: string;
  /** What it acts on, with its title as read: "task 4 «Quarterly plan»". */
  title: string;
  changes: ChangeLine[];
}

export interface InboxItem extends Entitlement {
  threadId: string;
  /** What a decision names: the envelope's hash, or for a change set the set's hash. */
  envelopeHash: string;
  revision: number;
  requestedBy: string;
  requesterVerifiedBy: RequesterVerification;
  createdAt: string;
  expiresAt: string;
  risk: string;
  operation: string;
  escalatedTo: string | null;
  lastRefusal: { code: string; reason: string } | null;
  /** Set for a change set: its actions in execution order (operation above is the first's). */
  actions: InboxSetAction[] | null;
  /** What the row names: the object with its title as read. */
  title: string;
  /** Each change as before → after, shortened (for a change set: the first action's; each action has its own). */
  changes: ChangeLine[];
  /** The run's checkpoints are kept by another server (the LangGraph API): it is decided there, not here. */
  elsewhere: boolean;
}

/** Why a user who may decide an approval may not approve it: its escalation group, or separation of duties (they requested or edited it). */
export type NotApprovable = "escalated" | "requested" | "edited";

export interface Entitlement {
  /** May approve, reject or edit. */
  mayDecide: boolean;
  /** May approve: narrowed to the escalation group's members once escalated. */
  mayApprove: boolean;
  /** May cancel: an approver or the requester. */
  mayCancel: boolean;
  /** Why this user may not approve although they may decide (escalated elsewhere, or they wrote it), or null. */
  notApprovable: NotApprovable | null;
}

/** Every operation an approval covers: the envelope's, or each action's of a change set. */
export function operationsOf(action: ActionRow): string[] {
  return action.set
    ? [...new Set(action.set.set.actions.map((a) => a.operation))]
    : [action.envelope.operation];
}

/**
 * What a decision on this approval is bound to: the envelope's hash and nonce, or, for an action of a
 * change set, the SET's hash, nonce, revision, expiry and risk (the riskiest action's). A decision
 * naming a member's own hash or nonce is refused by check_decision.
 */
export interface Bound {
  hash: string;
  nonce: string;
  revision: number;
  expiresAt: string;
  risk: string;
  requestedBy: string;
  requesterVerifiedBy: RequesterVerification;
  createdAt: string;
}

export function boundOf(action: ActionRow): Bound {
  const e = action.set ? action.set.set : action.envelope;
  return {
    hash: action.set ? action.set.setHash : action.envelopeHash,
    nonce: e.nonce,
    revision: e.revision,
    expiresAt: e.expiresAt,
    risk: e.risk.level,
    requestedBy: e.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(e),
    createdAt: e.createdAt,
  };
}

/**
 * Approving needs authority over every operation the approval covers (a change set: each action's),
 * membership of the escalation group once escalated, and, under separation of duties, not having
 * requested or edited what is approved at or above the policy's level (check_decision refuses that as
 * SELF_APPROVAL; the inbox says so before anyone clicks).
 */
export function entitlementOf(app: App, action: ActionRow, user: string): Entitlement {
  const policy = app.deps.policy;
  const approver = operationsOf(action).every((op) => allowedApprovers(policy, op).has(user));
  const inGroup = !action.escalatedTo || (policy.approvers.groups[action.escalatedTo] ?? []).includes(user);
  const subject = action.set ? action.set.set : action.envelope;
  const sod = policy.separationOfDuties;
  const author = subject.requestedBy === user ? "requested" : subject.editedBy === user ? "edited" : null;
  const selfBarred =
    sod && author && levelRank(subject.risk.level) >= levelRank(sod.requesterMayNotApproveAtOrAbove)
      ? author
      : null;
  const notApprovable: NotApprovable | null = !approver ? null : !inGroup ? "escalated" : selfBarred;
  return {
    mayDecide: approver,
    mayApprove: approver && notApprovable === null,
    mayCancel: approver || action.envelope.requestedBy === user,
    notApprovable,
  };
}

/** The journal's action for a thread when it is a live, intact, waiting approval; else undefined. */
export async function waitingAction(app: App, threadId: string): Promise<ActionRow | undefined> {
  const action = await app.deps.journal.currentAction(threadId);
  return action && action.macValid && action.phase === "registered" && !action.progress.closed
    ? action
    : undefined;
}

/** The one to decide first is the one that expires first. */
export function byExpiry(a: InboxItem, b: InboxItem): number {
  return (
    Date.parse(a.expiresAt) - Date.parse(b.expiresAt) ||
    a.createdAt.localeCompare(b.createdAt) ||
    a.threadId.localeCompare(b.threadId)
  );
}

/** A waiting action as the list shows it to `user`, or undefined when they may neither decide nor cancel it. */
export async function inboxItemOf(app: App, action: ActionRow, user: string): Promise<InboxItem | undefined> {
  const may = entitlementOf(app, action, user);
  if (!may.mayDecide && !may.mayCancel) return undefined;
  const e = action.envelope;
  // What a decision on it is bound to, but the nonce: only the card page's forms carry that.
  const { hash, nonce: _nonce, ...bound } = boundOf(action);
  const last = action.progress.lastRefusal;
  const members = action.set ? await membersOf(app.deps, action) : null;
  const snapshot = await app.graph.getState({ configurable: { thread_id: action.threadId } });
  const elsewhere = !snapshot.values || Object.keys(snapshot.values as object).length === 0;
  return {
    threadId: action.threadId,
    envelopeHash: hash,
    ...bound,
    operation: e.operation,
    escalatedTo: action.escalatedTo,
    lastRefusal: last ? { code: last.code, reason: last.reason } : null,
    actions: members
      ? members.map((m) => ({
          actionId: m.set?.actionId ?? "",
          operation: m.envelope.operation,
          title: objectTitle(m.envelope),
          changes: changeLines(m.envelope, m.people?.names),
        }))
      : null,
    title: objectTitle(e),
    changes: changeLines(e, action.people?.names),
    elsewhere,
    ...may,
  };
}

/** Changes whenever anything on the list changes (arrived, decided, revised, refused, escalated). */
export function versionOf(items: InboxItem[]): string {
  return sha256Hex(
    JSON.stringify(items.map((i) => [i.threadId, i.envelopeHash, i.lastRefusal?.code ?? null])),
  ).slice(0, 16);
}

/** A structured question waiting for an answer, from the journal's questions index (no checkpoint is loaded). */
export interface QuestionItem {
  threadId: string;
  question: string;
  fields: QuestionEntry["fields"];
  askedAt: string;
  requestedBy: string;
}

/** Anyone the policy names as an approver of some operation (or by default). */
export function isApprover(app: App, user: string): boolean {
  const policy = app.deps.policy;
  if (allowedApprovers(policy, "").has(user)) return true;
  return Object.keys(policy.operations).some((op) => allowedApprovers(policy, op).has(user));
}

/** Holders of the policy role "admin" (approvers.roles.admin). */
export function isAdmin(app: App, user: string): boolean {
  return hasRole(app.deps.policy, user, "admin");
}

/**
 * Who may answer a thread's question: its requester (from the journal's sealed thread record), an
 * approver, or an admin. A thread record that does not verify names no requester.
 */
export function mayAnswer(app: App, thread: ThreadRecord | undefined, user: string): boolean {
  return (
    (thread?.macValid === true && thread.requestedBy === user) || isApprover(app, user) || isAdmin(app, user)
  );
}

export async function questionsFor(app: App, user: string): Promise<QuestionItem[]> {
  const out: QuestionItem[] = [];
  for (const q of await app.deps.journal.listOpenQuestions()) {
    const thread = await app.deps.journal.getThread(q.threadId);
    if (!mayAnswer(app, thread, user)) continue;
    out.push({
      threadId: q.threadId,
      question: q.question,
      fields: q.fields,
      askedAt: q.askedAt,
      requestedBy: thread?.macValid ? thread.requestedBy : "",
    });
  }
  return out;
}

/**
 * Who may see a run's evidence and outcome: its requester, the approvers entitled for its action's
 * operation (for a thread without an action: the policy's approvers), and admins.
 */
export async function maySeeRun(app: App, threadId: string, user: string): Promise<boolean> {
  if (isAdmin(app, user)) return true;
  const thread = await app.deps.journal.getThread(threadId);
  if (thread?.macValid && thread.requestedBy === user) return true;
  const action = await app.deps.journal.currentAction(threadId);
  if (action?.macValid) {
    if (action.envelope.requestedBy === user) return true;
    return entitlementOf(app, action, user).mayDecide;
  }
  return isApprover(app, user);
}
