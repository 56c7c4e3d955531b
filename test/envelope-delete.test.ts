/**
 * Deletes as data (delete_task_comment, delete_task), pure: the write's arguments, the envelope's
 * shape, the proposal gate, the comparison before the delete, the verification after it, the undo's
 * policy gate and its "still as created" check, and the card. No emulator, no graph.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { changedSinceCreated, deletionOf, type DeletePlan } from "../src/envelope/compensation.js";
import {
  checkProposal,
  compareBeforeDelete,
  createEnvelope,
  defaultPolicy,
  hashEnvelope,
  parseEnvelope,
  renderCard,
  verifyDeleted,
  writeArgsOf,
  type Acknowledgement,
  type Envelope,
  type Policy,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";

const NOW = new Date("2026-11-30T10:00:00Z");
const TEXT = "Moved to review — please check the numbers.";
const item = (over: Record<string, unknown> = {}) => ({
  ID: "12",
  AUTHOR_ID: "1",
  AUTHOR_NAME: "Admin",
  AUTHOR_EMAIL: "",
  POST_DATE: "2026-11-30T13:00:02+03:00",
  POST_MESSAGE: TEXT,
  ATTACHED_OBJECTS: {},
  ...over,
});
const list = (...items: Array<Record<string, unknown>>): ReadResult => ({
  status: "ok",
  body: { result: items },
});
const failed: ReadResult = {
  status: "failed",
  error: { kind: "transport_timeout", description: "no answer" },
};
const OK: Acknowledgement = { status: "OK", body: { result: true } };
const LOST: Acknowledgement = { status: "MISSING", reason: "no answer within 1500 ms" };
const REFUSED: Acknowledgement = {
  status: "ERROR",
  error: { kind: "access_denied", description: "Action is not allowed" },
};

function withDelete(
  policy: Policy,
  op: "delete_task" | "delete_task_comment",
  rule: Partial<Policy["operations"][string]>,
): Policy {
  policy.operations[op] = { ...policy.operations[op]!, ...rule };
  return policy;
}

function commentDelete(read: Record<string, unknown> = item()): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    operation: "delete_task_comment",
    taskId: 4,
    params: { COMMENT_ID: 12 },
    task: read,
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: NOW,
  });
}

function taskDelete(task: Record<string, unknown> = exampleTask()): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    operation: "delete_task",
    taskId: 4,
    params: {},
    task,
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: withDelete(defaultPolicy(), "delete_task", { allowed: true }),
    now: NOW,
  });
}

describe("the write's arguments", () => {
  it("are the task and the comment id for a comment delete, the task alone for a task delete; never fields", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 31 }),
        fc.integer({ min: 1, max: 2 ** 31 }),
        (taskId, commentId) => {
          expect(writeArgsOf("delete_task_comment", taskId, { COMMENT_ID: commentId })).toEqual({
            taskId,
            commentId,
          });
          expect(writeArgsOf("delete_task", taskId, {})).toEqual({ taskId });
        },
      ),
    );
  });
});

describe("a delete envelope", () => {
  it("records what it deletes as its baseline: a comment's author and text compared, every other key fingerprinted, nothing automatic", () => {
    const e = commentDelete();
    expect([e.operation, e.object, e.params]).toEqual([
      "delete_task_comment",
      { type: "task", id: 4 },
      { COMMENT_ID: 12 },
    ]);
    expect(e.comparedFields).toEqual(["AUTHOR_ID", "POST_MESSAGE"]);
    expect(e.baseline.values).toEqual({ AUTHOR_ID: "1", POST_MESSAGE: TEXT });
    expect(Object.keys(e.baseline.fingerprints).sort()).toEqual([
      "ATTACHED_OBJECTS",
      "AUTHOR_EMAIL",
      "AUTHOR_NAME",
      "POST_DATE",
    ]);
    expect([e.invariantFields, e.automaticFields]).toEqual([[], []]);
    expect(e.risk.reversibility).toBe("irreversible");
    const t = taskDelete();
    expect(t.comparedFields).toEqual(["CHANGED_DATE"]);
    expect(t.invariantFields).toEqual(defaultPolicy().watchedFields);
    expect(t.automaticFields).toEqual([]);
  });

  it("is refused by the schema with params other than what it deletes, and is refused a comment read of another id", () => {
    const e = commentDelete();
    expect(() => parseEnvelope({ ...e, params: {} })).toThrow(/delete_task_comment names exactly COMMENT_ID/);
    expect(() => parseEnvelope({ ...e, params: { COMMENT_ID: 12, POST_MESSAGE: "x" } })).toThrow(
      /names exactly COMMENT_ID/,
    );
    expect(() => parseEnvelope({ ...taskDelete(), params: { TITLE: "x" } })).toThrow(
      /delete_task names exactly no params/,
    );
    expect(() => commentDelete(item({ ID: "13" }))).toThrow(/WRONG_TASK/);
  });

  it("passes the proposal gate only with exactly what it deletes, and only where the policy allows it", () => {
    const policy = defaultPolicy();
    const check = (operation: string, fields: Record<string, unknown>, p: Policy = policy) =>
      checkProposal(p, { taskIds: [4] }, { operation, taskId: 4, fields });
    expect(check("delete_task_comment", { COMMENT_ID: 12 })).toMatchObject({
      allowed: true,
      risk: { reversibility: "irreversible", level: "high" },
      requiresApproval: true,
    });
    expect(check("delete_task_comment", {})).toMatchObject({ allowed: false, code: "INVALID_VALUE" });
    expect(check("delete_task_comment", { COMMENT_ID: 12, POST_MESSAGE: "x" })).toMatchObject({
      allowed: false,
    });
    expect(check("delete_task_comment", { COMMENT_ID: 0 })).toMatchObject({
      allowed: false,
      code: "INVALID_VALUE",
    });
    expect(check("delete_task", {})).toMatchObject({ allowed: false, code: "DENIED_OPERATION" });
    expect(
      check("delete_task", {}, withDelete(defaultPolicy(), "delete_task", { allowed: true })),
    ).toMatchObject({ allowed: true });
    expect(
      check("delete_task", { TITLE: "x" }, withDelete(defaultPolicy(), "delete_task", { allowed: true })),
    ).toMatchObject({
      allowed: false,
      reasons: expect.arrayContaining([expect.stringMatching(/delete_task takes no fields, got TITLE/)]),
    });
  });

  it("is shown as a delete with the content it removes, and no 'before → requested'", () => {
    const e = commentDelete(item({ POST_MESSAGE: "line one\nline two" }));
    const card = renderCard(e, hashEnvelope(e), "text").text;
    expect(card).toContain("DELETE COMMENT 12 of task 4 — cannot be undone (task.commentitem.delete)");
    expect(card).toContain("│line one");
    expect(card).not.toContain("requested:");
    expect(card).not.toContain("MUST STAY UNCHANGED");
    const md = renderCard(e, hashEnvelope(e), "markdown").text;
    expect(md).toContain("### Delete comment 12 of task 4 (cannot be undone)");
    expect(renderCard(taskDelete(), hashEnvelope(taskDelete()), "text").text).toContain(
      "DELETE TASK 4 — cannot be undone (tasks.task.delete)",
    );
  });
});

describe("compareBeforeDelete", () => {
  const keys = Object.keys(item()).filter((k) => k !== "ID");
  it("MATCH exactly when the comment is as recorded; any key that differs is MISMATCH naming it", () => {
    const e = commentDelete();
    fc.assert(
      fc.property(fc.subarray(keys), fc.string({ minLength: 1, maxLength: 8 }), (changed, suffix) => {
        const now = item(
          Object.fromEntries(
            changed.map((k) => [k, `${String(item()[k as keyof ReturnType<typeof item>])}${suffix}`]),
          ),
        );
        const c = compareBeforeDelete(e, list(item({ ID: "11" }), now));
        if (changed.length === 0) expect(c.verdict).toBe("MATCH");
        else {
          expect(c.verdict).toBe("MISMATCH");
          expect(c.moved.map((m) => m.field).sort()).toEqual([...changed].sort());
        }
      }),
    );
  });

  it("GONE when the comment is not in the list or the task answers not found; ERROR when the read failed; UNKNOWN for an unusable answer", () => {
    expect(compareBeforeDelete(commentDelete(), list(item({ ID: "11" }))).verdict).toBe("GONE");
    expect(compareBeforeDelete(commentDelete(), failed).verdict).toBe("ERROR");
    expect(compareBeforeDelete(commentDelete(), { status: "ok", body: "<html>502</html>" }).verdict).toBe(
      "UNKNOWN",
    );
    const t = taskDelete();
    expect(compareBeforeDelete(t, { status: "ok", body: { result: [] } }).verdict).toBe("GONE");
    expect(
      compareBeforeDelete(t, {
        status: "failed",
        error: { kind: "not_found", description: "task 4 does not exist (result: [])" },
      }).verdict,
    ).toBe("GONE");
    expect(compareBeforeDelete(t, { status: "ok", body: taskBody(exampleTask()) }).verdict).toBe("MATCH");
    // A comment posted under the task since: it would be deleted with it (no key is "automatic" here).
    expect(
      compareBeforeDelete(t, { status: "ok", body: taskBody(exampleTask({ commentsCount: "7" })) }),
    ).toMatchObject({ verdict: "MISMATCH", moved: [expect.objectContaining({ field: "COMMENTS_COUNT" })] });
    expect(compareBeforeDelete(t, { status: "ok", body: taskBody(exampleTask({ id: "5" })) })).toMatchObject({
      verdict: "MISMATCH",
      identity: { status: "MISMATCH" },
    });
  });
});

describe("verifyDeleted", () => {
  const e = commentDelete();
  const cases: Array<[string, ReadResult, Acknowledgement, string]> = [
    ["gone, acknowledged", list(), OK, "VERIFIED"],
    ["gone, answer lost", list(), LOST, "INCONCLUSIVE"],
    ["gone, refused", list(), REFUSED, "INCONCLUSIVE"],
    ["still there, acknowledged", list(item()), OK, "VERIFICATION_FAILED"],
    // The answer lost: the delete may still land.
    ["still there, answer lost", list(item()), LOST, "INCONCLUSIVE"],
    ["still there, refused", list(item()), REFUSED, "VERIFICATION_FAILED"],
    ["read failed, acknowledged", failed, OK, "INCONCLUSIVE"],
    ["unusable answer, acknowledged", { status: "ok", body: { result: "nope" } }, OK, "INCONCLUSIVE"],
  ];
  for (const [name, read, ack, verdict] of cases) {
    it(`${name}: ${verdict}`, () => {
      expect(verifyDeleted(e, ack, read).verdict).toBe(verdict);
    });
  }
  it("a task: gone by the portal's not-found answer with its OK is VERIFIED; still readable is not applied", () => {
    const t = taskDelete();
    expect(
      verifyDeleted(t, OK, {
        status: "failed",
        error: { kind: "not_found", description: "task 4 does not exist (result: [])" },
      }).verdict,
    ).toBe("VERIFIED");
    expect(verifyDeleted(t, OK, { status: "ok", body: taskBody(exampleTask()) }).verdict).toBe(
      "VERIFICATION_FAILED",
    );
  });
});

describe("deletionOf: the undo of a create", () => {
  const comment = createEnvelope({
    portal: "127.0.0.1:43210",
    operation: "add_task_comment",
    taskId: 4,
    params: { POST_MESSAGE: TEXT },
    task: exampleTask(),
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: NOW,
  });
  const verified = { created: { id: "12", via: "acknowledgement", raw: { result: [item()] } } };

  it("is the delete of the acknowledged comment, expecting the author and text its verification read", () => {
    const plan = deletionOf(comment, verified, defaultPolicy());
    expect(plan).toMatchObject({
      ok: true,
      operation: "delete_task_comment",
      taskId: 4,
      fields: { COMMENT_ID: 12 },
      expected: { AUTHOR_ID: "1", POST_MESSAGE: TEXT },
    });
  });

  it("is refused naming the policy when it denies the delete, has no entry for it, or allows it without an approval", () => {
    const denied = withDelete(defaultPolicy(), "delete_task_comment", {
      allowed: false,
      reason: "comments stay",
    });
    expect(deletionOf(comment, verified, denied)).toMatchObject({
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: expect.stringMatching(
        /deleting it \(delete_task_comment\) is denied by policy default@.*: comments stay/,
      ),
    });
    const none = defaultPolicy();
    delete none.operations["delete_task_comment"];
    expect(deletionOf(comment, verified, none)).toMatchObject({
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: expect.stringMatching(/not allowed \(no entry\)/),
    });
    const noApproval = withDelete(defaultPolicy(), "delete_task_comment", { requiresApproval: false });
    expect(deletionOf(comment, verified, noApproval)).toMatchObject({
      ok: false,
      code: "DENIED_BY_POLICY",
      reason: expect.stringMatching(/without an approval/),
    });
  });

  it("is refused when the comment was found by searching rather than by the acknowledged id", () => {
    expect(
      deletionOf(comment, { created: { ...verified.created, via: "search" } }, defaultPolicy()),
    ).toMatchObject({ ok: false, code: "NOT_TIED" });
  });

  it("changedSinceCreated is empty exactly when the comment still shows what was created", () => {
    const plan = deletionOf(comment, verified, defaultPolicy()) as DeletePlan;
    const keys = Object.keys(item()).filter((k) => k !== "ID");
    fc.assert(
      fc.property(fc.subarray(keys), (changed) => {
        const now = item(Object.fromEntries(changed.map((k) => [k, "changed"])));
        expect(
          changedSinceCreated(plan, now)
            .map((c) => c.field)
            .sort(),
        ).toEqual([...changed].sort());
      }),
    );
  });
});
