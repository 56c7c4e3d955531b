/** Write-ahead entries in SQLite: recorded with the move to intent, answered with the move to acknowledged. */
import type { ActionProgress, TransitionResult } from "../action-machine.js";
import { actionRowOf, planMove, planSealedMove } from "../action-rows.js";
import { executionValues, sealedEntryAnswer, toExecution, type ExecutionRow } from "../journal/rows.js";
import type { BeginWriteResult, ExecutionEntry, ExecutionIntent, ExecutionJournal } from "../journal/api.js";
import { SqliteBase } from "./base.js";

export class SqliteExecutions extends SqliteBase implements ExecutionJournal {
  async recordAcknowledgement(envelopeHash: string, acknowledgement: unknown, at: string): Promise<void> {
    this.conn.write(() =>
      this.sql(
        "UPDATE executions SET ack_json = ?, ack_at = ? WHERE envelope_hash = ? AND ack_json IS NULL",
      ).run(sealedEntryAnswer(this.key, envelopeHash, acknowledgement), at, envelopeHash),
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
      // Still ours since the pre-read took it: a lease taken by another action meanwhile (held, run out,
      // or released again) may cover a write of that action's, which this pre-read did not see.
      if (holder?.owner !== intent.envelopeHash) return { begun: false, leaseHolder: holder ?? null };
      const existing = this.sql("SELECT * FROM executions WHERE envelope_hash = ?").get(
        intent.envelopeHash,
      ) as ExecutionRow | undefined;
      if (existing) return { begun: false, existing: toExecution(existing, this.key) };
      const raw = this.actionDbRow(intent.envelopeHash);
      const plan = planMove(actionRowOf(raw, this.key), intent.envelopeHash, "intent", {});
      if (!plan.ok) return { begun: false, refused: plan.reason };
      this.putLease(lease.objectKey, intent, holder, now, lease.holdMs);
      this.sql(
        "INSERT INTO executions (envelope_hash, thread_id, idempotency_key, args_json, sent_at, mac) VALUES (?, ?, ?, ?, ?, ?)",
      ).run(...executionValues(this.key, intent, sentAt));
      return { begun: true, row: this.writeMove(plan) };
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
      ).run(sealedEntryAnswer(this.key, envelopeHash, acknowledgement), at, envelopeHash);
      const raw = this.actionDbRow(envelopeHash);
      const plan = planSealedMove(this.key, actionRowOf(raw, this.key), envelopeHash, "acknowledged", {
        acknowledgement,
      });
      if (!plan.ok) return plan;
      return { ok: true, row: this.writeMove(plan) };
    });
  }

  async findExecution(envelopeHash: string): Promise<ExecutionEntry | undefined> {
    const row = this.sql("SELECT * FROM executions WHERE envelope_hash = ?").get(envelopeHash) as
      ExecutionRow | undefined;
    return row ? toExecution(row, this.key) : undefined;
  }
}
