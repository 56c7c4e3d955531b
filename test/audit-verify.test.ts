/**
 * `audit verify` against a log written by real runs, tampered with by editing the SQLite file
 * directly (triggers dropped first, as anyone with the file could). Each kind of tampering is its own
 * test and must be named as that kind, at the right record, however the chain is paged.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { SqliteAuditLog, recordHash, type AuditRecord } from "../src/store/audit.js";
import { openTestApp, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

let portal: Portal;
let pristine: string;
let records: AuditRecord[];

beforeAll(async () => {
  portal = await startPortal();
  const dataDir = tempDir("ae-audit-src-");
  const app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: "LAB-AGENT-EXEC-002 - CHAIN" })),
  });
  try {
    for (const type of ["approve", "reject"] as const) {
      const view = await startRun(app, {
        request: "rename task 4 to LAB-AGENT-EXEC-002 - CHAIN",
        requestedBy: "demo-user",
      });
      const a = view.approval!;
      await submitDecision(app, view.threadId, {
        decisions: [{ type, envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } }],
      });
      // A person renames the task back, so the second run's proposal still changes something (else NO_CHANGE).
      if (type === "approve")
        await portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "RENAMED BACK BY A PERSON" } });
    }
    records = await app.deps.audit.records();
  } finally {
    await app.close();
  }
  pristine = path.join(dataDir, "journal.sqlite");
});

afterAll(async () => {
  await portal.emulator.close();
});

/** A fresh copy of the log in its own data directory, tampered with by `edit`. */
function tampered(edit?: (db: Database.Database) => void): string {
  const dir = tempDir("ae-audit-copy-");
  fs.copyFileSync(pristine, path.join(dir, "journal.sqlite"));
  if (edit) {
    const db = new Database(path.join(dir, "journal.sqlite"));
    try {
      db.exec("DROP TRIGGER audit_records_no_update; DROP TRIGGER audit_records_no_delete;");
      edit(db);
    } finally {
      db.close();
    }
  }
  return dir;
}

/**
 * The log's verification, which must be the same read in pages of every size: each record, the
 * tampered one included, is then the first or the last of a page in some reading.
 */
async function verify(dir: string) {
  const log = new SqliteAuditLog(path.join(dir, "journal.sqlite"));
  try {
    const whole = await log.verify();
    for (let pageSize = 1; pageSize <= whole.records; pageSize++)
      expect(await log.verify({ pageSize }), `pages of ${pageSize}`).toEqual(whole);
    return whole;
  } finally {
    await log.close();
  }
}

const bodyOf = (r: AuditRecord) => {
  const { prevHash: _p, hash: _h, ...body } = r;
  return body;
};

describe("audit verify", () => {
  it("the log of two real runs is what we expect to tamper with", () => {
    expect(records.map((r) => r.event)).toEqual([
      "approval_requested",
      "decision_accepted",
      "execution_outcome",
      "approval_requested",
      "decision_accepted",
      "run_ended",
    ]);
  });

  it("passes an intact log: exit 0 from the CLI", async () => {
    const dir = tampered();
    expect(await verify(dir)).toEqual({ intact: true, records: 6, head: { seq: 6, hash: records[5]!.hash } });
    const cli = await runCli(["audit", "verify"], { ACTION_ENVELOPE_DATA_DIR: dir });
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain("audit chain intact: 6 records");
    expect(cli.stdout).toContain(records[5]!.hash);
  });

  it("passes a record stored in another form of the same content (indented, keys reordered): its content is what was hashed", async () => {
    const dir = tampered((db) => {
      const { record_json } = db.prepare("SELECT record_json FROM audit_records WHERE seq = 3").get() as {
        record_json: string;
      };
      const body = JSON.parse(record_json) as Record<string, unknown>;
      const reordered = Object.fromEntries(Object.entries(body).reverse());
      expect(JSON.stringify(reordered, null, 2)).not.toBe(record_json);
      db.prepare("UPDATE audit_records SET record_json = ? WHERE seq = 3").run(
        JSON.stringify(reordered, null, 2),
      );
    });
    expect(await verify(dir)).toEqual({ intact: true, records: 6, head: { seq: 6, hash: records[5]!.hash } });
  });

  it("detects an edited field and names the record: exit 2 from the CLI", async () => {
    const dir = tampered((db) => {
      const changed = db
        .prepare(
          'UPDATE audit_records SET record_json = replace(record_json, \'"id":"alice"\', \'"id":"mallory"\') WHERE seq = 2',
        )
        .run();
      expect(changed.changes).toBe(1);
    });
    expect(await verify(dir)).toMatchObject({
      intact: false,
      problem: { kind: "edited", seq: 2, event: "decision_accepted" },
    });
    const cli = await runCli(["audit", "verify"], { ACTION_ENVELOPE_DATA_DIR: dir });
    expect(cli.code).toBe(2);
    expect(cli.stdout).toContain("AUDIT CHAIN BROKEN: record seq 2 edited");
    const json = await runCli(["audit", "verify", "--json"], { ACTION_ENVELOPE_DATA_DIR: dir });
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ intact: false, problem: { kind: "edited", seq: 2 } });
  });

  it("detects an edited record whose own hash was recomputed, at that record", async () => {
    const dir = tampered((db) => {
      const r = records[1]!;
      const forged = { ...bodyOf(r), approver: { ...r.approver!, id: "mallory" } };
      db.prepare("UPDATE audit_records SET record_json = ?, record_hash = ? WHERE seq = 2").run(
        JSON.stringify(forged),
        recordHash(forged, r.prevHash),
      );
    });
    expect(await verify(dir)).toMatchObject({ intact: false, problem: { kind: "edited", seq: 2 } });
  });

  it("detects a deleted record and names the missing sequence number", async () => {
    const dir = tampered((db) => db.prepare("DELETE FROM audit_records WHERE seq = 3").run());
    expect(await verify(dir)).toMatchObject({ intact: false, problem: { kind: "removed", seq: 3 } });
  });

  it("detects a swapped pair as reordered, at the first record out of place", async () => {
    const dir = tampered((db) => {
      db.prepare("UPDATE audit_records SET seq = -1 WHERE seq = 4").run();
      db.prepare("UPDATE audit_records SET seq = 4 WHERE seq = 5").run();
      db.prepare("UPDATE audit_records SET seq = 5 WHERE seq = -1").run();
    });
    expect(await verify(dir)).toMatchObject({ intact: false, problem: { kind: "reordered", seq: 4 } });
  });

  it("detects an inserted record even when it is correctly hashed and linked and the rest renumbered", async () => {
    const dir = tampered((db) => {
      db.prepare("UPDATE audit_records SET seq = seq + 1000 WHERE seq >= 3").run();
      db.prepare("UPDATE audit_records SET seq = seq - 999 WHERE seq >= 1000").run();
      const r = records[1]!;
      const forged = {
        ...bodyOf(r),
        seq: 3,
        discriminator: "forged",
        approver: { ...r.approver!, id: "mallory" },
      };
      db.prepare(
        "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (3, ?, ?, ?, ?, ?, ?, ?, ?)",
      ).run(
        forged.threadId,
        forged.revision,
        forged.event,
        forged.discriminator,
        forged.recordedAt,
        JSON.stringify(forged),
        r.hash,
        recordHash(forged, r.hash),
      );
    });
    expect(await verify(dir)).toMatchObject({
      intact: false,
      problem: { kind: "inserted", seq: 3, event: "decision_accepted" },
    });
  });

  it("detects a crudely inserted record (no valid hash) as inserted", async () => {
    const dir = tampered((db) => {
      db.prepare("UPDATE audit_records SET seq = seq + 1000 WHERE seq >= 2").run();
      db.prepare("UPDATE audit_records SET seq = seq - 999 WHERE seq >= 1000").run();
      db.prepare(
        "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (2, 'x', 1, 'decision_accepted', '', 'x', '{\"seq\":2}', 'x', 'x')",
      ).run();
    });
    expect(await verify(dir)).toMatchObject({ intact: false, problem: { kind: "inserted", seq: 2 } });
  });
});
