/**
 * A checkpoint file that is behind the journal: restored from a copy taken while the approval was
 * waiting (a backup put back, a fork of an old checkpoint, or checkpoints not yet on disk when the
 * machine lost power). The journal is the authority: nothing is written twice, the run is finished
 * from where the journal says it is, and what is reported is the journal's.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ThreadView } from "../src/app/view-thread.js";
import {
  eachTestPortal,
  envFor,
  journalHasRows,
  killedWhen,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  tempDir,
  until,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

const NEW_TITLE = "Rolled back checkpoint";

let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

const env = (extra: Record<string, string> = {}) => envFor(portal, dataDir, extra);
const CHECKPOINT_FILES = ["checkpoints.sqlite", "checkpoints.sqlite-wal", "checkpoints.sqlite-shm"];

function backupCheckpoints(): string {
  const dir = tempDir("ae-cp-backup-");
  for (const f of CHECKPOINT_FILES)
    if (fs.existsSync(path.join(dataDir, f))) fs.copyFileSync(path.join(dataDir, f), path.join(dir, f));
  return dir;
}

function restoreCheckpoints(from: string): void {
  for (const f of CHECKPOINT_FILES) {
    fs.rmSync(path.join(dataDir, f), { force: true });
    if (fs.existsSync(path.join(from, f))) fs.copyFileSync(path.join(from, f), path.join(dataDir, f));
  }
}

async function waiting(): Promise<ThreadView> {
  return recordPendingRename(portal, dataDir, NEW_TITLE, {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
  });
}

describe("a checkpoint file rolled back behind the journal", () => {
  it("after VERIFIED: show reports the journal's finished outcome, a second approval is refused THREAD_ENDED, recover has nothing to do, nothing is pending; one write", async () => {
    const view = await waiting();
    const backup = backupCheckpoints();
    const ok = await runCli(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
    );
    expect(parseJsonOutput(ok.stdout).outcome).toBe("VERIFIED");
    restoreCheckpoints(backup);

    const show = parseJsonOutput((await runCli(["show", view.threadId, "--json"], env())).stdout);
    expect({ status: show.status, outcome: show.outcome }).toEqual({
      status: "finished",
      outcome: "VERIFIED",
    });
    const again = await runCli(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
    );
    expect(again.code).toBe(2);
    expect(parseJsonOutput(again.stdout).refused.code).toBe("THREAD_ENDED");
    const rec = await runCli(["recover", view.threadId], env());
    expect(rec.code).toBe(1);
    expect(rec.stderr).toContain("nothing to recover (status finished)");
    expect(parseJsonOutput((await runCli(["pending", "--json"], env())).stdout).pending).toEqual([]);
    expect(await portal.writes()).toHaveLength(1);
  });

  it("killed after sending the write, checkpoint rolled back to the waiting approval: shown as a stopped run at the journal's step and not as pending, the worker finishes it honestly, a later decision is refused; one write", async () => {
    const view = await waiting();
    const backup = backupCheckpoints();
    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: 2500, times: 1 });
    await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      // No resume grace: the worker below may take the run over as soon as its process is gone.
      env({ ACTION_ENVELOPE_RESUME_GRACE_MS: "0" }),
      "the write held in the emulator",
      async () => (await journalHasRows(dataDir, "executions")) && (await portal.faultsArmed()) === 0,
      { graceMs: 100 },
    );
    await until("the held write to land", async () => (await portal.writes()).length === 1);
    restoreCheckpoints(backup);

    // The checkpoint says "waiting for approval"; the journal says the write was sent.
    const show = parseJsonOutput((await runCli(["show", view.threadId, "--json"], env())).stdout);
    expect({ status: show.status, next: show.next }).toEqual({
      status: "interrupted_run",
      next: ["carry_out"],
    });
    expect(parseJsonOutput((await runCli(["pending", "--json"], env())).stdout).pending).toEqual([]);

    const round = parseJsonOutput((await runCli(["worker", "--once", "--json"], env())).stdout);
    expect(round.recovered).toEqual([
      { threadId: view.threadId, result: "recovered", detail: "INCONCLUSIVE / INCONCLUSIVE" },
    ]);
    expect(await portal.writes()).toHaveLength(1);
    const after = parseJsonOutput((await runCli(["show", view.threadId, "--json"], env())).stdout);
    expect({ status: after.status, outcome: after.outcome, ack: after.acknowledgement.status }).toEqual({
      status: "finished",
      outcome: "INCONCLUSIVE",
      ack: "MISSING",
    });
    // Ended now: the same approval again is refused, nothing sent.
    const again = await runCli(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
    );
    expect(again.code).toBe(2);
    expect(parseJsonOutput(again.stdout).refused.code).toBe("THREAD_ENDED");
    expect(await portal.writes()).toHaveLength(1);
    // The stale pause was recorded, not silently skipped over.
    const audit = parseJsonOutput((await runCli(["audit", "show", view.threadId, "--json"], env())).stdout);
    expect(JSON.stringify(audit)).toContain("await_approval was reached, but action");
  });

  it("killed after the decision was recorded but before the pre-read: recover continues from the pre-read and writes once, VERIFIED", async () => {
    const view = await waiting();
    const backup = backupCheckpoints();
    // Hold the pre-read so the kill lands after the decision was claimed and before any write.
    await portal.fault({ method: "tasks.task.get", kind: "latency", ms: 4000, times: 1 });
    await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
      "the decision to be claimed in the journal",
      () => journalHasRows(dataDir, "decision_claims"),
    );
    restoreCheckpoints(backup);
    expect(await portal.writes()).toHaveLength(0);

    const show = parseJsonOutput((await runCli(["show", view.threadId, "--json"], env())).stdout);
    expect({ status: show.status, next: show.next }).toEqual({
      status: "interrupted_run",
      next: ["carry_out"],
    });
    const rec = await runCli(["recover", view.threadId, "--json"], env());
    expect(rec.code, rec.stderr).toBe(0);
    expect(parseJsonOutput(rec.stdout).outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
    expect((await portal.task(4)).title).toBe(NEW_TITLE);
  });
});
