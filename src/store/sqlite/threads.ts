/** Thread rows in SQLite: registration, scope and the close that ends a thread. */
import type { ActionRow, ClosedRecord, ThreadRecord } from "../action-machine.js";
import {
  actionRowOf,
  planClose,
  rescoped,
  sealThread,
  toThreadRecord,
  withAuditFrom,
  type NewThread,
  type ThreadDbRow,
  sealedThreadClose,
  threadCloseOf,
} from "../action-rows.js";
import type { RunClose, ThreadJournal } from "../journal/api.js";
import { SqliteBase } from "./base.js";

export class SqliteThreads extends SqliteBase implements ThreadJournal {
  async registerThread(t: NewThread): Promise<ThreadRecord> {
    this.conn.write(() => {
      const audit = this.sql(
        "SELECT coalesce(max(seq), 0) + 1 AS next, EXISTS (SELECT 1 FROM audit_records WHERE thread_id = ?) AS hasRecords FROM audit_records",
      ).get(t.threadId) as { next: number; hasRecords: number };
      const sealed = sealThread(this.key, withAuditFrom(t, { ...audit, hasRecords: audit.hasRecords === 1 }));
      this.sql(
        "INSERT OR IGNORE INTO threads (thread_id, record_json, mac, created_at, keeper) VALUES (?, ?, ?, ?, ?)",
      ).run(t.threadId, sealed.json, sealed.mac, t.createdAt, this.keeper);
    });
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
      const hasAction = this.sql("SELECT 1 FROM actions WHERE thread_id = ? LIMIT 1").get(threadId);
      const values = rescoped(this.key, row, scope, hasAction !== undefined);
      if (values) this.sql("UPDATE threads SET record_json = ?, mac = ? WHERE thread_id = ?").run(...values);
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
        action = actionRowOf(this.actionDbRow(run.action), this.key);
        const plan = planClose(this.key, action, run.action, closed);
        if (plan?.ok) action = this.writeMove(plan);
      }
      this.sql("UPDATE threads SET closed_json = ? WHERE thread_id = ? AND closed_json IS NULL").run(
        sealedThreadClose(this.key, threadId, action?.progress.closed ?? closed),
        threadId,
      );
      // The close that stands, as reported (a first close whose seal fails is reported as such).
      const stands = threadCloseOf(
        this.key,
        threadId,
        (
          this.sql("SELECT closed_json FROM threads WHERE thread_id = ?").get(threadId) as
            { closed_json: string } | undefined
        )?.closed_json ?? null,
      );
      if (stands && run.records) this.append(run.records(stands, action));
    });
    return this.getThread(threadId);
  }
}
