/**
 * A part of an action's evidence edited in the data directory by someone who holds no journal key, while
 * the action is in flight (a run stopped after the pre-read, the write's answer or the verification) or
 * after it closed, is never reported as the journal's evidence: the one projection (src/hitl/thread-view.ts)
 * withholds a part whose seal does not hold (or that a failing later seal covers), and names it and why.
 * Checked in process, by `show` and `show --json` (another process), by the inbox's thread page, and in the
 * closing audit record `finish` writes. A genuine stopped or finished thread shows its evidence as recorded.
 * Runs on the backend the suite runs on; the emulator's call log counts the writes.
 */
import { describe, expect, it } from "vitest";
import fs from "node:fs";
import path from "node:path";
import { recoverThread, submitDecision } from "../src/app/threads.js";
import { viewThread } from "../src/app/view-thread.js";
import { auditedView } from "../src/api/cli-api.js";
import { hashPassword, loadInboxUsers } from "../src/inbox/users.js";
import { startInbox } from "../src/inbox/server.js";
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
import { signedInSession } from "./support/inbox.js";

const t = eachTestApp("ae-withheld-");

type Part = "decision" | "preRead" | "invocation" | "acknowledgement" | "verification";

/**
 * The thread's evidence as this process, `show --json` and (with `text`) `show` report it; the CLI
 * commands are other processes, reading the same journal.
 */
async function reported(threadId: string, text = true) {
  const view = await viewThread(t.app, threadId);
  const env = envFor(t.portal, t.dataDir);
  const json = await runCli(["show", threadId, "--json"], env);
  const shownText = text ? (await runCli(["show", threadId], env)).stdout : "";
  const shown = parseJsonOutput(json.stdout) as Record<Part, unknown> & { withheld?: Record<string, string> };
  return { view, json: shown, text: shownText };
}

/** Each part named is reported nowhere, and every surface says why with `why`. */
async function expectWithheld(threadId: string, parts: Part | Part[], why: string) {
  const { view, json, text } = await reported(threadId);
  for (const part of [parts].flat()) {
    expect(view.state?.[part] ?? null).toBeNull();
    expect(view.withheld?.[part]).toContain(why);
    expect(json[part]).toBeNull();
    expect(json.withheld?.[part]).toContain(why);
    const label = part === "preRead" ? "pre-read" : part;
    expect(text).toContain(`${label}: withheld — `);
  }
  expect(text).toContain(why);
  return { view, json, text };
}

/** Every part named is reported as recorded, and nothing is withheld. */
async function expectReported(threadId: string, parts: Part[]) {
  // `show`'s text of genuine evidence is other tests' (this file checks the notes it prints in its place).
  const { view, json } = await reported(threadId, false);
  expect(view.withheld).toBeUndefined();
  expect(json.withheld).toBeUndefined();
  for (const part of parts) {
    expect(view.state?.[part], part).toBeTruthy();
    // `show --json` prints the decision without the raw resume value.
    if (part !== "decision") expect(json[part], part).toEqual(JSON.parse(JSON.stringify(view.state?.[part])));
    else expect(json.decision).toBeTruthy();
  }
}

describe("evidence of an action in flight, edited in the data directory, is withheld by every view", () => {
  it("a pre-read edited while its run waits to write: withheld (in process, show, show --json and the inbox); put back, reported again", async () => {
    const view = await renameWaiting(t, 4, "WITHHELD PRE-READ");
    stopOnceBefore(t.app, "beginWrite", "the write-ahead entry");
    const hash = await approvedUntilStopped(t, view, "pre_read");
    await expectReported(view.threadId, ["decision", "preRead"]);

    const original = await actionProgress(t, hash);
    const preRead = original["preRead"] as { verdict: string; reason: string };
    await setActionProgress(t, hash, { ...original, preRead: { ...preRead, reason: "read by hand" } });
    const why = "the journal's pre-read of this action does not match its seal under the journal key";
    const { json } = await expectWithheld(view.threadId, "preRead", why);
    expect(JSON.stringify(json)).not.toContain("read by hand");

    // The inbox's page of the thread says the same, and shows nothing of the edited pre-read.
    const page = await inboxPage(view.threadId);
    expect(page).toContain('data-part="preRead"');
    expect(page).toContain("pre-read of this action does not match its seal under the journal key");
    expect(page).not.toContain("read by hand");

    // Its seal removed: withheld as carrying none.
    const { preReadSeal: _s, ...unsealed } = original;
    await setActionProgress(t, hash, unsealed);
    await expectWithheld(view.threadId, "preRead", "pre-read of this action carries no seal");

    await setActionProgress(t, hash, original);
    await expectReported(view.threadId, ["decision", "preRead"]);
    expect(await t.portal.writes()).toEqual([]);
  });

  it("an acknowledgement or a write-ahead entry edited while the run waits to verify: withheld; the genuine pre-read is still reported", async () => {
    const view = await renameWaiting(t, 4, "WITHHELD ANSWER");
    stopOnceBeforeMove(t.app, "verified");
    const hash = await approvedUntilStopped(t, view, "acknowledged");
    await expectReported(view.threadId, ["preRead", "invocation", "acknowledgement"]);

    const original = await actionProgress(t, hash);
    const ack = original["acknowledgement"] as { status: string; at: string };
    await setActionProgress(t, hash, {
      ...original,
      acknowledgement: { ...ack, at: "2020-01-01T00:00:00.000Z" },
    });
    const { view: now, json } = await expectWithheld(
      view.threadId,
      "acknowledgement",
      "the journal's acknowledgement of this action does not match its seal under the journal key",
    );
    expect(now.state?.preRead).toBeTruthy();
    expect(json.preRead).toBeTruthy();
    await setActionProgress(t, hash, original);

    // The write-ahead entry's arguments rewritten: the invocation it names is not reported.
    const [entry] = await journalSql(
      t.dataDir,
      "SELECT args_json FROM T.executions WHERE envelope_hash = ?",
      [hash],
    );
    const args = JSON.parse(String(entry!["args_json"])) as { fields: Record<string, unknown> };
    await journalSql(t.dataDir, "UPDATE T.executions SET args_json = ? WHERE envelope_hash = ?", [
      JSON.stringify({ ...args, fields: { ...args.fields, TITLE: "WRITTEN BY HAND" } }),
      hash,
    ]);
    const shown = await expectWithheld(
      view.threadId,
      "invocation",
      "the journal's write-ahead entry of this action does not match its seal under the journal key",
    );
    expect(JSON.stringify(shown.json)).not.toContain("WRITTEN BY HAND");
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("an answer written onto the write-ahead entry while the run waits to record the target's: withheld, never the target's", async () => {
    const view = await renameWaiting(t, 4, "WITHHELD ENTRY ANSWER");
    // The write went out; the process stops before the answer is recorded.
    stopOnceBefore(t.app, "recordAnswer", "the answer was recorded");
    const hash = await approvedUntilStopped(t, view, "intent");
    await expectReported(view.threadId, ["preRead", "invocation"]);
    await journalSql(t.dataDir, "UPDATE T.executions SET ack_json = ?, ack_at = ? WHERE envelope_hash = ?", [
      JSON.stringify({
        status: "ERROR",
        error: { description: "REFUSED BY HAND" },
        at: "2026-12-05T00:00:00Z",
      }),
      "2026-12-05T00:00:00Z",
      hash,
    ]);
    const shown = await expectWithheld(
      view.threadId,
      "acknowledgement",
      "the answer on the journal's write-ahead entry of this action carries no seal",
    );
    expect(JSON.stringify(shown.json)).not.toContain("REFUSED BY HAND");
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("an acknowledgement edited while the run waits to close: withheld as covered by the verification's seal, which no longer holds", async () => {
    const view = await renameWaiting(t, 4, "WITHHELD AFTER VERIFYING");
    stopOnceBefore(t.app, "closeThread", "the close was recorded");
    const hash = await approvedUntilStopped(t, view, "verified");
    await expectReported(view.threadId, ["preRead", "invocation", "acknowledgement", "verification"]);

    const original = await actionProgress(t, hash);
    const ack = original["acknowledgement"] as { status: string; at: string };
    await setActionProgress(t, hash, {
      ...original,
      acknowledgement: { ...ack, at: "2020-01-01T00:00:00.000Z" },
    });
    const { view: now } = await expectWithheld(
      view.threadId,
      "acknowledgement",
      "the journal's acknowledgement of this action is covered by the seal of its verification, which does not hold",
    );
    // The seal that fails covers the verification it was made on too; the verification's own seal says so.
    expect(now.withheld?.verification).toContain("verification of this action does not match its seal");
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("a verification edited while the run waits to close: neither finish's closing audit record nor any view of the closed thread takes it as evidence", async () => {
    const view = await renameWaiting(t, 4, "EDITED BEFORE THE CLOSE");
    stopOnceBefore(t.app, "closeThread", "the close was recorded");
    const hash = await approvedUntilStopped(t, view, "verified");
    const progress = await actionProgress(t, hash);
    const verification = progress["verification"] as { verdict: string; reason: string };
    await setActionProgress(t, hash, {
      ...progress,
      verification: { ...verification, reason: "checked by hand" },
    });

    const recovered = await recoverThread(t.app, view.threadId);
    expect(recovered.state).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    const [ended] = await t.app.deps.audit.records({
      threadId: view.threadId,
      events: ["execution_outcome"],
    });
    const received = ended!.received as Record<string, unknown>;
    // The parts whose own seal holds are recorded; the edited verification is not, nor the
    // acknowledgement its seal covered (which of the two was changed cannot be told).
    expect(received["preRead"]).toBeTruthy();
    expect(received["invocation"]).toBeTruthy();
    expect(received["verification"] ?? null).toBeNull();
    expect(received["acknowledgement"] ?? null).toBeNull();
    expect(JSON.stringify(ended)).not.toContain("checked by hand");
    // The record says which parts it leaves out and why, and the --api view, built from the server's
    // audit records (src/api/cli-api.ts), names them as the local views do.
    const noted = received["withheld"] as Record<string, string>;
    expect(noted["verification"]).toContain("seal under the journal key");
    expect(noted["acknowledgement"]).toContain("seal under the journal key");
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const apiView = auditedView(view.threadId, { tasks: [], next: [] }, {} as never, records);
    expect(apiView.status).toBe("finished");
    expect(apiView.withheld).toEqual(noted);
    expect(apiView.state?.verification ?? null).toBeNull();

    // The close's seal covers the edited verification as it stood; the close records that it did not
    // hold, so the closed thread's views withhold it too (and the acknowledgement its seal covered).
    const why = "did not hold its seal under the journal key when the action was closed";
    const { text, json } = await expectWithheld(view.threadId, ["verification", "acknowledgement"], why);
    expect(text).not.toContain("checked by hand");
    expect(json.preRead).toBeTruthy();
    expect((await t.portal.writes()).length).toBe(1);
  });
});

describe("evidence of a closed action whose close seal no longer holds is withheld", () => {
  it("a verified thread whose verification is edited afterwards: the parts the close covers are withheld, with the OUTCOME_TAMPERED ending", async () => {
    const view = await renameWaiting(t, 4, "CLOSED THEN EDITED");
    const done = await submitDecision(t.app, view.threadId, approvalOf(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    const hash = view.approval!.envelopeHash;
    await expectReported(view.threadId, [
      "decision",
      "preRead",
      "invocation",
      "acknowledgement",
      "verification",
    ]);

    const original = await actionProgress(t, hash);
    const verification = original["verification"] as { reason: string };
    await setActionProgress(t, hash, {
      ...original,
      verification: { ...verification, reason: "edited by hand" },
    });
    const why = "is covered by the seal of its close, which does not hold";
    const { json, text } = await expectWithheld(
      view.threadId,
      ["verification", "preRead", "acknowledgement"],
      why,
    );
    expect(json).toMatchObject({ outcome: "INCONCLUSIVE", reasonCode: "OUTCOME_TAMPERED" });
    expect(text).not.toContain("edited by hand");
    // The decision and the write-ahead entry have seals of their own, which hold.
    expect(json.decision).toBeTruthy();
    expect(json.invocation).toBeTruthy();

    await setActionProgress(t, hash, original);
    await expectReported(view.threadId, [
      "decision",
      "preRead",
      "invocation",
      "acknowledgement",
      "verification",
    ]);
    expect((await t.portal.writes()).length).toBe(1);
  });
});

/** The inbox's page of a thread, as a signed-in user sees it. */
async function inboxPage(threadId: string): Promise<string> {
  const usersFile = path.join(t.dataDir, "inbox-users.json");
  fs.writeFileSync(
    usersFile,
    JSON.stringify({ users: [{ id: "demo-user", password: await hashPassword("demo-user-password-1") }] }),
  );
  const inbox = await startInbox({ app: t.app, users: loadInboxUsers(usersFile), pollMs: 200 });
  try {
    const req = await signedInSession(inbox.url, "demo-user", "demo-user-password-1");
    const page = await req(`/t/${threadId}`);
    expect(page.status).toBe(200);
    return page.text();
  } finally {
    await inbox.close();
  }
}
