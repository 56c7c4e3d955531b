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
import { toApproval, toClaim, toExecution, type ApprovalEntry, type ApprovalRow, type ClaimResult, type ClaimRow, type DecisionClaim, type ExecutionEntry, type ExecutionIntent, type ExecutionRow, type Journal } from "./journal.js";
import { createPool, inTransaction, lockKey, prepareDatabase, query, quoteIdent, storeError } from "./postgres.js";

export class PostgresJournal implements Journal {
  private readonly s: string;
  /** Connections holding a thread lock, by thread and owner. */
  private readonly held = new Map<string, pg.PoolClient>();

  private constructor(
    private readonly pool: pg.Pool,
    /** Lock connections come from their own pool so a long run cannot starve ordinary queries. */
    private readonly lockPool: pg.Pool,
    private readonly db: DatabaseConfig,
  ) {
    this.s = quoteIdent(db.schema);
  }

  /** Connects, applies pending migrations and returns a journal; fails with StoreUnavailableError when the server is not there. */
  static async open(db: DatabaseConfig): Promise<PostgresJournal> {
    const pool = createPool(db, { name: "journal" });
    await prepareDatabase(pool, db).catch(async (e: unknown) => {
      await pool.end().catch(() => {});
      throw e;
    });
    return new PostgresJournal(pool, createPool(db, { name: "locks", max: 20 }), db);
  }

  async claimDecision(claim: DecisionClaim): Promise<ClaimResult> {
    return inTransaction(this.pool, this.db, `claiming decision nonce ${claim.nonce} on thread ${claim.threadId}`, async (c) => {
      const inserted = await c.query(
        `INSERT INTO ${this.s}.decision_claims (envelope_hash, nonce, thread_id, revision, decision_type, approver_id, decided_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING nonce`,
        [claim.envelopeHash, claim.nonce, claim.threadId, claim.revision, claim.decisionType, claim.approverId, claim.decidedAt],
      );
      if (inserted.rowCount === 1) return { claimed: true as const };
      const existing = await c.query<ClaimRow>(`SELECT * FROM ${this.s}.decision_claims WHERE nonce = $1`, [claim.nonce]);
      const row = existing.rows[0];
      if (!row) throw new Error(`decision claim for nonce ${claim.nonce} conflicted but no claim with that nonce exists`);
      return { claimed: false as const, existing: toClaim(row) };
    });
  }

  async findClaim(nonce: string): Promise<DecisionClaim | undefined> {
    const rows = await query<ClaimRow>(this.pool, this.db, "reading a decision claim", `SELECT * FROM ${this.s}.decision_claims WHERE nonce = $1`, [nonce]);
    return rows[0] ? toClaim(rows[0]) : undefined;
  }

  async recordIntent(intent: ExecutionIntent, sentAt: string): Promise<{ recorded: true } | { recorded: false; existing: ExecutionEntry }> {
    return inTransaction(this.pool, this.db, `recording the write-ahead entry for ${intent.envelopeHash}`, async (c) => {
      const inserted = await c.query(
        `INSERT INTO ${this.s}.executions (envelope_hash, thread_id, idempotency_key, args_json, sent_at)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING envelope_hash`,
        [intent.envelopeHash, intent.threadId, intent.idempotencyKey, JSON.stringify(intent.args), sentAt],
      );
      if (inserted.rowCount === 1) return { recorded: true as const };
      const existing = await c.query<ExecutionRow>(`SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`, [intent.envelopeHash]);
      const row = existing.rows[0];
      if (!row) throw new Error(`write-ahead entry for ${intent.envelopeHash} conflicted on its idempotency key ${intent.idempotencyKey} with another envelope`);
      return { recorded: false as const, existing: toExecution(row) };
    });
  }

  async recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void> {
    await query(
      this.pool,
      this.db,
      `recording the acknowledgement for ${envelopeHash}`,
      `UPDATE ${this.s}.executions SET ack_json = $1, ack_at = $2 WHERE envelope_hash = $3 AND ack_json IS NULL`,
      [JSON.stringify(acknowledgement), at, envelopeHash],
    );
  }

  async findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined> {
    const rows = await query<ExecutionRow>(this.pool, this.db, "reading a write-ahead entry", `SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`, [envelopeHash]);
    return rows[0] ? toExecution(rows[0]) : undefined;
  }

  async registerApproval(e: Omit<ApprovalEntry, "status">): Promise<void> {
    await query(
      this.pool,
      this.db,
      `registering approval ${e.envelopeHash}`,
      `INSERT INTO ${this.s}.approvals (envelope_hash, thread_id, revision, requested_by, created_at, expires_at, status)
       VALUES ($1, $2, $3, $4, $5, $6, 'pending') ON CONFLICT (envelope_hash) DO NOTHING`,
      [e.envelopeHash, e.threadId, e.revision, e.requestedBy, e.createdAt, e.expiresAt],
    );
  }

  async setApprovalStatus(envelopeHash: string, status: ApprovalEntry["status"]): Promise<void> {
    await query(this.pool, this.db, `updating approval ${envelopeHash}`, `UPDATE ${this.s}.approvals SET status = $1 WHERE envelope_hash = $2`, [status, envelopeHash]);
  }

  async closeThreadApprovals(threadId: string, status: ApprovalEntry["status"]): Promise<void> {
    await query(
      this.pool,
      this.db,
      `closing the approvals of thread ${threadId}`,
      `UPDATE ${this.s}.approvals SET status = $1 WHERE thread_id = $2 AND status = 'pending'`,
      [status, threadId],
    );
  }

  async listApprovals(status?: ApprovalEntry["status"]): Promise<ApprovalEntry[]> {
    const rows = status
      ? await query<ApprovalRow>(this.pool, this.db, "listing approvals", `SELECT * FROM ${this.s}.approvals WHERE status = $1 ORDER BY created_at, id`, [status])
      : await query<ApprovalRow>(this.pool, this.db, "listing approvals", `SELECT * FROM ${this.s}.approvals ORDER BY created_at, id`);
    return rows.map(toApproval);
  }

  async acquireThreadLock(threadId: string, owner: string, _leaseMs: number): Promise<boolean> {
    const id = `${threadId}\n${owner}`;
    if (this.held.has(id)) return true;
    const key = lockKey(this.db, `thread:${threadId}`);
    let client: pg.PoolClient;
    try {
      client = await this.lockPool.connect();
    } catch (e) {
      throw storeError(this.db, `locking thread ${threadId}`, e);
    }
    try {
      const r = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${key.sql}) AS locked`, key.values);
      if (r.rows[0]?.locked) {
        this.held.set(id, client);
        return true;
      }
      client.release();
      return false;
    } catch (e) {
      client.release(e as Error);
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
      client.release();
    } catch (e) {
      // Destroying the connection ends the session, which releases every lock it held.
      client.release(e as Error);
    }
  }

  async close(): Promise<void> {
    for (const client of this.held.values()) client.release(true);
    this.held.clear();
    await Promise.allSettled([this.pool.end(), this.lockPool.end()]);
  }
}
