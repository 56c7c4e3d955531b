/**
 * A write whose outcome is unknown is neither success nor failure. When the answer is lost (the
 * client timed out while the portal still held the call) or the portal answered a 5xx, a fresh read
 * that does not show the change can only say "not applied yet": the write may still land. Such a run
 * ends INCONCLUSIVE (never VERIFIED, NOT_EXECUTED, VERIFICATION_FAILED or REJECTED_BY_TARGET), keeps
 * the object lease, and the late write is seen to land. The graph, our MCP server over stdio and the
 * emulator over HTTP; writes are counted in the emulator's call log.
 */
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import {
  createEnvelope,
  defaultPolicy,
  verifyDeleted,
  type Acknowledgement,
  type ReadResult,
} from "../src/envelope/index.js";
import { objectKeyOf } from "../src/store/action-machine.js";
import { approvalOf as approve, eachTestApp, objectLeaseOf, until } from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose } from "./support/scripted-model.js";

const NEW_TITLE = "WRITE-OUTCOME-UNKNOWN renamed";
const COMMENT = "Posted late: the answer to this comment was lost.";
const NEW_TASK = "WRITE-OUTCOME-UNKNOWN new task";
/** The client gives up after this; the emulator holds the write longer and applies it then. */
const CLIENT_TIMEOUT_MS = 1000;
const HOLD_MS = 2500;
const NOT_A_RESULT = ["VERIFIED", "NOT_EXECUTED", "VERIFICATION_FAILED", "REJECTED_BY_TARGET"];

const t = eachTestApp();

async function waiting(model: ScriptedChatModel, request: string): Promise<ThreadView> {
  // Plain REST 2 (no Idempotency-Key), so nothing is re-sent: the only write is the one held.
  await t.open({
    model,
    env: { BITRIX24_TIMEOUT_MS: String(CLIENT_TIMEOUT_MS), BITRIX24_IDEMPOTENCY: "off" },
  });
  const view = await startRun(t.app, { request, requestedBy: "demo-user" });
  expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
  return view;
}

function expectUnknownOutcome(state: NonNullable<ThreadView["state"]>) {
  expect(NOT_A_RESULT).not.toContain(state.outcome);
  expect(state.outcome).toBe("INCONCLUSIVE");
  expect(state.acknowledgement?.status).toBe("MISSING");
  expect(state.verification?.verdict).toBe("INCONCLUSIVE");
  expect(state.verification?.reason).toMatch(/not applied as of the read after the write/);
  expect(state.reason).toContain("may still land");
  expect(state.reason).not.toMatch(/was not applied|was not created|refused/);
}

describe("a write held longer than the client waits (latency fault > BITRIX24_TIMEOUT_MS)", () => {
  it("update: INCONCLUSIVE, 'may still land', the lease kept; the write lands later, exactly once", async () => {
    const view = await waiting(
      new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
      `rename task 4 to ${NEW_TITLE}`,
    );
    await t.portal.fault({ method: "tasks.task.update", kind: "latency", ms: HOLD_MS, times: 1 });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expectUnknownOutcome(done.state!);
    expect(done.state!.verification!.fields.find((f) => f.field === "TITLE")).toMatchObject({
      status: "not_applied",
    });
    // The write may still land, so the task stays held for it.
    expect((await objectLeaseOf(t.dataDir, objectKeyOf(view.approval!.envelope)))?.owner).toBe(
      view.approval!.envelopeHash,
    );
    // And it does land, seconds later: once.
    await until(
      "the held write to land",
      async () => (await t.portal.task(4))["title"] === NEW_TITLE,
      200,
      50,
    );
    const writes = await t.portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { TITLE: NEW_TITLE } });
  });

  it("comment: INCONCLUSIVE, not 'the comment was not applied'; the comment appears later, once", async () => {
    const view = await waiting(
      new ScriptedChatModel(readThenPropose(4, { POST_MESSAGE: COMMENT }, "add_task_comment")),
      `comment on task 4: ${COMMENT}`,
    );
    await t.portal.fault({ method: "task.commentitem.add", kind: "latency", ms: HOLD_MS, times: 1 });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expectUnknownOutcome(done.state!);
    const withText = async () =>
      (
        (await t.portal.rest("task.commentitem.getlist", { TASKID: 4 })).body.result as Array<{
          POST_MESSAGE: string;
        }>
      ).filter((c) => c.POST_MESSAGE === COMMENT);
    await until("the held comment to land", async () => (await withText()).length === 1, 200, 50);
    expect(await t.portal.writes()).toHaveLength(1);
  });

  it("new task: INCONCLUSIVE, not 'the task was not created'; the task appears later, once", async () => {
    const model = new ScriptedChatModel((messages) => {
      if (messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change"))
        return new AIMessage("Proposed; waiting for the human.");
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            operation: "add_task",
            fields: { TITLE: NEW_TASK, RESPONSIBLE_ID: "5" },
            rationale: "requested by the user",
          }),
        ],
      });
    });
    const view = await waiting(model, `create a task "${NEW_TASK}" for user 5`);
    await t.portal.fault({ method: "tasks.task.add", kind: "latency", ms: HOLD_MS, times: 1 });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expectUnknownOutcome(done.state!);
    const titled = async () =>
      (
        (await t.portal.rest("tasks.task.list", { filter: { TITLE: NEW_TASK } })).body.result.tasks as Array<{
          title: string;
        }>
      ).filter((t) => t.title === NEW_TASK);
    await until("the held create to land", async () => (await titled()).length === 1, 200, 50);
    expect(await t.portal.writes()).toHaveLength(1);
  });
});

describe("a 5xx answer to the write", () => {
  it("504: INCONCLUSIVE (not REJECTED_BY_TARGET), one write, the object lease kept", async () => {
    const view = await waiting(
      new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
      `rename task 4 to ${NEW_TITLE}`,
    );
    await t.portal.fault({
      method: "tasks.task.update",
      kind: "error",
      status: 504,
      error: "GATEWAY_TIMEOUT",
      description: "Gateway Timeout",
      times: 1,
    });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expectUnknownOutcome(done.state!);
    expect(done.state!.reasonCode).toBe("INCONCLUSIVE");
    expect(await t.portal.writes()).toHaveLength(1);
    const lease = await objectLeaseOf(t.dataDir, objectKeyOf(view.approval!.envelope));
    expect(lease?.owner).toBe(view.approval!.envelopeHash);
  });

  it("503 OVERLOAD_LIMIT: the portal did not run the call, so it is a refusal (REJECTED_BY_TARGET) and the lease is released", async () => {
    const view = await waiting(
      new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
      `rename task 4 to ${NEW_TITLE}`,
    );
    await t.portal.fault({
      method: "tasks.task.update",
      kind: "error",
      status: 503,
      error: "OVERLOAD_LIMIT",
      description: "REST API is blocked due to overload.",
      times: 1,
    });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome).toBe("REJECTED_BY_TARGET");
    expect(done.state!.acknowledgement?.status).toBe("ERROR");
    expect(await t.portal.writes()).toHaveLength(1);
    expect(await objectLeaseOf(t.dataDir, objectKeyOf(view.approval!.envelope))).toBeUndefined();
  });
});

describe("a delete whose answer is lost, the object still there (pure)", () => {
  const TEXT = "A comment to remove.";
  const item = {
    ID: "12",
    AUTHOR_ID: "1",
    AUTHOR_NAME: "Admin",
    AUTHOR_EMAIL: "",
    POST_DATE: "2026-11-30T13:00:02+03:00",
    POST_MESSAGE: TEXT,
    ATTACHED_OBJECTS: {},
  };
  const e = createEnvelope({
    portal: "127.0.0.1:43210",
    operation: "delete_task_comment",
    taskId: 4,
    params: { COMMENT_ID: 12 },
    task: item,
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
  const stillThere: ReadResult = { status: "ok", body: { result: [item] } };

  it("is INCONCLUSIVE (the delete may still land); a definite refusal or an OK is VERIFICATION_FAILED", () => {
    const lost: Acknowledgement = { status: "MISSING", reason: "no answer within 1000 ms" };
    const timedOut: Acknowledgement = {
      status: "ERROR",
      error: { kind: "transport_timeout", description: "no answer", outcomeUnknown: true },
    };
    for (const ack of [lost, timedOut]) {
      const v = verifyDeleted(e, ack, stillThere, "2026-11-30T10:00:05.000Z");
      expect(v.verdict).toBe("INCONCLUSIVE");
      expect(v.reason).toMatch(
        /^the delete is not applied as of the read after the write at 2026-11-30T10:00:05.000Z: comment 12 of task 4 is still there/,
      );
      expect(v.reason).toContain("may still land");
    }
    expect(
      verifyDeleted(
        e,
        {
          status: "ERROR",
          error: { kind: "access_denied", description: "Action is not allowed", outcomeUnknown: false },
        },
        stillThere,
      ).verdict,
    ).toBe("VERIFICATION_FAILED");
    expect(verifyDeleted(e, { status: "OK", body: { result: true } }, stillThere).verdict).toBe(
      "VERIFICATION_FAILED",
    );
  });
});
