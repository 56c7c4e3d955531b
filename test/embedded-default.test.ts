/**
 * The embedded default across processes: no BITRIX24_WEBHOOK_URL, so every process starts its own
 * emulator on the shared state file (on a new port each time). An approval given in a later process
 * must still execute against the same portal and end VERIFIED.
 */
import { describe, expect, it } from "vitest";
import Database from "better-sqlite3";
import path from "node:path";
import { parseJsonOutput, runCli, tempDir } from "./support/harness.js";

describe("embedded default portal", () => {
  it("run in one process, approve in another: VERIFIED, one write in the shared emulator state", async () => {
    const dataDir = tempDir();
    const env = {
      ACTION_ENVELOPE_DATA_DIR: dataDir,
      MODEL: "offline",
      BITRIX24_WEBHOOK_URL: "",
      DATABASE_URL: "",
    };
    const run = await runCli(["run", "rename task 4 to Embedded two-process check", "--json"], env);
    expect(run.code, run.stderr).toBe(0);
    const waiting = parseJsonOutput(run.stdout);
    expect(waiting.status).toBe("awaiting_approval");
    expect(waiting.envelope.portal).toMatch(/^emulator-[0-9a-f]{12}\.local$/);

    const approve = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--as", "demo-approver", "--json"],
      env,
    );
    expect(approve.code, approve.stderr).toBe(0);
    expect(parseJsonOutput(approve.stdout).outcome).toBe("VERIFIED");

    const db = new Database(path.join(dataDir, "emulator.sqlite"), { readonly: true });
    try {
      const tables = (
        db.prepare("SELECT name FROM sqlite_master WHERE type='table'").all() as Array<{ name: string }>
      ).map((t) => t.name);
      const callTable = tables.find((t) => /call/.test(t));
      expect(callTable).toBeDefined();
      const rows = db.prepare(`SELECT * FROM ${callTable}`).all() as Array<Record<string, unknown>>;
      expect(rows.filter((r) => String(r["method"]) === "tasks.task.update")).toHaveLength(1);
    } finally {
      db.close();
    }
  });
});
