/**
 * The request's scope keeps tasks and deals apart (src/envelope/scope.ts checkProposal): a request that
 * names only tasks reaches no deal, and one that names only deals reaches no existing task (an update
 * or a comment); a request naming both reaches the ones it names; a create names no existing object.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkProposal, defaultPolicy } from "../src/envelope/index.js";
import { deriveScope } from "../src/hitl/scope.js";

const policy = defaultPolicy();
const id = fc.integer({ min: 1, max: 10_000 });

describe("scope: tasks and deals", () => {
  it("a request naming only deals refuses an update or comment on any task OUT_OF_SCOPE, naming the deals", () => {
    fc.assert(
      fc.property(fc.uniqueArray(id, { minLength: 1, maxLength: 3 }), id, (dealIds, taskId) => {
        for (const [operation, fields] of [
          ["update_task", { TITLE: "Renamed" }],
          ["add_task_comment", { POST_MESSAGE: "Renamed" }],
        ] as const) {
          const r = checkProposal(policy, { dealIds }, { operation, taskId, fields });
          expect(r.allowed).toBe(false);
          if (r.allowed) return;
          expect(r.code).toBe("OUT_OF_SCOPE");
          expect(r.reasons[0]).toBe(
            `task ${taskId} is outside the request's scope (it names deals ${dealIds.join(", ")} and no task)`,
          );
        }
      }),
    );
  });

  it("the deal it names is in scope; a new task (a create) is not refused by object id", () => {
    expect(
      checkProposal(
        policy,
        { dealIds: [3] },
        { operation: "update_deal", taskId: 3, fields: { STAGE_ID: "WON" } },
      ).allowed,
    ).toBe(true);
    const created = checkProposal(
      policy,
      { dealIds: [3] },
      { operation: "add_task", taskId: 0, fields: { TITLE: "Follow up", RESPONSIBLE_ID: "5" } },
    );
    expect(
      created.allowed ? [] : created.reasons.filter((x) => /outside the request's scope/.test(x)),
    ).toEqual([]);
  });

  it("a request naming both reaches the task and the deal it names, and no other task", () => {
    const scope = { taskIds: [4], dealIds: [3] };
    expect(
      checkProposal(policy, scope, { operation: "update_task", taskId: 4, fields: { TITLE: "Renamed" } })
        .allowed,
    ).toBe(true);
    expect(
      checkProposal(policy, scope, { operation: "update_deal", taskId: 3, fields: { TITLE: "Renamed" } })
        .allowed,
    ).toBe(true);
    expect(
      checkProposal(policy, scope, { operation: "update_task", taskId: 9, fields: { TITLE: "Renamed" } }),
    ).toMatchObject({ allowed: false, code: "OUT_OF_SCOPE" });
  });

  it("the derived scope of 'rename deal 3 to X' names deal 3 and no task, so task 9 is out of it", () => {
    const scope = deriveScope("rename deal 3 to Quarterly renewal");
    expect(scope).toMatchObject({ dealIds: [3], fields: expect.arrayContaining(["TITLE"]) });
    expect(scope.taskIds).toBeUndefined();
    expect(
      checkProposal(policy, scope, {
        operation: "update_task",
        taskId: 9,
        fields: { TITLE: "Quarterly renewal" },
      }),
    ).toMatchObject({ allowed: false, code: "OUT_OF_SCOPE" });
  });
});

describe("scope words for a deal's own fields", () => {
  it("a deal's comment or description is COMMENTS and its deadline CLOSEDATE, so those deal updates are in scope", () => {
    for (const [request, field, value] of [
      ["set the comment of deal 3 to Call back on Monday", "COMMENTS", "Call back on Monday"],
      ["update the description of deal 3: renewal for 2027", "COMMENTS", "renewal for 2027"],
      ["move the deadline of deal 3 to 2027-01-15", "CLOSEDATE", "2027-01-15T00:00:00+03:00"],
      ["set the close date of deal 3 to 2027-01-15", "CLOSEDATE", "2027-01-15T00:00:00+03:00"],
    ] as const) {
      const scope = deriveScope(request);
      expect(scope.fields, request).toContain(field);
      const r = checkProposal(policy, scope, {
        operation: "update_deal",
        taskId: 3,
        fields: { [field]: value },
      });
      expect(r.allowed ? [] : r.reasons, request).toEqual([]);
    }
  });

  it("a request about a task gains no deal field", () => {
    for (const request of [
      "comment on task 4: ready for review",
      "move the deadline of task 4 to 2027-01-15",
      "update the description of task 4",
    ]) {
      const fields = deriveScope(request).fields ?? [];
      expect(
        fields.filter((f) => f === "COMMENTS" || f === "CLOSEDATE"),
        request,
      ).toEqual([]);
    }
  });
});
