/** What every part of the SQLite journal shares: its connection, key, clock and keeper, and the steps several parts take inside one transaction. */
import Database from "better-sqlite3";
import { SqliteConnection } from "../statements.js";
import { appendOnlyIn, type AuditEntry } from "../audit.js";
import type { ActionRow, ObjectLease } from "../action-machine.js";
import { toLease, type LeaseRow } from "../journal/rows.js";
import { moveWrite, type ActionDbRow, type PlannedMove } from "../action-rows.js";
import type { Keeper } from "../keeper.js";
import type { JournalOptions } from "../journal/api.js";

/** The SQLite journal's connection, MAC key (src/store/journal-key.ts) and options. */
export interface SqliteCore extends Required<JournalOptions> {
  conn: SqliteConnection;
  key: Buffer;
}

export class SqliteBase {
  protected readonly conn: SqliteConnection;
  protected readonly db: Database.Database;
  protected readonly sql: (text: string) => Database.Statement;
  protected readonly key: Buffer;
  protected readonly clock: () => Date;
  protected readonly resumeGraceMs: number;
  protected readonly keeper: Keeper;

  constructor(core: SqliteCore) {
    this.conn = core.conn;
    this.db = core.conn.db;
    this.sql = core.conn.sql;
    this.key = core.key;
    this.clock = core.clock;
    this.resumeGraceMs = core.resumeGraceMs;
    this.keeper = core.keeper;
  }

  /** The action's stored row. */
  protected actionDbRow(envelopeHash: string): ActionDbRow | undefined {
    return this.sql("SELECT * FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
      ActionDbRow | undefined;
  }

  /** Appends audit records inside the caller's transaction. */
  protected append(records: AuditEntry[]): void {
    for (const r of records) appendOnlyIn(this.sql, r, this.clock());
  }

  /** Writes a planned move (moveWrite); returns the moved row. */
  protected writeMove(plan: PlannedMove): ActionRow {
    const move = moveWrite(plan, this.clock().getTime(), this.resumeGraceMs);
    this.sql(
      "UPDATE actions SET phase = ?, progress_json = ?, due_at = ?, due_reason = ?, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = ?",
    ).run(...move.values);
    if (move.releases) this.sql("DELETE FROM object_leases WHERE owner = ?").run(plan.row.envelopeHash);
    return move.row;
  }

  /** The lease row on an object (inside the caller's transaction). */
  protected leaseOn(objectKey: string): ObjectLease | undefined {
    const row = this.sql("SELECT * FROM object_leases WHERE object_key = ?").get(objectKey) as
      LeaseRow | undefined;
    return row ? toLease(row) : undefined;
  }

  /** Takes or renews the lease for `owner` (the caller checked leaseIsFree); a renewal keeps its acquisition time. Returns the expiry. */
  protected putLease(
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
}
