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
import {
  countSql,
  pageSql,
  SQLITE,
  waitingIndexes,
  type RegisteredFilter,
  type RegisteredPageFilter,
} from "./waiting-list.js";

import {
  OPEN_PHASES_SQL,
  LEGACY_APPROVALS_SQL,
  sealExecution,
  sealedToolCalls,
  toClaim,
  toExecution,
  toLease,
  toLegacyApproval,
  toQuestion,
  toThreadTurns,
  type ClaimRow,
  type ExecutionRow,
  type LeaseRow,
  type LegacyApprovalRow,
  type QuestionRow,
  type ThreadTurnsRow,
} from "./journal/rows.js";
import { MAX_REPLY_CHARS } from "./journal/api.js";
import type {
  BeginWriteResult,
  DecideResult,
  DecisionClaim,
  ExecutionEntry,
  ExecutionIntent,
  Journal,
  LeaseResult,
  LegacyApproval,
  QuestionEntry,
  RecordedToolCall,
  RunClose,
  ThreadTurns,
} from "./journal/api.js";

export * from "./journal/api.js";
export * from "./journal/rows.js";

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
