/** Structured questions in PostgreSQL: one row per thread, recorded when asked and closed when answered. */
import { toQuestion, type QuestionRow } from "../journal/rows.js";
import type { AuditEntry } from "../audit.js";
import { PgBase } from "./base.js";
import type { QuestionJournal, QuestionEntry } from "../journal/api.js";

export class PgQuestions extends PgBase implements QuestionJournal {
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

  async noteInvalidAnswer(
    threadId: string,
    reason: string,
    records: (count: number) => AuditEntry[] = () => [],
  ): Promise<number> {
    return this.tx(`counting an invalid answer of thread ${threadId}`, async (c) => {
      const r = await c.query<{ invalid_answers: number }>(
        `UPDATE ${this.s}.questions SET invalid_answers = invalid_answers + 1, last_refusal = $2 WHERE thread_id = $1 AND status = 'open' RETURNING invalid_answers`,
        [threadId, reason],
      );
      if (!r.rows[0]) return 0;
      const count = Number(r.rows[0].invalid_answers);
      await this.append(c, records(count));
      return count;
    });
  }

  async closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void> {
    await this.run(
      `closing the question of thread ${threadId}`,
      `UPDATE ${this.s}.questions SET status = $1, closed_at = $2 WHERE thread_id = $3 AND status = 'open'`,
      [status, at, threadId],
    );
  }

  async getQuestion(threadId: string): Promise<QuestionEntry | undefined> {
    const rows = await this.read<QuestionRow>(
      `reading the question of thread ${threadId}`,
      `SELECT * FROM ${this.s}.questions WHERE thread_id = $1`,
      [threadId],
    );
    return rows[0] ? toQuestion(rows[0]) : undefined;
  }

  async listOpenQuestions(): Promise<QuestionEntry[]> {
    const rows = await this.read<QuestionRow>(
      "listing open questions",
      `SELECT q.* FROM ${this.s}.questions q LEFT JOIN ${this.s}.threads t ON t.thread_id = q.thread_id
       WHERE q.status = 'open' AND t.closed_json IS NULL ORDER BY q.asked_at DESC, q.thread_id`,
    );
    return rows.map(toQuestion);
  }
}
