/**
 * A CRM deal update (update_deal, crm.deal.update) end to end: the same envelope, approval, lease,
 * pre-read, single send and fresh read as a task update, with the deal's own fields, change marker
 * (DATE_MODIFY), watched and automatic fields from the policy, and faults. The graph, our MCP server
 * over stdio and the emulator over HTTP; writes counted in the emulator's call log.
 */
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { sweepExpired } from "../src/app/due-work.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { escalationApprovers } from "../src/envelope/index.js";
import { startUndo } from "../src/app/undo.js";
import { buildCase } from "../src/evidence/bundle.js";
import { renderCase } from "../src/evidence/render.js";
import { objectKeyOf } from "../src/store/action-machine.js";
import { eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, call, readDealThenPropose, type Script } from "./support/scripted-model.js";

const t = eachTestApp();

async function open(
  dealId: number,
  fields: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<void> {
  await t.open({
    model: new ScriptedChatModel(readDealThenPropose(dealId, fields)),
    env,
  });
}

const deal = async (id: number) =>
  (await t.portal.rest("crm.deal.get", { id })).body.result as Record<string, string>;
const dealWrites = async () =>
  (await t.portal.calls("crm.deal.update")).filter(
    (c) => c.status === 200 || c.status === 400 || c.status === 0,
  );

function approve(view: ThreadView, approver = "demo-approver") {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approver } },
    ],
  };
}

async function waiting(request: string): Promise<ThreadView> {
  const view = await startRun(t.app, { request, requestedBy: "demo-user" });
  expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
  return view;
}

describe("a deal update", () => {
  it("moves deal 3 to WON after approval, once; the stage's consequences are automatic, not violations", async () => {
    await open(3, { STAGE_ID: "WON" });
    const view = await waiting("move deal 3 to WON");
    const e = view.approval!.envelope;
    expect([e.operation, e.object]).toEqual(["update_deal", { type: "deal", id: 3 }]);
    expect(view.approval!.actionRequests[0].args).toEqual({ dealId: 3, fields: { STAGE_ID: "WON" } });
    expect(e.comparedFields).toEqual(["STAGE_ID", "DATE_MODIFY"]);
    expect(e.baseline.values["STAGE_ID"]).toBe("EXECUTING");
    expect(e.invariantFields).toContain("OPPORTUNITY");
    expect(e.risk.level).toBe("high");
    expect(view.state!.card).toContain("Object:       deal 3");
    expect(view.state!.card).toMatch(/STAGE_ID\n\s+before:\s+"EXECUTING"\n\s+requested: "WON"/);

    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual(["crm.deal.update"]);
    expect(done.state!.invocation).toMatchObject({
      tool: "update_deal",
      args: { dealId: 3, fields: { STAGE_ID: "WON" } },
    });
    const after = await deal(3);
    expect([after["STAGE_ID"], after["STAGE_SEMANTIC_ID"], after["CLOSED"]]).toEqual(["WON", "S", "Y"]);
    // The answer is tied to deal 3 by its own id key (a deal answers "ID", a task "id").
    expect(done.state!.preRead!.identity).toEqual({ expected: 3, answered: "3", status: "MATCH" });
    expect(done.state!.verification!.identity).toEqual({ expected: 3, answered: "3", status: "MATCH" });
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const { caseRecord, evidence } = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await t.app.deps.audit.verify(),
    });
    expect(renderCase(caseRecord, evidence)).toContain('identity: MATCH (expected deal 3, answer names "3")');
    const automatic = done
      .state!.verification!.fields.filter((f) => f.status === "automatic")
      .map((f) => f.field);
    expect(automatic).toEqual(expect.arrayContaining(["DATE_MODIFY", "STAGE_SEMANTIC_ID", "CLOSED"]));
  });

  it("names the deal as a deal where a task's messages said 'task': the case record's What line, and a lease another action holds", async () => {
    await open(3, { STAGE_ID: "WON" }, { ACTION_ENVELOPE_OBJECT_WAIT_MS: "1" });
    const busy = await waiting("move deal 3 to WON");
    const e = busy.approval!.envelope;
    // Another approved action holds deal 3 from its pre-read to its verification.
    const held = await t.app.deps.journal.acquireObjectLease(
      objectKeyOf(e),
      { envelopeHash: "f".repeat(64), threadId: "other-thread" },
      60_000,
    );
    expect(held.acquired).toBe(true);
    const stopped = await submitDecision(t.app, busy.threadId, approve(busy));
    expect(stopped.state!.reasonCode).toBe("TARGET_BUSY");
    expect(stopped.state!.reason).toContain("another approved action holds deal 3 from its pre-read");
    expect(await dealWrites()).toHaveLength(0);

    const records = await t.app.deps.audit.records({ threadId: busy.threadId });
    const { caseRecord, evidence } = buildCase({
      threadId: busy.threadId,
      status: "finished",
      state: stopped.state,
      records,
      chain: await t.app.deps.audit.verify(),
    });
    expect(renderCase(caseRecord, evidence)).toMatch(/What: +update_deal deal 3 \{"STAGE_ID":"WON"\}/);
  });

  it("is not written when the deal changed after the card was shown: STALE_STATE naming the field, no write", async () => {
    await open(3, { STAGE_ID: "WON" });
    const view = await waiting("move deal 3 to WON");
    expect(
      (await t.portal.rest("crm.deal.update", { id: 3, fields: { OPPORTUNITY: "60000.00" } })).status,
    ).toBe(200);
    const before = (await t.portal.writes()).length;
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome).toBe("NOT_EXECUTED");
    expect(done.state!.reasonCode).toBe("STALE_STATE");
    expect(done.state!.reason).toContain("OPPORTUNITY");
    expect((await t.portal.writes()).length).toBe(before);
  });

  it('an amount compares as an amount: 48500.5 proposed as "51000" and read back as "51000.00" is VERIFIED', async () => {
    await open(3, { OPPORTUNITY: "51000" });
    const view = await waiting("set the amount of deal 3 to 51000");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect((await deal(3))["OPPORTUNITY"]).toBe("51000.00");
    expect(done.state!.verification!.fields.find((f) => f.field === "OPPORTUNITY")).toMatchObject({
      status: "applied",
      normalised: true,
      rule: { id: "money-equal" },
    });
  });

  it("an amount the portal keeps to fewer cents than approved is not VERIFIED: 900000000000000.01 read back as .00", async () => {
    // The portal holds amounts as floating point (so does the emulator): at this size the cent is lost.
    await open(3, { OPPORTUNITY: "900000000000000.01" });
    const view = await waiting("set the amount of deal 3 to 900000000000000.01");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect((await deal(3))["OPPORTUNITY"]).toBe("900000000000000.00");
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFICATION_FAILED");
    expect(done.state!.verification!.fields.find((f) => f.field === "OPPORTUNITY")).toMatchObject({
      status: "wrong_value",
      actual: "900000000000000.00",
    });
  });

  it("acknowledged without being applied: VERIFICATION_FAILED; applied with the answer lost (REST 2): INCONCLUSIVE; one send each", async () => {
    await open(3, { STAGE_ID: "WON" }, { BITRIX24_IDEMPOTENCY: "off", BITRIX24_TIMEOUT_MS: "1500" });
    const first = await waiting("move deal 3 to WON");
    await t.portal.fault({ method: "crm.deal.update", kind: "ack_without_apply", times: 1 });
    const failed = await submitDecision(t.app, first.threadId, approve(first));
    expect(failed.state!.outcome).toBe("VERIFICATION_FAILED");
    expect((await deal(3))["STAGE_ID"]).toBe("EXECUTING");

    const second = await waiting("move deal 3 to WON");
    await t.portal.fault({ method: "crm.deal.update", kind: "apply_then_timeout", times: 1 });
    const lost = await submitDecision(t.app, second.threadId, approve(second));
    expect(lost.state!.acknowledgement!.status).not.toBe("OK");
    expect(lost.state!.outcome).toBe("INCONCLUSIVE");
    expect((await deal(3))["STAGE_ID"]).toBe("WON");
    expect(await t.portal.calls("crm.deal.update")).toHaveLength(2);
  });

  it("a deal the webhook's user may read but not edit: the portal refuses the write, REJECTED_BY_TARGET, nothing changed", async () => {
    await open(4, { TITLE: "Payroll software licences (renewal)" });
    const view = await waiting("rename deal 4 to Payroll software licences (renewal)");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome).toBe("REJECTED_BY_TARGET");
    expect(done.state!.acknowledgement!.status).toBe("ERROR");
    expect((await deal(4))["TITLE"]).toBe("Payroll software licences");
  });

  it("undo restores the stage recorded before the write, with its own approval", async () => {
    await open(3, { STAGE_ID: "WON" });
    const view = await waiting("move deal 3 to WON");
    expect((await submitDecision(t.app, view.threadId, approve(view))).state!.outcome).toBe("VERIFIED");
    const undo = await startUndo(t.app, view.threadId, "demo-user");
    expect(undo.status, `${undo.state?.reasonCode}: ${undo.state?.reason}`).toBe("awaiting_approval");
    expect(undo.approval!.envelope).toMatchObject({
      operation: "update_deal",
      object: { type: "deal", id: 3 },
      params: { STAGE_ID: "EXECUTING" },
    });
    const restored = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(restored.state!.outcome, restored.state!.reason ?? "").toBe("VERIFIED");
    expect((await deal(3))["STAGE_ID"]).toBe("EXECUTING");
  });

  it("an edit names the deal by dealId; one naming a task (taskId) is refused; a request about a task cannot reach a deal", async () => {
    await open(3, { STAGE_ID: "WON" });
    const view = await waiting("move deal 3 to WON");
    const a = view.approval!;
    const edit = (args: Record<string, unknown>, approver: string, on = a) => ({
      decisions: [
        {
          type: "edit",
          envelopeHash: on.envelopeHash,
          nonce: on.nonce,
          approver: { id: approver },
          editedAction: { name: "update_deal", args },
        },
      ],
    });
    const wrongKind = await submitDecision(
      t.app,
      view.threadId,
      edit({ taskId: 3, fields: { STAGE_ID: "LOSE" } }, "alice"),
    );
    expect(wrongKind.approval!.lastRefusal?.code).toBe("OUT_OF_SCOPE");
    const edited = await submitDecision(
      t.app,
      view.threadId,
      edit({ dealId: 3, fields: { STAGE_ID: "FINAL_INVOICE" } }, "alice"),
    );
    expect(edited.approval!.envelope).toMatchObject({ revision: 2, params: { STAGE_ID: "FINAL_INVOICE" } });
    expect(await t.portal.writes()).toHaveLength(0);

    await t.app.close();
    await open(3, { STAGE_ID: "WON" });
    const wrongScope = await startRun(t.app, {
      request: "rename task 4 to Something",
      requestedBy: "demo-user",
    });
    expect(wrongScope.state!.reasonCode).toBe("DENIED_BY_POLICY");
    expect(wrongScope.state!.reason).toContain("deal 3 is outside the request's scope");
  });

  it("an expired deal approval is not escalated to a group none of whose members may approve deals: it ends APPROVAL_EXPIRED saying so", async () => {
    let now = new Date();
    await t.open({
      model: new ScriptedChatModel(readDealThenPropose(3, { STAGE_ID: "WON" })),
      clock: () => now,
    });
    // The default policy escalates to task-leads (carol), and only deal-approvers may decide update_deal.
    expect(t.app.deps.policy.escalationGroup).toBe("task-leads");
    expect(escalationApprovers(t.app.deps.policy, "task-leads", ["update_deal"])).toEqual([]);
    expect(escalationApprovers(t.app.deps.policy, "task-leads", ["update_task"])).toEqual(["carol"]);
    const view = await waiting("move deal 3 to WON");
    now = new Date(Date.parse(view.approval!.expiresAt) + 1_000);
    expect(await sweepExpired(t.app)).toEqual([
      expect.objectContaining({ threadId: view.threadId, result: "expired" }),
    ]);
    const ended = await viewThread(t.app, view.threadId);
    expect(ended.status).toBe("finished");
    expect(ended.state!.reasonCode).toBe("APPROVAL_EXPIRED");
    expect(ended.state!.reason).toContain(
      "not escalated to task-leads: none of its members may decide update_deal",
    );
    expect(ended.state!.escalatedTo ?? null).toBeNull();
    expect(await dealWrites()).toHaveLength(0);
  });

  it("a deal a person names in answer to a question narrows the scope: the model's proposal for another deal is refused", async () => {
    const asksThenStrays: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (!tools.includes("request_input"))
        return new AIMessage({
          content: "",
          tool_calls: [
            call("request_input", {
              question: "Which deal do you mean?",
              fields: { dealId: { type: "number", description: "Bitrix24 deal id" } },
            }),
          ],
        });
      if (!tools.includes("get_deal"))
        return new AIMessage({ content: "", tool_calls: [call("get_deal", { dealId: 7 })] });
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            operation: "update_deal",
            dealId: 7,
            fields: { STAGE_ID: "WON" },
            rationale: "the big one",
          }),
        ],
      });
    };
    await t.open({ model: new ScriptedChatModel(asksThenStrays) });
    const asked = await startRun(t.app, { request: "move the big deal to WON", requestedBy: "demo-user" });
    expect(asked.status).toBe("awaiting_input");
    expect((await t.app.deps.journal.getThread(asked.threadId))!.scope.dealIds).toBeUndefined();
    const run = await submitDecision(t.app, asked.threadId, { answers: { dealId: 3 } });
    expect((await t.app.deps.journal.getThread(asked.threadId))!.scope.dealIds).toEqual([3]);
    expect(run.status).toBe("finished");
    expect(run.state!.reason).toContain("deal 7 is outside the request's scope (deals 3)");
    expect(await dealWrites()).toHaveLength(0);
  });

  it("a deal named in answer to a question does not widen a request about a task: the model's proposal for that deal is refused", async () => {
    const asksForDeal: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (!tools.includes("request_input"))
        return new AIMessage({
          content: "",
          tool_calls: [
            call("request_input", {
              question: "Which deal is this task for?",
              fields: { dealId: { type: "number", description: "Bitrix24 deal id" } },
            }),
          ],
        });
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            operation: "update_deal",
            dealId: 3,
            fields: { TITLE: "Quarterly plan" },
            rationale: "the deal the person named",
          }),
        ],
      });
    };
    await t.open({ model: new ScriptedChatModel(asksForDeal) });
    const asked = await startRun(t.app, {
      request: "rename task 4 to Quarterly plan",
      requestedBy: "demo-user",
    });
    expect(asked.status).toBe("awaiting_input");
    const run = await submitDecision(t.app, asked.threadId, { answers: { dealId: 3 } });
    expect((await t.app.deps.journal.getThread(asked.threadId))!.scope).toEqual({
      taskIds: [4],
      fields: ["TITLE"],
    });
    expect(run.status).toBe("finished");
    expect(run.state!.reasonCode).toBe("DENIED_BY_POLICY");
    expect(run.state!.reason).toContain(
      "deal 3 is outside the request's scope (it names tasks 4 and no deal)",
    );
    expect(await dealWrites()).toHaveLength(0);
  });

  it("a request about a deal cannot reach a task: a model proposing task 4's title for 'rename deal 3 …' is refused, nothing written", async () => {
    const taskInstead: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (!tools.includes("get_task_by_id"))
        return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            operation: "update_task",
            taskId: 4,
            fields: { TITLE: "Quarterly renewal" },
            rationale: "requested by the user",
          }),
        ],
      });
    };
    await t.open({ model: new ScriptedChatModel(taskInstead) });
    const title = async () => (await t.portal.rest("tasks.task.get", { taskId: 4 })).body.result.task.title;
    const before = await title();
    const run = await startRun(t.app, {
      request: "rename deal 3 to Quarterly renewal",
      requestedBy: "demo-user",
    });
    expect(run.status).toBe("finished");
    expect(run.state!.outcome).toBe("NOT_EXECUTED");
    expect(run.state!.reason).toContain(
      "task 4 is outside the request's scope (it names deals 3 and no task)",
    );
    expect(await t.portal.writes()).toEqual([]);
    expect(await title()).toBe(before);
  });
});
