/**
 * The execution journal: consumed nonces, write-ahead entries and per-thread locks, kept OUTSIDE graph
 * state. A checkpoint can be replayed, forked or edited; this file cannot be rewound by doing so, which
 * is what makes "at most one write per approval" hold.
 */
import { type CommitCount, type SqliteConnection } from "./statements.js";
import { ComposedJournal } from "./journal/composed.js";
import { openSqliteFile } from "./sqlite/schema.js";
import type { SqliteCore } from "./sqlite/base.js";
import { SqliteExecutions } from "./sqlite/executions.js";
import { SqliteThreads } from "./sqlite/threads.js";
import { SqliteActions } from "./sqlite/actions.js";
import { SqliteListing } from "./sqlite/listing.js";
import { SqliteTurns } from "./sqlite/turns.js";
import { SqliteQuestions } from "./sqlite/questions.js";
import { SqliteLeases, SqliteLocks } from "./sqlite/leases.js";
import { SqliteDue } from "./sqlite/due.js";
import { DEFAULT_RESUME_GRACE_MS } from "./due.js";
import { DEFAULT_KEEPER } from "./keeper.js";
import type { JournalOptions } from "./journal/api.js";

export * from "./journal/api.js";
export * from "./journal/rows.js";

/** The journal in one SQLite file: a part per concern (src/store/sqlite/), all on one connection. */
export class SqliteJournal extends ComposedJournal {
  /** The connection the audit log shares (src/store/backends.ts), so a transition and its records commit together. */
  readonly conn: SqliteConnection;
  readonly commits: CommitCount;

  constructor(
    file: string,
    /** MAC key for registered rows (src/store/journal-key.ts). */
    key: Buffer,
    opts: JournalOptions = {},
  ) {
    const core: SqliteCore = {
      conn: openSqliteFile(file),
      key,
      clock: opts.clock ?? (() => new Date()),
      resumeGraceMs: opts.resumeGraceMs ?? DEFAULT_RESUME_GRACE_MS,
      keeper: opts.keeper ?? DEFAULT_KEEPER,
    };
    super({
      executions: new SqliteExecutions(core),
      threads: new SqliteThreads(core),
      actions: new SqliteActions(core),
      listing: new SqliteListing(core),
      turns: new SqliteTurns(core),
      questions: new SqliteQuestions(core),
      leases: new SqliteLeases(core),
      locks: new SqliteLocks(core),
      due: new SqliteDue(core),
    });
    this.conn = core.conn;
    this.commits = core.conn.commits;
  }

  async close(): Promise<void> {
    this.conn.close();
  }
}
