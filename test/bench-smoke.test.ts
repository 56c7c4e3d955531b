/**
 * The benchmarks' commit counting (bench/support/sqlite-commits.ts): first on statements whose commits
 * are known, then on two approved actions of our app and of the bare three-call graph, as
 * bench/control-overhead.ts counts them. Counts, not timings.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BARE_CHECKPOINTS,
  approvalOf,
  openBareGraph,
  openBenchApp,
  timedDecision,
  waitingRun,
  type BenchApp,
  type BareGraph,
} from "../bench/support/app.js";
import { FIRST_BENCH_TASK, benchSeed } from "../bench/support/portal.js";
import { diff, installCommitCounter, total, type Counts } from "../bench/support/sqlite-commits.js";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { tempDir } from "./support/harness.js";

const counter = installCommitCounter();

/** Runs `fn` and returns the counts of `file` it caused. */
function counted(file: string, fn: () => void) {
  const before = counter.snapshot();
  fn();
  return (
    diff(counter.snapshot(), before)[file] ?? {
      commits: 0,
      durableCommits: 0,
      syncCalls: 0,
      settings: {},
      statements: 0,
      ms: 0,
    }
  );
}

describe("the commit counter", () => {
  it("counts committed writes with the connection's setting at the time, and nothing else", () => {
    const dir = tempDir("ae-bench-smoke-");
    const db = new Database(path.join(dir, "known.sqlite"));
    try {
      db.pragma("journal_mode = WAL");
      db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
      const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
      db.pragma("synchronous = FULL");

      expect(counted("known.sqlite", () => insert.run("a"))).toMatchObject({
        commits: 1,
        durableCommits: 1,
        settings: { "wal/FULL": 1 },
      });
      const two = db.transaction(() => {
        insert.run("b");
        insert.run("c");
      });
      expect(counted("known.sqlite", () => two())).toMatchObject({ commits: 1, durableCommits: 1 });
      // A read, a transaction that only reads, a write that matches nothing and a rolled-back write.
      const nothing = counted("known.sqlite", () => {
        db.prepare("SELECT count(*) FROM t").get();
        db.exec("BEGIN");
        db.prepare("SELECT * FROM t").all();
        db.exec("COMMIT");
        db.prepare("UPDATE t SET v = 'x' WHERE id = -1").run();
        db.exec("BEGIN");
        insert.run("rolled back");
        db.exec("ROLLBACK");
      });
      expect(nothing).toMatchObject({ commits: 0, durableCommits: 0, settings: {} });
      expect(nothing.statements).toBe(8);
      // The setting is read at each commit: a store may switch it per transaction.
      db.pragma("synchronous = NORMAL");
      expect(counted("known.sqlite", () => insert.run("d"))).toMatchObject({
        commits: 1,
        durableCommits: 0,
        settings: { "wal/NORMAL": 1 },
      });
      db.pragma("journal_mode = DELETE");
      expect(counted("known.sqlite", () => insert.run("e"))).toMatchObject({
        commits: 1,
        durableCommits: 1,
        settings: { "delete/NORMAL": 1 },
      });
      // An fsync outside SQLite counts against the file it syncs.
      const other = path.join(dir, "other.txt");
      fs.writeFileSync(other, "x");
      const fd = fs.openSync(other, "r+");
      try {
        expect(counted("other.txt", () => fs.fsyncSync(fd))).toMatchObject({ commits: 0, syncCalls: 1 });
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the commit counter, paused and resumed", () => {
  it("counts nothing while paused, and after resume nothing that changed out of sight", () => {
    const dir = tempDir("ae-bench-smoke-");
    const db = new Database(path.join(dir, "paused.sqlite"));
    const other = path.join(dir, "other.txt");
    fs.writeFileSync(other, "x");
    const fd = fs.openSync(other, "r+");
    try {
      db.pragma("journal_mode = WAL");
      db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
      const insert = db.prepare("INSERT INTO t (v) VALUES (?)");
      expect(counted("paused.sqlite", () => insert.run("seen")).commits).toBe(1);

      counter.pause();
      expect(counter.counting).toBe(false);
      const paused = counted("paused.sqlite", () => {
        insert.run("unseen 1");
        db.transaction(() => insert.run("unseen 2"))();
        db.prepare("SELECT count(*) FROM t").get();
      });
      expect(paused).toMatchObject({ commits: 0, statements: 0 });
      expect(counted("other.txt", () => fs.fsyncSync(fd)).syncCalls).toBe(0);

      counter.resume();
      expect(counter.counting).toBe(true);
      // A transaction that only reads: total_changes() grew while paused, but not in it.
      const readOnly = counted("paused.sqlite", () => {
        db.exec("BEGIN");
        db.prepare("SELECT * FROM t").all();
        db.exec("COMMIT");
      });
      expect(readOnly).toMatchObject({ commits: 0, statements: 3 });
      expect(counted("paused.sqlite", () => insert.run("seen again")).commits).toBe(1);
      expect(counted("other.txt", () => fs.fsyncSync(fd)).syncCalls).toBe(1);
      expect(db.prepare("SELECT count(*) FROM t").pluck().get()).toBe(4);
    } finally {
      counter.resume();
      fs.closeSync(fd);
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("counting two approved actions, ours and the bare graph's", () => {
  let dir: string;
  let emulator: RunningEmulator;
  let bench: BenchApp;
  let bare: BareGraph;

  beforeAll(async () => {
    dir = tempDir("ae-bench-smoke-");
    emulator = await startEmulator({ port: 0, rate: 0, seed: benchSeed(4) });
    bench = await openBenchApp({ webhookUrl: emulator.webhookUrl, dataDir: path.join(dir, "data"), rate: 0 });
    bare = openBareGraph(bench.app.deps.tools, path.join(dir, "data"));
  });

  afterAll(async () => {
    bare?.close();
    await bench?.close();
    await emulator?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Every file's figures add up: fsync-level ≤ commits, the settings' counts sum to the commits. */
  function expectWellFormed(counts: Counts): void {
    for (const [file, f] of Object.entries(counts)) {
      expect(f.durableCommits, file).toBeLessThanOrEqual(f.commits);
      expect(
        Object.values(f.settings).reduce((a, b) => a + b, 0),
        file,
      ).toBe(f.commits);
      for (const setting of Object.keys(f.settings))
        expect(setting).toMatch(/^(wal|delete|truncate|persist|memory|off)\/(OFF|NORMAL|FULL|EXTRA)$/);
      expect(f.statements, file).toBeGreaterThanOrEqual(f.commits);
    }
  }

  it("ours commits on its own files, the bare graph only on its checkpoints, both well-formed", async () => {
    for (let i = 0; i < 2; i++) {
      const view = await waitingRun(bench.app, FIRST_BENCH_TASK + i);
      const timed = await timedDecision(bench, view.threadId, approvalOf(view));
      expect(timed.view.state?.outcome).toBe("VERIFIED");
      expectWellFormed(timed.commits);
      expect(Object.keys(timed.commits)).not.toContain(BARE_CHECKPOINTS);
      const ours = total(timed.commits, (f) => f !== ":memory:");
      // The decision and the outcome are recorded: at least one commit each, and at least one made
      // durable (fsynced by SQLite at commit, or by an explicit fsync of its file after it).
      expect(ours.commits).toBeGreaterThanOrEqual(2);
      expect(ours.durableCommits + ours.syncCalls).toBeGreaterThanOrEqual(1);

      const id = `bare-smoke-${i}`;
      await bare.start(id, FIRST_BENCH_TASK + 2 + i);
      const before = counter.snapshot();
      await bare.resume(id);
      const bareCounts = diff(counter.snapshot(), before);
      expectWellFormed(bareCounts);
      // The in-process emulator's store is in memory.
      expect(Object.keys(bareCounts).filter((f) => f !== ":memory:")).toEqual([BARE_CHECKPOINTS]);
      // Four steps after the resume (ask's resumption, pre_read, write, verify), each checkpointed.
      expect(bareCounts[BARE_CHECKPOINTS]!.commits).toBeGreaterThanOrEqual(4);
      // SqliteSaver's WAL file runs at this better-sqlite3 build's default, synchronous=NORMAL.
      expect(bareCounts[BARE_CHECKPOINTS]!.durableCommits).toBe(0);
    }
  });
});
