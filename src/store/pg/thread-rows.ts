/** A thread's rows in one statement (Journal.threadRows): its record, its newest action and its question. */
import {
  toActionRow,
  toThreadRecord,
  currentFrom,
  type ActionDbRow,
  type ThreadDbRow,
} from "../action-rows.js";
import { toQuestion, type QuestionRow } from "../journal/rows.js";
import type { ThreadRows } from "../journal/api.js";
import type { ActionPart } from "../journal/composed.js";
import { PgBase, type PgCore } from "./base.js";

export class PgThreadRows extends PgBase {
  constructor(
    core: PgCore,
    private readonly actions: Pick<ActionPart, "getAction">,
  ) {
    super(core);
  }

  /**
   * The rows getThread, currentAction and getQuestion read, as JSON of each row (TEXT stays the exact
   * stored text, so the seals are checked over the same bytes); a change set's other members are
   * then read as currentAction reads them.
   */
  async threadRows(threadId: string): Promise<ThreadRows> {
    const [r] = await this.read<{
      thread: ThreadDbRow | null;
      action: ActionDbRow | null;
      question: QuestionRow | null;
    }>(
      `reading thread ${threadId}`,
      `SELECT (SELECT to_json(t) FROM ${this.s}.threads t WHERE t.thread_id = $1) AS thread,
        (SELECT to_json(a) FROM ${this.s}.actions a WHERE a.thread_id = $1 ORDER BY a.id DESC LIMIT 1) AS action,
        (SELECT to_json(q) FROM ${this.s}.questions q WHERE q.thread_id = $1) AS question`,
      [threadId],
    );
    return {
      thread: r?.thread ? toThreadRecord(r.thread, this.key) : undefined,
      action: await currentFrom(r?.action ? toActionRow(r.action, this.key) : undefined, (h) =>
        this.actions.getAction(h),
      ),
      question: r?.question ? toQuestion(r.question) : undefined,
    };
  }
}
