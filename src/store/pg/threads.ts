/** Thread rows in PostgreSQL: registration, scope and the close that ends a thread. */
import type { RunClose, ThreadJournal } from "../journal/api.js";
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
import { PgBase } from "./base.js";

export class PgThreads extends PgBase implements ThreadJournal {
  async registerThread(t: NewThread): Promise<ThreadRecord> {
    // Records appended meanwhile get a later seq; the thread's own come after its registration.
    const [audit] = await this.read<{ next: string; has_records: boolean }>(
      `registering thread ${t.threadId}`,
      `SELECT coalesce(max(seq), 0) + 1 AS next, EXISTS (SELECT 1 FROM ${this.s}.audit_records WHERE thread_id = $1) AS has_records FROM ${this.s}.audit_records`,
      [t.threadId],
    );
    const sealed = sealThread(
      this.key,
      withAuditFrom(t, { next: Number(audit!.next), hasRecords: audit!.has_records }),
    );
    await this.run(
      `registering thread ${t.threadId}`,
      `INSERT INTO ${this.s}.threads (thread_id, record_json, mac, created_at, keeper) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (thread_id) DO NOTHING`,
      [t.threadId, sealed.json, sealed.mac, t.createdAt, this.keeper],
    );
    return (await this.getThread(t.threadId))!;
  }

  async getThread(threadId: string): Promise<ThreadRecord | undefined> {
    const rows = await this.read<ThreadDbRow>(
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
      const hasAction = await c.query(`SELECT 1 FROM ${this.s}.actions WHERE thread_id = $1 LIMIT 1`, [
        threadId,
      ]);
      const values = rescoped(this.key, r.rows[0], scope, Boolean(hasAction.rowCount));
      if (values)
        await c.query(`UPDATE ${this.s}.threads SET record_json = $1, mac = $2 WHERE thread_id = $3`, values);
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
          action = actionRowOf(await this.lockAction(c, run.action), this.key);
          const plan = planClose(this.key, action, run.action, closed);
          if (plan?.ok) action = await this.writeMove(c, plan);
        }
        const r = await c.query<{ closed_json: string | null }>(
          `UPDATE ${this.s}.threads SET closed_json = COALESCE(closed_json, $1) WHERE thread_id = $2 RETURNING closed_json`,
          [sealedThreadClose(this.key, threadId, action?.progress.closed ?? closed), threadId],
        );
        // The close that stands, as reported (a first close whose seal fails is reported as such).
        const stands = threadCloseOf(this.key, threadId, r.rows[0]?.closed_json ?? null);
        if (stands && run.records) await this.append(c, run.records(stands, action));
      },
      true,
    );
    return this.getThread(threadId);
  }
}
