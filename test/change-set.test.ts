/**
 * Change sets end to end: several actions under one approval, decided as a whole or per action by
 * id, run in order under the chain rule, each with its own pre-read, write-ahead entry,
 * acknowledgement and verification. The graph, our MCP server over stdio and the emulator over
 * HTTP; writes counted in the emulator's call log. Also in the PostgreSQL pass.
 */
import fs from "node:fs";
import Database from "better-sqlite3";
import path from "node:path";
import { AIMessage } from "@langchain/core/messages";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Command } from "@langchain/langgraph";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { startUndo } from "../src/app/undo.js";
import { buildCase } from "../src/evidence/bundle.js";
import { buildEvidence } from "../src/evidence/evidence-objects.js";
import {
  journalSql,
  openTestApp,
  ROOT,
  startPortal,
  stopOnceBeforeMove,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, call, type Script } from "./support/scripted-model.js";

const COMMENT = "Moved to review and reassigned; please check the numbers.";
const REQUEST = `set status of task 4 to awaiting control, assign it to user 5 and comment on task 4: ${COMMENT}`;
let portal: Portal;
let dataDir: string;
let app: App;

type Action = { operation: string; taskId: number; fields: Record<string, unknown> };

/** Reads every task named, then proposes the change set. */
function proposeSet(actions: Action[]): Script {
  return (messages) => {
    const read = new Set(
      messages.filter((m) => m.getType() === "tool" && (m as { name?: string }).name === "get_task_by_id")
        .length
        ? actions.map((a) => a.taskId)
        : [],
    );
    if (
      messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change_set")
    )
      return new AIMessage("Proposed; waiting for the human.");
    if (read.size === 0)
      return new AIMessage({
        content: "",
        tool_calls: [...new Set(actions.map((a) => a.taskId))].map((taskId) =>
          call("get_task_by_id", { taskId }),
        ),
      });
    return new AIMessage({
      content: "",
      tool_calls: [call("propose_change_set", { actions, rationale: "requested by the user" })],
    });
  };
}

const REVIEW_SET: Action[] = [
  { operation: "update_task", taskId: 4, fields: { STATUS: "4", RESPONSIBLE_ID: "5" } },
  { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
];

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
});

afterEach(async () => {
  await app?.close();
  await portal.emulator.close();
});

async function open(actions: Action[], env: Record<string, string> = {}): Promise<void> {
  app = await openTestApp(portal, dataDir, { model: new ScriptedChatModel(proposeSet(actions)), env });
}

function approveAll(view: ThreadView, approver = "demo-approver") {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approver } },
    ],
  };
}

function perAction(
  view: ThreadView,
  types: Record<string, "approve" | "reject" | { edit: Record<string, unknown> }>,
  approver = "alice",
) {
  const a = view.approval!;
  return {
    decisions: Object.entries(types).map(([actionId, t]) => {
      const base = { envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approver }, actionId };
      if (typeof t === "string") return { type: t, ...base };
      const env = a.changeSet!.actions.find((x) => x.actionId === actionId)!.envelope;
      return {
        type: "edit",
        ...base,
        editedAction: { name: env.operation, args: { taskId: env.object.id, fields: t.edit } },
      };
    }),
  };
}

async function waiting(request = REQUEST): Promise<ThreadView> {
  const view = await startRun(app, { request, requestedBy: "demo-user" });
  expect(view.status).toBe("awaiting_approval");
  return view;
}

const startOrView = (threadId: string) => viewThread(app, threadId);
const writeMethods = async () => (await portal.writes()).map((w) => w.method);

describe("a change set", () => {
  it("is shown as one approval with every action in full, approved once, run in order, each verified", async () => {
    await open(REVIEW_SET);
    const view = await waiting();
    const a = view.approval!;
    expect(a.changeSet!.actions.map((x) => [x.actionId, x.envelope.operation])).toEqual([
      ["a1", "update_task"],
      ["a2", "add_task_comment"],
    ]);
    expect(a.actionRequests.map((r) => r.name)).toEqual(["update_task", "add_task_comment"]);
    expect(a.envelopeHash).toBe(a.changeSet!.setHash);
    // The chain is as risky as its riskiest action (RESPONSIBLE_ID: high, reversible_external).
    expect(a.changeSet!.set.risk).toEqual({ reversibility: "reversible_external", level: "high" });
    const card = view.state!.card!;
    expect(card).toContain("CHANGE SET — approval requested for 2 actions");
    expect(card).toContain("ACTION 1 of 2: a1");
    expect(card).toContain("NEW COMMENT on task 4");
    expect(await portal.writes()).toHaveLength(0);

    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.update", "task.commentitem.add"]);
    const task = await portal.task(4);
    expect([task["status"], task["responsibleId"]]).toEqual(["4", "5"]);
    const table = done
      .state!.messages.map((m) => String(m.content))
      .find((t) => t.startsWith("Change set, action by action"));
    expect(table).toMatch(/a1 +update_task +task 4 +VERIFIED/);
    expect(table).toMatch(/a2 +add_task_comment +task 4 +VERIFIED/);
    // Each action's own evidence is in the hash-chained log and in the case record, not only the last one's.
    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(
      records
        .filter((r) => r.event === "action_ended")
        .map((r) => [
          (r.received as { actionId: string }).actionId,
          r.outcome!.outcome,
          r.outcome!.flags.sideEffectVerified,
        ]),
    ).toEqual([
      ["a1", "VERIFIED", true],
      ["a2", "VERIFIED", true],
    ]);
    const evidence = buildEvidence({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await app.deps.audit.verify(),
    }).map((e) => e.name.replace(/^\d+-/, ""));
    expect(evidence).toEqual(
      expect.arrayContaining([
        "a1-pre-read",
        "a1-invocation",
        "a1-acknowledgement",
        "a1-post-write-read",
        "a1-outcome",
        "a2-pre-read",
        "a2-invocation",
        "a2-post-write-read",
        "a2-outcome",
        "outcome",
      ]),
    );
    expect(evidence).not.toContain("pre-read");
    // Why the set's flags hold is explained from the records alone (no state given).
    const page = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: undefined,
      records,
      chain: await app.deps.audit.verify(),
    }).caseRecord.firstPage;
    expect(page.flags).toEqual(records.find((r) => r.event === "execution_outcome")!.outcome!.flags);
    expect(page.flagReasons?.sideEffectVerified).toMatch(/\S/);
  });

  it("stops at the first action that is not verified: 1 VERIFIED, 2 NOT_EXECUTED (STALE_STATE), 3 NOT_EXECUTED (CHAIN_STOPPED), one write", async () => {
    await open([
      { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } },
      { operation: "update_task", taskId: 5, fields: { TITLE: "CS-2 renamed" } },
      { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
    ]);
    const view = await waiting(
      `rename task 4 to CS-1 renamed, rename task 5 to CS-2 renamed and comment on task 4: ${COMMENT}`,
    );
    // Someone changes task 5 after the card was shown.
    expect((await portal.rest("tasks.task.update", { taskId: 5, fields: { PRIORITY: "2" } })).status).toBe(
      200,
    );
    const before = (await portal.writes()).length;
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("PARTIALLY_EXECUTED");
    expect(done.state!.reasonCode).toBe("STALE_STATE");
    expect(done.state!.reason).toMatch(
      /a1 VERIFIED \(VERIFIED\); a2 NOT_EXECUTED \(STALE_STATE\); a3 NOT_EXECUTED \(CHAIN_STOPPED\)/,
    );
    expect((await portal.writes()).slice(before).map((w) => w.method)).toEqual(["tasks.task.update"]);
    expect((await portal.task(4))["title"]).toBe("CS-1 renamed");
    expect(await portal.calls("task.commentitem.add")).toHaveLength(0);
    {
      const records = await app.deps.audit.records({ threadId: view.threadId });
      const page = buildCase({
        threadId: view.threadId,
        status: "finished",
        state: undefined,
        records,
        chain: await app.deps.audit.verify(),
      }).caseRecord.firstPage;
      expect(page.outcome).toMatchObject({ outcome: "PARTIALLY_EXECUTED", reasonCode: "STALE_STATE" });
      expect(page.flagReasons).not.toBeNull();
    }
  });

  it("two comments with the same text in one set: the second is not taken for the first's comment; each posted once and verified on its own", async () => {
    const same = { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } };
    await open([same, same]);
    const view = await waiting(`comment on task 4 twice: ${COMMENT}`);
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["task.commentitem.add", "task.commentitem.add"]);
    const ids = new Set<string>();
    for (const x of view.approval!.changeSet!.actions)
      ids.add((await app.deps.journal.getAction(x.envelopeHash))!.progress.verification!.created!.id!);
    expect(ids.size).toBe(2);
  });

  // The process dies right after the journal commits a boundary (as crash-process.ts does, in process).
  it.each([
    { boundary: "verified", nth: 1, at: "a1 verified, a2 not started" },
    { boundary: "pre_read", nth: 2, at: "a2's pre-read recorded, nothing of a2 sent" },
  ])(
    "a run that dies between actions ($at) is continued by recover: a2 runs once on what a1 wrote, a1 is not sent again",
    async ({ boundary, nth }) => {
      await open([
        { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } },
        { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      ]);
      const view = await waiting("rename task 4 to CS-1 renamed and make it high priority");
      const journal = app.deps.journal as unknown as { moveAction: (...a: unknown[]) => Promise<unknown> };
      const moveAction = journal.moveAction.bind(journal);
      let seen = 0;
      journal.moveAction = async (...args: unknown[]) => {
        const moved = await moveAction(...args);
        if (args[1] === boundary && ++seen === nth) {
          journal.moveAction = moveAction;
          throw new Error(`the process died at ${boundary}`);
        }
        return moved;
      };
      await expect(submitDecision(app, view.threadId, approveAll(view))).rejects.toThrow(/process died/);
      expect(await writeMethods()).toEqual(["tasks.task.update"]);
      const done = await recoverThread(app, view.threadId);
      expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
      expect(done.state!.reason).toMatch(/a1 VERIFIED \(VERIFIED\); a2 VERIFIED \(VERIFIED\)/);
      expect(await writeMethods()).toEqual(["tasks.task.update", "tasks.task.update"]);
      const task = await portal.task(4);
      expect([task["title"], task["priority"]]).toEqual(["CS-1 renamed", "2"]);
    },
  );

  it("an irreversible action runs only after the one before it VERIFIED: a write acknowledged but not applied stops the chain", async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
    policy.requireVerifiedRequesterAtOrAbove = null; // a self-declared requester (in process), as under envFor's policy
    policy.operations.add_task_comment.reversibility = "irreversible";
    policy.version = "test-irreversible-comment";
    const file = path.join(dataDir, "policy.json");
    fs.writeFileSync(file, JSON.stringify(policy));
    await open([{ operation: "update_task", taskId: 4, fields: { STATUS: "4" } }, REVIEW_SET[1]!], {
      ACTION_ENVELOPE_POLICY: file,
    });
    const view = await waiting(`set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`);
    expect(view.approval!.changeSet!.set.risk.reversibility).toBe("irreversible");
    await portal.fault({ method: "tasks.task.update", kind: "ack_without_apply", times: 1 });
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("PARTIALLY_EXECUTED");
    expect(done.state!.reasonCode).toBe("VERIFICATION_FAILED");
    expect(done.state!.reason).toContain("a2 NOT_EXECUTED (CHAIN_STOPPED)");
    expect(await portal.calls("task.commentitem.add")).toHaveLength(0);
  });

  it("a verification edited to VERIFIED while a stopped set waits does not carry the chain on: the next action is not written", async () => {
    // The second action is on another task, so its own pre-read would not stop it.
    await open([
      { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
      { operation: "add_task_comment", taskId: 5, fields: { POST_MESSAGE: COMMENT } },
    ]);
    const view = await waiting(`set status of task 4 to awaiting control and comment on task 5: ${COMMENT}`);
    await portal.fault({ method: "tasks.task.update", kind: "ack_without_apply", times: 1 });
    // The process stops after the first action's verification was recorded, before the set's closes.
    stopOnceBeforeMove(app, "closed");
    await expect(submitDecision(app, view.threadId, approveAll(view))).rejects.toThrow(/stopped/);
    const first = view.approval!.changeSet!.actions[0]!.envelopeHash;
    const [row] = await journalSql(
      dataDir,
      "SELECT phase, progress_json FROM T.actions WHERE envelope_hash = ?",
      [first],
    );
    expect(row!["phase"]).toBe("verified");
    const progress = JSON.parse(String(row!["progress_json"])) as { verification: { verdict: string } };
    expect(progress.verification.verdict).not.toBe("VERIFIED");

    // A writer of the data directory turns the first action's verdict into VERIFIED before the run is recovered.
    await journalSql(dataDir, "UPDATE T.actions SET progress_json = ? WHERE envelope_hash = ?", [
      JSON.stringify({ ...progress, verification: { ...progress.verification, verdict: "VERIFIED" } }),
      first,
    ]);
    const recovered = await recoverThread(app, view.threadId);
    expect(await portal.calls("task.commentitem.add")).toHaveLength(0);
    expect(await writeMethods()).toEqual(["tasks.task.update"]);
    expect(recovered.state!.outcome).not.toBe("VERIFIED");
    expect(recovered.state!.reason).toContain("a2 NOT_EXECUTED (CHAIN_STOPPED)");
  });

  it("a cancel of a change set needs an approver of every operation in it (or the requester): one who may decide only the update is refused, the set keeps waiting", async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
    policy.requireVerifiedRequesterAtOrAbove = null; // a self-declared requester (in process), as under envFor's policy
    policy.operations.add_task_comment.approverGroups = ["task-leads"];
    policy.version = "test-comment-leads";
    const file = path.join(dataDir, "policy.json");
    fs.writeFileSync(file, JSON.stringify(policy));
    await open([{ operation: "update_task", taskId: 4, fields: { STATUS: "4" } }, REVIEW_SET[1]!], {
      ACTION_ENVELOPE_POLICY: file,
    });
    const view = await waiting(`set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`);
    const a = view.approval!;
    const cancel = (id: string) => ({
      decisions: [
        { type: "cancel", envelopeHash: a.envelopeHash, nonce: a.nonce, by: { id }, reason: "not needed" },
      ],
    });
    // bob may decide update_task (task-approvers) but not add_task_comment (task-leads only).
    const refused = await submitDecision(app, view.threadId, cancel("bob"));
    expect(refused.status).toBe("awaiting_approval");
    expect(refused.approval!.lastRefusal).toMatchObject({
      code: "APPROVER_NOT_ALLOWED",
      reason: expect.stringContaining("add_task_comment"),
    });
    // The requester may cancel their own request.
    const done = await submitDecision(app, view.threadId, cancel("demo-user"));
    expect(done.state!.reasonCode).toBe("CANCELLED");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("decided per action by id: approving the update and rejecting the comment runs the update at once (policy: reversible may run after a partial approval)", async () => {
    await open([{ operation: "update_task", taskId: 4, fields: { STATUS: "4" } }, REVIEW_SET[1]!]);
    const view = await waiting(`set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`);
    // Listed in another order than the set's: matched by id, not by position.
    const done = await submitDecision(app, view.threadId, perAction(view, { a2: "reject", a1: "approve" }));
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.update"]);
    expect(done.state!.envelope!.revision).toBe(2);
    expect(done.state!.decision!.message).toContain("partial approval");
  });

  it("decided per action: approving only the comment (reversible_external) shows the remaining part again; nothing is written until it is approved", async () => {
    await open([{ operation: "update_task", taskId: 4, fields: { STATUS: "4" } }, REVIEW_SET[1]!]);
    const view = await waiting(`set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`);
    const again = await submitDecision(app, view.threadId, perAction(view, { a1: "reject", a2: "approve" }));
    expect(again.status).toBe("awaiting_approval");
    expect(again.approval!.envelope.operation).toBe("add_task_comment");
    expect(again.approval!.envelope.revision).toBe(2);
    expect(again.approval!.changeSet).toBeUndefined();
    expect(await portal.writes()).toHaveLength(0);
    const done = await submitDecision(app, view.threadId, approveAll(again));
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["task.commentitem.add"]);
  });

  it("an edit of any action is a new revision of the whole set: the earlier set hash is refused STALE_REVISION", async () => {
    await open(REVIEW_SET);
    const view = await waiting();
    const edited = await submitDecision(
      app,
      view.threadId,
      perAction(view, { a1: "approve", a2: { edit: { POST_MESSAGE: "Shorter." } } }),
    );
    expect(edited.status).toBe("awaiting_approval");
    expect(edited.approval!.changeSet!.set.revision).toBe(2);
    expect(edited.approval!.changeSet!.set.previousSetHash).toBe(view.approval!.envelopeHash);
    expect(edited.approval!.envelopeHash).not.toBe(view.approval!.envelopeHash);
    // Approving the set as first shown is refused: the edit voided every approval of it.
    const stale = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "approve",
          envelopeHash: view.approval!.envelopeHash,
          nonce: edited.approval!.nonce,
          approver: { id: "bob" },
        },
      ],
    });
    expect(stale.approval!.lastRefusal?.code).toBe("STALE_REVISION");
    expect(await portal.writes()).toHaveLength(0);
    const done = await submitDecision(app, view.threadId, approveAll(edited, "bob"));
    expect(done.state!.outcome).toBe("VERIFIED");
    const comments = (await portal.rest("task.commentitem.getlist", { TASKID: 4 })).body.result as Array<{
      POST_MESSAGE: string;
    }>;
    expect(comments.at(-1)!.POST_MESSAGE).toBe("Shorter.");
  });

  it("refuses per-action decisions that do not name every action exactly once by id, and a whole-set edit", async () => {
    await open(REVIEW_SET);
    const view = await waiting();
    const a = view.approval!;
    const d = (extra: Record<string, unknown>) => ({
      type: "approve",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      approver: { id: "alice" },
      ...extra,
    });
    for (const decisions of [
      [d({}), d({})],
      [d({ actionId: "a1" })],
      [d({ actionId: "a1" }), d({ actionId: "a1" })],
      [d({ actionId: "a1" }), d({ actionId: "a9" })],
    ]) {
      const r = await submitDecision(app, view.threadId, { decisions });
      expect(r.status).toBe("awaiting_approval");
      expect(r.approval!.lastRefusal?.code).toBe("MALFORMED");
    }
    const wholeEdit = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          editedAction: { name: "update_task", args: { taskId: 4, fields: { STATUS: "3" } } },
        },
      ],
    });
    expect(wholeEdit.approval!.lastRefusal).toMatchObject({ code: "MALFORMED" });
    expect(wholeEdit.approval!.lastRefusal!.reason).toContain("names the action");
    // A decision bound to one action's own envelope hash is not an approval of the set.
    const ownHash = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "approve",
          envelopeHash: a.changeSet!.actions[0]!.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
        },
      ],
    });
    expect(ownHash.approval!.lastRefusal?.code).toBe("HASH_MISMATCH");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("a whole-set rejection ends every action REJECTED_BY_HUMAN with nothing written", async () => {
    await open(REVIEW_SET);
    const view = await waiting();
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        { type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } },
      ],
    });
    expect(done.state!.outcome).toBe("NOT_EXECUTED");
    expect(done.state!.reasonCode).toBe("REJECTED_BY_HUMAN");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("undo of a verified set restores the updates (a posted comment is named, not deleted, where the policy denies deleting it), with its own approval", async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
    policy.requireVerifiedRequesterAtOrAbove = null; // a self-declared requester (in process), as under envFor's policy
    policy.operations.delete_task_comment.allowed = false;
    policy.operations.delete_task_comment.reason = "comments stay";
    policy.version = "test-no-comment-delete";
    const file = path.join(dataDir, "policy.json");
    fs.writeFileSync(file, JSON.stringify(policy));
    await open(REVIEW_SET, { ACTION_ENVELOPE_POLICY: file });
    const original = await portal.task(4);
    const view = await waiting();
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("VERIFIED");
    const undo = await startUndo(app, done.threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    expect(undo.approval!.envelope.params).toEqual({
      STATUS: original["status"],
      RESPONSIBLE_ID: original["responsibleId"],
    });
    expect(undo.state!.card).toContain("Not undone: a2 (add_task_comment on task 4)");
    expect(undo.state!.card).toMatch(
      /deleting it \(delete_task_comment\) is denied by policy default@test-no-comment-delete: comments stay/,
    );
    expect(await writeMethods()).toEqual(["tasks.task.update", "task.commentitem.add"]);
    const restored = await submitDecision(app, undo.threadId, approveAll(undo));
    expect(restored.state!.outcome).toBe("VERIFIED");
    const task = await portal.task(4);
    expect([task["status"], task["responsibleId"]]).toEqual([original["status"], original["responsibleId"]]);
    expect(await writeMethods()).toEqual(["tasks.task.update", "task.commentitem.add", "tasks.task.update"]);
  });

  it("undo of a set that changed two tasks is itself a change set of two restores", async () => {
    await open([
      { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } },
      { operation: "update_task", taskId: 5, fields: { TITLE: "CS-2 renamed" } },
    ]);
    const titles = [(await portal.task(4))["title"], (await portal.task(5))["title"]];
    const view = await waiting("rename task 4 to CS-1 renamed and rename task 5 to CS-2 renamed");
    expect((await submitDecision(app, view.threadId, approveAll(view))).state!.outcome).toBe("VERIFIED");
    const undo = await startUndo(app, view.threadId, "demo-user");
    expect(undo.approval!.changeSet!.actions.map((a) => [a.envelope.object.id, a.envelope.params])).toEqual([
      [4, { TITLE: titles[0] }],
      [5, { TITLE: titles[1] }],
    ]);
    expect(undo.state!.card).toContain(`UNDO of thread ${view.threadId}`);
    const restored = await submitDecision(app, undo.threadId, approveAll(undo));
    expect(restored.state!.outcome).toBe("VERIFIED");
    expect([(await portal.task(4))["title"], (await portal.task(5))["title"]]).toEqual(titles);
  });

  it("undo of a set is refused STALE_STATE after someone else changed a task it restores; nothing is written", async () => {
    await open(REVIEW_SET);
    const view = await waiting();
    expect((await submitDecision(app, view.threadId, approveAll(view))).state!.outcome).toBe("VERIFIED");
    expect((await portal.rest("tasks.task.update", { taskId: 4, fields: { PRIORITY: "0" } })).status).toBe(
      200,
    );
    const count = (await portal.writes()).length;
    const undo = await startUndo(app, view.threadId, "demo-user");
    expect(undo.state!.outcome).toBe("NOT_EXECUTED");
    expect(undo.state!.reasonCode).toBe("STALE_STATE");
    expect(await portal.writes()).toHaveLength(count);
  });

  // Edits the SQLite journal file, so not in the PostgreSQL pass (its rows are sealed the same way).
  it.skipIf(!!process.env["ACTION_ENVELOPE_TEST_DATABASE_URL"])(
    "a change set whose second action was edited in the journal file is refused INTEGRITY_CHECK_FAILED; nothing written",
    async () => {
      await open(REVIEW_SET);
      const view = await waiting();
      const second = view.approval!.changeSet!.actions[1]!.envelopeHash;
      const db = new Database(path.join(dataDir, "journal.sqlite"));
      try {
        const r = db.prepare("SELECT registered_json FROM actions WHERE envelope_hash = ?").get(second) as {
          registered_json: string;
        };
        const edited = JSON.parse(r.registered_json);
        edited.envelope.params.POST_MESSAGE = "Something else entirely";
        db.prepare("UPDATE actions SET registered_json = ? WHERE envelope_hash = ?").run(
          JSON.stringify(edited),
          second,
        );
      } finally {
        db.close();
      }
      await expect(submitDecision(app, view.threadId, approveAll(view))).rejects.toMatchObject({
        code: "INTEGRITY_CHECK_FAILED",
      });
      expect(await portal.writes()).toHaveLength(0);
    },
  );

  // Edits the SQLite journal file, so not in the PostgreSQL pass.
  it.skipIf(!!process.env["ACTION_ENVELOPE_TEST_DATABASE_URL"])(
    "a change set missing one of its rows (deleted from the journal file, every other seal intact) is refused INTEGRITY_CHECK_FAILED; nothing written",
    async () => {
      await open(REVIEW_SET);
      const view = await waiting();
      const db = new Database(path.join(dataDir, "journal.sqlite"));
      try {
        db.prepare("DELETE FROM actions WHERE envelope_hash = ?").run(
          view.approval!.changeSet!.actions[1]!.envelopeHash,
        );
      } finally {
        db.close();
      }
      await expect(submitDecision(app, view.threadId, approveAll(view))).rejects.toMatchObject({
        code: "INTEGRITY_CHECK_FAILED",
        message: expect.stringMatching(/lists 2 actions, 1 were found/),
      });
      expect(await portal.writes()).toHaveLength(0);
    },
  );

  // In process, as the LangGraph API refuses state edits and gotos outright (src/auth): the journal is what stops them here.
  it("a set proposal the tool would refuse, written into graph state (6 actions; a deal's action), ends the run INVALID_PROPOSAL: nothing registered, nothing written", async () => {
    const rename = { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } };
    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(
        proposeSet([rename, { operation: "update_task", taskId: 5, fields: { TITLE: "CS-2 renamed" } }]),
      ),
      compile: { interruptBefore: ["build_envelope"] },
    });
    const cases = [
      {
        actions: [1, 2, 3, 4, 5, 6].map((k) => ({ ...rename, fields: { TITLE: `CS-1 renamed ${k}` } })),
        why: "a change set holds at most 5 actions; the proposal has 6",
      },
      {
        actions: [rename, { operation: "update_deal", taskId: 3, fields: { STAGE_ID: "WON" } }],
        why: "a change set acts on tasks only; a2 (update_deal) acts on another kind of object",
      },
    ];
    for (const { actions, why } of cases) {
      const paused = await startRun(app, {
        request: "rename task 4 to CS-1 renamed and rename task 5 to CS-2 renamed",
        requestedBy: "demo-user",
      });
      expect(paused.next).toEqual(["build_envelope"]);
      const cfg = { configurable: { thread_id: paused.threadId }, durability: "sync" as const };
      await app.graph.updateState(cfg, {
        proposal: { ...rename, actions, rationale: "forged", source: "model" },
      });
      await app.graph.invoke(null, cfg);
      expect(await app.deps.journal.currentAction(paused.threadId)).toBeUndefined();
      expect((await app.deps.journal.getThread(paused.threadId))?.closed).toMatchObject({
        outcome: "NOT_EXECUTED",
        reasonCode: "INVALID_PROPOSAL",
        reason: why,
      });
    }
    expect(await portal.writes()).toHaveLength(0);
  });

  it("graph state cannot run a set: a goto to the executor, with journalNext and a decision written into state, writes nothing before approval or after the chain stopped", async () => {
    await open([
      { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } },
      { operation: "update_task", taskId: 5, fields: { TITLE: "CS-2 renamed" } },
      { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
    ]);
    const view = await waiting(
      `rename task 4 to CS-1 renamed, rename task 5 to CS-2 renamed and comment on task 4: ${COMMENT}`,
    );
    const cfg = { configurable: { thread_id: view.threadId } };
    const forgedDecision = {
      type: "approve",
      envelopeHash: view.approval!.envelopeHash,
      nonce: view.approval!.nonce,
      revision: 1,
      approverId: "mallory",
      verifiedBy: "self_declared",
      decidedAt: new Date().toISOString(),
      acceptedAt: new Date().toISOString(),
      raw: null,
    };
    // The state says "approved, go to the executor"; the journal says the set is waiting.
    await app.graph.updateState(
      cfg,
      { journalNext: "carry_out", decision: forgedDecision },
      "check_decision",
    );
    await app.graph.invoke(new Command({ goto: "carry_out" }), cfg);
    expect(await portal.writes()).toHaveLength(0);
    const still = await startOrView(view.threadId);
    expect(still.status).toBe("awaiting_approval");
    expect(still.approval!.envelopeHash).toBe(view.approval!.envelopeHash);

    // The chain stops at a2 (someone changed task 5); driving the graph to a3's steps afterwards writes nothing.
    expect((await portal.rest("tasks.task.update", { taskId: 5, fields: { PRIORITY: "2" } })).status).toBe(
      200,
    );
    const done = await submitDecision(app, view.threadId, approveAll(still));
    expect(done.state!.outcome).toBe("PARTIALLY_EXECUTED");
    const count = (await portal.writes()).length;
    await app.graph.invoke(new Command({ goto: "carry_out" }), cfg);
    // The single steps are no nodes any more: a goto to one of them reaches nothing.
    for (const goto of ["pre_read", "execute", "verify"])
      await app.graph.invoke(new Command({ goto: goto as never }), cfg);
    expect(await portal.writes()).toHaveLength(count);
    expect(await portal.calls("task.commentitem.add")).toHaveLength(0);
    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(records.filter((r) => r.event === "transition_refused").length).toBeGreaterThan(0);
  });
});
