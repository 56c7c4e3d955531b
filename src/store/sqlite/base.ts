/** What every part of the SQLite journal shares: its connection, key and clock, and the steps several parts take inside one transaction. */
import Database from "better-sqlite3";
import { SqliteConnection } from "../statements.js";
import { appendOnlyIn, type AuditEntry } from "../audit.js";
import type { ActionProgress, ObjectLease, Phase } from "../action-machine.js";
import { releasesLease } from "../action-machine.js";
import { toLease, type LeaseRow } from "../journal/rows.js";
import { progressColumn } from "../action-rows.js";
import { dueColumns, dueOnMove } from "../due.js";
import type { Keeper } from "../keeper.js";

/** The SQLite journal's connection, MAC key (src/store/journal-key.ts) and clock. */
export interface SqliteCore {
  conn: SqliteConnection;
  key: Buffer;
  clock: () => Date;
  /** How long after entering a post-approval phase an action falls due for a worker (src/store/due.ts). */
  resumeGraceMs: number;
  /** Which side keeps the checkpoints of the threads this process registers (src/store/keeper.ts). */
  keeper: Keeper;
}

export class SqliteBase {
  protected readonly conn: SqliteConnection;
  protected readonly db: Database.Database;
  protected readonly sql: (text: string) => Database.Statement;
  protected readonly key: Buffer;
  protected readonly clock: () => Date;
  protected readonly resumeGraceMs: number;

  constructor(core: SqliteCore) {
    this.conn = core.conn;
    this.db = core.conn.db;
    this.sql = core.conn.sql;
    this.key = core.key;
    this.clock = core.clock;
    this.resumeGraceMs = core.resumeGraceMs;
  }

  /** Appends audit records inside the caller's transaction. */
  protected append(records: AuditEntry[]): void {
    for (const r of records) appendOnlyIn(this.sql, r, this.clock());
  }

  /**
   * Moves the action (the caller planned the move) and sets when it is next due; any worker's claim on
   * it ends. Returns the progress as stored (progressColumn: only the part the move adds is serialised).
   */
  protected writeMove(
    envelopeHash: string,
    from: Phase,
    to: Phase,
    progress: ActionProgress,
  ): ActionProgress {
    const [dueAt, dueReason] = dueColumns(dueOnMove(to, this.clock().getTime(), this.resumeGraceMs));
    const column = progressColumn(envelopeHash, progress);
    this.sql(
      "UPDATE actions SET phase = ?, progress_json = ?, due_at = ?, due_reason = ?, due_owner = NULL, due_lease_until = NULL WHERE envelope_hash = ?",
    ).run(to, column.text, dueAt, dueReason, envelopeHash);
    if (releasesLease(from, to, column.progress))
      this.sql("DELETE FROM object_leases WHERE owner = ?").run(envelopeHash);
    return column.progress;
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
