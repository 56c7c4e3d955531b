/**
 * A thread's audit records held against the journal's sealed rows. The audit log is a hash chain
 * without a key: whoever can write the data directory can link new records after its head, and an
 * earlier head kept elsewhere (`audit verify --head`) is still in the chain then. The journal's rows
 * that say what was approved, decided and sent are sealed under the journal key, which that writer
 * does not hold; so a record that says otherwise than those rows was not written by this program, and
 * a view (and the bundle checked against it) must not report it as confirmed.
 */
import { canonicalJson, hashEnvelope, type Envelope } from "../envelope/index.js";
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import type { AuditRecord, ChainProblem } from "../store/audit.js";
import type { ExecutionEntry, Journal } from "../store/journal.js";
import { isClosingRecord } from "./recorded.js";

/** The journal's rows a thread's records are held against, read by `journalFactsOf`. */
export interface JournalFacts {
  thread: ThreadRecord | undefined;
  /**
   * The row of each envelope the records name; undefined where the journal holds none. A change set's
   * hash (its decision records name it, with its first action's envelope) maps to that action's row,
   * which carries the set's hash and its decision.
   */
  actions: ReadonlyMap<string, ActionRow | undefined>;
  /**
   * The write-ahead entry of each envelope the records name, and of every action of each change set
   * they name (a set's closing record speaks for all of them); undefined where the journal holds none.
   */
  executions: ReadonlyMap<string, ExecutionEntry | undefined>;
}

export type JournalReader = Pick<Journal, "getThread" | "getAction" | "findExecution">;

/**
 * Reads the rows `contradictionOf` needs: the thread's, each named envelope's action and write-ahead
 * entry, and the write-ahead entries of every action of a change set a sealed row of them belongs to.
 */
export async function journalFactsOf(
  journal: JournalReader,
  threadId: string,
  records: readonly AuditRecord[],
): Promise<JournalFacts> {
  const named = new Map<string, unknown>();
  for (const r of records)
    if (r.what.envelopeHash && !named.has(r.what.envelopeHash))
      named.set(r.what.envelopeHash, r.what.envelope);
  const actionOf = async (h: string, envelope: unknown): Promise<ActionRow | undefined> => {
    const row = await journal.getAction(h);
    if (row || envelope === null || typeof envelope !== "object") return row;
    // Not an action's hash: a change set's, when the envelope beside it is one of its actions'.
    let member: string;
    try {
      member = hashEnvelope(envelope as Envelope);
    } catch {
      return undefined;
    }
    const first = await journal.getAction(member);
    return first?.set?.setHash === h ? first : undefined;
  };
  const [thread, actions] = await Promise.all([
    journal.getThread(threadId),
    Promise.all([...named].map(async ([h, envelope]) => [h, await actionOf(h, envelope)] as const)),
  ]);
  const written = new Set(named.keys());
  for (const [, row] of actions)
    if (row?.macValid && row.set) for (const a of row.set.set.actions) written.add(a.envelopeHash);
  const executions = await Promise.all(
    [...written].map(async (h) => [h, await journal.findExecution(h)] as const),
  );
  return { thread, actions: new Map(actions), executions: new Map(executions) };
}

const DECISION_EVENTS = new Set(["decision_accepted", "approval_expired", "approval_cancelled"]);

/**
 * The outcomes an action reaches only after its write-ahead entry: a verification's verdict, which reads
 * the target after the write (src/hitl/closing.ts closingOf). INCONCLUSIVE is not among them: a write
 * refused as tampered or rolled back ends so without a sealed entry.
 */
const WRITTEN_OUTCOMES = new Set([
  "VERIFIED",
  "REJECTED_BY_TARGET",
  "VERIFICATION_FAILED",
  "INVARIANT_VIOLATION",
]);

/** A sealed row of the thread, among those the records name, that replaces `action` (a later revision). */
function supersedingOf(
  h: string,
  action: ActionRow,
  facts: JournalFacts,
  threadId: string,
): ActionRow | undefined {
  const replaced = (row: ActionRow) =>
    row.supersededHashes.includes(h) ||
    row.supersededHashes.includes(action.envelopeHash) ||
    (action.set !== undefined && row.supersededHashes.includes(action.set.setHash));
  return [...facts.actions.values()].find(
    (row) => row !== undefined && row.macValid && row.threadId === threadId && replaced(row),
  );
}

/**
 * The first record of the thread that the journal's sealed rows contradict, as a chain problem; none
 * when every record agrees with them. Each record naming an envelope must name a sealed action of this
 * thread and say what its envelope says; an accepted decision (or expiry, or cancel) must be the
 * action's sealed decision; a record that ends an action must say a write was sent (by its flags, its
 * event or an outcome only a write reaches) exactly when the journal holds the action's sealed
 * write-ahead entry; the thread's closing record must name its last revision and that revision's sealed
 * decision and say the outcome of the journal's sealed close, and a change set's must say none, some or
 * all of its actions were written as their sealed write-ahead entries do; the request's text and how
 * the requester was established must be the sealed thread row's.
 */
export function contradictionOf(
  threadId: string,
  records: readonly AuditRecord[],
  facts: JournalFacts,
): ChainProblem | undefined {
  for (const r of records) {
    const detail = contradictionIn(threadId, r, facts);
    if (detail)
      return {
        kind: "contradicted",
        seq: r.seq,
        threadId: r.threadId,
        event: r.event,
        detail: `record seq ${r.seq} (${r.event}) ${detail}: the journal's rows are sealed under the journal key, which a writer of the data directory does not hold, and they do not confirm this record`,
      };
  }
  return undefined;
}

const same = (a: unknown, b: unknown) => canonicalJson(a ?? null) === canonicalJson(b ?? null);

function contradictionIn(threadId: string, r: AuditRecord, facts: JournalFacts): string | undefined {
  const thread = facts.thread?.macValid ? facts.thread : undefined;
  if (thread && r.request !== undefined && r.request !== thread.request)
    return `states a request the journal's thread row does not hold`;
  if (
    thread &&
    r.requesterVerifiedBy !== undefined &&
    r.requesterVerifiedBy !== (thread.requesterVerifiedBy ?? "self_declared")
  )
    return `says the requester was established by ${r.requesterVerifiedBy}; the journal's thread row says ${thread.requesterVerifiedBy ?? "self_declared"}`;

  const h = r.what.envelopeHash;
  const claimsWrite = r.outcome?.flags.sideEffectAttempted === true || r.event === "execution_outcome";
  if (!h) return claimsWrite ? `says a write was sent but names no envelope` : otherClose(r, thread);

  const action = facts.actions.get(h);
  if (!action || !action.macValid || action.threadId !== threadId)
    return `names envelope ${h}, of which the journal holds no sealed action of thread ${threadId}`;
  const e = action.envelope;
  if (
    r.revision !== action.revision ||
    r.requestedBy !== e.requestedBy ||
    r.what.operation !== e.operation ||
    r.what.taskId !== e.object.id ||
    !same(r.what.params, e.params) ||
    (r.what.envelope != null && !same(r.what.envelope, e)) ||
    !same(r.risk, { level: e.risk.level, reversibility: e.risk.reversibility }) ||
    (r.shown !== undefined && r.shown.card !== action.card)
  )
    return `says of envelope ${h} what its sealed action does not (revision, requester, operation, object, params, risk or card)`;

  // The action's decision as sealed under the journal key, and whether the record's approver is it.
  const sealed = action.decisionSeal === "valid" ? action.progress.decision : undefined;
  const isSealedDecision =
    sealed !== undefined &&
    r.approver?.id === sealed.approverId &&
    r.approver.decision === sealed.type &&
    r.approver.verifiedBy === sealed.verifiedBy &&
    same(r.override, sealed.override);
  if (DECISION_EVENTS.has(r.event)) {
    if (!sealed)
      return `records a decision on envelope ${h}; the journal holds no decision of it sealed under the journal key`;
    if (!isSealedDecision)
      return `records ${r.approver?.decision ?? "a decision"} by ${r.approver?.id ?? "nobody"} (${r.approver?.verifiedBy ?? "unverified"}) on envelope ${h}; the journal's sealed decision is ${sealed.type} by ${sealed.approverId} (${sealed.verifiedBy})`;
  }

  if (isClosingRecord(r)) {
    const later = supersedingOf(h, action, facts, threadId);
    if (later)
      return `ends the thread on envelope ${h}, which the journal's sealed row of envelope ${later.envelopeHash} (revision ${later.revision}) replaces; a thread ends on its last revision`;
    if (r.approver && !isSealedDecision)
      return `ends the thread on a ${r.approver.decision ?? "decision"} by ${r.approver.id ?? "nobody"} (${r.approver.verifiedBy}) of envelope ${h}; the journal's sealed decision is ${sealed ? `${sealed.type} by ${sealed.approverId} (${sealed.verifiedBy})` : "none"}`;
  }

  const sealedWrite = (hash: string) => {
    const entry = facts.executions.get(hash);
    return entry !== undefined && entry.sealValid && entry.threadId === threadId ? entry : undefined;
  };
  // A change set's closing record speaks for every action of it: its outcome (chainOutcome) says
  // whether none, some or all of them were written, which their sealed write-ahead entries decide.
  const set = action.set;
  if (set && isClosingRecord(r)) {
    const members = set.set.actions.map((a) => a.envelopeHash);
    const written = members.filter((m) => sealedWrite(m) !== undefined);
    const o = r.outcome?.outcome;
    const names = (hs: string[]) =>
      hs.map((m) => set.set.actions.find((a) => a.envelopeHash === m)!.actionId);
    if (o === "VERIFIED" && written.length < members.length)
      return `says every action of change set ${set.setHash} was written and verified; the journal holds no sealed write-ahead entry of ${names(members.filter((m) => !written.includes(m))).join(", ")}`;
    if (o === "PARTIALLY_EXECUTED" && written.length === 0)
      return `says part of change set ${set.setHash} was written; the journal holds no sealed write-ahead entry of any of its actions`;
    if (o !== undefined && o !== "VERIFIED" && o !== "PARTIALLY_EXECUTED" && written.length > 0)
      return `says nothing of change set ${set.setHash} was written (${o}); the journal holds the sealed write-ahead entries of ${names(written).join(", ")}`;
  }

  // The set's closing record named by the set's hash stands for no one action; every other record
  // that ends one names it, and says a write was sent exactly when its sealed entry is there.
  const ofSet = action.envelopeHash !== h;
  if (
    ofSet &&
    set &&
    isClosingRecord(r) &&
    claimsWrite &&
    !set.set.actions.some((a) => sealedWrite(a.envelopeHash))
  )
    return `says a write was sent for change set ${h}; the journal holds no sealed write-ahead entry of any of its actions`;
  if (!ofSet && (isClosingRecord(r) || r.event === "action_ended")) {
    const entry = sealedWrite(h);
    // An action's outcome that only a sent write reaches claims one as well (a set's closing outcome
    // speaks for the whole set, above).
    const written =
      claimsWrite || (!(set && isClosingRecord(r)) && WRITTEN_OUTCOMES.has(r.outcome?.outcome ?? ""));
    if (written && !entry)
      return `says a write was sent for envelope ${h}; the journal holds no write-ahead entry of it sealed under the journal key`;
    if (!written && entry)
      return `says no write was sent for envelope ${h}; the journal holds its sealed write-ahead entry (sent at ${entry.sentAt})`;
  }
  return otherClose(r, thread);
}

/**
 * A closing record whose outcome is not the journal's sealed close of the thread (a close that fails its
 * seal is already reported OUTCOME_TAMPERED, src/store/action-rows.ts, and is held against nothing).
 */
function otherClose(r: AuditRecord, thread: ThreadRecord | undefined): string | undefined {
  const closed = thread?.closed;
  if (!closed || closed.reasonCode === "OUTCOME_TAMPERED" || !isClosingRecord(r) || !r.outcome)
    return undefined;
  if (r.outcome.outcome === closed.outcome && r.outcome.reasonCode === closed.reasonCode) return undefined;
  return `ends the thread ${r.outcome.outcome} / ${r.outcome.reasonCode}; the journal's sealed close says ${closed.outcome} / ${closed.reasonCode}`;
}
