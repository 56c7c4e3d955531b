/**
 * The life of one action (one registered envelope), in one place. Pure: no I/O, no LangGraph.
 *
 *   registered ──decide──▶ decided ──pre-read MATCH──▶ pre_read ──intent──▶ intent ──answer──▶ acknowledged ──read──▶ verified
 *        │                    │                           │                    │                   │                    │
 *        └─ superseded        └─ superseded (edit,        └──────────── close(outcome) from any open phase ─────────────┘
 *           (new revision)       reject+feedback, escalation)                         ▼
 *                                                                                   closed
 *
 * The journal applies a transition only when the row's current phase allows it (compare-and-set in
 * one transaction), so whatever graph state claims, a step can happen once and only in this order.
 * `closed` and `superseded` are final: no claim, pre-read or write can follow on any copy, fork or
 * replay of any checkpoint.
 */
import type {
  AcknowledgementRecord,
  DecisionRecord,
  Outcome,
  PreReadRecord,
  ReasonCode,
  RequestScope,
  VerificationRecord,
} from "../envelope/records.js";
import type {
  ChangeSet,
  Envelope,
  NameResolution,
  PeopleLookup,
  RequesterVerification,
} from "../envelope/index.js";
import type { SetPlanDraft } from "../envelope/decision-judgement.js";
import { operationSpec } from "../envelope/operations.js";
import { createHash } from "node:crypto";
import { canonicalJson } from "../envelope/canonical.js";
import type { SealCheck } from "../envelope/seal-check.js";

export const PHASES = [
  "registered",
  "decided",
  "pre_read",
  "intent",
  "acknowledged",
  "verified",
  "closed",
  "superseded",
] as const;
export type Phase = (typeof PHASES)[number];

/** Allowed moves. Anything not listed is refused by the journal and audited by the caller. */
export const TRANSITIONS: Readonly<Record<Phase, readonly Phase[]>> = {
  registered: ["decided", "superseded", "closed"],
  decided: ["pre_read", "superseded", "closed"],
  pre_read: ["intent", "closed"],
  intent: ["acknowledged", "closed"],
  acknowledged: ["verified", "closed"],
  verified: ["closed"],
  closed: [],
  superseded: [],
};

export function canMove(from: Phase, to: Phase): boolean {
  return TRANSITIONS[from].includes(to);
}

/** What a registered envelope carries, fixed at registration and covered by the row's MAC. */
export interface RegisteredAction {
  envelopeHash: string;
  threadId: string;
  revision: number;
  envelope: Envelope;
  /** The card exactly as rendered for the approver. */
  card: string;
  /** The request's scope as recorded for the thread (never the model's). */
  scope: RequestScope;
  policy: { id: string; version: string };
  /** Group an expired approval was escalated to; only its members may approve this envelope. */
  escalatedTo: string | null;
  /** Hashes of earlier revisions of this thread; an approval naming one is STALE_REVISION. */
  supersededHashes: string[];
  /** Who wrote this revision by an edit (may not approve it), if it came from an edit. */
  editedBy: string | null;
  /**
   * The names read (user.get, by code) for the user ids the card shows, so the card can be rendered
   * again from this row exactly as the approver saw it. Absent in rows registered before it existed.
   */
  people?: PeopleLookup;
  /**
   * Set when the action is one of a change set: the sealed set (every row of the set carries it, so
   * any row reproduces what was approved), its hash, and this action's id and position. Absent for a
   * single action.
   */
  set?: SetMembership;
}

export interface SetMembership {
  setHash: string;
  set: ChangeSet;
  actionId: string;
  /** 0-based position in the set's order. */
  index: number;
}

export interface ClosedRecord {
  outcome: Outcome;
  reasonCode: ReasonCode;
  reason: string;
  at: string;
  /**
   * On an action's close: the parts of its evidence whose seal did not hold when it was closed (edited
   * while the action was in flight). The close's seal covers them as they were, so this list, sealed with
   * the close, is what keeps every view from reporting them (src/hitl/thread-view.ts). Absent when none.
   */
  unconfirmed?: Array<"preRead" | "acknowledgement" | "verification">;
}

/** Everything that happened to the action after registration; each part written by one transition. */
export interface ActionProgress {
  decision?: DecisionRecord & {
    /**
     * For an edit: the proposal the next revision is built from, and the names typed for user fields
     * with the user each resolved to (user.get), when the edit named people.
     */
    edit?: { taskId: number; fields: Record<string, unknown>; names?: NameResolution[] };
    /** For a reject: whether the model gets the feedback and may revise. */
    revise?: boolean;
    /** For an expiry: the group the next revision is escalated to. */
    escalateTo?: string;
    /**
     * A change set decided action by action with an edit or a rejection among them: the next revision
     * (the approved and edited actions in set order, by id), each action's decision, and whether the
     * policy lets it run without being shown again (partial approval of allowed classes, no edits).
     */
    setPlan?: SetPlanDraft;
  };
  preRead?: PreReadRecord;
  acknowledgement?: AcknowledgementRecord;
  verification?: VerificationRecord;
  closed?: ClosedRecord;
  /** The last refused decision, shown on the card. */
  lastRefusal?: { code: string; reason: string; at: string };
  /** Refused decisions from callers entitled to decide (these use up the budget). */
  refusalsCounted: number;
  /** All refused decisions, entitled or not; orders their audit records. */
  refusalsSeen: number;
  /**
   * The decision's seal: HMAC under the journal key over the decision as recorded and the action it
   * decides (action-rows.ts, decisionSealOf), written with the decision. Absent in rows decided before
   * decisions were sealed.
   */
  decisionSeal?: string;
  /**
   * The pre-read's seal: HMAC under the journal key over the pre-read as stored and the action
   * (action-rows.ts), written by the move to pre_read, the one move a write may follow. Absent in rows
   * moved to pre_read before pre-reads were sealed; over the verdict and time alone in rows moved
   * there before the whole pre-read was (such a seal no longer holds).
   */
  preReadSeal?: string;
  /**
   * The close's seal: HMAC under the journal key over the closing record, the evidence it was closed on
   * and the action (action-rows.ts, SEALED_PARTS), written by the move to closed. Absent in rows
   * closed before closes were sealed; such a close is reported INCONCLUSIVE / OUTCOME_TAMPERED.
   */
  closeSeal?: string;
  /**
   * The verification's seal: HMAC under the journal key over the verification and the acknowledgement
   * it was made on, and the action (action-rows.ts), written by the move to verified; the close that
   * follows takes its outcome from a verification only when this seal holds.
   */
  verificationSeal?: string;
  /**
   * The acknowledgement's seal: HMAC under the journal key over it and the action (action-rows.ts),
   * written by the move to acknowledged; the verification that follows uses it only when this holds.
   */
  acknowledgementSeal?: string;
}

export type { SealCheck };

export interface ActionRow extends RegisteredAction {
  phase: Phase;
  progress: ActionProgress;
  registeredAt: string;
  /** False when the row's MAC does not verify: its registered content was edited outside the program. */
  macValid: boolean;
  /**
   * Whether the decision recorded on the row is the one this program recorded: "none" without a
   * decision, "valid" when its seal holds, "unsealed" without a seal, "invalid" when the seal does not
   * hold (the decision, or its seal, was written or copied outside the program); "unchecked" on a row
   * of a listing at a phase whose next step does not act on it (decided and pre_read are checked).
   */
  decisionSeal: SealCheck;
  /**
   * The same for the pre-read the move to pre_read recorded (its verdict lets the write go out; the
   * verification compares with what it read), checked from pre_read to verified.
   */
  preReadSeal: SealCheck;
  /**
   * Whether the row's close is the one this program recorded ("none" while open). When it is not, the
   * row's progress.closed is already the INCONCLUSIVE / OUTCOME_TAMPERED close reported in its place.
   */
  closeSeal: SealCheck;
  /** The same for the verification the move to verified recorded, checked at `verified` (the close acts on it). */
  verificationSeal: SealCheck;
  /** The same for the acknowledgement the move to acknowledged recorded, checked at `acknowledged`. */
  acknowledgementSeal: SealCheck;
}

/** What the thread was asked, recorded once when its first run starts. */
export interface ThreadRecord {
  threadId: string;
  request: string;
  requestedBy: string;
  /**
   * How requestedBy was established, taken from the run's auth context by the process that registered
   * the thread (src/conversation/first-turn.ts), never from graph state; sealed with the rest. Absent on threads
   * registered before it was recorded: read as self-declared.
   */
  requesterVerifiedBy?: RequesterVerification;
  scope: RequestScope;
  createdAt: string;
  /**
   * Set for an undo thread (`undo <thread>`): the verified action it restores. The proposal is then
   * built by code from that action's recorded before-values, never by the model. Sealed with the rest.
   */
  compensates?: { threadId: string; envelopeHash: string };
  /**
   * The audit log's next seq when the thread was registered with no audit record yet: every record of
   * the thread is at or after it, so a view of the thread checks the chain from here (a record of the
   * thread removed is then found). Sealed with the rest; absent on threads registered before it was
   * recorded and on threads that had records before their registration.
   */
  auditFrom?: number;
  closed: ClosedRecord | null;
  macValid: boolean;
}

export type TransitionResult =
  { ok: true; row: ActionRow } | { ok: false; phase: Phase | null; reason: string };

export function refusedMove(from: Phase | null, to: Phase, envelopeHash: string, expected?: Phase): string {
  if (from === null) return `no action ${envelopeHash} is registered; cannot move it to ${to}`;
  if (expected !== undefined && expected !== from)
    return `action ${envelopeHash} is ${from}, not ${expected} as the step that would move it to ${to} read it; another process moved it meanwhile`;
  return `action ${envelopeHash} is ${from}; it cannot become ${to} (allowed from ${from}: ${TRANSITIONS[from].join(", ") || "nothing, it is final"})`;
}

/**
 * What the executor (src/executor/index.ts) does next for an approved action, by the row's phase: the
 * only place the order of the post-approval steps is written. Null: nothing for the executor (the
 * action waits for a decision, was not approved, or has ended). `intent` (sent, no answer recorded)
 * is reconciled before it is verified, whatever a checkpoint says.
 */
export type Step = "pre_read" | "write" | "reconcile" | "verify";

export function stepOf(row: ActionRow): Step | null {
  switch (row.phase) {
    case "decided":
      return row.progress.decision?.type === "approve" ? "pre_read" : null;
    case "pre_read":
      return "write";
    case "intent":
      return "reconcile";
    case "acknowledged":
      return "verify";
    case "registered":
    case "verified":
    case "closed":
    case "superseded":
      return null;
    default: {
      const never: never = row.phase;
      throw new Error(`unknown phase ${String(never)}`);
    }
  }
}

/**
 * The node that should run next for a thread, from the journal alone. `null` while no action exists
 * and the thread is open: the agent is still studying the portal and may propose. Every step after an
 * approval is the executor's (`carry_out`), which takes the step from stepOf.
 */
export type JournalNext = "agent" | "build_envelope" | "await_approval" | "carry_out" | "finish" | null;

export function nextFromJournal(
  thread: ThreadRecord | undefined,
  current: ActionRow | undefined,
): JournalNext {
  if (thread?.closed) return "finish";
  if (!current) return null;
  if (stepOf(current) !== null) return "carry_out";
  if (current.phase === "registered") return "await_approval";
  if (current.phase !== "decided") return "finish";
  const d = current.progress.decision;
  switch (d?.type) {
    case "edit":
      return "build_envelope";
    case "reject":
      return d.revise ? "agent" : "finish";
    case "expire":
      return d.escalateTo ? "build_envelope" : "finish";
    case "approve":
    case "cancel":
    case undefined:
      return "finish";
    default: {
      const never: never = d!.type;
      throw new Error(`unknown decision ${String(never)}`);
    }
  }
}

/** The content a registered row's MAC covers: everything that decides what may be written and shown. */
export function macContentOfAction(a: RegisteredAction): unknown {
  return {
    kind: "action",
    envelopeHash: a.envelopeHash,
    threadId: a.threadId,
    revision: a.revision,
    envelope: a.envelope,
    card: a.card,
    scope: a.scope,
    policy: a.policy,
    escalatedTo: a.escalatedTo,
    supersededHashes: a.supersededHashes,
    editedBy: a.editedBy,
    // Only when present, so rows registered before names existed keep their seal.
    ...(a.people ? { people: a.people } : {}),
    ...(a.set ? { set: a.set } : {}),
  };
}

/**
 * Whether the journal confirms the action VERIFIED: its verification says so under a seal that holds
 * (the verification's own while the row is at verified, the close's, which covers it, once closed).
 * A verdict written into the row outside this program carries no chain on and stands for no write.
 */
export function verifiedInJournal(r: ActionRow): boolean {
  if (r.progress.verification?.verdict !== "VERIFIED") return false;
  return r.phase === "verified"
    ? r.verificationSeal === "valid"
    : r.phase === "closed" && r.closeSeal === "valid";
}

/**
 * The action of a change set that the thread is at, from its rows in set order (pure; the journal's
 * currentAction applies it). Waiting for approval: the first row. Then the chain: the first row not
 * yet done; a row that ended other than VERIFIED stops the chain there (finish closes the rest).
 * When every row is verified, the last one (finish closes them all).
 */
export function currentOfSet(rows: ActionRow[]): ActionRow | undefined {
  if (rows.length === 0) return undefined;
  const waiting = rows.find((r) => r.phase === "registered");
  if (waiting) return waiting;
  for (const r of rows) {
    switch (r.phase) {
      case "registered":
      case "decided":
      case "pre_read":
      case "intent":
      case "acknowledged":
      case "superseded":
        return r;
      case "verified":
        if (!verifiedInJournal(r)) return r;
        continue;
      case "closed":
        if (r.progress.closed?.outcome !== "VERIFIED") return r;
        continue;
      default: {
        const never: never = r.phase;
        throw new Error(`unknown phase ${String(never)}`);
      }
    }
  }
  return rows.at(-1);
}

export function macContentOfThread(
  t: Pick<
    ThreadRecord,
    | "threadId"
    | "request"
    | "requestedBy"
    | "requesterVerifiedBy"
    | "scope"
    | "createdAt"
    | "compensates"
    | "auditFrom"
  >,
): Record<string, unknown> {
  // `compensates`, `requesterVerifiedBy` and `auditFrom` only when present, so threads sealed before they existed keep their seal.
  return {
    kind: "thread",
    threadId: t.threadId,
    request: t.request,
    requestedBy: t.requestedBy,
    ...(t.requesterVerifiedBy ? { requesterVerifiedBy: t.requesterVerifiedBy } : {}),
    scope: t.scope,
    createdAt: t.createdAt,
    ...(t.compensates ? { compensates: t.compensates } : {}),
    ...(t.auditFrom !== undefined ? { auditFrom: t.auditFrom } : {}),
  };
}

export function emptyProgress(): ActionProgress {
  return { refusalsCounted: 0, refusalsSeen: 0 };
}

// ── Object leases ─────────────────────────────────────────────────────────────────────────────────
// Two approved actions on the same object must not both pass their pre-read before either writes:
// the second would overwrite the first with a change approved against a state that no longer exists.
// So an action holds a lease on its target object (portal + kind + id) from before its pre-read until
// it is verified or closed; a second action waits for it (bounded), and its pre-read then sees the
// first one's write. The lease belongs to the action (its envelope hash), not to a process, so the
// process that recovers an action after a crash holds it as the original one did.

/** Phases in which an action no longer needs its object: the lease is released by the move itself. */
export const LEASE_RELEASING_PHASES: readonly Phase[] = ["verified", "closed", "superseded"];

/**
 * Whether the move from → to lets go of the object. A write that was sent and never answered (no
 * acknowledgement, or MISSING) and that the verification did not see applied may still land later:
 * the lease is then kept until it runs out, so another action's pre-read cannot pass before a late
 * write arrives and be overwritten by it.
 */
export function releasesLease(from: Phase, to: Phase, progress: ActionProgress): boolean {
  if (!LEASE_RELEASING_PHASES.includes(to)) return false;
  const sent = from === "intent" || from === "acknowledged" || from === "verified";
  const unanswered = progress.acknowledgement === undefined || progress.acknowledgement.status === "MISSING";
  if (sent && unanswered && progress.verification?.verdict !== "VERIFIED") return false;
  return true;
}

export interface ObjectLease {
  objectKey: string;
  /** The envelope hash of the action holding it. */
  owner: string;
  threadId: string;
  acquiredAt: number;
  expiresAt: number;
}

/**
 * Whether `owner` may take (or renew) the lease on an object held by `holder`. Free when nobody holds
 * it, the holder is the same action (renewal, or recovery after a crash), or the lease ran out (a
 * holder that died and was never recovered, or a write whose answer was lost and had time to land).
 * Nothing else frees it: the move that ends an action deletes its lease in the same transaction
 * (releasesLease), so a row still present is a lease still meant to hold.
 */
export function leaseIsFree(holder: ObjectLease | undefined, owner: string, nowMs: number): boolean {
  if (!holder) return true;
  if (holder.owner === owner) return true;
  return holder.expiresAt <= nowMs;
}

/**
 * The key of an envelope's target object, on which its lease is taken (src/hitl/object-lease.ts) and
 * renewed with the write-ahead entry (journal.beginWrite): the same task on the same portal is one
 * object. A create (add_task) names no existing object (object id 0), so its key is what identifies
 * the object it makes for verification, the title (src/envelope/created.ts finds the task by it when
 * the answer is lost): creates of the same title on a portal share a lease and wait on each other, so
 * a lost answer cannot be confused with another's task; creates of different titles do not.
 */
export function objectKeyOf(envelope: {
  portal: string;
  operation: string;
  object: { type: string; id: number };
  params: Record<string, unknown>;
}): string {
  if (operationSpec(envelope.operation)?.effect === "create")
    return `${envelope.portal}|${envelope.object.type}|new:${newObjectDigest(envelope.params["TITLE"])}`;
  return `${envelope.portal}|${envelope.object.type}|${envelope.object.id}`;
}

/**
 * sha256 (hex) of a create's title, normalised more loosely than verification compares titles (Unicode
 * NFC, whitespace collapsed and trimmed, lower case): titles that might be listed as one share a lease.
 * Sharing more than needed only costs a wait; sharing less would let two creates be confused.
 */
function newObjectDigest(title: unknown): string {
  const text =
    typeof title === "string"
      ? title.normalize("NFC").replace(/\s+/g, " ").trim().toLowerCase()
      : canonicalJson(title ?? null);
  return createHash("sha256").update(text, "utf8").digest("hex");
}
