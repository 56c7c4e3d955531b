/** Structured questions in SQLite: one row per thread, recorded when asked and closed when answered. */
import { toQuestion, type QuestionRow } from "../journal/rows.js";
import type { QuestionEntry, QuestionJournal } from "../journal/api.js";
import type { AuditEntry } from "../audit.js";
import { SqliteBase } from "./base.js";

export class SqliteQuestions extends SqliteBase implements QuestionJournal {
  async recordQuestion(
    q: Omit<QuestionEntry, "status" | "closedAt" | "invalidAnswers" | "lastRefusal">,
  ): Promise<void> {
    this.conn.write(() =>
      this.sql(
        `INSERT INTO questions (thread_id, tool_call_id, question, fields_json, asked_at, status, closed_at, invalid_answers, last_refusal) VALUES (?, ?, ?, ?, ?, 'open', NULL, 0, NULL)
         ON CONFLICT (thread_id) DO UPDATE SET tool_call_id = excluded.tool_call_id, question = excluded.question, fields_json = excluded.fields_json,
           asked_at = excluded.asked_at, status = 'open', closed_at = NULL,
           invalid_answers = CASE WHEN questions.tool_call_id != excluded.tool_call_id THEN 0 ELSE questions.invalid_answers END,
           last_refusal = CASE WHEN questions.tool_call_id != excluded.tool_call_id THEN NULL ELSE questions.last_refusal END
         WHERE questions.tool_call_id != excluded.tool_call_id OR questions.status = 'open'`,
      ).run(q.threadId, q.toolCallId, q.question, JSON.stringify(q.fields), q.askedAt),
    );
  }

  async noteInvalidAnswer(
    threadId: string,
    reason: string,
    records: (count: number) => AuditEntry[] = () => [],
  ): Promise<number> {
    return this.conn.write(() => {
      const row = this.sql(
        "UPDATE questions SET invalid_answers = invalid_answers + 1, last_refusal = ? WHERE thread_id = ? AND status = 'open' RETURNING invalid_answers",
      ).get(reason, threadId) as { invalid_answers: number } | undefined;
      if (!row) return 0;
      this.append(records(row.invalid_answers));
      return row.invalid_answers;
    });
  }

  async closeQuestion(threadId: string, status: "answered" | "closed", at: string): Promise<void> {
    this.conn.write(() =>
      this.sql("UPDATE questions SET status = ?, closed_at = ? WHERE thread_id = ? AND status = 'open'").run(
        status,
        at,
        threadId,
      ),
    );
  }

  async getQuestion(threadId: string): Promise<QuestionEntry | undefined> {
    const row = this.sql("SELECT * FROM questions WHERE thread_id = ?").get(threadId) as
      QuestionRow | undefined;
    return row ? toQuestion(row) : undefined;
  }

  async listOpenQuestions(): Promise<QuestionEntry[]> {
    const rows = this.sql(
      `SELECT q.* FROM questions q LEFT JOIN threads t ON t.thread_id = q.thread_id
         WHERE q.status = 'open' AND t.closed_json IS NULL ORDER BY q.asked_at DESC, q.thread_id`,
    ).all() as QuestionRow[];
    return rows.map(toQuestion);
  }
}
