/** Write-ahead entries in PostgreSQL: recorded with the move to intent, answered with the move to acknowledged. */
import { executionValues, sealedEntryAnswer, toExecution, type ExecutionRow } from "../journal/rows.js";
import type { ActionProgress, TransitionResult } from "../action-machine.js";
import { actionRowOf, planMove, planSealedMove } from "../action-rows.js";
import { PgBase } from "./base.js";
import type { ExecutionJournal, BeginWriteResult, ExecutionEntry, ExecutionIntent } from "../journal/api.js";

export class PgExecutions extends PgBase implements ExecutionJournal {
  async recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void> {
    await this.run(
      `recording the acknowledgement for ${envelopeHash}`,
      `UPDATE ${this.s}.executions SET ack_json = $1, ack_at = $2 WHERE envelope_hash = $3 AND ack_json IS NULL`,
      [sealedEntryAnswer(this.key, envelopeHash, acknowledgement), at, envelopeHash],
    );
  }

  async beginWrite(
    intent: ExecutionIntent,
    sentAt: string,
    lease: { objectKey: string; holdMs: number },
  ): Promise<BeginWriteResult> {
    // Locks in the same order as every move (the action row first, then its lease), so a concurrent
    // close of the same action cannot deadlock with this.
    return this.tx(
      `beginning the write for ${intent.envelopeHash}`,
      async (c): Promise<BeginWriteResult> => {
        const now = Date.now();
        const raw = await this.lockAction(c, intent.envelopeHash);
        const holder = await this.lockLease(c, lease.objectKey);
        // Still ours since the pre-read took it: a lease taken by another action meanwhile (held, run
        // out, or released again) may cover a write of that action's, which this pre-read did not see.
        if (holder?.owner !== intent.envelopeHash) return { begun: false, leaseHolder: holder ?? null };
        const existing = await c.query<ExecutionRow>(
          `SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`,
          [intent.envelopeHash],
        );
        if (existing.rows[0]) return { begun: false, existing: toExecution(existing.rows[0], this.key) };
        const plan = planMove(actionRowOf(raw, this.key), intent.envelopeHash, "intent", {});
        if (!plan.ok) return { begun: false, refused: plan.reason };
        const inserted = await c.query(
          `INSERT INTO ${this.s}.executions (envelope_hash, thread_id, idempotency_key, args_json, sent_at, mac)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING envelope_hash`,
          executionValues(this.key, intent, sentAt),
        );
        if (inserted.rowCount !== 1)
          throw new Error(
            `write-ahead entry for ${intent.envelopeHash} conflicted on its idempotency key ${intent.idempotencyKey} with another envelope`,
          );
        // The row is ours and locked: the renewal updates it in place.
        await this.putLease(c, lease.objectKey, intent, holder, now, lease.holdMs);
        return { begun: true, row: await this.writeMove(c, plan) };
      },
      true,
    );
  }

  async recordAnswer(
    envelopeHash: string,
    acknowledgement: ActionProgress["acknowledgement"] & {},
    at: string,
  ): Promise<TransitionResult> {
    return this.tx(`recording the answer for ${envelopeHash}`, async (c): Promise<TransitionResult> => {
      await c.query(
        `UPDATE ${this.s}.executions SET ack_json = $1, ack_at = $2 WHERE envelope_hash = $3 AND ack_json IS NULL`,
        [sealedEntryAnswer(this.key, envelopeHash, acknowledgement), at, envelopeHash],
      );
      const raw = await this.lockAction(c, envelopeHash);
      const plan = planSealedMove(this.key, actionRowOf(raw, this.key), envelopeHash, "acknowledged", {
        acknowledgement,
      });
      if (!plan.ok) return plan;
      return { ok: true, row: await this.writeMove(c, plan) };
    });
  }

  async findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined> {
    const rows = await this.read<ExecutionRow>(
      "reading a write-ahead entry",
      `SELECT * FROM ${this.s}.executions WHERE envelope_hash = $1`,
      [envelopeHash],
    );
    return rows[0] ? toExecution(rows[0], this.key) : undefined;
  }
}
