/**
 * The execution journal in PostgreSQL, for several processes (or hosts) sharing one database.
 *
 * Exactly-once rests on constraints, not on timing: a nonce can be inserted into decision_claims
 * once (UNIQUE (nonce) and PRIMARY KEY (envelope_hash, nonce)), and an envelope into executions once
 * (PRIMARY KEY envelope_hash). Concurrent inserts of the same key wait for each other inside
 * PostgreSQL and exactly one commits; the others read the winner's row back.
 *
 * Thread locks are session-level advisory locks held on a connection dedicated to the lock for as
 * long as the thread is being driven. PostgreSQL drops them when that connection ends, so a process
 * that is killed (or whose host vanishes, once TCP keepalive notices) frees its threads without a
 * lease having to run out, and no clock is compared across hosts. The lease length the interface
 * passes is therefore not used here: a live holder keeps its lock however long the run takes.
 */
import type pg from "pg";
import type { DatabaseConfig } from "../config/env.js";
import {
  LEGACY_APPROVALS_SQL,
  sealExecution,
  toClaim,
  toExecution,
  toLease,
  toLegacyApproval,
  type BeginWriteResult,
  type LeaseResult,
  type LeaseRow,
  type LegacyApproval,
  type LegacyApprovalRow,
  type ClaimRow,
  type DecisionClaim,
  type RunClose,
  type ExecutionEntry,
  type ExecutionIntent,
  type ExecutionRow,
  type Journal,
} from "./journal.js";
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
  MAX_REPLY_CHARS,
  OPEN_PHASES_SQL,
  sealedToolCalls,
  toQuestion,
  toThreadTurns,
  type RecordedToolCall,
  type ThreadTurns,
  type ThreadTurnsRow,
  type DecideResult,
  type QuestionEntry,
  type QuestionRow,
} from "./journal.js";
import {
  countSql,
  pageSql,
  POSTGRES,
  type RegisteredFilter,
  type RegisteredPageFilter,
} from "./waiting-list.js";
import {
  inTransaction,
  lockKey,
  prepareDatabase,
  query,
  quoteIdent,
  storeError,
  openPools,
  type PoolLease,
} from "./postgres.js";
import { appendWithin } from "./pg-audit.js";
import type { AuditEntry } from "./audit.js";
import type { CommitCount } from "./statements.js";

export class PostgresJournal implements Journal {
  private readonly s: string;
  /** Connections holding a thread lock, by thread and owner. */
  private readonly held = new Map<string, pg.PoolClient>();

  readonly commits: CommitCount = { total: 0, durable: 0 };

  /** Shared with the audit log (src/store/backends.ts), so a transition and its records commit together. */
  readonly pool: pg.Pool;

  private constructor(
    /** The process's connections (openPools): queries on `pool`, thread locks on lock connections beside it. */
    readonly pools: PoolLease,
    private readonly db: DatabaseConfig,
    /** MAC key for registered rows (src/store/journal-key.ts). */
    private readonly key: Buffer,
    private readonly clock: () => Date,
  ) {
    this.s = quoteIdent(db.schema);
    this.pool = pools.pool;
  }

  /** One counted transaction; `durable` ones commit with synchronous_commit = on. */
  private async tx<T>(doing: string, fn: (c: pg.PoolClient) => Promise<T>, durable = false): Promise<T> {
    const result = await inTransaction(this.pool, this.db, doing, fn, durable);
    this.commits.total += 1;
    if (durable) this.commits.durable += 1;
    return result;
  }

  /** One counted statement in a transaction of its own. */
  private async run<R extends pg.QueryResultRow>(
    doing: string,
    text: string,
    values: unknown[] = [],
  ): Promise<R[]> {
    const rows = await query<R>(this.pool, this.db, doing, text, values);
    this.commits.total += 1;
    return rows;
  }

  private async append(c: pg.PoolClient, records: AuditEntry[]): Promise<void> {
    for (const r of records) await appendWithin(c, this.db, r, this.clock());
  }

  /** Connects, applies pending migrations and returns a journal; fails with StoreUnavailableError when the server is not there. */
  static async open(
    db: DatabaseConfig,
    key: Buffer,
    opts: { clock?: () => Date } = {},
  ): Promise<PostgresJournal> {
    const pools = openPools(db);
    await prepareDatabase(pools, db).catch(async (e: unknown) => {
      await pools.close();
      throw e;
    });
    return new PostgresJournal(pools, db, key, opts.clock ?? (() => new Date()));
  }

  async recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void> {
    await this.run(
      `recording the acknowledgement for ${envelopeHash}`,
      `UPDATE ${this.s}.executions SET ack_json = $1, ack_at = $2 WHERE envelope_hash = $3 AND ack_json IS NULL`,
      [JSON.stringify(acknowledgement), at, envelopeHash],
    );
  }

  async beginWrite(
    intent: ExecutionIntent,
    sentAt: string,
    lease: { objectKey: string; holdMs: number },
  ): Promise<BeginWriteResult> {
    // Locks in the same order as every move (the action row first, then its lease), so a concurrent
    // close of the same action cannot deadlock with this.
    const raced = new Error("the lease was taken concurrently");
    try {
      return await this.tx(
        `beginning the write for ${intent.envelopeHash}`,
        async (c): Promise<BeginWriteResult> => {
          const now = Date.now();
          const r = await c.query<ActionDbRow>(
            `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
            [intent.envelopeHash],
          );
          const holder = await this.lockLease(c, lease.objectKey);
          if (!leaseIsFree(holder, intent.envelopeHash, now)) return { begun: false, leaseHolder: holder! };
          const existing = await c.query<ExecutionRow>(
            `SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`,
            [intent.envelopeHash],
          );
          if (existing.rows[0]) return { begun: false, existing: toExecution(existing.rows[0], this.key) };
          const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
          const plan = planMove(row, intent.envelopeHash, "intent", {});
          if (!plan.ok) return { begun: false, refused: plan.reason };
          const inserted = await c.query(
            `INSERT INTO ${this.s}.executions (envelope_hash, thread_id, idempotency_key, args_json, sent_at, mac)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING envelope_hash`,
            [
              intent.envelopeHash,
              intent.threadId,
              intent.idempotencyKey,
              JSON.stringify(intent.args),
              sentAt,
              sealExecution(this.key, intent, sentAt),
            ],
          );
          if (inserted.rowCount !== 1)
            throw new Error(
              `write-ahead entry for ${intent.envelopeHash} conflicted on its idempotency key ${intent.idempotencyKey} with another envelope`,
            );
          // Another action took the (missing) lease between our look and our insert: nothing of ours is committed.
          if (!(await this.putLease(c, lease.objectKey, intent, holder, now, lease.holdMs))) throw raced;
          await this.writeMove(c, intent.envelopeHash, row!.phase, "intent", plan.progress);
          return { begun: true, row: { ...row!, phase: "intent", progress: plan.progress } };
        },
        true,
      );
    } catch (e) {
      if (e !== raced) throw e;
      const holder = await this.getObjectLease(lease.objectKey);
      if (!holder)
        // eslint-disable-next-line preserve-caught-error -- `raced` is this function's own signal, not a cause
        throw new Error(
          `the lease on ${lease.objectKey} was taken and released while beginning the write for ${intent.envelopeHash}; nothing was sent`,
        );
      return { begun: false, leaseHolder: holder };
    }
  }

  async recordAnswer(
    envelopeHash: string,
    acknowledgement: ActionProgress["acknowledgement"] & {},
    at: string,
  ): Promise<TransitionResult> {
    return this.tx(`recording the answer for ${envelopeHash}`, async (c): Promise<TransitionResult> => {
      await c.query(
        `UPDATE ${this.s}.executions SET ack_json = $1, ack_at = $2 WHERE envelope_hash = $3 AND ack_json IS NULL`,
        [JSON.stringify(acknowledgement), at, envelopeHash],
      );
      const r = await c.query<ActionDbRow>(
        `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
        [envelopeHash],
      );
      const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
      const plan = planMove(row, envelopeHash, "acknowledged", { acknowledgement });
      if (!plan.ok) return plan;
      await this.writeMove(c, envelopeHash, row!.phase, "acknowledged", plan.progress);
      return { ok: true, row: { ...row!, phase: "acknowledged", progress: plan.progress } };
    });
  }

  async findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined> {
    const rows = await query<ExecutionRow>(
      this.pool,
      this.db,
      "reading a write-ahead entry",
      `SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`,
      [envelopeHash],
    );
    return rows[0] ? toExecution(rows[0], this.key) : undefined;
  }

  async registerThread(t: NewThread): Promise<ThreadRecord> {
    const sealed = sealThread(this.key, t);
    await this.run(
      `registering thread ${t.threadId}`,
      `INSERT INTO ${this.s}.threads (thread_id, record_json, mac, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (thread_id) DO NOTHING`,
      [t.threadId, sealed.json, sealed.mac, t.createdAt],
    );
    return (await this.getThread(t.threadId))!;
  }

  async getThread(threadId: string): Promise<ThreadRecord | undefined> {
    const rows = await query<ThreadDbRow>(
      this.pool,
      this.db,
      `reading thread ${threadId}`,
      `SELECT * FROM ${this.s}.threads WHERE thread_id = $1`,
      [threadId],
    );
    return rows[0] ? toThreadRecord(rows[0], this.key) : undefined;
  }

  async setThreadScope(threadId: string, scope: ThreadRecord["scope"]): Promise<ThreadRecord | undefined> {
    await this.tx(`setting the scope of thread ${threadId}`, async (c) => {
      const r = await c.query<ThreadDbRow>(
        `SELECT * FROM ${this.s}.threads WHERE thread_id = $1 FOR UPDATE`,
        [threadId],
      );
      if (!r.rows[0]) return;
      const t = toThreadRecord(r.rows[0], this.key);
      const hasAction = await c.query(`SELECT 1 FROM ${this.s}.actions WHERE thread_id = $1 LIMIT 1`, [
        threadId,
      ]);
      if (!t.macValid || t.closed || hasAction.rowCount) return;
      const sealed = sealThread(this.key, { ...t, scope });
      await c.query(`UPDATE ${this.s}.threads SET record_json = $1, mac = $2 WHERE thread_id = $3`, [
        sealed.json,
        sealed.mac,
        threadId,
      ]);
    });
    return this.getThread(threadId);
  }

  async closeThread(
    threadId: string,
    closed: ClosedRecord,
    run: RunClose = {},
  ): Promise<ThreadRecord | undefined> {
    // Durable: this commit is what the outcome is reported from.
    await this.tx(
      `closing thread ${threadId}`,
      async (c) => {
        let action: ActionRow | undefined;
        if (run.action) {
          const r = await c.query<ActionDbRow>(
            `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
            [run.action],
          );
          action = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
          const plan =
            action && !action.progress.closed
              ? planMove(action, run.action, "closed", { closed })
              : undefined;
          if (plan?.ok) {
            await this.writeMove(c, run.action, action!.phase, "closed", plan.progress);
            action = { ...action!, phase: "closed", progress: plan.progress };
          }
        }
        const r = await c.query<{ closed_json: string | null }>(
          `UPDATE ${this.s}.threads SET closed_json = COALESCE(closed_json, $1) WHERE thread_id = $2 RETURNING closed_json`,
          [JSON.stringify(action?.progress.closed ?? closed), threadId],
        );
        const stands = r.rows[0]?.closed_json ? (JSON.parse(r.rows[0].closed_json) as ClosedRecord) : null;
        if (stands && run.records) await this.append(c, run.records(stands, action));
      },
      true,
    );
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
    const fresh = list.map((a) => a.envelopeHash);
    await this.tx(
      `registering ${list.length === 1 ? `action ${list[0]!.envelopeHash}` : `a change set of ${list.length} actions`}`,
      async (c) => {
        const open = await c.query<ActionDbRow>(
          `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 AND phase IN ('registered', 'decided') AND NOT (envelope_hash = ANY($2::text[])) FOR UPDATE`,
          [threadId, fresh],
        );
        for (const r of open.rows)
          await c.query(`UPDATE ${this.s}.actions SET phase = 'superseded' WHERE envelope_hash = $1`, [
            r.envelope_hash,
          ]);
        for (const a of list) {
          const sealed = sealAction(this.key, a);
          await c.query(
            `INSERT INTO ${this.s}.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at)
           VALUES ($1, $2, $3, $4, $5, 'registered', $6, $7) ON CONFLICT (envelope_hash) DO NOTHING`,
            [
              a.envelopeHash,
              a.threadId,
              a.revision,
              sealed.json,
              sealed.mac,
              JSON.stringify(emptyProgress()),
              at,
            ],
          );
        }
      },
    );
    return Promise.all(list.map(async (a) => (await this.getAction(a.envelopeHash))!));
  }

  async getAction(envelopeHash: string): Promise<ActionRow | undefined> {
    const rows = await query<ActionDbRow>(
      this.pool,
      this.db,
      `reading action ${envelopeHash}`,
      `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1`,
      [envelopeHash],
    );
    return rows[0] ? toActionRow(rows[0], this.key) : undefined;
  }

  async currentAction(threadId: string): Promise<ActionRow | undefined> {
    const rows = await query<ActionDbRow>(
      this.pool,
      this.db,
      `reading the current action of thread ${threadId}`,
      `SELECT * FROM ${this.s}.actions WHERE thread_id = $1 ORDER BY id DESC LIMIT 1`,
      [threadId],
    );
    // A change set: every row carries the sealed set; the rows are read in the set's order.
    return currentFrom(rows[0] ? toActionRow(rows[0], this.key) : undefined, (h) => this.getAction(h));
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
    return this.tx(
      `deciding ${decisions.length === 1 ? `action ${decisions[0]!.envelopeHash}` : `a change set of ${decisions.length} actions`}`,
      async (c): Promise<DecideResult> => {
        const planned: Array<{ row: ActionRow; progress: ActionProgress }> = [];
        const refusals: Array<{ phase: Phase | null; reason: string }> = [];
        for (const { envelopeHash, decision } of decisions) {
          const r = await c.query<ActionDbRow>(
            `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
            [envelopeHash],
          );
          const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
          const plan = planMove(row, envelopeHash, "decided", { decision });
          if (!plan.ok) refusals.push({ phase: plan.phase, reason: plan.reason });
          else planned.push({ row: row!, progress: plan.progress });
        }
        const inserted = await c.query(
          `INSERT INTO ${this.s}.decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING nonce`,
          [
            claim.envelopeHash,
            claim.nonce,
            claim.threadId,
            claim.revision,
            claim.decisionType,
            claim.approverId,
            claim.decidedAt,
          ],
        );
        if (inserted.rowCount !== 1) {
          const existing = await c.query<ClaimRow>(
            `SELECT * FROM ${this.s}.decision_claims WHERE nonce = $1`,
            [claim.nonce],
          );
          if (!existing.rows[0])
            throw new Error(
              `decision claim for nonce ${claim.nonce} conflicted but no claim with that nonce exists`,
            );
          return { claimed: false, existing: toClaim(existing.rows[0]) };
        }
        if (refusals.length > 0) {
          // Undo the claim: nothing may be decided for an action that is not waiting.
          await c.query(`DELETE FROM ${this.s}.decision_claims WHERE nonce = $1`, [claim.nonce]);
          return { claimed: false, phase: refusals[0]!.phase, reason: refusals[0]!.reason };
        }
        for (const p of planned)
          await this.writeMove(c, p.row.envelopeHash, "registered", "decided", p.progress);
        await this.append(c, records);
        const first = planned[0]!;
        return { claimed: true, row: { ...first.row, phase: "decided", progress: first.progress } };
      },
    );
  }

  async moveAction(
    envelopeHash: string,
    to: Phase,
    patch: Partial<ActionProgress>,
    records: (row: ActionRow) => AuditEntry[] = () => [],
  ): Promise<TransitionResult> {
    return this.tx(`moving action ${envelopeHash} to ${to}`, async (c): Promise<TransitionResult> => {
      const r = await c.query<ActionDbRow>(
        `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
        [envelopeHash],
      );
      const row = r.rows[0] ? toActionRow(r.rows[0], this.key) : undefined;
      const plan = planMove(row, envelopeHash, to, patch);
      if (!plan.ok) return plan;
      await this.writeMove(c, envelopeHash, row!.phase, to, plan.progress);
      const moved: ActionRow = { ...row!, phase: to, progress: plan.progress };
      await this.append(c, records(moved));
      return { ok: true, row: moved };
    });
  }

  async listRegistered(f: RegisteredPageFilter): Promise<ActionRow[]> {
    const q = pageSql(POSTGRES, `${this.s}.actions`, f);
    const rows = await query<ActionDbRow>(this.pool, this.db, "listing waiting approvals", q.text, q.args);
    return rows.map((r) => toActionRow(r, this.key));
  }

  async countRegistered(f: RegisteredFilter): Promise<number> {
    const q = countSql(POSTGRES, `${this.s}.actions`, f);
    const rows = await query<{ n: string }>(this.pool, this.db, "counting waiting approvals", q.text, q.args);
    return Number(rows[0]?.n ?? 0);
  }

  private async hasLegacyApprovals(): Promise<boolean> {
    const rows = await query<{ t: string | null }>(
      this.pool,
      this.db,
      "looking for an older version's approvals table",
      "SELECT to_regclass($1) AS t",
      [`${this.s}.approvals`],
    );
    return rows[0]?.t != null;
  }

  async legacyApprovals(): Promise<LegacyApproval[] | null> {
    if (!(await this.hasLegacyApprovals())) return null;
    const rows = await query<LegacyApprovalRow>(
      this.pool,
      this.db,
      "listing approvals an older version indexed",
      LEGACY_APPROVALS_SQL(`${this.s}.`),
    );
    return rows.map(toLegacyApproval);
  }

  async retireLegacyApprovals(): Promise<void> {
    await this.run(
      "retiring the older version's approvals table",
      `ALTER TABLE IF EXISTS ${this.s}.approvals RENAME TO approvals_adopted`,
    );
  }

  async noteAgentStep(threadId: string): Promise<number> {
    const rows = await this.run<{ agent_steps: number }>(
      `counting a model turn of thread ${threadId}`,
      `UPDATE ${this.s}.threads SET agent_steps = agent_steps + 1 WHERE thread_id = $1 RETURNING agent_steps`,
      [threadId],
    );
    return Number(rows[0]?.agent_steps ?? 0);
  }

  async noteModelReply(threadId: string, text: string, toolCalls: RecordedToolCall[]): Promise<void> {
    await this.run(
      `recording the model's reply on thread ${threadId}`,
      `UPDATE ${this.s}.threads SET last_reply = $1, last_tool_calls = $2 WHERE thread_id = $3`,
      [
        text.slice(0, MAX_REPLY_CHARS),
        sealedToolCalls(this.key, threadId, text.slice(0, MAX_REPLY_CHARS), toolCalls),
        threadId,
      ],
    );
  }

  async noteInvalidProposal(threadId: string): Promise<number> {
    // One statement that always updates the row, so it waits for a concurrent one and then re-reads the
    // committed row (a CTE's plain SELECT would see the statement's older snapshot and answer 0). Counted
    // once per model turn: invalid_proposal_step is the turn the last one was counted at.
    const rows = await this.run<{ invalid_proposals: number }>(
      `counting an invalid proposal on thread ${threadId}`,
      `UPDATE ${this.s}.threads
         SET invalid_proposals = invalid_proposals + CASE WHEN invalid_proposal_step < agent_steps THEN 1 ELSE 0 END,
             invalid_proposal_step = GREATEST(invalid_proposal_step, agent_steps)
       WHERE thread_id = $1 RETURNING invalid_proposals`,
      [threadId],
    );
    return Number(rows[0]?.invalid_proposals ?? 0);
  }

  async getThreadTurns(threadId: string): Promise<ThreadTurns | undefined> {
    const rows = await query<ThreadTurnsRow>(
      this.pool,
      this.db,
      `reading the turns of thread ${threadId}`,
      `SELECT agent_steps, invalid_proposals, last_reply, last_tool_calls FROM ${this.s}.threads WHERE thread_id = $1`,
      [threadId],
    );
    return rows[0] ? toThreadTurns(rows[0], this.key, threadId) : undefined;
  }

  async recordQuestion(
    q: Omit<QuestionEntry, "status" | "closedAt" | "invalidAnswers" | "lastRefusal">,
  ): Promise<void> {
    await this.run(
      `recording the question of thread ${q.threadId}`,
      `INSERT INTO ${this.s}.questions (thread_id, tool_call_id, question, fields_json, asked_at, status, closed_at, invalid_answers, last_refusal) VALUES ($1, $2, $3, $4, $5, 'open', NULL, 0, NULL)
       ON CONFLICT (thread_id) DO UPDATE SET tool_call_id = excluded.tool_call_id, question = excluded.question, fields_json = excluded.fields_json,
         asked_at = excluded.asked_at, status = 'open', closed_at = NULL,
         invalid_answers = CASE WHEN ${this.s}.questions.tool_call_id <> excluded.tool_call_id THEN 0 ELSE ${this.s}.questions.invalid_answers END,
         last_refusal = CASE WHEN ${this.s}.questions.tool_call_id <> excluded.tool_call_id THEN NULL ELSE ${this.s}.questions.last_refusal END
       WHERE ${this.s}.questions.tool_call_id <> excluded.tool_call_id OR ${this.s}.questions.status = 'open'`,
      [q.threadId, q.toolCallId, q.question, JSON.stringify(q.fields), q.askedAt],
    );
  }

  async noteInvalidAnswer(threadId: string, reason: string): Promise<number> {
    const rows = await this.run<{ invalid_answers: number }>(
      `counting an invalid answer of thread ${threadId}`,
      `UPDATE ${this.s}.questions SET invalid_answers = invalid_answers + 1, last_refusal = $2 WHERE thread_id = $1 AND status = 'open' RETURNING invalid_answers`,
      [threadId, reason],
    );
    return Number(rows[0]?.invalid_answers ?? 0);
  }

  async closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void> {
    await this.run(
      `closing the question of thread ${threadId}`,
      `UPDATE ${this.s}.questions SET status = $1, closed_at = $2 WHERE thread_id = $3 AND status = 'open'`,
      [status, at, threadId],
    );
  }

  async getQuestion(threadId: string): Promise<QuestionEntry | undefined> {
    const rows = await query<QuestionRow>(
      this.pool,
      this.db,
      `reading the question of thread ${threadId}`,
      `SELECT * FROM ${this.s}.questions WHERE thread_id = $1`,
      [threadId],
    );
    return rows[0] ? toQuestion(rows[0]) : undefined;
  }

  async listOpenQuestions(): Promise<QuestionEntry[]> {
    const rows = await query<QuestionRow>(
      this.pool,
      this.db,
      "listing open questions",
      `SELECT q.* FROM ${this.s}.questions q LEFT JOIN ${this.s}.threads t ON t.thread_id = q.thread_id
       WHERE q.status = 'open' AND t.closed_json IS NULL ORDER BY q.asked_at DESC, q.thread_id`,
    );
    return rows.map(toQuestion);
  }

  async listOpenThreads(): Promise<string[]> {
    const rows = await query<{ thread_id: string }>(
      this.pool,
      this.db,
      "listing open threads",
      `SELECT thread_id, MIN(id) AS first FROM ${this.s}.actions WHERE phase IN (${OPEN_PHASES_SQL}) GROUP BY thread_id ORDER BY first`,
    );
    return rows.map((r) => r.thread_id);
  }

  async noteRefusal(
    envelopeHash: string,
    refusal: { code: string; reason: string; at: string },
    counted: boolean,
  ): Promise<ActionRow | undefined> {
    await this.tx(`recording a refused decision for ${envelopeHash}`, async (c) => {
      const r = await c.query<ActionDbRow>(
        `SELECT * FROM ${this.s}.actions WHERE envelope_hash = $1 FOR UPDATE`,
        [envelopeHash],
      );
      if (!r.rows[0]) return;
      const p = JSON.parse(r.rows[0].progress_json) as ActionProgress;
      const next: ActionProgress = {
        ...p,
        lastRefusal: refusal,
        refusalsSeen: p.refusalsSeen + 1,
        refusalsCounted: p.refusalsCounted + (counted ? 1 : 0),
      };
      await c.query(`UPDATE ${this.s}.actions SET progress_json = $1 WHERE envelope_hash = $2`, [
        JSON.stringify(next),
        envelopeHash,
      ]);
    });
    return this.getAction(envelopeHash);
  }

  private async writeMove(
    c: pg.PoolClient,
    envelopeHash: string,
    from: Phase,
    to: Phase,
    progress: ActionProgress,
  ): Promise<void> {
    await c.query(`UPDATE ${this.s}.actions SET phase = $1, progress_json = $2 WHERE envelope_hash = $3`, [
      to,
      JSON.stringify(progress),
      envelopeHash,
    ]);
    if (releasesLease(from, to, progress))
      await c.query(`DELETE FROM ${this.s}.object_leases WHERE owner = $1`, [envelopeHash]);
  }

  /**
   * A row in the journal's own table, not an advisory lock: the lease belongs to the action and must
   * outlive the session (and the process) that took it, so that another worker recovering the action
   * holds it, and it is released by the same transaction that moves the action to verified or closed.
   */
  async acquireObjectLease(
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holdMs: number,
  ): Promise<LeaseResult> {
    return this.tx(`taking the lease on ${objectKey}`, async (c): Promise<LeaseResult> => {
      const now = Date.now();
      // A second round only when another action inserted the missing row between our look and our insert.
      for (;;) {
        const holder = await this.lockLease(c, objectKey);
        if (!leaseIsFree(holder, owner.envelopeHash, now)) return { acquired: false, holder: holder! };
        if (await this.putLease(c, objectKey, owner, holder, now, holdMs))
          return { acquired: true, expiresAt: now + holdMs };
      }
    });
  }

  /** The lease row on an object, locked for the rest of the caller's transaction. */
  private async lockLease(c: pg.PoolClient, objectKey: string): Promise<ObjectLease | undefined> {
    const r = await c.query<LeaseRow>(
      `SELECT * FROM ${this.s}.object_leases WHERE object_key = $1 FOR UPDATE`,
      [objectKey],
    );
    return r.rows[0] ? toLease(r.rows[0]) : undefined;
  }

  /**
   * Takes or renews the lease for `owner` (the caller locked the row and checked leaseIsFree); a renewal
   * keeps its acquisition time. A missing row is inserted only if nobody inserted one meanwhile: false
   * then, and nothing was taken.
   */
  private async putLease(
    c: pg.PoolClient,
    objectKey: string,
    owner: { envelopeHash: string; threadId: string },
    holder: ObjectLease | undefined,
    now: number,
    holdMs: number,
  ): Promise<boolean> {
    const acquiredAt = holder?.owner === owner.envelopeHash ? holder.acquiredAt : now;
    if (holder) {
      await c.query(
        `UPDATE ${this.s}.object_leases SET owner = $2, thread_id = $3, acquired_at = $4, expires_at = $5 WHERE object_key = $1`,
        [objectKey, owner.envelopeHash, owner.threadId, acquiredAt, now + holdMs],
      );
      return true;
    }
    const taken = await c.query(
      `INSERT INTO ${this.s}.object_leases (object_key, owner, thread_id, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (object_key) DO NOTHING`,
      [objectKey, owner.envelopeHash, owner.threadId, acquiredAt, now + holdMs],
    );
    return taken.rowCount === 1;
  }

  /** The lease on an object, if any (expired ones included). */
  private async getObjectLease(objectKey: string): Promise<ObjectLease | undefined> {
    const rows = await query<LeaseRow>(
      this.pool,
      this.db,
      `reading the lease on ${objectKey}`,
      `SELECT * FROM ${this.s}.object_leases WHERE object_key = $1`,
      [objectKey],
    );
    return rows[0] ? toLease(rows[0]) : undefined;
  }

  async acquireThreadLock(threadId: string, owner: string, _leaseMs: number): Promise<boolean> {
    const id = `${threadId}\n${owner}`;
    if (this.held.has(id)) return true;
    const key = lockKey(this.db, `thread:${threadId}`);
    let client: pg.PoolClient;
    try {
      client = await this.pools.locks.connect();
    } catch (e) {
      throw storeError(this.db, `locking thread ${threadId}`, e);
    }
    try {
      const r = await client.query<{ locked: boolean }>(
        `SELECT pg_try_advisory_lock(${key.sql}) AS locked`,
        key.values,
      );
      if (r.rows[0]?.locked) {
        this.held.set(id, client);
        return true;
      }
      this.pools.locks.release(client);
      return false;
    } catch (e) {
      this.pools.locks.release(client, e as Error);
      throw storeError(this.db, `locking thread ${threadId}`, e);
    }
  }

  /** Never throws: a lock whose connection is gone was already released by the server. */
  async releaseThreadLock(threadId: string, owner: string): Promise<void> {
    const id = `${threadId}\n${owner}`;
    const client = this.held.get(id);
    if (!client) return;
    this.held.delete(id);
    const key = lockKey(this.db, `thread:${threadId}`);
    try {
      await client.query(`SELECT pg_advisory_unlock(${key.sql})`, key.values);
      this.pools.locks.release(client);
    } catch (e) {
      // Destroying the connection ends the session, which releases every lock it held.
      this.pools.locks.release(client, e as Error);
    }
  }

  async close(): Promise<void> {
    for (const client of this.held.values()) this.pools.locks.release(client, true);
    this.held.clear();
    await this.pools.close();
  }
}
