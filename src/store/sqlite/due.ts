/** Due work in SQLite: claiming the actions due now under the file's write lock, with a lease per claim. */
import type { DueJournal } from "../journal/api.js";
import { toDueItem, type DueItem, type DueRow } from "../due.js";
import { SqliteBase } from "./base.js";
import type { Keeper } from "../keeper.js";

/**
 * The due query for one keeper (src/store/keeper.ts): served by the partial index actions_due
 * (src/store/sqlite/schema.ts), in due order; an action whose thread the other side keeps is passed
 * over by a lookup of its thread row by key. Parameters: now, now, keeper, limit.
 */
export const SQLITE_DUE_SQL = `SELECT envelope_hash, thread_id, due_at, due_reason FROM actions
  WHERE due_at IS NOT NULL AND due_at <= ? AND (due_lease_until IS NULL OR due_lease_until <= ?)
    AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = actions.thread_id AND t.keeper <> ?)
  ORDER BY due_at LIMIT ?`;

export class SqliteDue extends SqliteBase implements DueJournal {
  async claimDue(
    now: Date,
    limit: number,
    owner: string,
    leaseMs: number,
    keeper: Keeper,
  ): Promise<DueItem[]> {
    const nowMs = now.getTime();
    // One IMMEDIATE transaction: the file's write lock makes the select and the claim one step for every process.
    return this.conn.write(() => {
      const rows = this.sql(SQLITE_DUE_SQL).all(nowMs, nowMs, keeper, limit) as DueRow[];
      const claim = this.sql("UPDATE actions SET due_owner = ?, due_lease_until = ? WHERE envelope_hash = ?");
      for (const r of rows) claim.run(owner, nowMs + leaseMs, r.envelope_hash);
      return rows.map(toDueItem);
    });
  }

  async releaseDue(envelopeHashes: readonly string[], owner: string, retryAt?: Date): Promise<void> {
    if (envelopeHashes.length === 0) return;
    this.conn.write(() => {
      for (const envelopeHash of envelopeHashes)
        if (retryAt === undefined)
          this.sql(
            "UPDATE actions SET due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = ? AND due_owner = ?",
          ).run(envelopeHash, owner);
        else
          this.sql(
            "UPDATE actions SET due_owner = NULL, due_lease_until = NULL, due_at = ? WHERE envelope_hash = ? AND due_owner = ? AND due_at IS NOT NULL",
          ).run(retryAt.getTime(), envelopeHash, owner);
    });
  }
}
