/**
 * A deal is named a deal in the evidence where a task's wording said "the task": the case record's flag
 * reasons, the concurrent-writer-window statement (crm.deal.update, not tasks.task.update), and the
 * boundary_refused record of a model calling the update_deal write tool directly (its dealId). Also the
 * inbox filter's placeholder and the request scope's description mention deals.
 */
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { buildCase } from "../src/evidence/bundle.js";
import { outcomeFlags, type FlagInputs } from "../src/envelope/outcome-flags.js";
import { renderCase } from "../src/evidence/render.js";
import { RequestScopeSchema } from "../src/graph/request-input.js";
import { inboxPage } from "../src/inbox/pages.js";
import { approvalOf as approve, eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, call, readDealThenPropose, type Script } from "./support/scripted-model.js";

const t = eachTestApp();

async function waiting(
  request: string,
  script: Script,
  env: Record<string, string> = {},
): Promise<ThreadView> {
  const app = await t.open({ model: new ScriptedChatModel(script), env });
  return startRun(app, { request, requestedBy: "demo-user" });
}

async function caseOf(view: ThreadView, done: ThreadView) {
  const records = await t.app.deps.audit.records({ threadId: view.threadId });
  const { caseRecord, evidence } = buildCase({
    threadId: view.threadId,
    status: "finished",
    state: done.state,
    records,
    chain: await t.app.deps.audit.verify(),
  });
  return { caseRecord, evidence, text: renderCase(caseRecord, evidence) };
}

describe("a deal's evidence names the deal", () => {
  it("acknowledged without being applied: the causal flag's reason says deal 3 does not hold the write, not the task", async () => {
    const view = await waiting("move deal 3 to WON", readDealThenPropose(3, { STAGE_ID: "WON" }), {
      BITRIX24_IDEMPOTENCY: "off",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    await t.portal.fault({ method: "crm.deal.update", kind: "ack_without_apply", times: 1 });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome).toBe("VERIFICATION_FAILED");

    const { caseRecord, text } = await caseOf(view, done);
    const why = caseRecord.firstPage.flagReasons!.causalClaimAllowed;
    expect(caseRecord.firstPage.flags!.causalClaimAllowed).toBe(false);
    expect(why).toBe(
      "the target acknowledged the write but deal 3 does not hold it; it was not applied or was overwritten afterwards",
    );
    expect(text).toContain("but deal 3 does not hold it");
    expect(text).not.toMatch(/\bthe task\b/);
  });

  it("a VERIFIED deal update's concurrent-writer window names crm.deal.update as the method without a conditional write", async () => {
    const view = await waiting("move deal 3 to WON", readDealThenPropose(3, { STAGE_ID: "WON" }));
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");

    const { evidence, text } = await caseOf(view, done);
    const post = evidence.find((e) => e.kind === "post_write_read")!;
    const w = post.data["concurrentWriterWindow"] as { statement: string; fieldsOverwritten: string[] };
    expect(w.fieldsOverwritten).toEqual(["STAGE_ID"]);
    expect(w.statement).toMatch(/no conditional write/);
    expect(w.statement).toContain(
      "Bitrix24 offers no conditional write (crm.deal.update takes no version or If-Match)",
    );
    expect(w.statement).not.toContain("tasks.task.update");
    const outcome = evidence.find((e) => e.kind === "outcome")!;
    expect((outcome.data["concurrentWriterWindow"] as { statement: string }).statement).toBe(w.statement);
    expect(text).not.toContain("tasks.task.update");
  });

  it("a model calling the update_deal write tool directly: boundary_refused records operation update_deal and the deal's id 3", async () => {
    let turn = 0;
    const script: Script = () => {
      turn += 1;
      if (turn === 1)
        return new AIMessage({
          content: "",
          tool_calls: [call("update_deal", { dealId: 3, fields: { STAGE_ID: "WON" } })],
        });
      return new AIMessage("I could not make the change.");
    };
    const view = await waiting("move deal 3 to WON", script);
    expect(view.status).toBe("finished");
    expect(view.state?.reasonCode).toBe("WRITE_ATTEMPT_REFUSED");
    expect(await t.portal.writes()).toHaveLength(0);

    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const boundary = records.filter((r) => r.event === "boundary_refused");
    expect(boundary).toHaveLength(1);
    expect(boundary[0]!.what).toMatchObject({
      operation: "update_deal",
      taskId: 3,
      params: null,
      envelopeHash: null,
    });
    expect(boundary[0]!.received).toMatchObject({ tool: "update_deal" });
    expect((await t.app.deps.audit.verify()).intact).toBe(true);
  });
});

describe("the flag reasons by object kind", () => {
  const base: FlagInputs = {
    preRead: null,
    invocation: null,
    acknowledgement: null,
    verification: null,
    outcome: null,
    reasonCode: null,
  };
  const deal = { operation: "update_deal", object: { type: "deal" as const, id: 3 } };
  const task = { operation: "update_task", object: { type: "task" as const, id: 4 } };
  const preReadUnknown = { ...base, preRead: { verdict: "UNKNOWN" } } as unknown as FlagInputs;
  const inconclusive = { ...base, outcome: "INCONCLUSIVE" } as FlagInputs;

  it("a deal's pre-read UNKNOWN and inconclusive verification name deal 3; a task's keep the task wording", () => {
    expect(outcomeFlags({ ...preReadUnknown, envelope: deal }).because.causalClaimAllowed).toBe(
      "the pre-read could not tell whether deal 3 changed; the block may be a changed deal, an unexpected answer shape or missing data",
    );
    expect(outcomeFlags({ ...inconclusive, envelope: deal }).because.causalClaimAllowed).toBe(
      "verification was inconclusive; deal 3's state cannot be tied to the write",
    );
    for (const envelope of [task, null, undefined]) {
      expect(outcomeFlags({ ...preReadUnknown, envelope }).because.causalClaimAllowed).toBe(
        "the pre-read could not tell whether the task changed; the block may be a changed task, an unexpected answer shape or missing data",
      );
      expect(outcomeFlags({ ...inconclusive, envelope }).because.causalClaimAllowed).toBe(
        "verification was inconclusive; the task's state cannot be tied to the write",
      );
    }
  });
});

describe("texts that named only tasks mention deals", () => {
  it("the inbox filter's placeholder names deals", () => {
    expect(inboxPage("alice", "csrf", [])).toMatch(
      /id="filter-text" type="search" placeholder="[^"]*\bdeal\b[^"]*"/,
    );
  });

  it("the request scope's descriptions say tasks or deals", () => {
    expect(RequestScopeSchema.description).toMatch(/^Optional\. Task or deal ids and fields/);
    expect(RequestScopeSchema.shape.fields.description).toMatch(/^Task or deal fields/);
  });
});
