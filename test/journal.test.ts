/**
 * The SQLite execution journal on a file, opened twice as two processes would: one claim per nonce,
 * one write-ahead entry per envelope, and thread leases that a dead (or unreaped) holder cannot keep.
 */
import path from "node:path";
import { spawn } from "node:child_process";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteJournal } from "../src/store/journal.js";
import { takeThreadLock } from "../src/app/threads.js";
import { tempDir, until } from "./support/harness.js";
import { approvalOf, leaseFor, readyToWrite, testAction } from "./support/journal-rows.js";
import { randomBytes } from "node:crypto";

/** Any 32 bytes: these tests exercise claims, entries and locks, not the seal of registered rows. */
const TEST_JOURNAL_KEY = randomBytes(32);

const opened: SqliteJournal[] = [];
afterEach(async () => {
  for (const j of opened.splice(0)) await j.close();
});

function pair() {
  const file = path.join(tempDir(), "journal.sqlite");
  const a = new SqliteJournal(file, TEST_JOURNAL_KEY);
  const b = new SqliteJournal(file, TEST_JOURNAL_KEY);
  opened.push(a, b);
  return { file, a, b };
}

describe("SqliteJournal", () => {
  it("lets exactly one of two connections consume a nonce (and decide the action)", async () => {
    const { a, b } = pair();
    const action = testAction("t1", `sha256:${"1".repeat(64)}`);
    await a.registerAction(action, action.envelope.createdAt);
    const alice = approvalOf(action, "alice");
    const bob = approvalOf(action, "bob");
    const [x, y] = await Promise.all([
      a.decideAction(action.envelopeHash, alice.claim, alice.decision),
      b.decideAction(action.envelopeHash, bob.claim, bob.decision),
    ]);
    expect([x.claimed, y.claimed].sort()).toEqual([false, true]);
    const loser = x.claimed ? y : x;
    const winner = x.claimed ? "alice" : "bob";
    expect(loser).toMatchObject({ claimed: false, existing: { approverId: winner } });
    expect((await b.getAction(action.envelopeHash))?.progress.decision?.approverId).toBe(winner);
  });

  it("records one write-ahead entry per envelope", async () => {
    const { a, b } = pair();
    const action = testAction("t1", "sha256:e");
    await readyToWrite(a, action);
    const intent = {
      envelopeHash: "sha256:e",
      threadId: "t1",
      idempotencyKey: "k1",
      args: { taskId: 4, fields: { TITLE: "x" } },
    };
    expect((await a.beginWrite(intent, "2026-11-30T00:00:00Z", leaseFor(action))).begun).toBe(true);
    const second = await b.beginWrite(intent, "2026-11-30T00:00:01Z", leaseFor(action));
    expect(second).toMatchObject({
      begun: false,
      existing: { envelopeHash: "sha256:e", sentAt: "2026-11-30T00:00:00Z" },
    });
    await a.recordAcknowledgement("sha256:e", { status: "OK" }, "2026-11-30T00:00:02Z");
    expect((await b.findExecution("sha256:e"))?.acknowledgement).toEqual({ status: "OK" });
  });

  it("takes an answer recorded on a write-ahead entry only under its seal: edited, stripped or copied from another entry, it is not the entry's answer", async () => {
    // Two entries, each in a journal of its own under the same key (each takes task 4's lease).
    const entries = [pair(), pair()].map((p, i) => ({ ...p, hash: `sha256:a${i}` }));
    for (const [i, e] of entries.entries()) {
      const action = testAction(`t${i}`, e.hash);
      await readyToWrite(e.a, action);
      const intent = {
        envelopeHash: e.hash,
        threadId: `t${i}`,
        idempotencyKey: `k${i}`,
        args: { taskId: 4 },
      };
      expect((await e.a.beginWrite(intent, "2026-11-30T00:00:00Z", leaseFor(action))).begun).toBe(true);
    }
    const [first, second] = entries as [(typeof entries)[0], (typeof entries)[0]];
    const answer = { status: "ERROR", error: { code: "X" } };
    await first.a.recordAcknowledgement(first.hash, answer, "2026-11-30T00:00:02Z");
    const verdictOf = async (e: typeof first) => {
      const entry = await e.b.findExecution(e.hash);
      return { acknowledgement: entry?.acknowledgement, unconfirmed: entry?.unconfirmedAnswer };
    };
    expect(await verdictOf(first)).toEqual({ acknowledgement: answer, unconfirmed: undefined });
    expect(await verdictOf(second)).toEqual({ acknowledgement: undefined, unconfirmed: undefined });

    const dbs = entries.map((e) => new Database(e.file));
    const ackOf = (i: number) =>
      (
        dbs[i]!.prepare("SELECT ack_json FROM executions WHERE envelope_hash = ?").get(entries[i]!.hash) as {
          ack_json: string;
        }
      ).ack_json;
    const setAck = (i: number, text: string) =>
      dbs[i]!.prepare("UPDATE executions SET ack_json = ? WHERE envelope_hash = ?").run(
        text,
        entries[i]!.hash,
      );
    const genuine = ackOf(0);
    const stored = JSON.parse(genuine) as Record<string, unknown>;
    try {
      // Copied with its seal onto another entry: the seal names the entry it was recorded on.
      setAck(1, genuine);
      expect(await verdictOf(second)).toEqual({ acknowledgement: undefined, unconfirmed: "invalid" });
      // Edited under its seal.
      setAck(0, JSON.stringify({ ...stored, status: "OK" }));
      expect(await verdictOf(first)).toEqual({ acknowledgement: undefined, unconfirmed: "invalid" });
      // Its seal removed, or text that is not an answer.
      const { seal: _seal, ...bare } = stored;
      setAck(0, JSON.stringify(bare));
      expect(await verdictOf(first)).toEqual({ acknowledgement: undefined, unconfirmed: "unsealed" });
      setAck(0, "not json");
      expect(await verdictOf(first)).toEqual({ acknowledgement: undefined, unconfirmed: "invalid" });
      // Put back as recorded, it holds again.
      setAck(0, genuine);
      expect(await verdictOf(first)).toEqual({ acknowledgement: answer, unconfirmed: undefined });
    } finally {
      for (const db of dbs) db.close();
    }
  });

  it("a close naming the phase its step read is refused once another connection moved the action on", async () => {
    const { a, b } = pair();
    const action = testAction("t1", "sha256:c");
    await readyToWrite(a, action);
    const intent = {
      envelopeHash: "sha256:c",
      threadId: "t1",
      idempotencyKey: "k1",
      args: { taskId: 4, fields: { TITLE: "x" } },
    };
    // b read the action at pre_read; a records its write-ahead entry (intent) and is sending.
    const read = (await b.getAction("sha256:c"))!;
    expect(read.phase).toBe("pre_read");
    expect((await a.beginWrite(intent, "2026-11-30T00:00:00Z", leaseFor(action))).begun).toBe(true);
    const closed = {
      outcome: "NOT_EXECUTED",
      reasonCode: "STALE_STATE",
      reason: "stale",
      at: "2026-11-30T00:00:01Z",
    } as const;
    const refused = await b.moveAction("sha256:c", "closed", { closed }, undefined, read.phase);
    expect(refused).toMatchObject({ ok: false, phase: "intent" });
    expect((await a.getAction("sha256:c"))?.phase).toBe("intent");
    // Named at the phase it holds, the close applies.
    expect(await b.moveAction("sha256:c", "closed", { closed }, undefined, "intent")).toMatchObject({
      ok: true,
    });
  });

  it("a lease held by a live process blocks another owner", async () => {
    const { a, b } = pair();
    expect(await a.acquireThreadLock("t1", "owner-a", 60_000)).toBe(true);
    expect(await b.acquireThreadLock("t1", "owner-b", 60_000)).toBe(false);
    await a.releaseThreadLock("t1", "owner-a");
    expect(await b.acquireThreadLock("t1", "owner-b", 60_000)).toBe(true);
  });

  it("a lease taken for a run is renewed while the run holds it: another owner is refused past its term, until it is released", async () => {
    const { a, b } = pair();
    const release = await takeThreadLock({ journal: a }, "t2", "run:", { leaseMs: 300 });
    await new Promise((r) => setTimeout(r, 900));
    expect(await b.acquireThreadLock("t2", "owner-b", 60_000)).toBe(false);
    await release();
    expect(await b.acquireThreadLock("t2", "owner-b", 60_000)).toBe(true);
  });

  it("a holder that never releases keeps renewing the lease only up to its longest hold: then the thread is free again, and that is said", async () => {
    const { a, b } = pair();
    const said: string[] = [];
    const release = await takeThreadLock({ journal: a }, "t3", "run:", {
      leaseMs: 300,
      maxHoldMs: 600,
      log: (l) => said.push(l),
    });
    try {
      await new Promise((r) => setTimeout(r, 400));
      expect(await b.acquireThreadLock("t3", "owner-b", 60_000)).toBe(false);
      await until(
        "the lease to be let go",
        async () => (await b.acquireThreadLock("t3", "owner-b", 60_000)) || undefined,
      );
      expect(said.join("\n")).toMatch(
        /lock on thread t3 .* was held for 600 ms, the most a run may hold it; it is released/,
      );
    } finally {
      await release();
    }
  });

  it("a renewal that finds the lease taken by another owner stops renewing, says so, and the release leaves the other owner's lease alone", async () => {
    const { file, a, b } = pair();
    const said: string[] = [];
    const release = await takeThreadLock({ journal: a }, "t4", "run:", {
      leaseMs: 300,
      log: (l) => said.push(l),
    });
    // Another owner holds the row now, as after this holder stalled past its term.
    const db = new Database(file);
    db.prepare("UPDATE thread_locks SET owner = ?, expires_at = ? WHERE thread_id = ?").run(
      "owner-b",
      Date.now() + 60_000,
      "t4",
    );
    db.close();
    await until("the holder to notice", async () => (said.length > 0 ? said : undefined));
    expect(said.join("\n")).toMatch(
      /was taken by another owner after its term ran out; it is no longer renewed/,
    );
    await release();
    expect(await a.acquireThreadLock("t4", "owner-c", 60_000)).toBe(false);
    expect(await b.acquireThreadLock("t4", "owner-b", 60_000)).toBe(true);
  });

  it("a lease left by a killed process that nobody reaped yet (a zombie) is taken over", async () => {
    const { file, b } = pair();
    // A parent that forks a child which exits at once and is never waited for: the child stays a zombie.
    const parent = spawn(
      "python3",
      [
        "-c",
        "import os,time,sys\npid=os.fork()\nif pid==0: os._exit(0)\nprint(pid, flush=True)\ntime.sleep(30)",
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      let out = "";
      parent.stdout.on("data", (d) => (out += d));
      const zombie = await until("the child pid", async () => (out.trim() ? Number(out.trim()) : undefined));
      await until("the child to become a zombie", async () => {
        const stat = await import("node:fs").then((fs) => fs.readFileSync(`/proc/${zombie}/stat`, "utf8"));
        return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
      });
      const db = new Database(file);
      db.prepare("INSERT INTO thread_locks (thread_id, owner, pid, expires_at) VALUES (?, ?, ?, ?)").run(
        "t1",
        "dead-owner",
        zombie,
        Date.now() + 60_000,
      );
      db.close();
      expect(await b.acquireThreadLock("t1", "owner-b", 60_000)).toBe(true);
    } finally {
      parent.kill("SIGKILL");
    }
  });
});

describe("a journal made before questions counted invalid answers", () => {
  it("gains the columns when opened: its open question keeps its row and counts from 0; a new question starts again at 0", async () => {
    const file = path.join(tempDir("ae-journal-old-"), "journal.sqlite");
    const old = new Database(file);
    old.exec(`CREATE TABLE questions (thread_id TEXT PRIMARY KEY, tool_call_id TEXT NOT NULL, question TEXT NOT NULL, fields_json TEXT NOT NULL, asked_at TEXT NOT NULL, status TEXT NOT NULL, closed_at TEXT);
      INSERT INTO questions VALUES ('t1', 'call-1', 'Which task?', '{"taskId":{"type":"number"}}', '2026-12-01T10:00:00.000Z', 'open', NULL);`);
    old.close();
    const j = new SqliteJournal(file, TEST_JOURNAL_KEY);
    try {
      expect(await j.getQuestion("t1")).toMatchObject({ invalidAnswers: 0, lastRefusal: null });
      expect(await j.noteInvalidAnswer("t1", "taskId: expected a number")).toBe(1);
      expect(await j.noteInvalidAnswer("t1", "taskId: must be positive")).toBe(2);
      // The same question recorded again (a re-run of ask_input) keeps its count and last refusal; another one starts at 0.
      await j.recordQuestion({
        threadId: "t1",
        toolCallId: "call-1",
        question: "Which task?",
        fields: { taskId: { type: "number" } },
        askedAt: "2026-12-01T10:00:00.000Z",
      });
      expect(await j.getQuestion("t1")).toMatchObject({
        invalidAnswers: 2,
        lastRefusal: "taskId: must be positive",
      });
      await j.recordQuestion({
        threadId: "t1",
        toolCallId: "call-2",
        question: "Which deal?",
        fields: { dealId: { type: "number" } },
        askedAt: "2026-12-01T10:05:00.000Z",
      });
      expect(await j.getQuestion("t1")).toMatchObject({ invalidAnswers: 0, lastRefusal: null });
      await j.closeQuestion("t1", "answered", "2026-12-01T10:06:00.000Z");
      expect(await j.noteInvalidAnswer("t1", "late")).toBe(0);
    } finally {
      await j.close();
    }
  });
});
