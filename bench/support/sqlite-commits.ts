/**
 * Counts SQLite commits per file as better-sqlite3 sees them, whatever code issues them (journal, audit
 * log, checkpointer, a bare SqliteSaver): every statement run on any connection in this process passes
 * through better-sqlite3's Statement.prototype (run, get, all) or Database.prototype.exec, which
 * `installCommitCounter` wraps once. A commit is the end of a transaction that changed rows (COMMIT, or
 * an autocommit write statement), detected by the connection leaving its transaction and its
 * `total_changes()` having grown; a ROLLBACK is not one. At each commit the connection's own
 * `PRAGMA synchronous` and `PRAGMA journal_mode` are read, because a store may switch them per
 * transaction: in WAL mode only synchronous=FULL (2) or EXTRA (3) fsyncs at commit (NORMAL syncs only
 * at checkpoints), in rollback-journal modes NORMAL and above do.
 *
 * Explicit syncs outside SQLite (fs.fsyncSync, fs.fdatasyncSync, fs.fsync, fs.fdatasync from this
 * process, e.g. the write anchor's) are counted too, as `syncCalls` of the file they synced.
 *
 * Counting can be switched off (`pause`) and on again (`resume`), process-wide: while it is off the
 * wrappers call better-sqlite3 and node:fs straight away (no timing, no extra queries, no sync notes),
 * so timed samples run at the cost of one flag test per statement. Each connection's `total_changes()`
 * baseline is read again before its first statement after `resume`, so changes made while counting was
 * off are not taken for a commit. The edge: a transaction open across `resume` counts as a commit only
 * if it changes rows after `resume`.
 *
 * Not seen here: WAL checkpoints and WAL-header syncs (SQLite's own, amortised over many commits),
 * schema-only commits (DDL does not change total_changes(); stores run it when they open), the
 * directory syncs SQLite makes when it creates a file, and PostgreSQL.
 * `strace -f -e trace=fsync,fdatasync -y` on the process sees those (bench/README.md).
 */
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";

type Db = Database.Database;
type Statement = Database.Statement;

export interface FileCounts {
  /** Transactions that changed rows and committed. */
  commits: number;
  /** Those of them that fsync at commit under the connection's settings at that moment. */
  durableCommits: number;
  /** Commits by setting at the time, e.g. { "wal/NORMAL": 7, "wal/FULL": 2 }. */
  settings: Record<string, number>;
  /** fsync/fdatasync calls made on this file outside SQLite. */
  syncCalls: number;
  /** Statements run (BEGIN and COMMIT included), and the time spent inside them. */
  statements: number;
  ms: number;
}

/** Counts per file (basename of the database path; ":memory:" for in-memory ones). */
export type Counts = Record<string, FileCounts>;

const SYNCHRONOUS = ["OFF", "NORMAL", "FULL", "EXTRA"];

interface Connection {
  file: string;
  lastTotalChanges: number;
  /** The `resume` generation lastTotalChanges was read in; an older one is refreshed before use. */
  generation: number;
  totalChanges: Statement;
  synchronous: Statement;
  journalMode: Statement;
}

interface Originals {
  run: Statement["run"];
  get: Statement["get"];
  all: Statement["all"];
  exec: Db["exec"];
}

let installed: { counts: Counts; connections: WeakMap<Db, Connection>; originals: Originals } | undefined;

/** Whether the wrappers count; shared by every CommitCounter of the process. */
let counting = true;
/** Incremented by each `resume`, so each connection re-reads its baseline once. */
let generation = 0;

/** Wraps better-sqlite3 once per process; later calls return the same counter. */
export function installCommitCounter(): CommitCounter {
  if (!installed) installed = install();
  return new CommitCounter(installed.counts);
}

export class CommitCounter {
  constructor(private readonly live: Counts) {}

  /** Whether statements and syncs are being counted (process-wide). */
  get counting(): boolean {
    return counting;
  }

  /** Stops counting, process-wide: statements and syncs go straight to better-sqlite3 and node:fs. */
  pause(): void {
    counting = false;
  }

  /** Counts again from here on; each connection re-reads its `total_changes()` before its next statement. */
  resume(): void {
    if (counting) return;
    counting = true;
    generation += 1;
  }

  /** A copy of the counts so far; subtract two with `diff`. */
  snapshot(): Counts {
    const out: Counts = {};
    for (const [file, c] of Object.entries(this.live)) out[file] = { ...c, settings: { ...c.settings } };
    return out;
  }
}

/** What happened between two snapshots, per file; files with nothing in between are left out. */
export function diff(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const [file, a] of Object.entries(after)) {
    const b = before[file];
    const settings: Record<string, number> = {};
    for (const [k, v] of Object.entries(a.settings))
      if (v - (b?.settings[k] ?? 0) > 0) settings[k] = v - (b?.settings[k] ?? 0);
    const d: FileCounts = {
      commits: a.commits - (b?.commits ?? 0),
      durableCommits: a.durableCommits - (b?.durableCommits ?? 0),
      syncCalls: a.syncCalls - (b?.syncCalls ?? 0),
      settings,
      statements: a.statements - (b?.statements ?? 0),
      ms: a.ms - (b?.ms ?? 0),
    };
    if (d.statements > 0 || d.commits > 0 || d.syncCalls > 0) out[file] = d;
  }
  return out;
}

/** Sums the files `pick` selects. */
export function total(counts: Counts, pick: (file: string) => boolean = () => true): FileCounts {
  const out: FileCounts = { commits: 0, durableCommits: 0, syncCalls: 0, settings: {}, statements: 0, ms: 0 };
  for (const [file, c] of Object.entries(counts)) {
    if (!pick(file)) continue;
    out.commits += c.commits;
    out.durableCommits += c.durableCommits;
    out.syncCalls += c.syncCalls;
    out.statements += c.statements;
    out.ms += c.ms;
    for (const [k, v] of Object.entries(c.settings))
      out.settings[`${file} ${k}`] = (out.settings[`${file} ${k}`] ?? 0) + v;
  }
  return out;
}

function install() {
  const counts: Counts = {};
  const connections = new WeakMap<Db, Connection>();
  const scratch = new Database(":memory:");
  const proto = Object.getPrototypeOf(scratch.prepare("SELECT 1")) as Statement;
  scratch.close();
  const originals: Originals = {
    run: proto.run,
    get: proto.get,
    all: proto.all,
    exec: Database.prototype.exec,
  };

  const connection = (db: Db): Connection => {
    let c = connections.get(db);
    if (!c) {
      c = {
        file: db.memory ? ":memory:" : path.basename(db.name),
        lastTotalChanges: 0,
        generation: -1,
        totalChanges: db.prepare("SELECT total_changes()").pluck(),
        synchronous: db.prepare("PRAGMA synchronous").pluck(),
        journalMode: db.prepare("PRAGMA journal_mode").pluck(),
      };
      connections.set(db, c);
    }
    // Before the statement runs: a first sight or a first statement since `resume` takes the
    // connection's current total as the baseline, so nothing changed out of sight counts as a commit.
    if (c.generation !== generation) {
      c.lastTotalChanges = originals.get.call(c.totalChanges) as number;
      c.generation = generation;
    }
    return c;
  };

  /** After a statement that returned normally: count it, and a commit if it ended a write transaction. */
  const after = (
    db: Db,
    c: Connection,
    wasInTransaction: boolean,
    mayWrite: boolean,
    sql: string,
    startedAt: number,
  ): void => {
    const f = (counts[c.file] ??= empty());
    f.statements += 1;
    f.ms += performance.now() - startedAt;
    if (db.inTransaction) return;
    if (!wasInTransaction && !mayWrite) return;
    const changes = originals.get.call(c.totalChanges) as number;
    const changed = changes > c.lastTotalChanges;
    c.lastTotalChanges = changes;
    if (!changed || /^\s*ROLLBACK\b(?!\s+TO\b)/i.test(sql)) return;
    const synchronous = originals.get.call(c.synchronous) as number;
    const mode = String(originals.get.call(c.journalMode)).toLowerCase();
    const setting = `${mode}/${SYNCHRONOUS[synchronous] ?? synchronous}`;
    f.commits += 1;
    if (mode === "wal" ? synchronous >= 2 : synchronous >= 1) f.durableCommits += 1;
    f.settings[setting] = (f.settings[setting] ?? 0) + 1;
  };

  for (const method of ["run", "get", "all"] as const) {
    const original = originals[method] as (...args: unknown[]) => unknown;
    (proto as unknown as Record<string, unknown>)[method] = function (this: Statement, ...args: unknown[]) {
      if (!counting) return original.apply(this, args);
      const db = this.database;
      const c = connection(db);
      const wasInTransaction = db.inTransaction;
      const startedAt = performance.now();
      const out = original.apply(this, args);
      after(db, c, wasInTransaction, !this.readonly, this.source, startedAt);
      return out;
    };
  }
  Database.prototype.exec = function (this: Db, sql: string) {
    if (!counting) return originals.exec.call(this, sql);
    const c = connection(this);
    const wasInTransaction = this.inTransaction;
    const startedAt = performance.now();
    originals.exec.call(this, sql);
    after(this, c, wasInTransaction, true, sql, startedAt);
    return this;
  };
  countSyncs(counts);
  return { counts, connections, originals };
}

const empty = (): FileCounts => ({
  commits: 0,
  durableCommits: 0,
  syncCalls: 0,
  settings: {},
  statements: 0,
  ms: 0,
});

/** Wraps node:fs's sync calls (the module object every `import fs from "node:fs"` shares). */
function countSyncs(counts: Counts): void {
  const fileOf = (fd: number) => {
    try {
      return path.basename(fs.readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      return `fd ${fd}`;
    }
  };
  const note = (fd: unknown) => {
    if (typeof fd === "number") (counts[fileOf(fd)] ??= empty()).syncCalls += 1;
  };
  const target = fs as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ["fsyncSync", "fdatasyncSync", "fsync", "fdatasync"]) {
    const original = target[name]!;
    target[name] = function (this: unknown, ...args: unknown[]) {
      if (counting) note(args[0]);
      return original.apply(this, args);
    };
  }
}
