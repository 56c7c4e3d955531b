/** The model's turns in PostgreSQL, counted in the thread row. */
import { sealedToolCalls, toThreadTurns, type ThreadTurnsRow } from "../journal/rows.js";
import { MAX_REPLY_CHARS } from "../journal/api.js";
import { PgBase } from "./base.js";
import type { TurnJournal, RecordedToolCall, ThreadTurns } from "../journal/api.js";

export class PgTurns extends PgBase implements TurnJournal {
  async noteAgentStep(threadId: string): Promise<number> {
    const rows = await this.run<{ agent_steps: number }>(
      `counting a model turn of thread ${threadId}`,
      `UPDATE ${this.s}.threads SET agent_steps = agent_steps + 1 WHERE thread_id = $1 RETURNING agent_steps`,
      [threadId],
    );
    return Number(rows[0]?.agent_steps ?? 0);
  }

  async noteModelReply(threadId: string, text: string, toolCalls: RecordedToolCall[]): Promise<void> {
    await this.run(
      `recording the model's reply on thread ${threadId}`,
      `UPDATE ${this.s}.threads SET last_reply = $1, last_tool_calls = $2 WHERE thread_id = $3`,
      [
        text.slice(0, MAX_REPLY_CHARS),
        sealedToolCalls(this.key, threadId, text.slice(0, MAX_REPLY_CHARS), toolCalls),
        threadId,
      ],
    );
  }

  async noteInvalidProposal(threadId: string): Promise<number> {
    // One statement that always updates the row, so it waits for a concurrent one and then re-reads the
    // committed row (a CTE's plain SELECT would see the statement's older snapshot and answer 0). Counted
    // once per model turn: invalid_proposal_step is the turn the last one was counted at.
    const rows = await this.run<{ invalid_proposals: number }>(
      `counting an invalid proposal on thread ${threadId}`,
      `UPDATE ${this.s}.threads
         SET invalid_proposals = invalid_proposals + CASE WHEN invalid_proposal_step < agent_steps THEN 1 ELSE 0 END,
             invalid_proposal_step = GREATEST(invalid_proposal_step, agent_steps)
       WHERE thread_id = $1 RETURNING invalid_proposals`,
      [threadId],
    );
    return Number(rows[0]?.invalid_proposals ?? 0);
  }

  async getThreadTurns(threadId: string): Promise<ThreadTurns | undefined> {
    const rows = await this.read<ThreadTurnsRow>(
      `reading the turns of thread ${threadId}`,
      `SELECT agent_steps, invalid_proposals, last_reply, last_tool_calls FROM ${this.s}.threads WHERE thread_id = $1`,
      [threadId],
    );
    return rows[0] ? toThreadTurns(rows[0], this.key, threadId) : undefined;
  }
}
