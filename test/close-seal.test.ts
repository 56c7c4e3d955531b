/**
 * A finished thread's outcome cannot be changed afterwards by someone who can write the data directory
 * (or the database) but holds no journal key: the thread's closing record and the action's, with the
 * evidence the action was closed on, are sealed under the key when they are written, and a close whose
 * seal does not hold (edited, copied from another thread, or stripped of its seal) is reported
 * INCONCLUSIVE / OUTCOME_TAMPERED in place of what it says, in process and by the CLI. So are the parts a
 * later step acts on while a stopped run waits: a verification edited before the close, an acknowledgement
 * edited before the verification, a pre-read's evidence edited before the write or the verification. Runs on the
 * backend the suite runs on (SQLite files, or PostgreSQL with ACTION_ENVELOPE_TEST_DATABASE_URL); the
 * emulator's call log counts the writes.
 */
import { describe, expect, it } from "vitest";
import { recoverThread, submitDecision } from "../src/app/threads.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import {
  approvalOf,
  eachTestApp,
  envFor,
  journalSql,
  parseJsonOutput,
  runCli,
  stopOnceBefore,
  stopOnceBeforeMove,
} from "./support/harness.js";
import {
  actionProgress,
  approvedUntilStopped,
  renameWaiting,
  setActionProgress,
} from "./support/stopped-runs.js";

const t = eachTestApp("ae-close-seal-");

function rejectionOf(view: ThreadView) {
  const a = view.approval!;
  return {
    decisions: [
      { type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

async function threadClose(threadId: string): Promise<string> {
  const [row] = await journalSql(t.dataDir, "SELECT closed_json FROM T.threads WHERE thread_id = ?", [
    threadId,
  ]);
  return String(row!["closed_json"]);
}

const setThreadClose = (threadId: string, text: string) =>
  journalSql(t.dataDir, "UPDATE T.threads SET closed_json = ? WHERE thread_id = ?", [text, threadId]);
/** The thread's ending as this process and the CLI (`show --json`, another process) report it. */
async function reported(threadId: string) {
  const view = await viewThread(t.app, threadId);
  const shown = await runCli(["show", threadId, "--json"], envFor(t.portal, t.dataDir));
  const json = parseJsonOutput(shown.stdout) as { outcome?: string; reasonCode?: string; reason?: string };
  // The exit code says the outcome too: 0 only for VERIFIED.
  expect(shown.code, shown.stderr).toBe(json.outcome === "VERIFIED" ? 0 : 2);
  return {
    inProcess: {
      outcome: view.state?.outcome,
      reasonCode: view.state?.reasonCode,
      reason: view.state?.reason,
    },
    cli: { outcome: json.outcome, reasonCode: json.reasonCode, reason: json.reason },
  };
}

describe("a closing record edited in the data directory", () => {
  it("a rejected thread given a verified thread's close, seal and all, is reported OUTCOME_TAMPERED, never VERIFIED; nothing is written", async () => {
    const done = await renameWaiting(t, 4, "SEALED CLOSE");
    const verified = await submitDecision(t.app, done.threadId, approvalOf(done));
    expect(verified.state?.outcome).toBe("VERIFIED");
    const rejectedView = await renameWaiting(t, 3, "NEVER WRITTEN");
    const rejected = await submitDecision(t.app, rejectedView.threadId, rejectionOf(rejectedView));
    expect(rejected.state?.reasonCode).toBe("REJECTED_BY_HUMAN");
    const writes = (await t.portal.writes()).length;

    // The writer copies the verified thread's closing records, seals included, onto the rejected one.
    await setThreadClose(rejectedView.threadId, await threadClose(done.threadId));
    const theirs = await actionProgress(t, verified.approval?.envelopeHash ?? done.approval!.envelopeHash);
    const mine = await actionProgress(t, rejectedView.approval!.envelopeHash);
    await setActionProgress(t, rejectedView.approval!.envelopeHash, {
      ...mine,
      closed: theirs["closed"],
      closeSeal: theirs["closeSeal"],
      verification: theirs["verification"],
    });

    const { inProcess, cli } = await reported(rejectedView.threadId);
    for (const r of [inProcess, cli]) {
      expect(r).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
      expect(r.reason).toContain("does not match its seal under the journal key");
      expect(r.reason).toContain("VERIFIED/VERIFIED");
    }
    // The thread stays ended: a decision sent now is refused, and nothing is written.
    await expect(submitDecision(t.app, rejectedView.threadId, approvalOf(rejectedView))).rejects.toThrow(
      /ended/,
    );
    expect((await t.portal.writes()).length).toBe(writes);
    // The untouched thread still reports its own close.
    expect((await reported(done.threadId)).cli).toMatchObject({
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
    });
  });

  it("a verified thread whose verification evidence or close is edited afterwards, or whose seal is removed, is reported OUTCOME_TAMPERED", async () => {
    const view = await renameWaiting(t, 4, "EDITED EVIDENCE");
    const done = await submitDecision(t.app, view.threadId, approvalOf(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    const hash = view.approval!.envelopeHash;
    const original = await actionProgress(t, hash);
    const originalClose = await threadClose(view.threadId);

    // The verification's evidence edited (the thread's own close untouched): the action's close no longer holds.
    const verification = original["verification"] as { reason: string };
    await setActionProgress(t, hash, {
      ...original,
      verification: { ...verification, reason: `${verification.reason} (edited)` },
    });
    let r = await reported(view.threadId);
    expect(r.inProcess).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    expect(r.cli).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });

    // Put back: reported as recorded again.
    await setActionProgress(t, hash, original);
    expect((await reported(view.threadId)).cli).toMatchObject({
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
    });

    // The thread's close edited (its reason), its seal kept: the seal no longer holds.
    const close = JSON.parse(originalClose) as Record<string, unknown>;
    await setThreadClose(view.threadId, JSON.stringify({ ...close, reason: "all fine" }));
    r = await reported(view.threadId);
    expect(r.cli).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });

    // The seal removed: reported as a close that carries none.
    const { seal: _seal, ...unsealed } = close;
    await setThreadClose(view.threadId, JSON.stringify(unsealed));
    r = await reported(view.threadId);
    expect(r.cli).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    expect(r.cli.reason).toContain("carries no seal");
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("a verification edited while its run waits to close (stopped after verifying) is not closed on: the close says OUTCOME_TAMPERED", async () => {
    const view = await renameWaiting(t, 4, "VERIFIED THEN EDITED");
    // The process stops after the verification was recorded, before the close.
    stopOnceBefore(t.app, "closeThread", "the close was recorded");
    const hash = await approvedUntilStopped(t, view, "verified");

    // The writer rewrites the recorded verification's reason before the close reads it.
    const progress = await actionProgress(t, hash);
    const verification = progress["verification"] as { verdict: string; reason: string };
    expect(verification.verdict).toBe("VERIFIED");
    await setActionProgress(t, hash, {
      ...progress,
      verification: { ...verification, reason: "checked by hand" },
    });

    const recovered = await recoverThread(t.app, view.threadId);
    expect(recovered.state).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    expect(recovered.state?.reason).toContain("verification of this action does not match its seal");
    const { cli } = await reported(view.threadId);
    expect(cli).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    // One write went out (the approved one); nothing more.
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("an acknowledgement edited while its run waits to verify is not used: the fresh read decides as without one (INCONCLUSIVE, never VERIFIED on its word)", async () => {
    const view = await renameWaiting(t, 4, "ACKNOWLEDGED THEN EDITED");
    stopOnceBeforeMove(t.app, "verified");
    const hash = await approvedUntilStopped(t, view, "acknowledged");

    // The writer rewrites the recorded answer (its time) before the verification reads it.
    const progress = await actionProgress(t, hash);
    const ack = progress["acknowledgement"] as { status: string; at: string };
    expect(ack.status).toBe("OK");
    await setActionProgress(t, hash, {
      ...progress,
      acknowledgement: { ...ack, at: "2020-01-01T00:00:00.000Z" },
    });

    const recovered = await recoverThread(t.app, view.threadId);
    expect(recovered.state).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "INCONCLUSIVE" });
    expect(recovered.state?.reason).toContain("acknowledgement does not match its seal");
    expect((await reported(view.threadId)).cli).toMatchObject({ outcome: "INCONCLUSIVE" });
    expect((await t.portal.writes()).length).toBe(1);
    // The edited answer is not kept under the verification's and the close's seals as the target's:
    // every view shows the MISSING answer the verification was made on.
    const shown = parseJsonOutput(
      (await runCli(["show", view.threadId, "--json"], envFor(t.portal, t.dataDir))).stdout,
    ) as { acknowledgement: { status: string; reason: string; at: string } | null; withheld?: unknown };
    expect(shown.acknowledgement).toMatchObject({ status: "MISSING" });
    expect(shown.acknowledgement?.reason).toContain("does not match its seal");
    expect(JSON.stringify(shown)).not.toContain("2020-01-01T00:00:00.000Z");
    expect(JSON.stringify((await viewThread(t.app, view.threadId)).state?.acknowledgement)).not.toContain(
      "2020-01-01",
    );
  });

  it("a pre-read whose evidence is edited while its run waits to write is not written on: refused INTEGRITY_CHECK_FAILED, nothing sent", async () => {
    const view = await renameWaiting(t, 4, "PRE-READ THEN EDITED");
    // The process stops after the pre-read's MATCH was recorded, before the write-ahead entry.
    stopOnceBefore(t.app, "beginWrite", "the write-ahead entry");
    const hash = await approvedUntilStopped(t, view, "pre_read");

    // The writer leaves the verdict and its time alone and rewrites what the pre-read found.
    const progress = await actionProgress(t, hash);
    const preRead = progress["preRead"] as { verdict: string; reason: string };
    expect(preRead.verdict).toBe("MATCH");
    await setActionProgress(t, hash, { ...progress, preRead: { ...preRead, reason: "read by hand" } });

    await expect(recoverThread(t.app, view.threadId)).rejects.toMatchObject({
      code: "INTEGRITY_CHECK_FAILED",
      message: expect.stringContaining(
        `action ${hash} is pre_read: expected the MATCH of its pre-read sealed under the journal key (ACTION_ENVELOPE_JOURNAL_KEY / _FILE), found a pre-read (MATCH) whose seal under the journal key does not hold`,
      ),
    });
    expect(await t.portal.writes()).toEqual([]);
  });

  it("a pre-read whose evidence is edited while its run waits to verify is not compared with: OUTCOME_TAMPERED, never VERIFIED", async () => {
    const view = await renameWaiting(t, 4, "WRITTEN THEN PRE-READ EDITED");
    stopOnceBeforeMove(t.app, "verified");
    const hash = await approvedUntilStopped(t, view, "acknowledged");

    // The writer rewrites what the pre-read found (the verification compares the fresh read with it).
    const progress = await actionProgress(t, hash);
    const preRead = progress["preRead"] as { verdict: string; reason: string };
    await setActionProgress(t, hash, { ...progress, preRead: { ...preRead, reason: "read by hand" } });

    const recovered = await recoverThread(t.app, view.threadId);
    expect(recovered.state).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    expect(recovered.state?.reason).toContain("pre-read of this action does not match its seal");
    const after = await actionProgress(t, hash);
    expect(after["verification"]).toMatchObject({ verdict: "INCONCLUSIVE" });
    expect((await reported(view.threadId)).cli).toMatchObject({
      outcome: "INCONCLUSIVE",
      reasonCode: "OUTCOME_TAMPERED",
    });
    expect((await t.portal.writes()).length).toBe(1);
  });
});
