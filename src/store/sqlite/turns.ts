/** The model's turns in SQLite, counted in the thread row. */
import { sealedToolCalls, toThreadTurns, type ThreadTurnsRow } from "../journal/rows.js";
import { MAX_REPLY_CHARS } from "../journal/api.js";
import type { RecordedToolCall, ThreadTurns, TurnJournal } from "../journal/api.js";
import { SqliteBase } from "./base.js";

export class SqliteTurns extends SqliteBase implements TurnJournal {
  async noteAgentStep(threadId: string): Promise<number> {
    const row = this.conn.write(
      () =>
        this.sql(
          "UPDATE threads SET agent_steps = agent_steps + 1 WHERE thread_id = ? RETURNING agent_steps",
        ).get(threadId) as { agent_steps: number } | undefined,
    );
    return row?.agent_steps ?? 0;
  }

  async noteModelReply(threadId: string, text: string, toolCalls: RecordedToolCall[]): Promise<void> {
    const reply = text.slice(0, MAX_REPLY_CHARS);
    this.conn.write(() =>
      this.sql("UPDATE threads SET last_reply = ?, last_tool_calls = ? WHERE thread_id = ?").run(
        reply,
        sealedToolCalls(this.key, threadId, reply, toolCalls),
        threadId,
      ),
    );
  }

  async noteInvalidProposal(threadId: string): Promise<number> {
    return this.conn.write(() => {
      // Counted once per model turn: invalid_proposal_step is the turn the last one was counted at.
      this.sql(
        "UPDATE threads SET invalid_proposals = invalid_proposals + 1, invalid_proposal_step = agent_steps WHERE thread_id = ? AND invalid_proposal_step < agent_steps",
      ).run(threadId);
      const row = this.sql("SELECT invalid_proposals FROM threads WHERE thread_id = ?").get(threadId) as
        { invalid_proposals: number } | undefined;
      return row?.invalid_proposals ?? 0;
    });
  }

  async getThreadTurns(threadId: string): Promise<ThreadTurns | undefined> {
    const row = this.sql(
      "SELECT agent_steps, invalid_proposals, last_reply, last_tool_calls FROM threads WHERE thread_id = ?",
    ).get(threadId) as ThreadTurnsRow | undefined;
    return row ? toThreadTurns(row, this.key, threadId) : undefined;
  }
}
