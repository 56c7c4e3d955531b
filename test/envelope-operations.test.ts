/**
 * Operations as data (src/envelope/operations.ts): a comment on a task goes through the same envelope,
 * proposal gate and verification as an update, with the differences the table states — no "before"
 * for the comment, the task's change marker and watched fields compared before the write, and the
 * created comment read back after it. Pure: no emulator, no graph.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compensationOf } from "../src/envelope/compensation.js";
import {
  checkProposal,
  createEnvelope,
  defaultPolicy,
  hashEnvelope,
  OPERATIONS,
  parseEnvelope,
  renderCard,
  validateDecision,
  verifyCreatedComment,
  type Acknowledgement,
  type Envelope,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";

const NOW = new Date("2026-11-30T10:00:00Z");
const TEXT = "Moved to review — please check the numbers.";

function comment(text: string = TEXT): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    operation: "add_task_comment",
    taskId: 4,
    params: { POST_MESSAGE: text },
    task: exampleTask(),
    requestedBy: "demo-user",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: NOW,
  });
}
const taskRead = (over: Record<string, unknown> = {}): ReadResult => ({
  status: "ok",
  body: taskBody(exampleTask({ commentsCount: "1", ...over })),
});
const list = (...items: Array<[number, string]>): ReadResult => ({
  status: "ok",
  body: {
    result: items.map(([id, msg]) => ({
      ID: String(id),
      AUTHOR_ID: "1",
      AUTHOR_NAME: "Admin",
      POST_MESSAGE: msg,
      POST_DATE: "2026-11-30T13:00:02+03:00",
    })),
  },
});
const ackId = (id: number): Acknowledgement => ({ status: "OK", body: { result: id, time: {} } });
const ackLost: Acknowledgement = {
  status: "ERROR",
  error: { kind: "transport_timeout", description: "no answer within 10000 ms", outcomeUnknown: true },
};

describe("the operation table", () => {
  it("names a method, a write role, an effect and a field table for every operation", () => {
    for (const spec of Object.values(OPERATIONS)) {
      expect(spec.method).toMatch(/^[a-z]+(\.[a-z]+)+$/);
      // A task delete sends nothing but the task's id; every other operation takes fields.
      if (spec.name !== "delete_task") expect(Object.keys(spec.fields).length).toBeGreaterThan(0);
      expect(["update", "create_child", "create", "delete"]).toContain(spec.effect);
    }
  });
});

describe("a comment envelope", () => {
  it("compares only the task's change marker, keeps every watched field as an invariant, and has no before-value for the comment", () => {
    const e = comment();
    expect(e.operation).toBe("add_task_comment");
    expect(e.comparedFields).toEqual(["CHANGED_DATE"]);
    expect(e.invariantFields).toEqual(defaultPolicy().watchedFields);
    expect(e.baseline.values).not.toHaveProperty("POST_MESSAGE");
    expect(e.automaticFields).toContain("COMMENTS_COUNT");
  });

  it("is refused by the schema when a comment's comparedFields name the text or omit the marker", () => {
    const e = comment();
    expect(() => parseEnvelope({ ...e, comparedFields: ["POST_MESSAGE", "CHANGED_DATE"] })).toThrow(
      /CHANGED_DATE alone/,
    );
    expect(() => parseEnvelope({ ...e, operation: "archive_task" })).toThrow(/operation/);
    // A comment envelope relabelled as a delete is not a delete: a delete names only what it removes.
    expect(() => parseEnvelope({ ...e, operation: "delete_task" })).toThrow(
      /delete_task names exactly no params/,
    );
    // The object must be the operation's kind, and only a create names object 0.
    expect(() => parseEnvelope({ ...e, object: { type: "deal", id: 4 } })).toThrow(
      /add_task_comment acts on a task, not a deal/,
    );
    expect(() => parseEnvelope({ ...e, object: { type: "task", id: 0 } })).toThrow(/positive integer/);
  });

  it("is refused by the proposal gate for a field a comment does not have, an empty or an over-long text", () => {
    const policy = defaultPolicy();
    const check = (fields: Record<string, unknown>) =>
      checkProposal(policy, {}, { operation: "add_task_comment", taskId: 4, fields });
    expect(check({ TITLE: "x" })).toMatchObject({ allowed: false, code: "DENIED_FIELD" });
    expect(check({ POST_MESSAGE: "" })).toMatchObject({ allowed: false, code: "INVALID_VALUE" });
    expect(check({ POST_MESSAGE: "x".repeat(4001) })).toMatchObject({
      allowed: false,
      code: "INVALID_VALUE",
    });
    expect(check({ POST_MESSAGE: TEXT })).toMatchObject({
      allowed: true,
      risk: { reversibility: "reversible_external", level: "medium" },
    });
    // The scope a request derives ("comment on task 4") names POST_MESSAGE; one about the title does not allow a comment.
    expect(
      checkProposal(
        policy,
        { taskIds: [4], fields: ["TITLE"] },
        { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: TEXT } },
      ),
    ).toMatchObject({ allowed: false, code: "OUT_OF_SCOPE" });
  });

  it("shows the text to post as a new comment, not as a change of a task field", () => {
    const e = comment("line one\nline two");
    const card = renderCard(e, hashEnvelope(e), "text").text;
    expect(card).toContain("Operation:    add_task_comment (comment on task: task.commentitem.add)");
    expect(card).toContain("NEW COMMENT on task 4");
    expect(card).toContain("│line one");
    expect(card).not.toContain("before:");
  });

  it("cannot be turned into another operation by an edit", () => {
    const e = comment();
    const hash = hashEnvelope(e);
    const ctx = {
      now: new Date(NOW.getTime() + 60_000),
      policy: defaultPolicy(),
      threadId: "t",
      envelopeHash: hash,
      nonceConsumed: false,
      supersededHashes: [],
      publicKeys: new Map(),
      scope: { taskIds: [4] },
    };
    const edit = (name: string, fields: Record<string, unknown>) =>
      validateDecision(
        e,
        {
          type: "edit",
          envelopeHash: hash,
          nonce: e.nonce,
          approver: { id: "alice" },
          editedAction: { name, args: { taskId: 4, fields } },
        },
        ctx,
      );
    expect(edit("update_task", { TITLE: "x" })).toMatchObject({ ok: false, code: "OUT_OF_SCOPE" });
    expect(edit("add_task_comment", { POST_MESSAGE: "Better words" })).toMatchObject({ ok: true });
  });

  it("is not offered as an undo (a posted comment may already have been read)", () => {
    expect(compensationOf(comment(), taskBody(exampleTask()))).toMatchObject({
      ok: false,
      code: "NOT_REVERSIBLE",
    });
  });
});

describe("verifyCreatedComment", () => {
  const e = comment();
  it("VERIFIED: the acknowledged comment is on the task with the approved text, the task's watched fields unchanged", () => {
    const r = verifyCreatedComment(e, ackId(12), taskRead(), list([3, "older"], [12, TEXT]), undefined, []);
    expect(r.verdict).toBe("VERIFIED");
    expect(r.created).toEqual({
      type: "task_comment",
      id: "12",
      via: "acknowledgement",
      newWithText: ["12"],
    });
    expect(r.fields[0]).toMatchObject({ field: "POST_MESSAGE", role: "requested", status: "applied" });
  });

  it("VERIFICATION_FAILED: acknowledged without being applied (no comment with that id)", () => {
    const r = verifyCreatedComment(e, ackId(12), taskRead(), list([3, "older"]), undefined, []);
    expect(r.verdict).toBe("VERIFICATION_FAILED");
    expect(r.reason).toContain("has no comment 12");
  });

  it("VERIFICATION_FAILED: the acknowledged comment carries other text", () => {
    expect(
      verifyCreatedComment(e, ackId(12), taskRead(), list([12, `${TEXT} `]), undefined, []).verdict,
    ).toBe("VERIFICATION_FAILED");
  });

  it("a lost acknowledgement: one new comment with the text is INCONCLUSIVE, none is INCONCLUSIVE too (the write may still land), two is more than approved", () => {
    expect(verifyCreatedComment(e, ackLost, taskRead(), list([12, TEXT]), undefined, []).verdict).toBe(
      "INCONCLUSIVE",
    );
    expect(verifyCreatedComment(e, ackLost, taskRead(), list([3, "older"]), undefined, []).verdict).toBe(
      "INCONCLUSIVE",
    );
    expect(
      verifyCreatedComment(e, ackLost, taskRead(), list([12, TEXT], [13, TEXT]), undefined, []).verdict,
    ).toBe("INVARIANT_VIOLATION");
  });

  it("a comment that already carried the same text at the pre-read is not taken for ours", () => {
    // (With the answer lost, no new comment yet is not a failure: the write may still land.)
    expect(verifyCreatedComment(e, ackLost, taskRead(), list([7, TEXT]), undefined, ["7"]).verdict).toBe(
      "INCONCLUSIVE",
    );
    expect(verifyCreatedComment(e, ackId(12), taskRead(), list([7, TEXT]), undefined, ["7"]).verdict).toBe(
      "VERIFICATION_FAILED",
    );
    expect(
      verifyCreatedComment(e, ackId(12), taskRead(), list([7, TEXT], [12, TEXT]), undefined, ["7"]).verdict,
    ).toBe("VERIFIED");
    // Without the pre-read's list an earlier comment cannot be told from ours.
    expect(verifyCreatedComment(e, ackLost, taskRead(), list([7, TEXT]), undefined, undefined).verdict).toBe(
      "INCONCLUSIVE",
    );
  });

  it("INVARIANT_VIOLATION when a watched field of the task moved, however good the comment", () => {
    const r = verifyCreatedComment(
      e,
      ackId(12),
      taskRead({ title: "Someone renamed it" }),
      list([12, TEXT]),
      undefined,
      [],
    );
    expect(r.verdict).toBe("INVARIANT_VIOLATION");
    expect(r.reason).toContain("TITLE");
  });

  it("INCONCLUSIVE when the comment list cannot be read or is not a list", () => {
    expect(
      verifyCreatedComment(
        e,
        ackId(12),
        taskRead(),
        { status: "failed", error: { kind: "http", description: "503" } },
        undefined,
        [],
      ).verdict,
    ).toBe("INCONCLUSIVE");
    expect(
      verifyCreatedComment(
        e,
        ackId(12),
        taskRead(),
        { status: "ok", body: { result: { 12: TEXT } } },
        undefined,
        [],
      ).verdict,
    ).toBe("INCONCLUSIVE");
  });

  it("property: only the acknowledged id with exactly the approved text and no extra copies is VERIFIED", () => {
    const msg = fc.constantFrom(TEXT, `${TEXT} `, "other", TEXT.toUpperCase());
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 30 }), msg), { maxLength: 6 }),
        fc.integer({ min: 1, max: 30 }),
        (items, id) => {
          const unique = [...new Map(items.map(([i, m]) => [i, m] as [number, string])).entries()];
          const r = verifyCreatedComment(e, ackId(id), taskRead(), list(...unique), undefined, []);
          const ours = unique.find(([i]) => i === id);
          const copies = unique.filter(([i, m]) => i !== id && m === TEXT).length;
          expect(r.verdict === "VERIFIED").toBe(ours !== undefined && ours[1] === TEXT && copies === 0);
        },
      ),
    );
  });
});
