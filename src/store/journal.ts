/**
 * The execution journal: consumed nonces, write-ahead entries and per-thread locks, kept OUTSIDE graph
 * state. A checkpoint can be replayed, forked or edited; this file cannot be rewound by doing so, which
 * is what makes "at most one write per approval" hold.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { SqliteConnection, type CommitCount } from "./statements.js";
import { appendIn, prepareAuditTable, type AuditEntry } from "./audit.js";
import type {
  ActionProgress,
  ActionRow,
  ClosedRecord,
  ObjectLease,
  Phase,
  RegisteredAction,
  ThreadRecord,
  TransitionResult,
} from "./action-machine.js";
import { emptyProgress, leaseIsFree, releasesLease } from "./action-machine.js";
import {
  currentFrom,
  planMove,
  sealAction,
  sealThread,
  toActionRow,
  toThreadRecord,
  type ActionDbRow,
  type NewThread,
  type ThreadDbRow,
} from "./action-rows.js";
import { sealHolds, sealOf } from "./journal-key.js";
import {
  countSql,
  pageSql,
  SQLITE,
  waitingIndexes,
  type RegisteredFilter,
  type RegisteredPageFilter,
} from "./waiting-list.js";

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
  /** Set once the target answered (or the send definitely failed); absent means "sent, outcome unknown". */
  acknowledgement?: unknown;
  acknowledgedAt?: string;
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

export type { RegisteredFilter, RegisteredKey, RegisteredPageFilter } from "./waiting-list.js";

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
  | { begun: false; leaseHolder: ObjectLease }
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

export interface Journal {
  /** Commits made on this journal's connection(s): all, and the durable ones (docs/durability.md). */
  readonly commits: CommitCount;
  recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void>;
  /**
   * Everything that must hold right before a write leaves, in ONE transaction: the object lease is
   * renewed (still ours), the write-ahead entry is recorded (none before), and the action moves
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
  /** Registers a frozen envelope; every still-open action of the thread is superseded in the same transaction. */
  registerAction(a: RegisteredAction, at: string): Promise<ActionRow>;
  /** Registers every action of a change set in one transaction (superseding the thread's open ones), in set order. */
  registerActions(rows: RegisteredAction[], at: string): Promise<ActionRow[]>;
  getAction(envelopeHash: string): Promise<ActionRow | undefined>;
  /**
   * The thread's current action: its most recently registered one, or for a change set the action the
   * set is at (action-machine.ts currentOfSet).
   */
  currentAction(threadId: string): Promise<ActionRow | undefined>;
  /** Consumes the nonce and moves registered → decided atomically, appending `records` (the decision's audit records) in the same transaction. */
  decideAction(
    envelopeHash: string,
    claim: DecisionClaim,
    decision: NonNullable<ActionProgress["decision"]>,
    records?: AuditEntry[],
  ): Promise<DecideResult>;
  /**
   * A change set's decision: consumes the set's nonce once and moves every listed action registered →
   * decided, each with its own record, all or nothing. The result's row is the first action's.
   */
  decideActions(
    decisions: Array<{ envelopeHash: string; decision: NonNullable<ActionProgress["decision"]> }>,
    claim: DecisionClaim,
    records?: AuditEntry[],
  ): Promise<DecideResult>;
  /**
   * Compare-and-set: applies only when the machine allows the move from the row's current phase. The
   * audit records `records` builds from the moved row are appended in the same transaction (none when
   * the move is refused).
   */
  moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records?: (row: ActionRow) => AuditEntry[],
  ): Promise<TransitionResult>;
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
  /** Threads with an action not yet closed (waiting, decided, or stopped mid-execution), oldest first. */
  listOpenThreads(): Promise<string[]>;
  /** Counts a refused decision (toward the budget only when `counted`) and keeps it for the card. */
  noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
  ): Promise<ActionRow | undefined>;
  // ── The model's turns, kept in the thread row so the limits and the reasons they give are not state's.
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
  // ── Structured questions (one per thread at a time): recorded when asked, closed when answered.
  /** Records the thread's question; a new question (another tool call) reopens the row, the same one already answered stays answered. */
  recordQuestion(
    q: Omit<QuestionEntry, "status" | "closedAt" | "invalidAnswers" | "lastRefusal">,
  ): Promise<void>;
  /**
   * Counts one invalid answer to the thread's open question and returns how many it has had; 0 when
   * no question is open. Kept here, not in graph state, so rewriting state cannot reset the budget.
   */
  noteInvalidAnswer(threadId: string, reason: string): Promise<number>;
  /** Closes the thread's open question (answered, or closed because the run ended). */
  closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void>;
  getQuestion(threadId: string): Promise<QuestionEntry | undefined>;
  /** Open questions of threads the journal has not closed, newest first; no checkpoint is loaded. */
  listOpenQuestions(): Promise<QuestionEntry[]>;
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
  /** A lease on a thread so two processes never drive the same thread at once. */
  acquireThreadLock(threadId: string, owner: string, leaseMs: number): Promise<boolean>;
  releaseThreadLock(threadId: string, owner: string): Promise<void>;
  close(): Promise<void>;
}

/** Phases of an action that still needs a run to end it. */
export const OPEN_PHASES_SQL = "'registered', 'decided', 'pre_read', 'intent', 'acknowledged', 'verified'";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS decision_claims (
  envelope_hash TEXT NOT NULL,
  nonce TEXT NOT NULL UNIQUE,
  thread_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  decision_type TEXT NOT NULL,
  approver_id TEXT NOT NULL,
  decided_at TEXT NOT NULL,
  claimed_at TEXT NOT NULL,
  PRIMARY KEY (envelope_hash, nonce)
);
CREATE TABLE IF NOT EXISTS executions (
  envelope_hash TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL UNIQUE,
  args_json TEXT NOT NULL,
  sent_at TEXT NOT NULL,
  ack_json TEXT,
  ack_at TEXT
);
CREATE TABLE IF NOT EXISTS threads (
  thread_id TEXT PRIMARY KEY,
  record_json TEXT NOT NULL,
  mac TEXT NOT NULL,
  closed_json TEXT,
  created_at TEXT NOT NULL,
  agent_steps INTEGER NOT NULL DEFAULT 0,
  invalid_proposals INTEGER NOT NULL DEFAULT 0,
  invalid_proposal_step INTEGER NOT NULL DEFAULT 0,
  last_reply TEXT,
  last_tool_calls TEXT
);
CREATE TABLE IF NOT EXISTS actions (
  envelope_hash TEXT PRIMARY KEY,
  thread_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  registered_json TEXT NOT NULL,
  mac TEXT NOT NULL,
  phase TEXT NOT NULL,
  progress_json TEXT NOT NULL,
  registered_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_thread ON actions (thread_id);
CREATE TABLE IF NOT EXISTS questions (
  thread_id TEXT PRIMARY KEY,
  tool_call_id TEXT NOT NULL,
  question TEXT NOT NULL,
  fields_json TEXT NOT NULL,
  asked_at TEXT NOT NULL,
  status TEXT NOT NULL,
  closed_at TEXT,
  invalid_answers INTEGER NOT NULL DEFAULT 0,
  last_refusal TEXT
);
CREATE TABLE IF NOT EXISTS object_leases (
  object_key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  acquired_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS object_leases_owner ON object_leases (owner);
CREATE TABLE IF NOT EXISTS thread_locks (
  thread_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  pid INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
`;

/**
 * Columns added after their tables were first made, added to an older journal when it is opened: a
 * question's invalid answers and why the last was refused; the thread row's model turns, invalid
 * proposals and the model's last reply. (PostgreSQL adds them by migration: src/store/postgres.ts.)
 */
const ADDED_COLUMNS: Array<[table: string, columns: Array<[name: string, type: string]>]> = [
  [
    "questions",
    [
      ["invalid_answers", "INTEGER NOT NULL DEFAULT 0"],
      ["last_refusal", "TEXT"],
    ],
  ],
  ["executions", [["mac", "TEXT"]]],
  [
    "threads",
    [
      ["agent_steps", "INTEGER NOT NULL DEFAULT 0"],
      ["invalid_proposals", "INTEGER NOT NULL DEFAULT 0"],
      ["invalid_proposal_step", "INTEGER NOT NULL DEFAULT 0"],
      ["last_reply", "TEXT"],
      ["last_tool_calls", "TEXT"],
    ],
  ],
];

/** Row shapes and mappers shared by the SQLite and PostgreSQL journals (same columns in both). */
export interface ClaimRow {
  envelope_hash: string;
  nonce: string;
  thread_id: string;
  revision: number;
  decision_type: DecisionClaim["decisionType"];
  approver_id: string;
  decided_at: string;
}

export interface ExecutionRow {
  envelope_hash: string;
  thread_id: string;
  idempotency_key: string;
  args_json: string;
  sent_at: string;
  ack_json: string | null;
  ack_at: string | null;
  mac?: string | null;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  // A killed process whose parent has not reaped it yet (common for orphans in containers, where PID 1
  // may never reap) still answers signal 0; it is dead all the same.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return true;
  }
}

export class SqliteJournal implements Journal {
  /** The connection the audit log shares (src/store/backends.ts), so a transition and its records commit together. */
  readonly conn: SqliteConnection;
  readonly commits: CommitCount;
  private readonly db: Database.Database;
  private readonly sql: (text: string) => Database.Statement;
  private readonly clock: () => Date;

  constructor(
    file: string,
    /** MAC key for registered rows (src/store/journal-key.ts). */
    private readonly key: Buffer,
    opts: { clock?: () => Date } = {},
  ) {
    if (file !== ":memory:") fs.mkdirSync(path.dirname(file), { recursive: true });
    this.conn = new SqliteConnection(file);
    this.db = this.conn.db;
    this.commits = this.conn.commits;
    this.clock = opts.clock ?? (() => new Date());
    this.db.exec(SCHEMA);
    // The listing's indexes; a journal made before them gains them here (built once, on this open).
    for (const sql of waitingIndexes(SQLITE, "actions")) this.db.exec(sql);
    prepareAuditTable(this.db);
    // A journal made before these columns gains them (existing rows: the column's default).
    for (const [table, added] of ADDED_COLUMNS) {
      const has = new Set(
        (this.db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name),
      );
      for (const [name, type] of added)
        if (!has.has(name)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
    }
    this.sql = this.conn.sql;
  }

  async recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void> {
    this.conn.write(() =>
      this.sql(
        "UPDATE executions SET ack_json = ?, ack_at = ? WHERE envelope_hash = ? AND ack_json IS NULL",
      ).run(JSON.stringify(acknowledgement), at, envelopeHash),
    );
  }

  async beginWrite(
    intent: ExecutionIntent,
    sentAt: string,
    lease: { objectKey: string; holdMs: number },
  ): Promise<BeginWriteResult> {
    return this.conn.writeDurable((): BeginWriteResult => {
      const now = Date.now();
      const holder = this.leaseOn(lease.objectKey);
      if (!leaseIsFree(holder, intent.envelopeHash, now)) return { begun: false, leaseHolder: holder! };
      const existing = this.sql("SELECT * FROM executions WHERE envelope_hash = ?").get(
        intent.envelopeHash,
      ) as ExecutionRow | undefined;
      if (existing) return { begun: false, existing: toExecution(existing, this.key) };
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(intent.envelopeHash) as
        ActionDbRow | undefined;
      const row = raw ? toActionRow(raw, this.key) : undefined;
      const plan = planMove(row, intent.envelopeHash, "intent", {});
      if (!plan.ok) return { begun: false, refused: plan.reason };
      this.putLease(lease.objectKey, intent, holder, now, lease.holdMs);
      this.sql(
        "INSERT INTO executions (envelope_hash, thread_id, idempotency_key, args_json, sent_at, mac) VALUES (?, ?, ?, ?, ?, ?)",
      ).run(
        intent.envelopeHash,
        intent.threadId,
        intent.idempotencyKey,
        JSON.stringify(intent.args),
        sentAt,
        sealExecution(this.key, intent, sentAt),
      );
      this.writeMove(intent.envelopeHash, row!.phase, "intent", plan.progress);
      return { begun: true, row: { ...row!, phase: "intent", progress: plan.progress } };
    });
  }

  async recordAnswer(
    envelopeHash: string,
    acknowledgement: ActionProgress["acknowledgement"] & {},
    at: string,
  ): Promise<TransitionResult> {
    return this.conn.write((): TransitionResult => {
      this.sql(
        "UPDATE executions SET ack_json = ?, ack_at = ? WHERE envelope_hash = ? AND ack_json IS NULL",
      ).run(JSON.stringify(acknowledgement), at, envelopeHash);
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        ActionDbRow | undefined;
      const row = raw ? toActionRow(raw, this.key) : undefined;
      const plan = planMove(row, envelopeHash, "acknowledged", { acknowledgement });
      if (!plan.ok) return plan;
      this.writeMove(envelopeHash, row!.phase, "acknowledged", plan.progress);
      return { ok: true, row: { ...row!, phase: "acknowledged", progress: plan.progress } };
    });
  }

  async findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined> {
    const row = this.sql("SELECT * FROM executions WHERE envelope_hash = ?").get(envelopeHash) as
      ExecutionRow | undefined;
    return row ? toExecution(row, this.key) : undefined;
  }

  async registerThread(t: NewThread): Promise<ThreadRecord> {
    const sealed = sealThread(this.key, t);
    this.conn.write(() =>
      this.sql(
        "INSERT OR IGNORE INTO threads (thread_id, record_json, mac, created_at) VALUES (?, ?, ?, ?)",
      ).run(t.threadId, sealed.json, sealed.mac, t.createdAt),
    );
    return (await this.getThread(t.threadId))!;
  }

  async getThread(threadId: string): Promise<ThreadRecord | undefined> {
    const row = this.sql("SELECT * FROM threads WHERE thread_id = ?").get(threadId) as
      ThreadDbRow | undefined;
    return row ? toThreadRecord(row, this.key) : undefined;
  }

  async setThreadScope(threadId: string, scope: ThreadRecord["scope"]): Promise<ThreadRecord | undefined> {
    this.conn.write(() => {
      const row = this.sql("SELECT * FROM threads WHERE thread_id = ?").get(threadId) as
        ThreadDbRow | undefined;
      if (!row) return;
      const t = toThreadRecord(row, this.key);
      const hasAction = this.sql("SELECT 1 FROM actions WHERE thread_id = ? LIMIT 1").get(threadId);
      if (!t.macValid || t.closed || hasAction) return;
      const sealed = sealThread(this.key, { ...t, scope });
      this.sql("UPDATE threads SET record_json = ?, mac = ? WHERE thread_id = ?").run(
        sealed.json,
        sealed.mac,
        threadId,
      );
    });
    return this.getThread(threadId);
  }

  async closeThread(
    threadId: string,
    closed: ClosedRecord,
    run: RunClose = {},
  ): Promise<ThreadRecord | undefined> {
    // Durable: this commit is what the outcome is reported from.
    await this.conn.writeDurable(() => {
      let action: ActionRow | undefined;
      if (run.action) {
        const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(run.action) as
          ActionDbRow | undefined;
        action = raw ? toActionRow(raw, this.key) : undefined;
        const plan =
          action && !action.progress.closed ? planMove(action, run.action, "closed", { closed }) : undefined;
        if (plan?.ok) {
          this.writeMove(run.action, action!.phase, "closed", plan.progress);
          action = { ...action!, phase: "closed", progress: plan.progress };
        }
      }
      this.sql("UPDATE threads SET closed_json = ? WHERE thread_id = ? AND closed_json IS NULL").run(
        JSON.stringify(action?.progress.closed ?? closed),
        threadId,
      );
      const stands = JSON.parse(
        (
          this.sql("SELECT closed_json FROM threads WHERE thread_id = ?").get(threadId) as
            { closed_json: string } | undefined
        )?.closed_json ?? "null",
      ) as ClosedRecord | null;
      if (stands && run.records) this.append(run.records(stands, action));
    });
    return this.getThread(threadId);
  }

  async registerAction(a: RegisteredAction, at: string): Promise<ActionRow> {
    return (await this.registerActions([a], at))[0]!;
  }

  async registerActions(list: RegisteredAction[], at: string): Promise<ActionRow[]> {
    if (list.length === 0) return [];
    const threadId = list[0]!.threadId;
    if (list.some((a) => a.threadId !== threadId))
      throw new Error("registerActions: every action of one registration belongs to one thread");
    const fresh = new Set(list.map((a) => a.envelopeHash));
    const sealed = list.map((a) => sealAction(this.key, a));
    this.conn.write(() => {
      const open = this.sql(
        "SELECT * FROM actions WHERE thread_id = ? AND phase IN ('registered', 'decided')",
      ).all(threadId) as ActionDbRow[];
      for (const r of open) {
        if (!fresh.has(r.envelope_hash))
          this.sql("UPDATE actions SET phase = 'superseded' WHERE envelope_hash = ?").run(r.envelope_hash);
      }
      list.forEach((a, i) => {
        this.sql(
          `INSERT OR IGNORE INTO actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at)
             VALUES (?, ?, ?, ?, ?, 'registered', ?, ?)`,
        ).run(
          a.envelopeHash,
          a.threadId,
          a.revision,
          sealed[i]!.json,
          sealed[i]!.mac,
          JSON.stringify(emptyProgress()),
          at,
        );
      });
    });
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    const row = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
      ActionDbRow | undefined;
    return row ? toActionRow(row, this.key) : undefined;
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const raw = this.sql("SELECT * FROM actions WHERE thread_id = ? ORDER BY rowid DESC LIMIT 1").get(
      threadId,
    ) as ActionDbRow | undefined;
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(raw ? toActionRow(raw, this.key) : undefined, (h) => this.getAction(h));
  }

  async decideAction(
    envelopeHash: string,
    claim: DecisionClaim,
    decision: NonNullable<ActionProgress["decision"]>,
    records: AuditEntry[] = [],
  ): Promise<DecideResult> {
    return this.decideActions([{ envelopeHash, decision }], claim, records);
  }

  async decideActions(
    decisions: Array<{ envelopeHash: string; decision: NonNullable<ActionProgress["decision"]> }>,
    claim: DecisionClaim,
    records: AuditEntry[] = [],
  ): Promise<DecideResult> {
    return this.conn.write((): DecideResult => {
      const existing = this.sql("SELECT * FROM decision_claims WHERE nonce = ?").get(claim.nonce) as
        ClaimRow | undefined;
      if (existing) return { claimed: false, existing: toClaim(existing) };
      const planned: Array<{ row: ActionRow; progress: ActionProgress }> = [];
      for (const { envelopeHash, decision } of decisions) {
        const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
          ActionDbRow | undefined;
        const row = raw ? toActionRow(raw, this.key) : undefined;
        const plan = planMove(row, envelopeHash, "decided", { decision });
        if (!plan.ok) return { claimed: false, phase: plan.phase, reason: plan.reason };
        planned.push({ row: row!, progress: plan.progress });
      }
      this.sql(
        `INSERT INTO decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at, claimed_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        claim.envelopeHash,
        claim.nonce,
        claim.threadId,
        claim.revision,
        claim.decisionType,
        claim.approverId,
        claim.decidedAt,
        new Date().toISOString(),
      );
      for (const p of planned) this.writeMove(p.row.envelopeHash, "registered", "decided", p.progress);
      this.append(records);
      const first = planned[0]!;
      return { claimed: true, row: { ...first.row, phase: "decided", progress: first.progress } };
    });
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<TransitionResult> {
    return this.conn.write((): TransitionResult => {
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        ActionDbRow | undefined;
      const row = raw ? toActionRow(raw, this.key) : undefined;
      const plan = planMove(row, envelopeHash, to, patch);
      if (!plan.ok) return plan;
      this.writeMove(envelopeHash, row!.phase, to, plan.progress);
      const moved: ActionRow = { ...row!, phase: to, progress: plan.progress };
      this.append(records(moved));
      return { ok: true, row: moved };
    });
  }

  /** Appends audit records inside the caller's transaction. */
  private append(records: AuditEntry[]): void {
    for (const r of records) appendIn(this.sql, r, this.clock());
  }

  async listRegistered(f: RegisteredPageFilter): Promise<ActionRow[]> {
    const q = pageSql(SQLITE, "actions", f);
    return (this.sql(q.text).all(...q.args) as ActionDbRow[]).map((r) => toActionRow(r, this.key));
  }

  async countRegistered(f: RegisteredFilter): Promise<number> {
    const q = countSql(SQLITE, "actions", f);
    return (this.sql(q.text).get(...q.args) as { n: number }).n;
  }

  private hasLegacyApprovals(): boolean {
    return (
      this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approvals'").get() !==
      undefined
    );
  }

  async legacyApprovals(): Promise<LegacyApproval[] | null> {
    if (!this.hasLegacyApprovals()) return null;
    return this.db
      .prepare(LEGACY_APPROVALS_SQL(""))
      .all()
      .map((r) => toLegacyApproval(r as LegacyApprovalRow));
  }

  async retireLegacyApprovals(): Promise<void> {
    this.conn.write(
      () => this.hasLegacyApprovals() && this.db.exec("ALTER TABLE approvals RENAME TO approvals_adopted"),
    );
  }

  async listOpenThreads(): Promise<string[]> {
    const rows = this.sql(
      `SELECT thread_id, MIN(rowid) AS first FROM actions WHERE phase IN (${OPEN_PHASES_SQL}) GROUP BY thread_id ORDER BY first`,
    ).all() as Array<{ thread_id: string }>;
    return rows.map((r) => r.thread_id);
  }

  async noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
  ): Promise<ActionRow | undefined> {
    this.conn.write(() => {
      const raw = this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        ActionDbRow | undefined;
      if (!raw) return;
      const p = JSON.parse(raw.progress_json) as ActionProgress;
      const next: ActionProgress = {
        ...p,
        lastRefusal: refusal,
        refusalsSeen: p.refusalsSeen + 1,
        refusalsCounted: p.refusalsCounted + (counted ? 1 : 0),
      };
      this.sql("UPDATE actions SET progress_json = ? WHERE envelope_hash = ?").run(
        JSON.stringify(next),
        envelopeHash,
      );
    });
    return this.getAction(envelopeHash);
  }

  private writeMove(envelopeHash: string, from: Phase, to: Phase, progress: ActionProgress): void {
    this.sql("UPDATE actions SET phase = ?, progress_json = ? WHERE envelope_hash = ?").run(
      to,
      JSON.stringify(progress),
      envelopeHash,
    );
    if (releasesLease(from, to, progress))
      this.sql("DELETE FROM object_leases WHERE owner = ?").run(envelopeHash);
  }

  async acquireObjectLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holdMs: number,
  ): Promise<LeaseResult> {
    return this.conn.write((): LeaseResult => {
      const now = Date.now();
      const holder = this.leaseOn(objectKey);
      if (!leaseIsFree(holder, owner.envelopeHash, now)) return { acquired: false, holder: holder! };
      return { acquired: true, expiresAt: this.putLease(objectKey, owner, holder, now, holdMs) };
    });
  }

  /** The lease row on an object (inside the caller's transaction). */
  private leaseOn(objectKey: string): ObjectLease | undefined {
    const row = this.sql("SELECT * FROM object_leases WHERE object_key = ?").get(objectKey) as
      LeaseRow | undefined;
    return row ? toLease(row) : undefined;
  }

  /** Takes or renews the lease for `owner` (the caller checked leaseIsFree); a renewal keeps its acquisition time. Returns the expiry. */
  private putLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holder: ObjectLease | undefined,
    now: number,
    holdMs: number,
  ): number {
    const acquiredAt = holder?.owner === owner.envelopeHash ? holder.acquiredAt : now;
    this.sql(
      "INSERT OR REPLACE INTO object_leases (object_key, owner, thread_id, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?)",
    ).run(objectKey, owner.envelopeHash, owner.threadId, acquiredAt, now + holdMs);
    return now + holdMs;
  }

  async noteAgentStep(threadId: string): Promise<number> {
    const row = this.conn.write(
      () =>
        this.sql(
          "UPDATE threads SET agent_steps = agent_steps + 1 WHERE thread_id = ? RETURNING agent_steps",
        ).get(threadId) as { agent_steps: number } | undefined,
    );
    return row?.agent_steps ?? 0;
  }

  async noteModelReply(threadId: string, text: string, toolCalls: RecordedToolCall[]): Promise<void> {
    const reply = text.slice(0, MAX_REPLY_CHARS);
    this.conn.write(() =>
      this.sql("UPDATE threads SET last_reply = ?, last_tool_calls = ? WHERE thread_id = ?").run(
        reply,
        sealedToolCalls(this.key, threadId, reply, toolCalls),
        threadId,
      ),
    );
  }

  async noteInvalidProposal(threadId: string): Promise<number> {
    return this.conn.write(() => {
      // Counted once per model turn: invalid_proposal_step is the turn the last one was counted at.
      this.sql(
        "UPDATE threads SET invalid_proposals = invalid_proposals + 1, invalid_proposal_step = agent_steps WHERE thread_id = ? AND invalid_proposal_step < agent_steps",
      ).run(threadId);
      const row = this.sql("SELECT invalid_proposals FROM threads WHERE thread_id = ?").get(threadId) as
        { invalid_proposals: number } | undefined;
      return row?.invalid_proposals ?? 0;
    });
  }

  async getThreadTurns(threadId: string): Promise<ThreadTurns | undefined> {
    const row = this.sql(
      "SELECT agent_steps, invalid_proposals, last_reply, last_tool_calls FROM threads WHERE thread_id = ?",
    ).get(threadId) as ThreadTurnsRow | undefined;
    return row ? toThreadTurns(row, this.key, threadId) : undefined;
  }

  async recordQuestion(
    q: Omit<QuestionEntry, "status" | "closedAt" | "invalidAnswers" | "lastRefusal">,
  ): Promise<void> {
    this.conn.write(() =>
      this.sql(
        `INSERT INTO questions (thread_id, tool_call_id, question, fields_json, asked_at, status, closed_at, invalid_answers, last_refusal) VALUES (?, ?, ?, ?, ?, 'open', NULL, 0, NULL)
         ON CONFLICT (thread_id) DO UPDATE SET tool_call_id = excluded.tool_call_id, question = excluded.question, fields_json = excluded.fields_json,
           asked_at = excluded.asked_at, status = 'open', closed_at = NULL,
           invalid_answers = CASE WHEN questions.tool_call_id != excluded.tool_call_id THEN 0 ELSE questions.invalid_answers END,
           last_refusal = CASE WHEN questions.tool_call_id != excluded.tool_call_id THEN NULL ELSE questions.last_refusal END
         WHERE questions.tool_call_id != excluded.tool_call_id OR questions.status = 'open'`,
      ).run(q.threadId, q.toolCallId, q.question, JSON.stringify(q.fields), q.askedAt),
    );
  }

  async noteInvalidAnswer(threadId: string, reason: string): Promise<number> {
    const row = this.conn.write(
      () =>
        this.sql(
          "UPDATE questions SET invalid_answers = invalid_answers + 1, last_refusal = ? WHERE thread_id = ? AND status = 'open' RETURNING invalid_answers",
        ).get(reason, threadId) as { invalid_answers: number } | undefined,
    );
    return row?.invalid_answers ?? 0;
  }

  async closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void> {
    this.conn.write(() =>
      this.sql("UPDATE questions SET status = ?, closed_at = ? WHERE thread_id = ? AND status = 'open'").run(
        status,
        at,
        threadId,
      ),
    );
  }

  async getQuestion(threadId: string): Promise<QuestionEntry | undefined> {
    const row = this.sql("SELECT * FROM questions WHERE thread_id = ?").get(threadId) as
      QuestionRow | undefined;
    return row ? toQuestion(row) : undefined;
  }

  async listOpenQuestions(): Promise<QuestionEntry[]> {
    const rows = this.sql(
      `SELECT q.* FROM questions q LEFT JOIN threads t ON t.thread_id = q.thread_id
         WHERE q.status = 'open' AND t.closed_json IS NULL ORDER BY q.asked_at DESC, q.thread_id`,
    ).all() as QuestionRow[];
    return rows.map(toQuestion);
  }

  async acquireThreadLock(threadId: string, owner: string, leaseMs: number): Promise<boolean> {
    return this.conn.write(() => {
      const now = Date.now();
      const row = this.sql("SELECT owner, pid, expires_at FROM thread_locks WHERE thread_id = ?").get(
        threadId,
      ) as { owner: string; pid: number; expires_at: number } | undefined;
      // A lease held by a dead process on this host (killed mid-run) is taken over rather than waited out.
      const free = !row || row.expires_at < now || row.owner === owner || !processAlive(row.pid);
      if (!free) return false;
      this.sql(
        "INSERT OR REPLACE INTO thread_locks (thread_id, owner, pid, expires_at) VALUES (?, ?, ?, ?)",
      ).run(threadId, owner, process.pid, now + leaseMs);
      return true;
    });
  }

  async releaseThreadLock(threadId: string, owner: string): Promise<void> {
    this.conn.write(() =>
      this.sql("DELETE FROM thread_locks WHERE thread_id = ? AND owner = ?").run(threadId, owner),
    );
  }

  async close(): Promise<void> {
    this.conn.close();
  }
}

export interface LeaseRow {
  object_key: string;
  owner: string;
  thread_id: string;
  acquired_at: number | string;
  expires_at: number | string;
}

/** PostgreSQL returns BIGINT as a string; both backends store milliseconds since the epoch. */
export function toLease(r: LeaseRow): ObjectLease {
  return {
    objectKey: r.object_key,
    owner: r.owner,
    threadId: r.thread_id,
    acquiredAt: Number(r.acquired_at),
    expiresAt: Number(r.expires_at),
  };
}

export function toClaim(r: ClaimRow): DecisionClaim {
  return {
    threadId: r.thread_id,
    envelopeHash: r.envelope_hash,
    nonce: r.nonce,
    revision: r.revision,
    decisionType: r.decision_type,
    approverId: r.approver_id,
    decidedAt: r.decided_at,
  };
}

/** What a write-ahead entry's seal covers: everything recorded before the request left (the answer comes later and is not sealed). */
function executionSealContent(intent: ExecutionIntent, sentAt: string): unknown {
  return {
    kind: "write-ahead",
    envelopeHash: intent.envelopeHash,
    threadId: intent.threadId,
    idempotencyKey: intent.idempotencyKey,
    args: intent.args,
    sentAt,
  };
}

/** The MAC of a write-ahead entry about to be recorded. */
export function sealExecution(key: Buffer, intent: ExecutionIntent, sentAt: string): string {
  return sealOf(key, executionSealContent(intent, sentAt));
}

export function toExecution(r: ExecutionRow, key: Buffer): ExecutionEntry {
  let args: unknown;
  let parsed = true;
  try {
    args = JSON.parse(r.args_json) as unknown;
  } catch {
    parsed = false;
  }
  const entry = {
    envelopeHash: r.envelope_hash,
    threadId: r.thread_id,
    idempotencyKey: r.idempotency_key,
    args,
    sentAt: r.sent_at,
  };
  return {
    ...entry,
    ...(r.ack_json !== null ? { acknowledgement: JSON.parse(r.ack_json) as unknown } : {}),
    ...(r.ack_at !== null ? { acknowledgedAt: r.ack_at } : {}),
    sealValid: parsed && sealHolds(key, executionSealContent(entry, r.sent_at), r.mac ?? null),
    sealPresent: r.mac !== null && r.mac !== undefined,
  };
}

/** Pending rows of an older version's `approvals` table without an action row; `s` prefixes the tables (a PostgreSQL schema). */
export const LEGACY_APPROVALS_SQL = (s: string) =>
  `SELECT a.envelope_hash, a.thread_id FROM ${s}approvals a LEFT JOIN ${s}actions x ON x.envelope_hash = a.envelope_hash
   WHERE a.status = 'pending' AND x.envelope_hash IS NULL ORDER BY a.created_at, a.envelope_hash`;

export interface LegacyApprovalRow {
  envelope_hash: string;
  thread_id: string;
}

export const toLegacyApproval = (r: LegacyApprovalRow): LegacyApproval => ({
  envelopeHash: r.envelope_hash,
  threadId: r.thread_id,
});

export interface QuestionRow {
  thread_id: string;
  tool_call_id: string;
  question: string;
  fields_json: string;
  asked_at: string;
  status: QuestionEntry["status"];
  closed_at: string | null;
  invalid_answers: number | null;
  last_refusal?: string | null;
}

export function toQuestion(r: QuestionRow): QuestionEntry {
  return {
    threadId: r.thread_id,
    toolCallId: r.tool_call_id,
    question: r.question,
    fields: JSON.parse(r.fields_json) as QuestionEntry["fields"],
    askedAt: r.asked_at,
    status: r.status,
    closedAt: r.closed_at,
    invalidAnswers: Number(r.invalid_answers ?? 0),
    lastRefusal: r.last_refusal ?? null,
  };
}

export interface ThreadTurnsRow {
  agent_steps: number | string | null;
  invalid_proposals: number | string | null;
  last_reply: string | null;
  last_tool_calls: string | null;
}

export function toThreadTurns(r: ThreadTurnsRow, key: Buffer, threadId: string): ThreadTurns {
  const lastReply = r.last_reply ?? null;
  const recorded = toolCallsOf(r.last_tool_calls);
  const lastReplySealValid =
    recorded === null ||
    (recorded.calls !== null &&
      sealHolds(key, replySealContent(threadId, lastReply ?? "", recorded.calls), recorded.mac));
  return {
    agentSteps: Number(r.agent_steps ?? 0),
    invalidProposals: Number(r.invalid_proposals ?? 0),
    lastReply,
    lastToolCalls: recorded === null ? null : lastReplySealValid ? recorded.calls : [],
    lastReplySealValid,
  };
}

/** What a model reply's seal covers: the thread, the reply's text as kept, and its tool calls. */
function replySealContent(threadId: string, reply: string, calls: unknown[]): Record<string, unknown> {
  return { kind: "model-reply", threadId, reply, toolCalls: calls };
}

/** The `last_tool_calls` column's value: the calls with their seal (HMAC under the journal key, bound to the thread and reply text). */
export function sealedToolCalls(
  key: Buffer,
  threadId: string,
  reply: string,
  calls: RecordedToolCall[],
): string {
  const plain = JSON.parse(JSON.stringify(calls)) as unknown[];
  return JSON.stringify({ calls: plain, mac: sealOf(key, replySealContent(threadId, reply, plain)) });
}

/** The recorded calls and their seal; null when no reply was recorded; calls null when the value is not sealed calls. */
function toolCallsOf(text: string | null): { calls: RecordedToolCall[] | null; mac: string | null } | null {
  if (text === null || text === undefined) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { calls: null, mac: null };
  }
  const { calls, mac } = (
    typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  ) as { calls?: unknown; mac?: unknown };
  if (!Array.isArray(calls) || typeof mac !== "string") return { calls: null, mac: null };
  const wellFormed = calls.every(
    (c) => typeof c === "object" && c !== null && typeof c.id === "string" && typeof c.name === "string",
  );
  return { calls: wellFormed ? (calls as RecordedToolCall[]) : null, mac };
}
