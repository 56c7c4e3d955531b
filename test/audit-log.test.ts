/**
 * The audit log on a real SQLite file: chaining, the idempotency key, append-only triggers, appends
 * serialised across processes, and the anchored head.
 */
import path from "node:path";
import { spawn } from "node:child_process";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import fc from "fast-check";
import { canonicalJson } from "../src/envelope/index.js";
import {
  GENESIS_HASH,
  SqliteAuditLog,
  recordHash,
  recordHashOfText,
  type AuditEntry,
} from "../src/store/audit.js";
import { ROOT, TSX, tempDir } from "./support/harness.js";

const logs: SqliteAuditLog[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close();
});

function open(file: string) {
  const log = new SqliteAuditLog(file);
  logs.push(log);
  return log;
}

function entry(threadId: string, event: AuditEntry["event"], discriminator = "", revision = 1): AuditEntry {
  return {
    threadId,
    revision,
    event,
    discriminator,
    at: new Date().toISOString(),
    requestedBy: "demo-user",
    risk: { level: "medium", reversibility: "reversible" },
    what: { operation: "update_task", taskId: 4, params: { TITLE: "x" }, envelopeHash: null, envelope: null },
    approver: null,
    override: null,
    policy: { id: "default", version: "1" },
    refusal: null,
    outcome: null,
  };
}

describe("audit log", () => {
  it("recordHashOfText over a record's canonical text is recordHash of the record (property)", () => {
    const json = fc
      .jsonValue({ maxDepth: 3 })
      .filter((v) => v !== null && typeof v === "object" && !Array.isArray(v));
    fc.assert(
      fc.property(json, fc.string(), (record, prevHash) => {
        const r = record as unknown as Parameters<typeof recordHash>[0];
        expect(recordHashOfText(canonicalJson(r), prevHash)).toBe(recordHash(r, prevHash));
      }),
      { numRuns: 300 },
    );
  });

  it("links each record to the previous one's hash and verifies intact", async () => {
    const log = open(path.join(tempDir(), "audit.sqlite"));
    const a = await log.append(entry("t1", "approval_requested", "h1"));
    const b = await log.append(entry("t1", "decision_accepted"));
    const c = await log.append(entry("t2", "run_ended", "", 0));
    expect([a.appended, b.appended, c.appended]).toEqual([true, true, true]);
    expect(a.record.seq).toBe(1);
    expect(a.record.prevHash).toBe(GENESIS_HASH);
    expect(b.record.prevHash).toBe(a.record.hash);
    expect(c.record.prevHash).toBe(b.record.hash);
    const { prevHash, hash, ...body } = b.record;
    expect(recordHash(body, prevHash)).toBe(hash);
    expect(await log.verify()).toEqual({ intact: true, records: 3, head: { seq: 3, hash: c.record.hash } });
    expect((await log.records({ threadId: "t1" })).map((r) => r.event)).toEqual([
      "approval_requested",
      "decision_accepted",
    ]);
  });

  it("appends at most once per (thread, revision, event, discriminator), and the UNIQUE key holds against a raw insert", async () => {
    const file = path.join(tempDir(), "audit.sqlite");
    const log = open(file);
    const first = await log.append(entry("t1", "decision_refused", "1"));
    const again = await log.append({
      ...entry("t1", "decision_refused", "1"),
      at: "2030-01-01T00:00:00.000Z",
    });
    expect(again.appended).toBe(false);
    expect(again.record).toEqual(first.record);
    // Another refusal of the same revision has its own discriminator and is a new record.
    expect((await log.append(entry("t1", "decision_refused", "2"))).appended).toBe(true);
    expect(await log.records()).toHaveLength(2);

    const db = new Database(file);
    try {
      expect(() =>
        db
          .prepare(
            "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (99, 't1', 1, 'decision_refused', '1', 'x', '{}', 'x', 'x')",
          )
          .run(),
      ).toThrow(/UNIQUE constraint failed/);
    } finally {
      db.close();
    }
  });

  it("refuses UPDATE and DELETE through SQL", async () => {
    const file = path.join(tempDir(), "audit.sqlite");
    const log = open(file);
    await log.append(entry("t1", "approval_requested", "h1"));
    const db = new Database(file);
    try {
      expect(() => db.prepare("UPDATE audit_records SET record_json = '{}'").run()).toThrow(/append-only/);
      expect(() => db.prepare("DELETE FROM audit_records").run()).toThrow(/append-only/);
    } finally {
      db.close();
    }
    expect((await log.verify()).intact).toBe(true);
  });

  it("keeps one unbroken chain when several processes append at once", async () => {
    const file = path.join(tempDir(), "audit.sqlite");
    open(file); // creates the schema before the workers race
    const worker = (n: number) =>
      new Promise<number | null>((resolve, reject) => {
        const code = `import(${JSON.stringify(path.join(ROOT, "src/store/audit.ts"))}).then(async ({ SqliteAuditLog }) => {
          const log = new SqliteAuditLog(${JSON.stringify(file)});
          for (let i = 0; i < 25; i++) {
            await log.append({ threadId: "w${n}", revision: 1, event: "decision_refused", discriminator: String(i), at: new Date().toISOString(),
              requestedBy: "u", risk: null, what: { operation: "update_task", taskId: 4, params: null, envelopeHash: null, envelope: null },
              approver: null, override: null, policy: { id: "p", version: "1" }, refusal: { code: "MALFORMED", reason: "r" }, outcome: null });
          }
          await log.close();
        })`;
        const child = spawn(TSX, ["-e", code], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
        child.on("error", reject);
        child.on("close", resolve);
      });
    expect(await Promise.all([1, 2, 3, 4].map(worker))).toEqual([0, 0, 0, 0]);
    const log = open(file);
    const records = await log.records();
    expect(records.map((r) => r.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(new Set(records.map((r) => r.prevHash)).size).toBe(100);
    expect(await log.verify()).toMatchObject({ intact: true, records: 100 });
  });

  it("with --head, notices that the tail after an anchored record was cut off", async () => {
    const file = path.join(tempDir(), "audit.sqlite");
    const log = open(file);
    await log.append(entry("t1", "approval_requested", "h1"));
    const head = (await log.append(entry("t1", "decision_accepted"))).record.hash;
    expect((await log.verify({ head })).intact).toBe(true);
    const db = new Database(file);
    try {
      db.exec("DROP TRIGGER audit_records_no_delete");
      db.prepare("DELETE FROM audit_records WHERE seq = 2").run();
    } finally {
      db.close();
    }
    // Without the anchor a cut tail looks like a shorter, intact chain; with it, it does not.
    expect((await log.verify()).intact).toBe(true);
    const anchored = await log.verify({ head });
    expect(anchored.intact).toBe(false);
    expect(anchored).toMatchObject({ problem: { kind: "removed", seq: 2 } });
    // The same when the anchored record would have been on a page of its own.
    expect(await log.verify({ head, pageSize: 1 })).toEqual(anchored);
  });
});
