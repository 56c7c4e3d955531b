/**
 * What the case record, the outcome flags, the chat report and the inbox card say about a create
 * (add_task: the envelope's object id is 0, the task gets its id from the write) and a delete (an undo's
 * delete_task_comment: the envelope's object is the task, the comment is named by COMMENT_ID). Neither
 * may read as an update: no "task 0", no "task undefined", no "approved values" for a delete, the
 * comment's id never named as a task's.
 */
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { startUndo } from "../src/app/undo.js";
import { buildCase } from "../src/evidence/bundle.js";
import { outcomeFlags } from "../src/envelope/outcome-flags.js";
import { renderCase } from "../src/evidence/render.js";
import { cardSection } from "../src/inbox/card-view.js";
import type { VerificationRecord } from "../src/envelope/records.js";
import { eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose } from "./support/scripted-model.js";

const TEXT = "Moved to review: please check the Q3 numbers before Friday.";
const TITLE = "Prepare the Q4 report";
const t = eachTestApp();

function approve(view: ThreadView): { decisions: unknown[] } {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

async function caseText(done: ThreadView): Promise<string> {
  const records = await t.app.deps.audit.records({ threadId: done.threadId });
  const { caseRecord, evidence } = buildCase({
    threadId: done.threadId,
    status: "finished",
    state: done.state,
    records,
    chain: await t.app.deps.audit.verify(),
  });
  return renderCase(caseRecord, evidence);
}

const said = (view: ThreadView) => view.state!.messages.map((m) => String(m.content));

describe("outcome flags of a delete", () => {
  const verification: VerificationRecord = {
    verdict: "VERIFIED",
    reason: "gone",
    fields: [],
    raw: null,
    at: "2026-01-01T00:00:00.000Z",
  };
  const invocation = {
    tool: "delete_task_comment" as const,
    args: { taskId: 4, commentId: 5 },
    idempotencyKey: "k",
    envelopeHash: "h",
    sentAt: "2026-01-01T00:00:00.000Z",
  };
  const inputs = {
    preRead: null,
    invocation,
    acknowledgement: { status: "OK" } as never,
    verification,
    outcome: "VERIFIED" as const,
    reasonCode: "VERIFIED" as never,
  };

  it("say the fresh read shows the comment gone, not the approved values (a delete approves none)", () => {
    const { because } = outcomeFlags({
      ...inputs,
      envelope: {
        operation: "delete_task_comment",
        object: { type: "task", id: 4 },
        params: { COMMENT_ID: 5 },
      },
    });
    expect(because.sideEffectVerified).toBe(
      "the post-write read at 2026-01-01T00:00:00.000Z shows comment 5 of task 4 gone",
    );
    expect(because.causalClaimAllowed).toBe(
      "the target acknowledged the delete and a fresh read shows comment 5 of task 4 gone",
    );
    const task = outcomeFlags({
      ...inputs,
      invocation: { ...invocation, tool: "delete_task" as const, args: { taskId: 9 } },
      envelope: { operation: "delete_task", object: { type: "task", id: 9 }, params: {} },
    });
    expect(task.because.sideEffectVerified).toContain("shows task 9 gone");
    expect(task.because.causalClaimAllowed).not.toContain("approved values");
  });

  it("say a delete acknowledged but not applied left the comment there, not that 'the task does not hold it'", () => {
    const failed = outcomeFlags({
      ...inputs,
      verification: { ...verification, verdict: "VERIFICATION_FAILED", reason: "still there" },
      outcome: "VERIFICATION_FAILED" as never,
      envelope: {
        operation: "delete_task_comment",
        object: { type: "task", id: 4 },
        params: { COMMENT_ID: 5 },
      },
    });
    expect(failed.flags.causalClaimAllowed).toBe(false);
    expect(failed.because.causalClaimAllowed).toBe(
      "the target acknowledged the delete but a fresh read still shows comment 5 of task 4; it was not applied, or the object was made again afterwards",
    );
  });

  it("keep the update wording for an update", () => {
    const { because } = outcomeFlags({
      ...inputs,
      envelope: { operation: "update_task", object: { type: "task", id: 4 }, params: { TITLE: "x" } },
    });
    expect(because.sideEffectVerified).toBe(
      "the post-write read at 2026-01-01T00:00:00.000Z shows the approved values",
    );
    expect(because.causalClaimAllowed).toBe(
      "the target acknowledged the write and a fresh read shows exactly the approved values",
    );
  });
});

describe("a new task (add_task) in words", () => {
  it("is named as a new task on the inbox card, in the chat report and in the case record, and by its created id once known", async () => {
    const model = new ScriptedChatModel((messages) => {
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
    });
    const app = await t.open({ model });
    const view = await startRun(app, {
      request: `create a task "${TITLE}" for user 5`,
      requestedBy: "demo-user",
    });
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");

    // The inbox card: a new task, created; never "task 0" or a "new object" to be "posted".
    const inbox = cardSection((await app.deps.journal.currentAction(view.threadId))!).toString();
    expect(inbox).toContain("add_task making a new task · revision 1");
    expect(inbox).toContain("New task: what will be created (there is no value before it)");
    expect(inbox).toContain("<em>new task</em>");
    expect(inbox).not.toContain("task 0");
    expect(inbox).not.toContain("new object");

    const done = await submitDecision(app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    const id = (done.state!.verification!.created as { id: string }).id;
    expect(id).toMatch(/^\d+$/);

    // The chat report: what was proposed and sent, with the created task's id; no task 0 or undefined.
    const chat = said(done);
    expect(
      chat.some((m) =>
        m.startsWith(`Proposed: add_task making a new task with {"TITLE":"${TITLE}","RESPONSIBLE_ID":"5"}`),
      ),
    ).toBe(true);
    expect(chat).toContain(
      `Sent add_task once for a new task (created: task ${id}) with {"TITLE":"${TITLE}","RESPONSIBLE_ID":"5"}; the target answered OK.`,
    );
    expect(chat.join("\n")).not.toMatch(/task (0|undefined)\b/);

    // The verification's identity is the created task's, and the case record says so.
    expect(done.state!.verification!.identity).toEqual({
      expected: Number(id),
      answered: id,
      status: "MATCH",
    });
    const text = await caseText(done);
    expect(text).toContain(`identity: MATCH (created task ${id}, answer names "${id}")`);
    expect(text).not.toContain("expected task 0");
    // A create overwrites nothing: the writer window says so instead of naming the new task's fields.
    const records = await app.deps.audit.records({ threadId: done.threadId });
    const { evidence } = buildCase({
      threadId: done.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await app.deps.audit.verify(),
    });
    const window = evidence.find((e) => e.kind === "post_write_read")!.data["concurrentWriterWindow"] as {
      fieldsOverwritten: string[];
      statement: string;
    };
    expect(window.fieldsOverwritten).toEqual([]);
    expect(window.statement).toMatch(
      /^A create writes no existing object, so nothing anyone else changed can be overwritten/,
    );
    expect(text).not.toMatch(/TITLE would have been overwritten/);
  });
});

describe("an undo's delete of a posted comment (delete_task_comment) in words", () => {
  it("names the comment, not a task with the comment's id, and says the fresh read shows it gone", async () => {
    const app = await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { POST_MESSAGE: TEXT }, "add_task_comment")),
    });
    const waiting = await startRun(app, { request: `comment on task 4: ${TEXT}`, requestedBy: "demo-user" });
    const posted = await submitDecision(app, waiting.threadId, approve(waiting));
    expect(posted.state!.outcome, posted.state!.reason ?? "").toBe("VERIFIED");
    const commentId = (posted.state!.verification!.created as { id: string }).id;
    const undo = await startUndo(app, posted.threadId, "demo-user");
    expect(undo.status).toBe("awaiting_approval");
    const done = await submitDecision(app, undo.threadId, approve(undo));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");

    const chat = said(done);
    expect(
      chat.some((m) =>
        m.startsWith(
          `Proposed: delete_task_comment removing comment ${commentId} of task 4 with {"COMMENT_ID":${commentId}}`,
        ),
      ),
    ).toBe(true);

    const text = await caseText(done);
    expect(text).toContain(
      `identity: MATCH (expected comment ${commentId} of task 4, answer names "${commentId}")`,
    );
    expect(text).toContain(`identity: UNKNOWN (expected comment ${commentId} of task 4, answer names none)`);
    expect(text).not.toContain(`expected task ${commentId}`);
    expect(text).toMatch(
      new RegExp(
        `sideEffectVerified +true +the post-write read at \\S+ shows comment ${commentId} of task 4 gone`,
      ),
    );
    expect(text).toContain(
      `causalClaimAllowed=true — the target acknowledged the delete and a fresh read shows comment ${commentId} of task 4 gone`,
    );
    expect(text).not.toContain("approved values");
  });
});
