/**
 * The one projection of a thread from its journal rows (pure: no LangGraph, no I/O). Every view of a
 * thread is built here: the mirror nodes write into graph state, the phase events the executor
 * streams, `show` / `show --json` and the local decision path (src/app/threads.ts), the inbox's
 * finished page (through those), and `finish`'s evidence, from which the hash-chained closing record
 * the API server's audit view serves is made. Graph state is never read to build one.
 */
import type { ActionRow, ThreadRecord } from "../store/action-machine.js";
import { sealFails, type SealCheck } from "../envelope/seal-check.js";
import type { ExecutionEntry } from "../store/journal.js";
import {
  OPERATIONS,
  isOperationName,
  type ActionOutcome,
  type Envelope,
  type OperationName,
} from "../envelope/index.js";
import {
  acknowledgementMirror,
  preReadMirror,
  verificationMirror,
  type AcknowledgementRecord,
  type DecisionRecord,
  type InvocationRecord,
  type Outcome,
  type PreReadRecord,
  type ReasonCode,
  type RequestScope,
  type VerificationRecord,
  type WriteProtocol,
} from "../envelope/records.js";

/** The journal rows a view is built from; any may be missing (a thread not yet registered, no action, nothing sent). */
export interface JournalRows {
  thread?: ThreadRecord | undefined;
  action?: ActionRow | undefined;
  /** The action's write-ahead entry, when a write was recorded. */
  execution?: ExecutionEntry | undefined;
  /** The revision the action's envelope replaces (its previousEnvelopeHash), when its row passed its seal. */
  previous?: ActionRow | undefined;
}

/** One field whose requested value differs between two revisions; absent `was` / `now`: not changed by that revision. */
export interface RevisionChange {
  field: string;
  was?: unknown;
  now?: unknown;
}

/** What a revision replaced and why: the previous revision's decision (with its feedback) and each field asked for differently. */
export interface RevisionHistory {
  revision: number;
  previousRevision: number;
  previousEnvelopeHash: string;
  decision: { type: string; by: string; message: string | null } | null;
  changes: RevisionChange[];
}

/** What an approver was shown: the registered envelope and its card. */
export interface RegisteredView {
  envelope: Envelope;
  envelopeHash: string;
  card: string;
  escalatedTo: string | null;
  supersededHashes: string[];
}

/** What happened to the action, each record as the journal holds it. */
export interface EvidenceView {
  decision: DecisionRecord | null;
  preRead: PreReadRecord | null;
  invocation: InvocationRecord | null;
  acknowledgement: AcknowledgementRecord | null;
  verification: VerificationRecord | null;
}

/**
 * The evidence parts the view withholds, each with why: a part whose seal under the journal key does not
 * hold, or that no seal this program checks covers yet (absent when every part present is reported).
 */
export type WithheldParts = Partial<Record<keyof EvidenceView, string>>;

/** The ending, or nulls while the journal has not closed the thread (or its action). */
export interface EndingView {
  outcome: Outcome | null;
  reasonCode: ReasonCode | null;
  reason: string | null;
  finishedAt: string | null;
}

export interface ThreadJournalView {
  /** What the thread was asked; absent while the thread is not registered. */
  request?: { request: string; requestedBy: string; scope: RequestScope };
  /** Absent while no action is registered. */
  registered?: RegisteredView;
  evidence: EvidenceView;
  /** The parts left out of `evidence` and why (absent when none is); each surface prints the note in the part's place. */
  withheld?: WithheldParts;
  ending: EndingView;
  /** A single action's revision 2 or later: what it replaced (a change set's is built from its members). */
  revisionHistory?: RevisionHistory;
}

/** The thread as its journal rows say it is. */
export function viewOf({ thread, action, execution, previous }: JournalRows): ThreadJournalView {
  const history = action && !action.set && previous ? revisionHistoryOf(action, previous) : undefined;
  // The thread's close, unless the action's own close fails its seal (the evidence it was closed on
  // changed since): that row then reports the INCONCLUSIVE / OUTCOME_TAMPERED close it carries instead.
  const actionClose = action?.progress.closed;
  const untrusted = actionClose && sealFails(action.closeSeal);
  const closed = untrusted ? actionClose : (thread?.closed ?? actionClose);
  const evidence = evidenceOf(action, execution);
  return {
    ...(thread
      ? { request: { request: thread.request, requestedBy: thread.requestedBy, scope: thread.scope } }
      : {}),
    ...(action
      ? {
          registered: {
            envelope: action.envelope,
            envelopeHash: action.envelopeHash,
            card: action.card,
            escalatedTo: action.escalatedTo,
            supersededHashes: action.supersededHashes,
          },
        }
      : {}),
    evidence: evidence.reported,
    ...(evidence.withheld ? { withheld: evidence.withheld } : {}),
    ending: closed
      ? {
          outcome: closed.outcome,
          reasonCode: closed.reasonCode,
          reason: closed.reason,
          finishedAt: closed.at,
        }
      : { outcome: null, reasonCode: null, reason: null, finishedAt: null },
    ...(history ? { revisionHistory: history } : {}),
  };
}

/**
 * The action's evidence as the journal holds it, each part only when a seal this program checks under
 * the journal key covers it and holds: its own (checked at the phase whose next step acts on it), or a
 * later one that covers it (the verification's covers the acknowledgement; the close's covers the
 * pre-read, the acknowledgement and the verification), and not one the close records as unconfirmed
 * when it was closed (ClosedRecord.unconfirmed). Any other part is withheld with why, as is a
 * write-ahead entry whose seal does not hold, and an answer on the write-ahead entry whose own seal
 * does not hold.
 */
function evidenceOf(
  action: ActionRow | undefined,
  execution: ExecutionEntry | undefined,
): { reported: EvidenceView; withheld?: WithheldParts } {
  const withheld: WithheldParts = {};
  // The parts whose seal did not hold when the action was closed, as its close (whose seal holds) records them.
  const atClose: readonly string[] =
    action?.closeSeal === "valid" ? (action.progress.closed?.unconfirmed ?? []) : [];
  const sealed = <T>(part: keyof EvidenceView, value: T | null | undefined, checks: SealChecks): T | null => {
    if (value === undefined || value === null) return null;
    const why = action
      ? unconfirmed(action, PART_NAMES[part], { ...checks, atClose: atClose.includes(part) })
      : null;
    if (why === null) return value;
    withheld[part] = why;
    return null;
  };
  const closeCovers = { by: [["close", action?.closeSeal ?? "none"]] } as const;
  let acknowledgement = sealed("acknowledgement", action?.progress.acknowledgement, {
    own: action?.acknowledgementSeal ?? "none",
    by: [
      ["verification", action?.verificationSeal ?? "none"],
      ["close", action?.closeSeal ?? "none"],
    ],
  });
  // An answer recorded on the write-ahead entry alone (the action not yet moved on it): the entry's
  // answer is there only while its own seal holds (src/store/journal/rows.ts), otherwise withheld.
  if (!action?.progress.acknowledgement && execution?.acknowledgement !== undefined)
    acknowledgement = execution.acknowledgement as AcknowledgementRecord;
  else if (!action?.progress.acknowledgement && execution?.unconfirmedAnswer)
    withheld.acknowledgement =
      execution.unconfirmedAnswer === "unsealed"
        ? "the answer on the journal's write-ahead entry of this action carries no seal (written by hand, by a version before answers were sealed, or its seal removed); it is not reported"
        : "the answer on the journal's write-ahead entry of this action does not match its seal under the journal key (changed or copied outside this program); it is not reported";
  const reported: EvidenceView = {
    decision: sealed("decision", decisionOf(action), { own: action?.decisionSeal ?? "none", by: [] }),
    preRead: sealed("preRead", action?.progress.preRead, {
      own: action?.preReadSeal ?? "none",
      ...closeCovers,
    }),
    invocation: execution ? invocationOrWithheld(action, execution, withheld) : null,
    acknowledgement,
    verification: sealed("verification", action?.progress.verification, {
      own: action?.verificationSeal ?? "none",
      ...closeCovers,
    }),
  };
  return Object.keys(withheld).length > 0 ? { reported, withheld } : { reported };
}

/** A part's own seal check and the later seals that cover it, by name. */
interface SealChecks {
  own: SealCheck;
  by: ReadonlyArray<readonly [name: string, check: SealCheck]>;
  /** Whether the action's close records that this part's seal did not hold when it was closed. */
  atClose?: boolean;
}

const PART_NAMES: Record<keyof EvidenceView, string> = {
  decision: "decision",
  preRead: "pre-read",
  invocation: "write-ahead entry",
  acknowledgement: "acknowledgement",
  verification: "verification",
};

/**
 * Why a recorded part is not reported, or null when a seal that covers it holds: its own seal failing
 * first, then a covering seal failing; a part whose own seal was not checked at this phase and that no
 * later seal covers yet is not reported as confirmed either.
 */
function unconfirmed(action: ActionRow, part: string, { own, by, atClose }: SealChecks): string | null {
  const of = `the journal's ${part} of this action`;
  if (own === "unsealed")
    return `${of} carries no seal (written by hand, by a version before it was sealed, or its seal removed); it is not reported`;
  if (own === "invalid")
    return `${of} does not match its seal under the journal key (changed outside this program); it is not reported`;
  if (atClose)
    return `${of} did not hold its seal under the journal key when the action was closed (changed outside this program while the action was in flight, or recorded by hand); it is not reported`;
  const failed = by.find(([, check]) => sealFails(check));
  if (failed)
    return `${of} is covered by the seal of its ${failed[0]}, which ${failed[1] === "unsealed" ? "is missing" : "does not hold under the journal key"} (it, or the ${failed[0]}, was changed outside this program); it is not reported`;
  if (own === "valid" || by.some(([, check]) => check === "valid")) return null;
  return `${of} is not covered by a seal this program checks at its phase (${action.phase}); it is not reported`;
}

/** The invocation of a write-ahead entry whose seal holds for this action; otherwise null, and why in `withheld`. */
function invocationOrWithheld(
  action: ActionRow | undefined,
  entry: ExecutionEntry,
  withheld: WithheldParts,
): InvocationRecord | null {
  const of = "the journal's write-ahead entry of this action";
  if (!entry.sealPresent)
    withheld.invocation = `${of} carries no seal (written before entries were sealed, or its seal removed); the invocation it names is not reported`;
  else if (!entry.sealValid || (action && entry.threadId !== action.threadId))
    withheld.invocation = `${of} does not match its seal under the journal key (changed outside this program); the invocation it names is not reported`;
  else return invocationOf(entry);
  return null;
}

/** The fields whose requested value differs between two revisions' params, in the order they appear. */
export function fieldChanges(was: Record<string, unknown>, now: Record<string, unknown>): RevisionChange[] {
  return [...new Set([...Object.keys(was), ...Object.keys(now)])]
    .filter((f) => JSON.stringify(was[f]) !== JSON.stringify(now[f]))
    .map((f) => ({ field: f, ...(f in was ? { was: was[f] } : {}), ...(f in now ? { now: now[f] } : {}) }));
}

/** What `current` replaced: undefined for a first revision or a previous row that is not the one it names. */
export function revisionHistoryOf(current: ActionRow, previous: ActionRow): RevisionHistory | undefined {
  const e = current.envelope;
  if (e.revision <= 1 || e.previousEnvelopeHash !== previous.envelopeHash) return undefined;
  const d = previous.progress.decision;
  return {
    revision: e.revision,
    previousRevision: previous.envelope.revision,
    previousEnvelopeHash: previous.envelopeHash,
    decision: d ? { type: d.type, by: d.approverId, message: d.message ?? null } : null,
    changes: fieldChanges(previous.envelope.params, e.params),
  };
}

/** The view flattened into graph state's channels (what a reader of values expects), raw answers included. */
export function flatView(
  v: ThreadJournalView,
): Partial<
  RegisteredView & EvidenceView & EndingView & { request: string; requestedBy: string; scope: RequestScope }
> {
  return { ...v.request, ...v.registered, ...v.evidence, ...v.ending };
}

/**
 * One action of a change set as the journal closed it (undefined while it is open): its outcome, whether
 * a write was sent, and for a create the task it made, as its verification tied it to this write.
 */
export function actionOutcomeOf(
  row: ActionRow,
  execution: ExecutionEntry | undefined,
  actionId = row.set?.actionId ?? "a?",
): ActionOutcome | undefined {
  const closed = row.progress.closed;
  if (!closed) return undefined;
  const made = row.progress.verification?.created;
  const createdId = Number(made?.id ?? Number.NaN);
  return {
    actionId,
    envelopeHash: row.envelopeHash,
    operation: row.envelope.operation,
    taskId: row.envelope.object.id,
    ...(row.envelope.object.id === 0 &&
    made?.type === "task" &&
    Number.isSafeInteger(createdId) &&
    createdId > 0
      ? { createdId }
      : {}),
    outcome: closed.outcome,
    reasonCode: closed.reasonCode,
    reason: closed.reason,
    sent: execution !== undefined,
  };
}

/**
 * JSON text of a value. A frozen object's text is kept: journal rows are deep-frozen when parsed and a
 * parsed row is reused while its stored text is unchanged (src/store/action-rows.ts), so the text of a
 * registered envelope is computed once per row version rather than at every node.
 */
export function jsonTextOf(value: unknown): string | undefined {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  const kept = frozenTexts.get(value);
  if (kept !== undefined) return kept;
  const text = JSON.stringify(value);
  if (Object.isFrozen(value) && text !== undefined) frozenTexts.set(value, text);
  return text;
}
const frozenTexts = new WeakMap<object, string>();

/** Whether two values have the same JSON text (false when either cannot be serialised). */
export function sameJson(a: unknown, b: unknown): boolean {
  try {
    return jsonTextOf(a) === jsonTextOf(b);
  } catch {
    return false;
  }
}

type Mirrored = { envelopeHash?: string | null; envelope?: unknown; card?: string | null };

/**
 * Whether state's copy of the registered action (hash, card, envelope) is the journal's. Compared once
 * per state object and registration: the drift check and the mirror a node writes (registeredFor) share
 * it, and a registered row never changes under its hash.
 */
export function mirrorsRegistered(
  r: Pick<RegisteredView, "envelopeHash" | "card" | "envelope">,
  mirrored: Mirrored,
): boolean {
  const seen = mirrorChecks.get(mirrored);
  if (seen?.envelopeHash === r.envelopeHash && seen.card === r.card && seen.envelope === r.envelope)
    return seen.same;
  const same =
    mirrored.envelopeHash === r.envelopeHash &&
    mirrored.card === r.card &&
    sameJson(mirrored.envelope, r.envelope);
  mirrorChecks.set(mirrored, { envelopeHash: r.envelopeHash, card: r.card, envelope: r.envelope, same });
  return same;
}
const mirrorChecks = new WeakMap<
  object,
  { envelopeHash: string; card: string; envelope: unknown; same: boolean }
>();

/**
 * The registered part as a node writes it into state's mirror: only where state's copy differs from the
 * journal's (another hash, or an envelope or card a client rewrote under the journal's hash). A
 * registered row never changes, and its envelope and card are kilobytes that would otherwise be
 * serialised into every step's checkpoint writes.
 */
export function registeredFor(view: ThreadJournalView, mirrored: Mirrored): Partial<RegisteredView> {
  const r = view.registered;
  return r && !mirrorsRegistered(r, mirrored) ? r : {};
}

/** Evidence as graph state and the phase events keep it: without the target's raw answers, which stay in the journal. */
export function evidenceForState(e: EvidenceView): EvidenceView {
  return {
    ...e,
    preRead: preReadMirror(e.preRead),
    acknowledgement: acknowledgementMirror(e.acknowledgement),
    verification: verificationMirror(e.verification),
  };
}

/**
 * The evidence channels whose mirror differs from what state holds: a node writes only those, so an
 * unchanged record is not serialised into every later step's checkpoint writes.
 */
export function evidenceChangedFrom(
  e: EvidenceView,
  mirrored: Partial<Record<keyof EvidenceView, unknown>>,
): Partial<EvidenceView> {
  const mirror = evidenceForState(e);
  const out: Partial<Record<keyof EvidenceView, unknown>> = {};
  for (const k of Object.keys(mirror) as Array<keyof EvidenceView>)
    if (!sameJson(mirror[k], mirrored[k] ?? null)) out[k] = mirror[k];
  return out as Partial<EvidenceView>;
}

/** The decision record as the journal holds it (for evidence and the closing record). */
export function decisionOf(a: ActionRow | undefined): DecisionRecord | null {
  const d = a?.progress.decision;
  if (!d) return null;
  const { edit: _e, revise: _r, escalateTo: _x, ...record } = d;
  return record;
}

/**
 * What the write-ahead entry stores as `args`: the call's arguments, plus the protocol when it is not
 * plain REST 2 and the operation when it is not update_task (entries made before either existed have neither).
 */
export type StoredArgs = InvocationRecord["args"] & { protocol?: WriteProtocol; operation?: OperationName };

export function operationOf(entry: ExecutionEntry): OperationName {
  const op = (entry.args as StoredArgs | null)?.operation;
  return isOperationName(op) ? op : "update_task";
}

export function protocolOf(entry: ExecutionEntry): WriteProtocol {
  return (entry.args as StoredArgs | null)?.protocol === "rest3-idempotency-key"
    ? "rest3-idempotency-key"
    : "rest2";
}

/** The invocation as the journal recorded it before sending. */
export function invocationOf(entry: ExecutionEntry): InvocationRecord {
  const stored = entry.args as StoredArgs;
  const { protocol: _p, operation: _o, ...args } = stored;
  return {
    tool: OPERATIONS[operationOf(entry)].tool,
    args,
    idempotencyKey: entry.idempotencyKey,
    envelopeHash: entry.envelopeHash,
    sentAt: entry.sentAt,
    protocol: protocolOf(entry),
  };
}
