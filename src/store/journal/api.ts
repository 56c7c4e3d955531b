/** What the journal records and the interfaces it offers, one per concern, which the full `Journal` extends. */
import type {
  ActionProgress,
  ActionRow,
  ClosedRecord,
  ObjectLease,
  Phase,
  RegisteredAction,
  ThreadRecord,
  TransitionResult,
} from "../action-machine.js";
import type { NewThread } from "../action-rows.js";
import type { AuditEntry } from "../audit.js";
import type { CommitCount } from "../statements.js";
import type { RegisteredFilter, RegisteredPageFilter } from "../waiting-list.js";
import type { DueItem } from "../due.js";
import type { Keeper } from "../keeper.js";

export interface DecisionClaim {
  threadId: string;
  envelopeHash: string;
  nonce: string;
  revision: number;
  decisionType: "approve" | "reject" | "edit" | "cancel" | "expire";
  approverId: string;
  decidedAt: string;
}

export interface ExecutionIntent {
  envelopeHash: string;
  threadId: string;
  idempotencyKey: string;
  /** The exact arguments about to be sent, as JSON. */
  args: unknown;
}

export interface ExecutionEntry extends ExecutionIntent {
  sentAt: string;
  /**
   * Set once the target answered (or the send definitely failed), and only while the answer's seal
   * under the journal key holds; absent (with no `unconfirmedAnswer`) means "sent, outcome unknown".
   */
  acknowledgement?: unknown;
  acknowledgedAt?: string;
  /**
   * An answer is recorded on the entry but not taken: its seal does not hold (edited outside this
   * program, or unreadable), or it has none (written by hand, or by a version before answers were sealed).
   */
  unconfirmedAnswer?: "invalid" | "unsealed";
  /**
   * Whether the entry's seal (HMAC under the journal key over what was recorded before sending:
   * envelope, thread, key, arguments with protocol and operation, time) holds. False for an entry
   * changed outside this program, or one made before entries were sealed: neither is re-sent.
   */
  sealValid: boolean;
  /** Whether the row carries a seal at all: false for a row written before entries were sealed (or its seal removed). */
  sealPresent: boolean;
}

/** A waiting approval an older version indexed in its `approvals` table, with no action row (src/hitl/legacy-approvals.ts adopts it). */
export interface LegacyApproval {
  envelopeHash: string;
  threadId: string;
}

export type { RegisteredFilter, RegisteredKey, RegisteredPageFilter } from "../waiting-list.js";

/** A structured question the graph asked (ask_input), indexed so interfaces list it without loading checkpoints. */
export interface QuestionEntry {
  threadId: string;
  toolCallId: string;
  question: string;
  /** The answer fields as asked (src/hitl/structured-input.ts InputField), by name. */
  fields: Record<string, { type: "string" | "number" | "enum"; description?: string; choices?: string[] }>;
  askedAt: string;
  status: "open" | "answered" | "closed";
  closedAt: string | null;
  /** Answers refused as invalid since this question was asked (the budget check_input closes it by). */
  invalidAnswers: number;
  /** Why the last of them was refused (shown with the question again); null before any. */
  lastRefusal: string | null;
}

/**
 * What the model did on a thread, counted in the journal's thread row (never in graph state, which any
 * API client can rewrite): model turns taken, invalid proposals made, and the model's last reply.
 */
export interface ThreadTurns {
  /** Model turns taken: counted by the agent node right before each model call. */
  agentSteps: number;
  /** Proposals refused as invalid, at most one per model turn. */
  invalidProposals: number;
  /** The text of the model's last reply (the first MAX_REPLY_CHARS characters); null before any reply. */
  lastReply: string | null;
  /**
   * The tool calls of the model's last reply, as the model made them; null before any reply. propose
   * reads them from here, never from graph state's messages (which a state rewrite could change).
   */
  lastToolCalls: RecordedToolCall[] | null;
  /**
   * Whether the recorded reply (text and tool calls) carries a seal under the journal key that holds for
   * this thread; true before any reply. False for a reply edited outside this program, or one recorded
   * without a seal: propose then acts on none of its calls.
   */
  lastReplySealValid: boolean;
}

/** One tool call of a model reply, as the journal keeps it. */
export interface RecordedToolCall {
  id: string;
  name: string;
  args: unknown;
}

/** How much of the model's last reply the journal keeps (the NO_PROPOSAL reason quotes it). */
export const MAX_REPLY_CHARS = 1000;

/** Taking an object lease: granted (until `expiresAt`, ms since the epoch), or the lease that stands in the way. */
export type LeaseResult = { acquired: true; expiresAt: number } | { acquired: false; holder: ObjectLease };

export type BeginWriteResult =
  | { begun: true; row: ActionRow }
  | { begun: false; existing: ExecutionEntry }
  /**
   * The object lease is no longer this action's: another action took it after this one's ran out (it
   * may have written since this action's pre-read), named, or took it and released it since (null).
   */
  | { begun: false; leaseHolder: ObjectLease | null }
  | { begun: false; refused: string };

/** Claiming a decision also moves the action registered → decided, in the same transaction. */
export type DecideResult =
  | { claimed: true; row: ActionRow }
  | { claimed: false; existing: DecisionClaim }
  | { claimed: false; phase: Phase | null; reason: string };

/** What closes with a thread: its action, and the closing audit records built from the close that stands. */
export interface RunClose {
  action?: string;
  records?: (closed: ClosedRecord, action: ActionRow | undefined) => AuditEntry[];
}

/** Write-ahead entries: what is about to leave, recorded before it leaves, and the target's answer. */
export interface ExecutionJournal {
  recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void>;
  /**
   * Everything that must hold right before a write leaves, in ONE transaction: the object lease is
   * renewed (still this action's, as its pre-read took it: expired or not, nobody took it since), the write-ahead entry is recorded (none before), and the action moves
   * pre_read → intent. Either all of it is committed or none of it.
   */
  beginWrite(
    intent: ExecutionIntent,
    sentAt: string,
    lease: { objectKey: string; holdMs: number },
  ): Promise<BeginWriteResult>;
  /** The target's answer: recorded on the write-ahead entry (first answer wins) and intent → acknowledged, in one transaction. */
  recordAnswer(
    envelopeHash: string,
    acknowledgement: ActionProgress["acknowledgement"] & {},
    at: string,
  ): Promise<TransitionResult>;
  findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined>;
}

/** Threads: what each was asked, its scope, and its close. */
export interface ThreadJournal {
  // ── The action state machine (src/store/action-machine.ts). The journal is the authority; graph
  //    state only mirrors it. Every registered row is sealed with an HMAC under a key kept outside
  //    the data directory; rows read back carry `macValid`.
  /** Records what a thread was asked, once; a second call returns the first record unchanged. */
  registerThread(t: NewThread): Promise<ThreadRecord>;
  getThread(threadId: string): Promise<ThreadRecord | undefined>;
  /** A human's answer to a structured question names the task; allowed only before any action exists. */
  setThreadScope(threadId: string, scope: ThreadRecord["scope"]): Promise<ThreadRecord | undefined>;
  /**
   * Ends the thread for good, durably; the first close wins and is returned to later callers. In the
   * same transaction: the run's action (`run.action`) is closed with the same record unless it already
   * was, and the audit records `run.records` builds from the close that stands are appended.
   */
  closeThread(threadId: string, closed: ClosedRecord, run?: RunClose): Promise<ThreadRecord | undefined>;
}

/** Actions through the state machine: registration, decision, moves and refusals. */
export interface ActionJournal {
  /**
   * Registers a frozen envelope; every still-open action of the thread is superseded, and `records` (its
   * approval_requested record) appended, in the same transaction.
   */
  registerAction(a: RegisteredAction, at: string, records?: AuditEntry[]): Promise<ActionRow>;
  /**
   * Registers every action of a change set in one transaction (superseding the thread's open ones), in
   * set order, appending `records` (each action's approval_requested record) in the same transaction.
   */
  registerActions(rows: RegisteredAction[], at: string, records?: AuditEntry[]): Promise<ActionRow[]>;
  getAction(envelopeHash: string): Promise<ActionRow | undefined>;
  /**
   * The thread's current action: its most recently registered one, or for a change set the action the
   * set is at (action-machine.ts currentOfSet).
   */
  currentAction(threadId: string): Promise<ActionRow | undefined>;
  /**
   * Consumes the nonce and moves registered → decided atomically, appending `records` (the decision's
   * audit records) in the same transaction. With `lease` (an approval about to be carried out), the
   * action's object lease is taken in the same transaction too when it is free (LeaseJournal), so the
   * pre-read that follows finds it held and commits nothing for it; a lease held by another is left
   * alone, and the pre-read waits for it as usual.
   */
  decideAction(
    envelopeHash: string,
    claim: DecisionClaim,
    decision: NonNullable<ActionProgress["decision"]>,
    records?: AuditEntry[],
    lease?: { objectKey: string; holdMs: number },
  ): Promise<DecideResult>;
  /**
   * A change set's decision: consumes the set's nonce once and moves every listed action registered →
   * decided, each with its own record, all or nothing (`lease` as decideAction takes it). The result's
   * row is the first action's.
   */
  decideActions(
    decisions: Array<{ envelopeHash: string; decision: NonNullable<ActionProgress["decision"]> }>,
    claim: DecisionClaim,
    records?: AuditEntry[],
    lease?: { objectKey: string; holdMs: number },
  ): Promise<DecideResult>;
  /**
   * Compare-and-set: applies only when the machine allows the move from the row's current phase and,
   * given `from`, only while the row is still at `from` (a close is allowed from every open phase, so a
   * step closing what it read names that phase: a row another process moved on meanwhile stays as it is).
   * The audit records `records` builds from the moved row are appended in the same transaction (none
   * when the move is refused).
   */
  moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records?: (row: ActionRow) => AuditEntry[],
    from?: Phase,
  ): Promise<TransitionResult>;
  /**
   * Counts a refused decision (toward the budget only when `counted`) and keeps it for the card; the
   * audit records `records` builds from the counted row (its decision_refused record) are appended in
   * the same transaction. Undefined, and nothing written, when no such action is registered.
   */
  noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
    records?: (row: ActionRow) => AuditEntry[],
  ): Promise<ActionRow | undefined>;
}

/** The listing of waiting approvals, and adoption of an older version's approvals index. */
export interface ApprovalListing {
  /**
   * Waiting rows straight from the index of registered actions, in listing order (registered_at, then
   * envelope hash), from just after `filter.after`, at most `filter.limit`; each row's seal checked
   * (`macValid`); no checkpoint is loaded.
   */
  listRegistered(filter: RegisteredPageFilter): Promise<ActionRow[]>;
  /** How many waiting approvals match `filter` (a change set's rows count once), counted in SQL. */
  countRegistered(filter: RegisteredFilter): Promise<number>;
  /**
   * Approvals an older version indexed as pending in its `approvals` table that have no action row;
   * null once the table is retired (or on a journal that never had one). Read once, when the stores open.
   */
  legacyApprovals(): Promise<LegacyApproval[] | null>;
  /** Renames the older version's `approvals` table to `approvals_adopted`, so later opens skip it. */
  retireLegacyApprovals(): Promise<void>;
}

/** The model's turns, kept in the thread row so the limits and the reasons they give are not state's. */
export interface TurnJournal {
  /**
   * Counts one model turn on a registered thread and returns how many it has taken (0 when the thread
   * is not registered). Called before each model call; a node re-run that calls the model again counts
   * again, so the count is the number of model calls.
   */
  noteAgentStep(threadId: string): Promise<number>;
  /** Keeps the model's last reply on the thread row: its text (the first MAX_REPLY_CHARS characters) and its tool calls. */
  noteModelReply(threadId: string, text: string, toolCalls: RecordedToolCall[]): Promise<void>;
  /**
   * Counts one invalid proposal and returns the count. At most one per model turn: a second call before
   * the next turn (a re-run of the node, or the node driven again) returns the count unchanged.
   */
  noteInvalidProposal(threadId: string): Promise<number>;
  /** The thread's counted turns; undefined when the thread is not registered. */
  getThreadTurns(threadId: string): Promise<ThreadTurns | undefined>;
}

/** Structured questions (one per thread at a time): recorded when asked, closed when answered. */
export interface QuestionJournal {
  /** Records the thread's question; a new question (another tool call) reopens the row, the same one already answered stays answered. */
  recordQuestion(
    q: Omit<QuestionEntry, "status" | "closedAt" | "invalidAnswers" | "lastRefusal">,
  ): Promise<void>;
  /**
   * Counts one invalid answer to the thread's open question and returns how many it has had; 0 when
   * no question is open. Kept here, not in graph state, so rewriting state cannot reset the budget.
   * The audit records `records` builds from the count (its answer_refused record) are appended in the
   * same transaction; none when no question is open.
   */
  noteInvalidAnswer(
    threadId: string,
    reason: string,
    records?: (count: number) => AuditEntry[],
  ): Promise<number>;
  /** Closes the thread's open question (answered, or closed because the run ended). */
  closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void>;
  getQuestion(threadId: string): Promise<QuestionEntry | undefined>;
  /** Open questions of threads the journal has not closed, newest first; no checkpoint is loaded. */
  listOpenQuestions(): Promise<QuestionEntry[]>;
}

/** Leases on target objects, held by an action from its pre-read until it releases them. */
export interface LeaseJournal {
  /**
   * Takes or renews the lease on a target object for an action (src/store/action-machine.ts leaseIsFree).
   * Held from before the pre-read until the action moves to a releasing phase: `moveAction` to verified
   * or closed releases it in the same transaction, so no run can end without letting go.
   */
  acquireObjectLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holdMs: number,
  ): Promise<LeaseResult>;
  /** The lease on an object as it stands (an expired one included), read without a transaction. */
  objectLease(objectKey: string): Promise<ObjectLease | undefined>;
}

/** Locks on threads, so two processes never drive the same thread at once. */
export interface LockJournal {
  /** A lease on a thread so two processes never drive the same thread at once. */
  acquireThreadLock(threadId: string, owner: string, leaseMs: number): Promise<boolean>;
  releaseThreadLock(threadId: string, owner: string): Promise<void>;
}

/**
 * Work a worker has to do, found by index (src/store/due.ts): each open action's next due time, and a
 * lease on it for the worker that claimed it, so several workers share the due work.
 */
export interface DueJournal {
  /**
   * Actions due at `now` (oldest due first, at most `limit`) that no other worker holds: unclaimed, or
   * claimed under a lease that has ended (a worker that died). Each is claimed for `owner` until
   * now + `leaseMs`, in the same transaction. A move of the action ends the claim. Only actions of
   * threads `keeper` keeps (src/store/keeper.ts) are claimed, and those of threads with no keeper recorded.
   */
  claimDue(now: Date, limit: number, owner: string, leaseMs: number, keeper: Keeper): Promise<DueItem[]>;
  /**
   * Ends `owner`'s claim (no-op when the action moved meanwhile, or another worker holds it); with
   * `retryAt`, the action is next due then (a thread with nothing for a worker to do now).
   */
  releaseDue(envelopeHashes: readonly string[], owner: string, retryAt?: Date): Promise<void>;
}

/** How a journal is opened: its clock, the resume grace (src/store/due.ts) and who keeps the threads it registers (src/store/keeper.ts). */
export interface JournalOptions {
  clock?: () => Date;
  /** How long after entering a post-approval phase an action falls due for a worker (src/store/due.ts). */
  resumeGraceMs?: number;
  /** Which side keeps the checkpoints of the threads this process registers (src/store/keeper.ts). */
  keeper?: Keeper;
}

/** The whole journal, every concern behind one object; callers that need one concern can take its interface. */
export interface Journal
  extends
    ExecutionJournal,
    ThreadJournal,
    ActionJournal,
    ApprovalListing,
    TurnJournal,
    QuestionJournal,
    LeaseJournal,
    LockJournal,
    DueJournal {
  /**
   * A thread's record, its current action (as currentAction reads it) and its question, read together:
   * one statement on PostgreSQL, where each step of a run would otherwise send three.
   */
  threadRows(threadId: string): Promise<ThreadRows>;
  /** Commits made on this journal's connection(s): all, and the durable ones (docs/durability.md). */
  readonly commits: CommitCount;
  close(): Promise<void>;
}

/** What threadRows reads: each undefined when the journal has no such row. */
export interface ThreadRows {
  thread: ThreadRecord | undefined;
  action: ActionRow | undefined;
  question: QuestionEntry | undefined;
}
