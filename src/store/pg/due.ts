/** Due work in PostgreSQL: the actions due now, claimed with a lease; concurrent workers skip each other's rows. */
import type { DueJournal } from "../journal/api.js";
import { toDueItem, type DueItem, type DueRow } from "../due.js";
import { PgBase } from "./base.js";
import type { Keeper } from "../keeper.js";

/**
 * The due query for one keeper (src/store/keeper.ts), schema-qualified: served by the partial index
 * actions_due, in due order; an action whose thread the other side keeps is passed over by a lookup of
 * its thread row by key. Parameters: now, limit, keeper.
 */
export const pgDueSql = (
  s: string,
): string => `SELECT envelope_hash, thread_id, due_at, due_reason FROM ${s}.actions a
  WHERE due_at <= $1 AND (due_lease_until IS NULL OR due_lease_until <= $1)
    AND NOT EXISTS (SELECT 1 FROM ${s}.threads t WHERE t.thread_id = a.thread_id AND t.keeper <> $3)
  ORDER BY due_at LIMIT $2 FOR UPDATE OF a SKIP LOCKED`;

export class PgDue extends PgBase implements DueJournal {
  async claimDue(
    now: Date,
    limit: number,
    owner: string,
    leaseMs: number,
    keeper: Keeper,
  ): Promise<DueItem[]> {
    const nowMs = now.getTime();
    return this.tx("claiming due work", async (c) => {
      const rows = (await c.query<DueRow>(pgDueSql(this.s), [nowMs, limit, keeper])).rows;
      if (rows.length > 0)
        await c.query(
          `UPDATE ${this.s}.actions SET due_owner = $1, due_lease_until = $2 WHERE envelope_hash = ANY($3::text[])`,
          [owner, nowMs + leaseMs, rows.map((r) => r.envelope_hash)],
        );
      return rows.map(toDueItem);
    });
  }

  async releaseDue(envelopeHashes: readonly string[], owner: string, retryAt?: Date): Promise<void> {
    if (envelopeHashes.length === 0) return;
    const which = envelopeHashes.length === 1 ? envelopeHashes[0]! : `${envelopeHashes.length} actions`;
    if (retryAt === undefined)
      await this.run(
        `releasing the claim on ${which}`,
        `UPDATE ${this.s}.actions SET due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = ANY($1::text[]) AND due_owner = $2`,
        [envelopeHashes, owner],
      );
    else
      await this.run(
        `deferring ${which}`,
        `UPDATE ${this.s}.actions SET due_owner = NULL, due_lease_until = NULL, due_at = $3 WHERE envelope_hash = ANY($1::text[]) AND due_owner = $2 AND due_at IS NOT NULL`,
        [envelopeHashes, owner, retryAt.getTime()],
      );
  }
}
