/**
 * `undo <thread>`: the compensation of a VERIFIED change is a new proposal, built by code from the
 * journal's recorded before-values (the model is never asked), shown on its own card and executed
 * only after its own approval, with a pre-read expecting exactly the state our write left. Someone
 * else's later change makes it STALE_STATE instead of being overwritten. Writes counted in the
 * emulator's call log.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { startUndo } from "../src/app/undo.js";
import { eachTestApp, envFor, parseJsonOutput, runCli } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

const NEW_TITLE = "UNDO-TEST renamed";
const t = eachTestApp();
let model: ScriptedChatModel;
let originalTitle: string;

beforeEach(async () => {
  model = new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE }));
  await t.open({ model });
  originalTitle = (await t.portal.task(4))["title"];
});

function approval(view: ThreadView, approver = "demo-approver") {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approver } },
    ],
  };
}

async function verifiedRename(): Promise<ThreadView> {
  const waiting = await startRun(t.app, {
    request: `rename task 4 to ${NEW_TITLE}`,
    requestedBy: "demo-user",
  });
  const done = await submitDecision(t.app, waiting.threadId, approval(waiting));
  expect(done.state!.outcome).toBe("VERIFIED");
  expect((await t.portal.task(4))["title"]).toBe(NEW_TITLE);
  return done;
}

describe("undo of a verified change", () => {
  it("proposes the recorded before-value on its own card without asking the model, and restores it only after its own approval", async () => {
    const done = await verifiedRename();
    const turns = model.boundToolNames.length;

    const undo = await startUndo(t.app, done.threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    expect(undo.threadId).not.toBe(done.threadId);
    expect(model.boundToolNames.length).toBe(turns);
    const env = undo.approval!.envelope;
    expect(env.params).toEqual({ TITLE: originalTitle });
    // Its baseline is the state our write left; the card says what it undoes.
    expect(env.baseline.values["TITLE"]).toBe(NEW_TITLE);
    expect(undo.state!.card).toContain(`UNDO of thread ${done.threadId}`);
    expect(undo.state!.proposal?.source).toBe("compensation");
    // Nothing is written before the approval.
    expect(await t.portal.writes()).toHaveLength(1);

    const restored = await submitDecision(t.app, undo.threadId, approval(undo));
    expect(restored.state!.outcome).toBe("VERIFIED");
    expect((await t.portal.task(4))["title"]).toBe(originalTitle);
    const writes = await t.portal.writes();
    expect(writes).toHaveLength(2);
    expect((writes[1]!.params["fields"] as Record<string, unknown>)["TITLE"]).toBe(originalTitle);
  });

  it("refused STALE_STATE when someone changed the task after our write (nothing proposed, nothing written)", async () => {
    const done = await verifiedRename();
    // A person edits another field in Bitrix24 afterwards: the change marker moves.
    expect(
      (
        await t.portal.rest("tasks.task.update", {
          taskId: 4,
          fields: { DESCRIPTION: "edited by a person afterwards" },
        })
      ).status,
    ).toBe(200);
    const undo = await startUndo(t.app, done.threadId, "demo-user");
    expect(undo.status).toBe("finished");
    expect(undo.state!.outcome).toBe("NOT_EXECUTED");
    expect(undo.state!.reasonCode).toBe("STALE_STATE");
    // DESCRIPTION is named with what our verification read, not as a value we wrote.
    expect(undo.state!.reason).toContain('DESCRIPTION (at our verification "');
    expect(await t.portal.writes()).toHaveLength(2); // ours and the person's, no undo
    expect(undo.state!.card ?? null).toBeNull();

    // The same when the person changed the very field we wrote: it is named with ours and now.
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: originalTitle } })).status,
    ).toBe(200);
    const done2 = await verifiedRenameAgain();
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "a person's title" } })).status,
    ).toBe(200);
    const undo2 = await startUndo(t.app, done2.threadId, "demo-user");
    expect(undo2.state!.reasonCode).toBe("STALE_STATE");
    expect(undo2.state!.reason).toContain(`TITLE (we wrote "${NEW_TITLE}", now "a person's title")`);
    expect((await t.portal.task(4))["title"]).toBe("a person's title");
  });

  it("a change after the undo was proposed makes the undo's own pre-read STALE_STATE: no write", async () => {
    const done = await verifiedRename();
    const undo = await startUndo(t.app, done.threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    expect(
      (
        await t.portal.rest("tasks.task.update", {
          taskId: 4,
          fields: { TITLE: "changed while the undo waited" },
        })
      ).status,
    ).toBe(200);
    const ended = await submitDecision(t.app, undo.threadId, approval(undo));
    expect(ended.state!.reasonCode).toBe("STALE_STATE");
    expect((await t.portal.task(4))["title"]).toBe("changed while the undo waited");
    expect(
      (await t.portal.writes()).filter(
        (w) => (w.params["fields"] as Record<string, unknown>)["TITLE"] === originalTitle,
      ),
    ).toHaveLength(0);
  });

  it("only a VERIFIED change can be undone: a rejected one, an unknown thread and an undo still waiting are refused NOT_UNDOABLE / NO_SUCH_THREAD", async () => {
    const waiting = await startRun(t.app, {
      request: `rename task 4 to ${NEW_TITLE}`,
      requestedBy: "demo-user",
    });
    await expect(startUndo(t.app, waiting.threadId, "demo-user")).rejects.toThrow(
      /NOT_UNDOABLE: only a VERIFIED change can be undone/,
    );
    const rejected = await submitDecision(t.app, waiting.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: waiting.approval!.envelopeHash,
          nonce: waiting.approval!.nonce,
          approver: { id: "demo-approver" },
          message: "no",
        },
      ],
    });
    expect(rejected.state!.outcome).not.toBe("VERIFIED");
    await expect(startUndo(t.app, waiting.threadId, "demo-user")).rejects.toThrow(
      /NOT_UNDOABLE: .*REJECTED_BY_HUMAN/,
    );
    await expect(startUndo(t.app, "no-such-thread", "demo-user")).rejects.toThrow(/NO_SUCH_THREAD/);
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("through the CLI: `undo <thread> --json` waits for approval, `approve` restores; one write each", async () => {
    const done = await verifiedRename();
    await t.close();
    const env = envFor(t.portal, t.dataDir);
    const undo = await runCli(["undo", done.threadId, "--json"], env);
    expect(undo.code, undo.stderr).toBe(0);
    const waiting = parseJsonOutput(undo.stdout);
    expect(waiting.status).toBe("awaiting_approval");
    expect(waiting.envelope.params).toEqual({ TITLE: originalTitle });
    const approved = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"],
      env,
    );
    expect(parseJsonOutput(approved.stdout).outcome).toBe("VERIFIED");
    expect((await t.portal.task(4))["title"]).toBe(originalTitle);
    expect(await t.portal.writes()).toHaveLength(2);
    // Undoing a thread that is not a verified change is refused with the reason, exit 1.
    const again = await runCli(["undo", "no-such-thread"], env);
    expect(again.code).toBe(1);
    expect(again.stderr + again.stdout).toContain("NO_SUCH_THREAD");
    await t.open({ model });
  });
});

async function verifiedRenameAgain(): Promise<ThreadView> {
  const waiting = await startRun(t.app, {
    request: `rename task 4 to ${NEW_TITLE}`,
    requestedBy: "demo-user",
  });
  expect(waiting.status).toBe("awaiting_approval");
  const done = await submitDecision(t.app, waiting.threadId, approval(waiting));
  expect(done.state!.outcome).toBe("VERIFIED");
  return done;
}
