/**
 * A change set holding a create (add_task: a new task, object id 0) end to end: the graph, our MCP
 * server over stdio and the emulator over HTTP; writes counted in the emulator's call log. The set is
 * proposed, shown, approved once, each action pre-read, written once and verified; the created task's
 * id is recorded with its verification and named in the set's outcome table. Also the CLI wording
 * (src/cli/render.ts, src/envelope/change-set.ts): a create is "a new task", never "task 0".
 */
import fs from "node:fs";
import path from "node:path";
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { startUndo } from "../src/app/undo.js";
import { pendingPage } from "./support/pending-page.js";
import {
  outcomeTable,
  setCardHeader,
  ChangeSetSchema,
  type ActionOutcome,
} from "../src/envelope/change-set.js";
import { Printer, outcomeTableLines, pendingLine } from "../src/cli/render.js";
import { setOutcomeFromMessages } from "../src/api/cli-api.js";
import type { PendingApproval } from "../src/app/pending.js";
import { ROOT, eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, call, type Script } from "./support/scripted-model.js";

const TITLE = "CS new task: check the Q3 numbers";
const REQUEST = `rename task 4 to CS-1 renamed and create a task "${TITLE}" for user 5`;
const t = eachTestApp();

type Action = { operation: string; taskId?: number; fields: Record<string, unknown> };

const SET: Action[] = [
  { operation: "update_task", taskId: 4, fields: { TITLE: "CS-1 renamed" } },
  { operation: "add_task", fields: { TITLE, RESPONSIBLE_ID: "5" } },
];

/** Reads every existing task named, then proposes the set (an add_task names no task). */
function proposeSet(actions: Action[]): Script {
  return (messages) => {
    const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
    if (tools.includes("propose_change_set")) return new AIMessage("Proposed; waiting for the human.");
    const ids = [...new Set(actions.flatMap((a) => (a.taskId ? [a.taskId] : [])))];
    if (!tools.includes("get_task_by_id") && ids.length)
      return new AIMessage({
        content: "",
        tool_calls: ids.map((taskId) => call("get_task_by_id", { taskId })),
      });
    return new AIMessage({
      content: "",
      tool_calls: [call("propose_change_set", { actions, rationale: "requested by the user" })],
    });
  };
}

function approveAll(view: ThreadView) {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

const writeMethods = async () => (await t.portal.writes()).map((w) => w.method);

describe("a change set with a create (add_task)", () => {
  it("is proposed and shown (the new task as 'a new task', not 'task 0'), approved once, run in order: one update, one create, each VERIFIED", async () => {
    const app = await t.open({ model: new ScriptedChatModel(proposeSet(SET)) });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const a = view.approval!;
    expect(a.changeSet!.actions.map((x) => [x.actionId, x.envelope.operation, x.envelope.object.id])).toEqual(
      [
        ["a1", "update_task", 4],
        ["a2", "add_task", 0],
      ],
    );
    const card = view.state!.card!;
    expect(card).toContain("CHANGE SET — approval requested for 2 actions");
    expect(card).toMatch(/2\. a2: add_task \(tasks\.task\.add\) on a new task/);
    expect(card).not.toMatch(/task 0\b/);
    expect(await t.portal.writes()).toHaveLength(0);

    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.update", "tasks.task.add"]);
    expect((await t.portal.task(4))["title"]).toBe("CS-1 renamed");
    const added = (await t.portal.calls("tasks.task.add"))[0]!;
    expect(added.params).toMatchObject({ fields: { TITLE, RESPONSIBLE_ID: "5" } });
    const table = done
      .state!.messages.map((m) => String(m.content))
      .find((t) => t.startsWith("Change set, action by action"));
    expect(table).toMatch(/a1 +update_task +task 4 +VERIFIED/);
    // The set's outcome table names a create by the task it made ("new task N"), never "task 0".
    expect(table).toMatch(/a2 +add_task +new task \d+ +VERIFIED/);
    // The created task's id is recorded with a2's verification, and the task is on the portal as approved.
    const a2 = await app.deps.journal.getAction(a.changeSet!.actions[1]!.envelopeHash);
    expect(a2!.progress.verification!.verdict).toBe("VERIFIED");
    const createdId = Number((a2!.progress.verification!.created as { id: string }).id);
    expect(createdId).toBeGreaterThan(0);
    expect(await t.portal.task(createdId)).toMatchObject({ title: TITLE, responsibleId: "5" });
    expect(table).toMatch(new RegExp(`a2 +add_task +new task ${createdId} +VERIFIED`));
    expect(table).not.toMatch(/task 0\b/);
  });

  it("is listed as pending with 'a new task'; after it ran, the thread's outcome names it so; undo restores the update and names the create it does not delete (default policy denies delete_task)", async () => {
    const app = await t.open({ model: new ScriptedChatModel(proposeSet(SET)) });
    const original = (await t.portal.task(4))["title"];
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const listed = (await pendingPage(app)).pending.find((p) => p.threadId === view.threadId)!;
    expect(pendingLine(listed)).toContain("a2 add_task a new task TITLE,RESPONSIBLE_ID");
    expect(pendingLine(listed)).not.toMatch(/task 0\b/);
    expect((await submitDecision(app, view.threadId, approveAll(view))).state!.outcome).toBe("VERIFIED");
    const shown = await viewThread(app, view.threadId);
    expect(outcomeTableLines(shown.changeSetOutcome!.actions).join("\n")).toMatch(
      /a2 +add_task +a new task +VERIFIED/,
    );
    const undo = await startUndo(app, view.threadId, "demo-user");
    expect(undo.status, undo.state?.reason ?? "").toBe("awaiting_approval");
    expect(undo.approval!.envelope.params).toEqual({ TITLE: original });
    expect(undo.state!.card).toMatch(/a2 \(add_task on a new task\) is not undone: .*delete_task/);
    expect(undo.state!.card).not.toMatch(/task 0\b/);
    const restored = await submitDecision(app, undo.threadId, approveAll(undo));
    expect(restored.state!.outcome).toBe("VERIFIED");
    expect((await t.portal.task(4))["title"]).toBe(original);
    expect(await writeMethods()).toEqual(["tasks.task.update", "tasks.task.add", "tasks.task.update"]);
  });

  it("undo where the policy allows delete_task is a set of the restore, then the delete of the created task; approved, both VERIFIED, the task gone", async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
    policy.version = "test-task-delete";
    policy.requireVerifiedRequesterAtOrAbove = null; // a self-declared requester (in process), as under envFor's policy
    policy.operations.delete_task = { ...policy.operations.delete_task, allowed: true };
    delete policy.operations.delete_task.reason;
    const file = path.join(t.dataDir, "policy.json");
    fs.writeFileSync(file, JSON.stringify(policy));
    const app = await t.open({
      model: new ScriptedChatModel(proposeSet(SET)),
      env: { ACTION_ENVELOPE_POLICY: file },
    });
    const original = (await t.portal.task(4))["title"];
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect((await submitDecision(app, view.threadId, approveAll(view))).state!.outcome).toBe("VERIFIED");
    const a2 = await app.deps.journal.getAction(view.approval!.changeSet!.actions[1]!.envelopeHash);
    const createdId = Number((a2!.progress.verification!.created as { id: string }).id);
    const undo = await startUndo(app, view.threadId, "demo-user");
    expect(undo.status, undo.state?.reason ?? "").toBe("awaiting_approval");
    expect(
      undo.approval!.changeSet!.actions.map((x) => [x.envelope.operation, x.envelope.object.id]),
    ).toEqual([
      ["update_task", 4],
      ["delete_task", createdId],
    ]);
    const restored = await submitDecision(app, undo.threadId, approveAll(undo));
    expect(restored.state!.outcome, restored.state!.reason ?? "").toBe("VERIFIED");
    expect((await t.portal.task(4))["title"]).toBe(original);
    expect(await writeMethods()).toEqual([
      "tasks.task.update",
      "tasks.task.add",
      "tasks.task.update",
      "tasks.task.delete",
    ]);
  });

  it("two creates in one set: each pre-read, written once and verified on its own (two new tasks)", async () => {
    const two: Action[] = [
      { operation: "add_task", fields: { TITLE: "CS first new task", RESPONSIBLE_ID: "5" } },
      { operation: "add_task", fields: { TITLE: "CS second new task", RESPONSIBLE_ID: "5" } },
    ];
    const app = await t.open({ model: new ScriptedChatModel(proposeSet(two)) });
    const view = await startRun(app, {
      request: 'create a task "CS first new task" for user 5 and a task "CS second new task" for user 5',
      requestedBy: "demo-user",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.add", "tasks.task.add"]);
    const ids: number[] = [];
    for (const x of view.approval!.changeSet!.actions) {
      const row = await app.deps.journal.getAction(x.envelopeHash);
      ids.push(Number((row!.progress.verification!.created as { id: string }).id));
    }
    expect(new Set(ids).size).toBe(2);
    expect([(await t.portal.task(ids[0]!))["title"], (await t.portal.task(ids[1]!))["title"]]).toEqual([
      "CS first new task",
      "CS second new task",
    ]);
  });

  it("two creates with the same title in one set: the second is not taken for the first's task; each created once and verified on its own", async () => {
    const same = { operation: "add_task", fields: { TITLE: "CS twice", RESPONSIBLE_ID: "5" } };
    const app = await t.open({ model: new ScriptedChatModel(proposeSet([same, same])) });
    const view = await startRun(app, {
      request: 'create two tasks "CS twice" for user 5',
      requestedBy: "demo-user",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.add", "tasks.task.add"]);
    const ids = new Set<string>();
    for (const x of view.approval!.changeSet!.actions)
      ids.add((await app.deps.journal.getAction(x.envelopeHash))!.progress.verification!.created!.id!);
    expect(ids.size).toBe(2);
  });

  it("is refused before the card when add_task names a task id (a create names no object); nothing written, no crash", async () => {
    const app = await t.open({
      model: new ScriptedChatModel(
        proposeSet([SET[0]!, { operation: "add_task", taskId: 4, fields: { TITLE, RESPONSIBLE_ID: "5" } }]),
      ),
    });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect(view.status).not.toBe("awaiting_approval");
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("is refused at the proposal tool when an action acts on a deal (a set acts on tasks only): the model is told why; nothing written, no crash", async () => {
    const app = await t.open({
      model: new ScriptedChatModel(
        proposeSet([SET[0]!, { operation: "update_deal", dealId: 3, fields: { STAGE_ID: "WON" } } as Action]),
      ),
    });
    const view = await startRun(app, {
      request: "rename task 4 to CS-1 renamed and move deal 3 to WON",
      requestedBy: "demo-user",
    });
    expect(view.status).toBe("finished");
    // The tool's answer to the model, among the thread's messages.
    expect(JSON.stringify(view.state!.messages)).toMatch(
      /a change set acts on tasks only; update_deal acts on a deal/,
    );
    expect(await t.portal.writes()).toHaveLength(0);
  });
});

describe("a change set's wording for a create", () => {
  const base = {
    actionId: "a2",
    envelopeHash: "sha256:" + "0".repeat(64),
    operation: "add_task",
    outcome: "VERIFIED",
    reasonCode: "VERIFIED",
    reason: "ok",
    sent: true,
  };

  it("outcome table: 'new task N' with the created id, 'a new task' without it; other rows unchanged", () => {
    const rows: ActionOutcome[] = [
      { ...base, actionId: "a1", operation: "update_task", taskId: 4 },
      { ...base, taskId: 0, createdId: 17 },
      {
        ...base,
        actionId: "a3",
        taskId: 0,
        outcome: "NOT_EXECUTED",
        reasonCode: "CHAIN_STOPPED",
        sent: false,
      },
    ];
    const t = outcomeTable(rows);
    expect(t).toMatch(/a1 +update_task +task 4 +VERIFIED/);
    expect(t).toMatch(/a2 +add_task +new task 17 +VERIFIED/);
    expect(t).toMatch(/a3 +add_task +a new task +NOT_EXECUTED/);
    expect(t).not.toMatch(/task 0\b/);
  });

  it("the set schema takes id 0 exactly for a create", () => {
    const action = (operation: string, id: number) => ({
      actionId: "a1",
      envelopeHash: "sha256:" + "1".repeat(64),
      operation,
      object: { type: "task", id },
      reversibility: "reversible_external",
    });
    const set = (actions: unknown[]) => ({
      schema: "action-envelope-set/1",
      setId: "s",
      revision: 1,
      threadId: "t",
      requestedBy: "u",
      actions,
      risk: { reversibility: "reversible_external", level: "low" },
      policy: { id: "p", version: "1" },
      createdAt: "2026-12-01T00:00:00Z",
      expiresAt: "2026-12-01T01:00:00Z",
      nonce: "0".repeat(32),
    });
    const second = (operation: string, id: number) => ({
      ...action(operation, id),
      actionId: "a2",
      envelopeHash: "sha256:" + "2".repeat(64),
    });
    expect(ChangeSetSchema.safeParse(set([action("update_task", 4), second("add_task", 0)])).success).toBe(
      true,
    );
    expect(ChangeSetSchema.safeParse(set([action("update_task", 0), second("add_task", 0)])).success).toBe(
      false,
    );
    expect(ChangeSetSchema.safeParse(set([action("update_task", 4), second("add_task", 5)])).success).toBe(
      false,
    );
    const parsed = ChangeSetSchema.parse(set([action("update_task", 4), second("add_task", 0)]));
    const header = setCardHeader(parsed, "sha256:" + "3".repeat(64));
    expect(header).toContain("a2: add_task (tasks.task.add) on a new task");
    expect(header).toContain("a1: update_task (tasks.task.update) on task 4");
  });

  const listing = (extra: Partial<PendingApproval>): PendingApproval => ({
    threadId: "t1",
    envelopeHash: "sha256:" + "4".repeat(64),
    revision: 1,
    requestedBy: "demo-user",
    requesterVerifiedBy: "self_declared",
    createdAt: "2026-12-01T00:00:00.000Z",
    expiresAt: "2026-12-01T01:00:00.000Z",
    expired: false,
    ...extra,
  });

  it("pending: a single add_task and a set's add_task are 'a new task'; updates keep 'task 4' / 'deal 3'", () => {
    const single = pendingLine(
      listing({
        taskId: 0,
        object: { type: "task", id: 0 },
        operation: "add_task",
        fields: ["TITLE", "RESPONSIBLE_ID"],
      }),
    );
    expect(single).toContain("add_task a new task TITLE,RESPONSIBLE_ID");
    expect(single).not.toMatch(/task 0\b/);
    expect(pendingLine(listing({ taskId: 4, operation: "update_task", fields: ["TITLE"] }))).toContain(
      "  task 4 TITLE  ",
    );
    expect(
      pendingLine(
        listing({
          taskId: 3,
          object: { type: "deal", id: 3 },
          operation: "update_deal",
          fields: ["STAGE_ID"],
        }),
      ),
    ).toContain("update_deal deal 3 STAGE_ID");
    const set = pendingLine(
      listing({
        changeSet: {
          setHash: "sha256:" + "4".repeat(64),
          actions: [
            {
              actionId: "a1",
              envelopeHash: "sha256:" + "5".repeat(64),
              operation: "update_task",
              taskId: 4,
              object: { type: "task", id: 4 },
              fields: ["TITLE"],
            },
            {
              actionId: "a2",
              envelopeHash: "sha256:" + "6".repeat(64),
              operation: "add_task",
              taskId: 0,
              object: { type: "task", id: 0 },
              fields: ["TITLE", "RESPONSIBLE_ID"],
            },
          ],
        },
      }),
    );
    expect(set).toContain(
      "change set of 2 actions: a1 update_task task 4 TITLE; a2 add_task a new task TITLE,RESPONSIBLE_ID",
    );
  });

  it("the CLI's outcome table and the proposal's progress line name a create 'a new task'", () => {
    const lines = outcomeTableLines([
      {
        actionId: "a1",
        operation: "update_task",
        taskId: 4,
        outcome: "VERIFIED",
        reasonCode: "VERIFIED",
        sent: true,
      },
      {
        actionId: "a2",
        operation: "add_task",
        taskId: 0,
        outcome: "VERIFIED",
        reasonCode: "VERIFIED",
        sent: true,
      },
    ]);
    expect(lines[1]).toMatch(/^a1 +update_task +task 4 +VERIFIED/);
    expect(lines[2]).toMatch(/^a2 +add_task +a new task +VERIFIED/);
    let out = "";
    const printer = new Printer({
      write: (t: string) => ((out += t), true),
      isTTY: false,
    } as unknown as NodeJS.WriteStream);
    printer.onStep("propose", {
      proposal: {
        operation: "update_task",
        taskId: 4,
        fields: { TITLE: "x" },
        actions: [
          { operation: "update_task", taskId: 4, fields: { TITLE: "x" } },
          { operation: "add_task", taskId: 0, fields: { TITLE: "y", RESPONSIBLE_ID: "5" } },
        ],
        rationale: "asked",
        source: "model",
      },
    } as never);
    expect(out).toContain(
      'change set of 2 actions: update_task task 4 {"TITLE":"x"}; add_task a new task {"TITLE":"y","RESPONSIBLE_ID":"5"}',
    );
    expect(out).not.toMatch(/task 0\b/);
  });

  it("show --api reads a create's row back from the set outcome table (taskId 0, rendered 'a new task' again); task rows as before", () => {
    const rows: ActionOutcome[] = [
      { ...base, actionId: "a1", operation: "update_task", taskId: 4 },
      { ...base, taskId: 0 },
      { ...base, actionId: "a3", taskId: 0, createdId: 17 },
    ];
    const content = `Change set, action by action:\n${outcomeTable(rows)}`;
    const parsed = setOutcomeFromMessages("t1", [{ id: "action-envelope:t1:set-outcomes", content }]);
    expect(parsed!.actions.map((a) => [a.actionId, a.operation, a.taskId, a.outcome, a.sent])).toEqual([
      ["a1", "update_task", 4, "VERIFIED", true],
      ["a2", "add_task", 0, "VERIFIED", true],
      ["a3", "add_task", 0, "VERIFIED", true],
    ]);
    expect(outcomeTableLines(parsed!.actions)[2]).toMatch(/^a2 +add_task +a new task +VERIFIED/);
  });
});
