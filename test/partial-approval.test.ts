/**
 * Partial approvals are not edits (issue 27): approving a1 and rejecting a2 of a change set keeps the
 * approver's approval of a1; a1 runs at once unless it depends on a rejected action (chain rule: an
 * earlier action on the same object) or the policy's partialExecution does not list its class. Then
 * the kept actions come back as a revision that names no editor, so the same approver may approve it.
 * Every action of the finished set is in the outcome table, a rejected one as REJECTED with its
 * reason. The graph, our MCP server over stdio, the emulator over HTTP; writes counted.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import {
  DecisionSchema,
  partialApprovalForecast,
  signDecision,
  signedPayloadOf,
} from "../src/envelope/index.js";
import { buildEvidence } from "../src/evidence/evidence-objects.js";
import { submitAsSignedIn } from "../src/inbox/driver.js";
import { eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, readThenProposeSet, type SetAction } from "./support/scripted-model.js";
import { makeKeys } from "./support/trust-boundary.js";

type Action = SetAction;
const t = eachTestApp("ae-partial-");

function perAction(
  view: ThreadView,
  types: Record<string, "approve" | "reject">,
  approver = "alice",
  reason = "not this one",
) {
  const a = view.approval!;
  return {
    decisions: Object.entries(types).map(([actionId, type]) => ({
      type,
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      approver: { id: approver },
      actionId,
      ...(type === "reject" ? { message: reason } : {}),
    })),
  };
}

async function waiting(actions: Action[]): Promise<ThreadView> {
  await t.open({ model: new ScriptedChatModel(readThenProposeSet(actions)) });
  const view = await startRun(t.app, { request: "several changes", requestedBy: "demo-user" });
  expect(view.status).toBe("awaiting_approval");
  return view;
}

const writeMethods = async () => (await t.portal.writes()).map((w) => w.method);

describe("partial approvals are not edits", () => {
  it("approve a1 and a3, reject a2 (a2 on another task): a1 and a3 run at once; the table lists a2 REJECTED with its reason", async () => {
    const view = await waiting([
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
      { operation: "update_task", taskId: 8, fields: { PRIORITY: "2" } },
    ]);
    const cs = view.approval!.changeSet!;
    expect(cs.partialExecution).toEqual(["reversible"]);
    const forecast = partialApprovalForecast(
      cs.actions,
      { a1: "approve", a2: "reject", a3: "approve" },
      cs.partialExecution!,
    );
    expect(forecast).toMatchObject({ runsAtOnce: true, kept: ["a1", "a3"], rejected: ["a2"] });
    const done = await submitDecision(
      t.app,
      view.threadId,
      perAction(view, { a1: "approve", a2: "reject", a3: "approve" }, "alice", "leave task 5 alone"),
    );
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(done.state!.envelope!.editedBy).toBeUndefined();
    expect(await writeMethods()).toEqual(["tasks.task.update", "tasks.task.update"]);
    expect(done.changeSetOutcome!.actions.map((a) => [a.actionId, a.outcome, a.reasonCode, a.sent])).toEqual([
      ["a1", "VERIFIED", "VERIFIED", true],
      ["a2", "REJECTED", "REJECTED_BY_HUMAN", false],
      ["a3", "VERIFIED", "VERIFIED", true],
    ]);
    expect(done.changeSetOutcome!.actions[1]!.reason).toContain("leave task 5 alone");
    // The evidence names it a per-action decision, not an edit.
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const summaries = buildEvidence({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await t.app.deps.audit.verify(),
    })
      .filter((e) => e.kind === "decision")
      .map((e) => e.summary);
    expect(summaries.join("\n")).toContain(
      "per-action decision (a1 approve, a2 reject, a3 approve) accepted from alice",
    );
    expect(summaries.join("\n")).not.toMatch(/edit accepted/);
  });

  it("a revision run at once is decided with its records or not at all: decision_accepted refused by the store leaves no claim; the revision stands registered with its approval_requested records", async () => {
    const view = await waiting([
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
      { operation: "update_task", taskId: 8, fields: { PRIORITY: "2" } },
    ]);
    // The store refuses the run-at-once revision's decision_accepted record (revision 2 only).
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    db.exec(
      "CREATE TRIGGER refuse_accept BEFORE INSERT ON audit_records WHEN NEW.event = 'decision_accepted' AND NEW.revision = 2 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    );
    db.close();
    await expect(
      submitDecision(t.app, view.threadId, perAction(view, { a1: "approve", a2: "reject", a3: "approve" })),
    ).rejects.toThrow(/refused by the test/);
    const current = await t.app.deps.journal.currentAction(view.threadId);
    expect(current?.revision).toBe(2);
    expect(current?.phase).toBe("registered");
    expect(current?.progress.decision).toBeUndefined();
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    // Registration and its approval_requested records commit together (one per registered action); the
    // refused claim adds nothing.
    const rev2 = records.filter((r) => r.revision === 2);
    expect(rev2.map((r) => r.event)).toEqual(rev2.map(() => "approval_requested"));
    expect(rev2.length).toBeGreaterThan(0);
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("a kept action that depends on a rejected one (same task, later in the chain) comes back with no editor: the same approver approves it", async () => {
    const view = await waiting([
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 4, fields: { TITLE: "Renamed after the priority" } },
    ]);
    const cs = view.approval!.changeSet!;
    const forecast = partialApprovalForecast(
      cs.actions,
      { a1: "reject", a2: "approve" },
      cs.partialExecution!,
    );
    expect(forecast.runsAtOnce).toBe(false);
    expect(forecast.summary).toContain("a2 depends on rejected a1");
    expect(forecast.summary).toContain("you included");
    const again = await submitDecision(
      t.app,
      view.threadId,
      perAction(view, { a1: "reject", a2: "approve" }),
    );
    expect(again.status).toBe("awaiting_approval");
    expect(await t.portal.writes()).toHaveLength(0);
    expect(again.approval!.envelope.editedBy).toBeUndefined();
    expect(again.approval!.description).not.toContain("Edited by");
    // Not an edit: alice, who decided the set, may approve what is left (no SELF_APPROVAL).
    const a = again.approval!;
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } },
      ],
    });
    expect(done.approval?.lastRefusal).toBeUndefined();
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.update"]);
    expect(done.changeSetOutcome!.actions.map((x) => [x.actionId, x.outcome])).toEqual([
      ["a1", "REJECTED"],
      ["a2", "VERIFIED"],
    ]);
  });
  it("an approved action whose task changed after the card was shown does not run at once: it comes back with the change named, then runs once approved", async () => {
    const view = await waiting([
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
    ]);
    // After the card was shown, someone renames task 4: TITLE is one of a1's "must stay unchanged" fields.
    expect(view.approval!.changeSet!.actions[0]!.envelope.invariantFields).toContain("TITLE");
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "Renamed meanwhile" } }))
        .status,
    ).toBe(200);
    const before = (await t.portal.writes()).length;
    const again = await submitDecision(
      t.app,
      view.threadId,
      perAction(view, { a1: "approve", a2: "reject" }),
    );
    // A whole-set approval would end STALE_STATE here; a partial one must not write over the change either.
    expect((await t.portal.writes()).length).toBe(before);
    expect(again.status).toBe("awaiting_approval");
    expect(again.approval!.description).toMatch(
      /NOT RUN AT ONCE: alice's partial approval of sha256:[0-9a-f]{64} covered these actions as they were shown; since then a1 task 4: [A-Z_, ]*TITLE[A-Z_, ]* changed/,
    );
    expect(again.approval!.envelope.baseline.values["TITLE"]).toBe("Renamed meanwhile");
    const a = again.approval!;
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } },
      ],
    });
    expect(done.state!.outcome).toBe("VERIFIED");
    expect((await t.portal.writes()).slice(before).map((w) => w.params)).toEqual([
      { taskId: 4, fields: { PRIORITY: "2" } },
    ]);
  });

  it("a partial approval of several actions comes back for a fresh approval when one of their objects changed after the card was shown; nothing is written", async () => {
    const view = await waiting([
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
      { operation: "update_task", taskId: 8, fields: { PRIORITY: "2" } },
    ]);
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 8, fields: { TITLE: "Renamed meanwhile" } }))
        .status,
    ).toBe(200);
    const before = (await t.portal.writes()).length;
    const again = await submitDecision(
      t.app,
      view.threadId,
      perAction(view, { a1: "approve", a2: "reject", a3: "approve" }),
    );
    expect((await t.portal.writes()).length).toBe(before);
    expect(again.status).toBe("awaiting_approval");
    expect(again.approval!.changeSet!.actions.map((x) => x.actionId)).toEqual(["a1", "a3"]);
    expect(again.approval!.description).toMatch(/since then a3 task 8: [A-Z_, ]*TITLE[A-Z_, ]* changed/);
    expect(again.approval!.description).not.toContain("run without being shown again");
  });
  it("a separation-of-duties override on an approved action is recorded when an earlier action of the set is rejected", async () => {
    await t.open({
      model: new ScriptedChatModel(
        readThenProposeSet([
          { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
          { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
        ]),
      ),
    });
    // carol requests a medium-risk set and, as override-officer (authenticated), approves a2 of it.
    const view = await startRun(t.app, { request: "several changes", requestedBy: "carol" });
    const a = view.approval!;
    const bound = { envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "carol" } };
    const override = { gate: "separation_of_duties", reason: "urgent fix" };
    const done = await submitAsSignedIn(
      t.app,
      view.threadId,
      { envelopeHash: a.envelopeHash, nonce: a.nonce },
      {
        decisions: [
          { type: "reject", actionId: "a1", message: "not this one", ...bound },
          { type: "approve", actionId: "a2", override, ...bound },
        ],
      },
      "carol",
    );
    expect(done.state!.outcome).toBe("VERIFIED");
    expect(await writeMethods()).toEqual(["tasks.task.update"]);
    // The decision and the revision run at once on it both say the gate was overridden, by whom and why.
    const accepted = (await t.app.deps.audit.records({ threadId: view.threadId })).filter(
      (r) => r.event === "decision_accepted",
    );
    expect(accepted.map((r) => r.override)).toEqual([
      { ...override, by: "carol" },
      { ...override, by: "carol" },
    ]);
  });
  it("an unsigned approval after a signed rejection of another action is recorded as self-declared, not as signed", async () => {
    const keys = makeKeys(["alice"]);
    await t.open({
      env: { ACTION_ENVELOPE_APPROVER_KEYS: keys.dir },
      model: new ScriptedChatModel(
        readThenProposeSet([
          { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
          { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
        ]),
      ),
    });
    const view = await startRun(t.app, { request: "several changes", requestedBy: "demo-user" });
    const a = view.approval!;
    const bound = { envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "alice" } };
    const reject: Record<string, unknown> = {
      type: "reject",
      actionId: "a1",
      message: "not this one",
      ...bound,
      decidedAt: new Date().toISOString(),
    };
    reject["signature"] = signDecision(
      signedPayloadOf(DecisionSchema.parse(reject), view.threadId),
      keys.pem["alice"]!,
    );
    // The policy accepts self-declared approvers, so the unsigned approval of a2 is taken, as what it is.
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [reject, { type: "approve", actionId: "a2", ...bound }],
    });
    expect(done.state!.outcome).toBe("VERIFIED");
    const accepted = (await t.app.deps.audit.records({ threadId: view.threadId })).filter(
      (r) => r.event === "decision_accepted",
    );
    expect(accepted.map((r) => r.approver?.verifiedBy)).toEqual(["self_declared", "self_declared"]);
  });
});
