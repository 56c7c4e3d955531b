/**
 * A data directory made when the audit log had a file of its own (`audit.sqlite`): its chain is copied
 * into the journal's file once, checked record for record, and the old file is set aside; `audit
 * verify` then reads the one store. A journal whose chain is not the old file's refuses to open.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { AuditLogError, type AuditEntry } from "../src/store/audit.js";
import { createAuditLog, openStores } from "../src/store/backends.js";
import { ROOT, tempDir } from "./support/harness.js";

const entry = (threadId: string, event: AuditEntry["event"]): AuditEntry => ({
  threadId,
  revision: 1,
  event,
  discriminator: "",
  at: "2026-11-01T10:00:00.000Z",
  requestedBy: "demo-user",
  risk: { level: "medium", reversibility: "reversible" },
  what: { operation: "update_task", taskId: 4, params: { TITLE: "x" }, envelopeHash: null, envelope: null },
  approver: null,
  override: null,
  policy: { id: "default", version: "1" },
  refusal: null,
  outcome: null,
});

/** An old-layout data directory: the chain in `audit.sqlite`, written as the old log wrote it (its own file, its own table). */
async function oldLayout(): Promise<{
  dataDir: string;
  config: ReturnType<typeof loadConfig>;
  head: string;
}> {
  const dataDir = tempDir("ae-adopt-");
  const config = loadConfig(
    {
      ACTION_ENVELOPE_DATA_DIR: dataDir,
      ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir}.journal.key`,
      MODEL: "offline",
    },
    ROOT,
  );
  const { SqliteAuditLog } = await import("../src/store/audit.js");
  const old = new SqliteAuditLog(path.join(dataDir, "audit.sqlite"));
  await old.append(entry("t1", "approval_requested"));
  await old.append(entry("t1", "decision_accepted"));
  const last = await old.append(entry("t1", "run_ended"));
  await old.close();
  return { dataDir, config, head: last.record.hash };
}

describe("adopting an old audit file into the journal", () => {
  it("copies the chain once, verifies it against the old file, sets the old file aside, and the chain continues", async () => {
    const { dataDir, config, head } = await oldLayout();
    const { journal, audit } = await openStores(config);
    try {
      expect(await audit.verify({ head })).toEqual({
        intact: true,
        records: 3,
        head: { seq: 3, hash: head },
      });
      expect(fs.existsSync(path.join(dataDir, "audit.sqlite"))).toBe(false);
      expect(fs.existsSync(path.join(dataDir, "audit.sqlite.adopted"))).toBe(true);
      const next = await audit.append(entry("t2", "approval_requested"));
      expect(next.record.prevHash).toBe(head);
    } finally {
      await journal.close();
    }
    // Opened again (the reading tools open the audit log alone): nothing copied twice.
    const again = await createAuditLog(config);
    try {
      expect(await again.verify()).toMatchObject({ intact: true, records: 4 });
    } finally {
      await again.close();
    }
  });

  it("a journal whose chain is not the old file's refuses to open, naming the record expected and the one found", async () => {
    const { dataDir, config, head } = await oldLayout();
    // Another chain already in the journal's file.
    const { SqliteAuditLog } = await import("../src/store/audit.js");
    const other = new SqliteAuditLog(path.join(dataDir, "journal.sqlite"));
    await other.append(entry("x", "proposal_denied"));
    await other.close();
    const refused = await openStores(config).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AuditLogError);
    expect((refused as Error).message).toMatch(
      new RegExp(`expected record seq 1 with hash sha256:[0-9a-f]{64}, found seq 1 with hash sha256:`),
    );
    expect((refused as Error).message).not.toContain(head);
    // The old file is left where it was, unchanged.
    const old = new Database(path.join(dataDir, "audit.sqlite"), { readonly: true });
    try {
      expect(
        (
          old.prepare("SELECT record_hash FROM audit_records ORDER BY seq DESC LIMIT 1").get() as {
            record_hash: string;
          }
        ).record_hash,
      ).toBe(head);
    } finally {
      old.close();
    }
  });
});
