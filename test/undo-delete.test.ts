/**
 * Undo deletes what a run created, where the policy allows it: a posted comment (delete_task_comment,
 * allowed with an approval by the default policy) and a created task (delete_task, denied by default;
 * a policy allowing it makes undo propose it). The graph, our MCP server over stdio, the emulator over
 * HTTP and the journal; deletes counted in the emulator's call log. Also in the PostgreSQL pass.
 */
import fs from "node:fs";
import path from "node:path";
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { startUndo } from "../src/app/undo.js";
import { cardSection, setSection } from "../src/inbox/card-view.js";
import { writerWindow } from "../src/evidence/writer-window.js";
import { eachTestApp, envFor, parseJsonOutput, ROOT, runCli } from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose, type Script } from "./support/scripted-model.js";

const TEXT = "Moved to review: please check the Q3 numbers before Friday.";
const TITLE = "Prepare the Q4 report";
const t = eachTestApp();

function approve(view: ThreadView, approver = "demo-approver"): { decisions: unknown[] } {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approver } },
    ],
  };
}

/** The default policy with `change` applied, written where ACTION_ENVELOPE_POLICY can name it. */
function policyFile(
  change: (p: { version: string; operations: Record<string, Record<string, unknown>> }) => void,
): string {
  const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
  // These runs' requester is self-declared (in process): the requester rule is tested in requester-verification.test.ts.
  policy.requireVerifiedRequesterAtOrAbove = null;
  change(policy);
  const file = path.join(t.dataDir, `policy-${policy.version}.json`);
  fs.writeFileSync(file, JSON.stringify(policy));
  return file;
}

async function comments(taskId = 4): Promise<Array<{ ID: string; POST_MESSAGE: string; AUTHOR_ID: string }>> {
  const r = await t.portal.rest("task.commentitem.getlist", { TASKID: taskId });
  expect(r.status).toBe(200);
  return r.body.result;
}

const deletes = async () => (await t.portal.calls("task.commentitem.delete")).length;

/** A comment posted on task 4 by an approved run: VERIFIED, and the id it created. */
async function postedComment(
  env: Record<string, string> = {},
): Promise<{ threadId: string; commentId: string }> {
  await t.open({
    model: new ScriptedChatModel(readThenPropose(4, { POST_MESSAGE: TEXT }, "add_task_comment")),
    env,
  });
  const waiting = await startRun(t.app, { request: `comment on task 4: ${TEXT}`, requestedBy: "demo-user" });
  expect(waiting.status).toBe("awaiting_approval");
  const done = await submitDecision(t.app, waiting.threadId, approve(waiting));
  expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
  const created = done.state!.verification!.created as { id: string; via: string };
  expect(created.via).toBe("acknowledgement");
  return { threadId: done.threadId, commentId: created.id };
}

describe("undo of a posted comment (delete_task_comment, allowed with an approval by the default policy)", () => {
  it("is a delete of exactly that comment, shown with its text, sent once after its own approval, read back gone: VERIFIED", async () => {
    const { threadId, commentId } = await postedComment();
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    const e = undo.approval!.envelope;
    expect([e.operation, e.object, e.params]).toEqual([
      "delete_task_comment",
      { type: "task", id: 4 },
      { COMMENT_ID: Number(commentId) },
    ]);
    expect(e.risk.reversibility).toBe("irreversible");
    expect(e.baseline.values).toMatchObject({ POST_MESSAGE: TEXT });
    const card = undo.state!.card!;
    expect(card).toContain(
      `DELETE COMMENT ${commentId} of task 4 — cannot be undone (task.commentitem.delete)`,
    );
    expect(card).toContain(TEXT);
    expect(card).toContain(`UNDO of thread ${threadId}`);
    // The web inbox shows the same delete, with the text it removes, and offers no "requested" value.
    const row = (await t.app.deps.journal.currentAction(undo.threadId))!;
    const inbox = cardSection(row).toString();
    expect(inbox).toContain(`Delete comment ${commentId} of task 4: cannot be undone`);
    expect(inbox).toContain("Moved to review: please check the Q3 numbers before Friday.");
    // Proposing is not deleting: nothing is sent before the approval.
    expect(await deletes()).toBe(0);
    // agent-inbox is not offered an edit it would only see refused.
    expect(undo.approval!.reviewConfigs).toEqual([
      {
        actionName: "delete_task_comment",
        action_name: "delete_task_comment",
        allowedDecisions: ["approve", "reject"],
      },
    ]);
    // An edit cannot point the delete at another comment.
    const a = undo.approval!;
    const edited = await submitDecision(t.app, undo.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          editedAction: { name: "delete_task_comment", args: { taskId: 4, fields: { COMMENT_ID: 1 } } },
        },
      ],
    });
    expect(edited.status).toBe("awaiting_approval");
    expect(edited.approval!.lastRefusal?.code).toBe("OUT_OF_SCOPE");

    const done = await submitDecision(t.app, undo.threadId, approve(edited));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await deletes()).toBe(1);
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "task.commentitem.add",
      "task.commentitem.delete",
    ]);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(false);
    expect(done.state!.invocation).toMatchObject({
      tool: "delete_task_comment",
      args: { taskId: 4, commentId: Number(commentId) },
    });
    expect(done.state!.verification!.reason).toContain(`comment ${commentId} of task 4 is gone`);
    // The chat report names what was deleted (a delete sends no fields).
    const said = done.state!.messages.map((m) => String(m.content));
    expect(said).toContain(
      `Sent delete_task_comment once for comment ${commentId} of task 4; the target answered OK.`,
    );
    // The evidence says what a delete cannot see: nothing is overwritten, a late change goes with the object.
    const window = writerWindow(done.state!.preRead, done.state!.invocation, done.state!.acknowledgement)!;
    expect(window.fieldsOverwritten).toEqual([]);
    expect(window.statement).toContain("would have been deleted with it");
  });

  it("is refused STALE_STATE when the comment was edited after our run posted it: nothing shown, nothing deleted", async () => {
    const { threadId, commentId } = await postedComment();
    expect(
      (
        await t.portal.rest("task.commentitem.update", {
          TASKID: 4,
          ITEMID: Number(commentId),
          FIELDS: { POST_MESSAGE: "Edited by a person" },
        })
      ).status,
    ).toBe(200);
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.state!.outcome).toBe("NOT_EXECUTED");
    expect(undo.state!.reasonCode).toBe("STALE_STATE");
    expect(undo.state!.reason).toContain("Edited by a person");
    expect(await deletes()).toBe(0);
  });

  it("ends STALE_STATE at its pre-read when the comment is edited while the undo waits for approval: no delete sent", async () => {
    const { threadId, commentId } = await postedComment();
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    expect(
      (
        await t.portal.rest("task.commentitem.update", {
          TASKID: 4,
          ITEMID: Number(commentId),
          FIELDS: { POST_MESSAGE: "Edited while waiting" },
        })
      ).status,
    ).toBe(200);
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.outcome).toBe("NOT_EXECUTED");
    expect(done.state!.reasonCode).toBe("STALE_STATE");
    expect(done.state!.preRead!.reason).toMatch(/POST_MESSAGE was .*, now "Edited while waiting"/);
    expect(await deletes()).toBe(0);
    expect((await comments()).find((c) => c.ID === commentId)?.POST_MESSAGE).toBe("Edited while waiting");
  });

  it("already gone when approved: NOT_EXECUTED (NO_CHANGE), saying so, with nothing sent", async () => {
    const { threadId, commentId } = await postedComment();
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(
      (await t.portal.rest("task.commentitem.delete", { TASKID: 4, ITEMID: Number(commentId) })).status,
    ).toBe(200);
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.outcome).toBe("NOT_EXECUTED");
    expect(done.state!.reasonCode).toBe("NO_CHANGE");
    expect(done.state!.reason).toMatch(/already gone.*nothing was sent/);
    expect(done.state!.invocation ?? null).toBeNull();
    // The one delete in the log is the person's, made above.
    expect(await deletes()).toBe(1);
  });

  it("where the policy denies the delete: NOT_UNDOABLE naming the policy, no write", async () => {
    const file = policyFile((p) => {
      p.version = "test-no-delete";
      p.operations["delete_task_comment"]!["allowed"] = false;
    });
    const { threadId } = await postedComment({ ACTION_ENVELOPE_POLICY: file });
    await expect(startUndo(t.app, threadId, "demo-user")).rejects.toThrow(
      /NOT_UNDOABLE: .*add_task_comment created a new comment; deleting it \(delete_task_comment\) is denied by policy default@test-no-delete/,
    );
    expect((await t.portal.writes()).map((w) => w.method)).toEqual(["task.commentitem.add"]);
  });

  it("acknowledged without being applied: VERIFICATION_FAILED, one delete sent, the comment still there", async () => {
    const { threadId, commentId } = await postedComment();
    const undo = await startUndo(t.app, threadId, "demo-user");
    await t.portal.fault({ method: "task.commentitem.delete", kind: "ack_without_apply", times: 1 });
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.acknowledgement!.status).toBe("OK");
    expect(done.state!.outcome).toBe("VERIFICATION_FAILED");
    expect(done.state!.reason).toContain("still there");
    expect(await deletes()).toBe(1);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(true);
  });

  it("applied but the answer lost (plain REST 2): INCONCLUSIVE, the comment gone, never sent twice", async () => {
    const { threadId, commentId } = await postedComment({
      BITRIX24_IDEMPOTENCY: "off",
      BITRIX24_TIMEOUT_MS: "1500",
    });
    const undo = await startUndo(t.app, threadId, "demo-user");
    await t.portal.fault({ method: "task.commentitem.delete", kind: "apply_then_timeout", times: 1 });
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.acknowledgement!.status).not.toBe("OK");
    expect(done.state!.outcome).toBe("INCONCLUSIVE");
    expect(done.state!.reason).toContain("not proven that this write removed it");
    expect(await deletes()).toBe(1);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(false);
  });
});

describe("undo of a created task (delete_task)", () => {
  const proposeNew: Script = (messages) => {
    if (messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change"))
      return new AIMessage("Proposed; waiting for the human.");
    return new AIMessage({
      content: "",
      tool_calls: [
        call("propose_change", {
          operation: "add_task",
          fields: { TITLE, RESPONSIBLE_ID: "5" },
          rationale: "requested by the user",
        }),
      ],
    });
  };

  async function createdTask(
    env: Record<string, string> = {},
  ): Promise<{ threadId: string; taskId: string }> {
    await t.open({ model: new ScriptedChatModel(proposeNew), env });
    const view = await startRun(t.app, {
      request: `create a task "${TITLE}" for user 5`,
      requestedBy: "demo-user",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    return { threadId: done.threadId, taskId: (done.state!.verification!.created as { id: string }).id };
  }

  const allowTaskDelete = () =>
    policyFile((p) => {
      p.version = "test-task-delete";
      p.operations["delete_task"] = { ...p.operations["delete_task"], allowed: true };
      delete p.operations["delete_task"]!["reason"];
    });

  it("is NOT_UNDOABLE under the default policy, which denies delete_task, naming it; no write", async () => {
    const { threadId } = await createdTask();
    await expect(startUndo(t.app, threadId, "demo-user")).rejects.toThrow(
      /NOT_UNDOABLE: .*add_task created a new task; deleting it \(delete_task\) is denied by policy default@2026-12-02\.1: deleting a task cannot be undone/,
    );
    expect((await t.portal.writes()).map((w) => w.method)).toEqual(["tasks.task.add"]);
  });

  it("is proposed as a delete of that task where a policy allows it, deleted once after approval: VERIFIED, the task gone", async () => {
    const { threadId, taskId } = await createdTask({ ACTION_ENVELOPE_POLICY: allowTaskDelete() });
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.status, undo.state?.reason ?? "").toBe("awaiting_approval");
    const e = undo.approval!.envelope;
    expect([e.operation, e.object, e.params]).toEqual([
      "delete_task",
      { type: "task", id: Number(taskId) },
      {},
    ]);
    expect(e.baseline.values).toMatchObject({ TITLE, RESPONSIBLE_ID: "5" });
    expect(undo.state!.card).toContain(`DELETE TASK ${taskId} — cannot be undone (tasks.task.delete)`);
    expect(undo.state!.card).toContain(TITLE);
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual(["tasks.task.add", "tasks.task.delete"]);
    expect((await t.portal.rest("tasks.task.get", { taskId: Number(taskId) })).body.result).toEqual([]);
  });

  it("is refused STALE_STATE when the task was changed after our run created it; nothing deleted", async () => {
    const { threadId, taskId } = await createdTask({ ACTION_ENVELOPE_POLICY: allowTaskDelete() });
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: Number(taskId), fields: { PRIORITY: "2" } }))
        .status,
    ).toBe(200);
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.state!.outcome).toBe("NOT_EXECUTED");
    expect(undo.state!.reasonCode).toBe("STALE_STATE");
    expect(await t.portal.calls("tasks.task.delete")).toHaveLength(0);
  });

  it("ends STALE_STATE at its pre-read when someone comments on the task while the undo waits (the comment would go with it)", async () => {
    const { threadId, taskId } = await createdTask({ ACTION_ENVELOPE_POLICY: allowTaskDelete() });
    const undo = await startUndo(t.app, threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    expect(
      (
        await t.portal.rest("task.commentitem.add", {
          TASKID: Number(taskId),
          FIELDS: { POST_MESSAGE: "I already started on it" },
        })
      ).status,
    ).toBe(200);
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.outcome).toBe("NOT_EXECUTED");
    expect(done.state!.reasonCode).toBe("STALE_STATE");
    expect(await t.portal.calls("tasks.task.delete")).toHaveLength(0);
    expect((await t.portal.rest("tasks.task.get", { taskId: Number(taskId) })).body.result.task.title).toBe(
      TITLE,
    );
  });

  it("deleted but the answer lost (plain REST 2): INCONCLUSIVE, the task gone, never sent twice", async () => {
    const { threadId, taskId } = await createdTask({
      ACTION_ENVELOPE_POLICY: allowTaskDelete(),
      BITRIX24_IDEMPOTENCY: "off",
      BITRIX24_TIMEOUT_MS: "1500",
    });
    const undo = await startUndo(t.app, threadId, "demo-user");
    await t.portal.fault({ method: "tasks.task.delete", kind: "apply_then_timeout", times: 1 });
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.acknowledgement!.status).not.toBe("OK");
    expect(done.state!.outcome).toBe("INCONCLUSIVE");
    expect(await t.portal.calls("tasks.task.delete")).toHaveLength(1);
    expect((await t.portal.rest("tasks.task.get", { taskId: Number(taskId) })).body.result).toEqual([]);
  });

  it("acknowledged without being applied: VERIFICATION_FAILED, one delete sent, the task still there", async () => {
    const { threadId, taskId } = await createdTask({ ACTION_ENVELOPE_POLICY: allowTaskDelete() });
    const undo = await startUndo(t.app, threadId, "demo-user");
    await t.portal.fault({ method: "tasks.task.delete", kind: "ack_without_apply", times: 1 });
    const done = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(done.state!.outcome).toBe("VERIFICATION_FAILED");
    expect(await t.portal.calls("tasks.task.delete")).toHaveLength(1);
    expect((await t.portal.rest("tasks.task.get", { taskId: Number(taskId) })).body.result.task.title).toBe(
      TITLE,
    );
  });
});

describe("undo of a change set that updated a task and posted a comment", () => {
  const SET = [
    { operation: "update_task", taskId: 4, fields: { STATUS: "4", RESPONSIBLE_ID: "5" } },
    { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: TEXT } },
  ];
  const proposeSet: Script = (messages) => {
    if (
      messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change_set")
    )
      return new AIMessage("Proposed; waiting for the human.");
    if (!messages.some((m) => m.getType() === "tool"))
      return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
    return new AIMessage({
      content: "",
      tool_calls: [call("propose_change_set", { actions: SET, rationale: "requested by the user" })],
    });
  };

  it("is one change set: the restore first, then the delete (irreversible last), one approval, each written once: VERIFIED", async () => {
    await t.open({ model: new ScriptedChatModel(proposeSet) });
    const original = await t.portal.task(4);
    const view = await startRun(t.app, {
      request: `set status of task 4 to awaiting control, assign it to user 5 and comment on task 4: ${TEXT}`,
      requestedBy: "demo-user",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    const commentId = (await comments()).find((c) => c.POST_MESSAGE === TEXT)!.ID;

    const undo = await startUndo(t.app, view.threadId, "demo-user");
    expect(undo.status, undo.state?.reason ?? "").toBe("awaiting_approval");
    const actions = undo.approval!.changeSet!.actions.map((a) => [
      a.actionId,
      a.envelope.operation,
      a.envelope.params,
    ]);
    expect(actions).toEqual([
      ["a1", "update_task", { STATUS: original["status"], RESPONSIBLE_ID: original["responsibleId"] }],
      ["a2", "delete_task_comment", { COMMENT_ID: Number(commentId) }],
    ]);
    expect(undo.approval!.changeSet!.set.risk.reversibility).toBe("irreversible");
    expect(undo.state!.card).toContain(
      "restores the values recorded before that set and deletes what it created",
    );
    const head = (await t.app.deps.journal.currentAction(undo.threadId))!;
    const members = await Promise.all(
      head.set!.set.actions.map(async (a) => (await t.app.deps.journal.getAction(a.envelopeHash))!),
    );
    expect(setSection(head, members).toString()).toContain(
      `Delete comment ${commentId} of task 4: cannot be undone`,
    );
    expect(await t.portal.writes()).toHaveLength(2);

    const undone = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(undone.state!.outcome, undone.state!.reason ?? "").toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "tasks.task.update",
      "task.commentitem.add",
      "tasks.task.update",
      "task.commentitem.delete",
    ]);
    const task = await t.portal.task(4);
    expect([task["status"], task["responsibleId"]]).toEqual([original["status"], original["responsibleId"]]);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(false);
  });

  it("decided per action, only the delete approved: shown again on its own (irreversible is not run without a second look), then deleted once", async () => {
    await t.open({ model: new ScriptedChatModel(proposeSet) });
    const view = await startRun(t.app, {
      request: `set status of task 4 to awaiting control, assign it to user 5 and comment on task 4: ${TEXT}`,
      requestedBy: "demo-user",
    });
    expect((await submitDecision(t.app, view.threadId, approve(view))).state!.outcome).toBe("VERIFIED");
    const commentId = (await comments()).find((c) => c.POST_MESSAGE === TEXT)!.ID;
    const undo = await startUndo(t.app, view.threadId, "demo-user");
    const a = undo.approval!;
    const base = { envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } };
    const again = await submitDecision(t.app, undo.threadId, {
      decisions: [
        { type: "reject", actionId: "a1", message: "keep the new status", ...base },
        { type: "approve", actionId: "a2", ...base },
      ],
    });
    expect(again.status, again.state?.reason ?? "").toBe("awaiting_approval");
    expect([
      again.approval!.envelope.operation,
      again.approval!.envelope.params,
      again.approval!.envelope.revision,
    ]).toEqual(["delete_task_comment", { COMMENT_ID: Number(commentId) }, 2]);
    expect(await deletes()).toBe(0);
    // alice shaped this revision (she decided the set action by action), so another approver approves it.
    const done = await submitDecision(t.app, undo.threadId, approve(again, "bob"));
    expect(done.state?.outcome, JSON.stringify(done.approval?.lastRefusal ?? done.state?.reason)).toBe(
      "VERIFIED",
    );
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "tasks.task.update",
      "task.commentitem.add",
      "task.commentitem.delete",
    ]);
  });

  it("stops at the restore when it is not verified: the delete is not sent (CHAIN_STOPPED)", async () => {
    await t.open({ model: new ScriptedChatModel(proposeSet) });
    const view = await startRun(t.app, {
      request: `set status of task 4 to awaiting control, assign it to user 5 and comment on task 4: ${TEXT}`,
      requestedBy: "demo-user",
    });
    expect((await submitDecision(t.app, view.threadId, approve(view))).state!.outcome).toBe("VERIFIED");
    const undo = await startUndo(t.app, view.threadId, "demo-user");
    await t.portal.fault({ method: "tasks.task.update", kind: "ack_without_apply", times: 1 });
    const undone = await submitDecision(t.app, undo.threadId, approve(undo));
    // The restore was sent (acknowledged, not applied), so the set wrote something and stopped.
    expect(undone.state!.outcome).toBe("PARTIALLY_EXECUTED");
    expect(undone.changeSetOutcome?.actions.map((o) => [o.actionId, o.outcome, o.reasonCode])).toEqual([
      ["a1", "VERIFICATION_FAILED", "VERIFICATION_FAILED"],
      ["a2", "NOT_EXECUTED", "CHAIN_STOPPED"],
    ]);
    expect(await deletes()).toBe(0);
    expect((await comments()).some((c) => c.POST_MESSAGE === TEXT)).toBe(true);
  });
});

describe("through the command line (compiled CLI, offline model, local stores)", () => {
  it("run, approve, undo, show, pending and approve again: the comment is posted once and deleted once, each VERIFIED", async () => {
    const env = envFor(t.portal, t.dataDir);
    const started = await runCli(["run", `comment on task 4: ${TEXT}`, "--as", "demo-user", "--json"], env);
    expect(started.code, started.stderr).toBe(0);
    const run = parseJsonOutput(started.stdout);
    expect(run.envelope.operation).toBe("add_task_comment");
    const posted = await runCli(
      ["approve", run.threadId, "--hash", run.envelopeHash, "--as", "demo-approver", "--json"],
      env,
    );
    expect(posted.code, posted.stderr).toBe(0);
    expect(parseJsonOutput(posted.stdout).outcome).toBe("VERIFIED");
    const commentId = (await comments()).find((c) => c.POST_MESSAGE === TEXT)!.ID;

    const proposed = await runCli(["undo", run.threadId, "--as", "demo-user", "--json"], env);
    expect(proposed.code, proposed.stderr).toBe(0);
    const undo = parseJsonOutput(proposed.stdout);
    expect([undo.status, undo.envelope.operation, undo.envelope.params]).toEqual([
      "awaiting_approval",
      "delete_task_comment",
      { COMMENT_ID: Number(commentId) },
    ]);
    const shown = await runCli(["show", undo.threadId], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`DELETE COMMENT ${commentId} of task 4`);
    expect(shown.stdout).toContain(TEXT);
    const pending = await runCli(["pending", "--json"], env);
    expect(pending.code, pending.stderr).toBe(0);
    expect(parseJsonOutput(pending.stdout).pending.map((p: { threadId: string }) => p.threadId)).toEqual([
      undo.threadId,
    ]);
    expect(await deletes()).toBe(0);

    const deleted = await runCli(
      ["approve", undo.threadId, "--hash", undo.envelopeHash, "--as", "demo-approver"],
      env,
    );
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "task.commentitem.add",
      "task.commentitem.delete",
    ]);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(false);
  });
});

describe("a delete cannot be smuggled in through graph state", () => {
  it("a model's proposal rewritten in state into a delete of a posted comment (single, or inside a change set) is denied at build_envelope: nothing registered, nothing deleted", async () => {
    // A comment our earlier run posted, which a delete could name.
    const { commentId } = await postedComment();
    await t.app.close();
    const single = {
      operation: "delete_task_comment",
      taskId: 4,
      fields: { COMMENT_ID: Number(commentId) },
      rationale: "forged",
      source: "model",
    };
    const cases = [
      // The request's scope (TITLE of task 4) already keeps a COMMENT_ID out.
      { forged: single, scope: undefined, why: /OUT_OF_SCOPE: field COMMENT_ID/ },
      // Even with a scope that names COMMENT_ID, a delete is built only as an undo's.
      {
        forged: single,
        scope: { taskIds: [4], fields: ["TITLE", "COMMENT_ID"] },
        why: /proposed only by an undo/,
      },
      // Nor inside a change set, next to a harmless rename.
      {
        scope: { taskIds: [4], fields: ["TITLE", "COMMENT_ID"] },
        why: /proposed only by an undo/,
        forged: {
          operation: "update_task",
          taskId: 4,
          fields: { TITLE: "Harmless" },
          actions: [
            { operation: "update_task", taskId: 4, fields: { TITLE: "Harmless" } },
            { operation: "delete_task_comment", taskId: 4, fields: { COMMENT_ID: Number(commentId) } },
          ],
          rationale: "forged",
          source: "model",
        },
      },
    ];
    for (const { forged, scope, why } of cases) {
      await t.open({
        model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Harmless" })),
        compile: { interruptBefore: ["build_envelope"] },
      });
      const paused = await startRun(t.app, {
        request: "rename task 4 to Harmless",
        requestedBy: "demo-user",
        ...(scope ? { scope } : {}),
      });
      expect(paused.status).toBe("interrupted_run");
      expect(paused.next).toEqual(["build_envelope"]);
      // A client with API access rewrites the proposal the model made, then lets the run go on.
      await t.app.graph.updateState({ configurable: { thread_id: paused.threadId } }, { proposal: forged });
      await t.app.graph.invoke(null, { configurable: { thread_id: paused.threadId }, durability: "sync" });
      const row = await t.app.deps.journal.currentAction(paused.threadId);
      expect(row, JSON.stringify(forged.operation)).toBeUndefined();
      const thread = await t.app.deps.journal.getThread(paused.threadId);
      expect(thread?.closed).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "DENIED_BY_POLICY" });
      expect(thread?.closed?.reason).toMatch(why);
      await t.app.close();
    }
    expect(await deletes()).toBe(0);
    expect((await comments()).some((c) => c.ID === commentId)).toBe(true);
  });
});
