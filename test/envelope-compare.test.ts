import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compareBaseline,
  createEnvelope,
  defaultPolicy,
  valuesEqual,
  type Envelope,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";

function envelope(
  params: Record<string, unknown> = { TITLE: "Renamed", PRIORITY: "2" },
  task = exampleTask(),
): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task,
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
}
const ok = (body: unknown): ReadResult => ({ status: "ok", body });
const read = (over: Record<string, unknown> = {}) => ok(taskBody(exampleTask(over)));

describe("valuesEqual (normalisation rules)", () => {
  it("ids and enums: number and digit string are equal, other spellings are not", () => {
    expect(valuesEqual("RESPONSIBLE_ID", "5", 5)).toBe(true);
    expect(valuesEqual("PRIORITY", 2, "2")).toBe(true);
    expect(valuesEqual("RESPONSIBLE_ID", "05", "5")).toBe(false);
    expect(valuesEqual("RESPONSIBLE_ID", "5 ", "5")).toBe(false);
    expect(valuesEqual("RESPONSIBLE_ID", "5.0", 5)).toBe(false);
    expect(valuesEqual("STATUS", "3", "2")).toBe(false);
  });

  it("date-times: equal as instants when both carry an offset, exact otherwise", () => {
    expect(valuesEqual("DEADLINE", "2026-12-15T18:00:00+03:00", "2026-12-15T15:00:00Z")).toBe(true);
    expect(valuesEqual("DEADLINE", "2026-12-15T18:00:00+03:00", "2026-12-15T15:00:00+00:00")).toBe(true);
    expect(valuesEqual("DEADLINE", "2026-12-15T18:00:00+03:00", "2026-12-15T18:00:00+00:00")).toBe(false);
    expect(valuesEqual("DEADLINE", "2026-12-15T18:00:00", "2026-12-15T18:00:00+00:00")).toBe(false);
    expect(valuesEqual("DEADLINE", "2026-12-15T18:00:00", "2026-12-15T18:00:00")).toBe(true);
    // A title that looks like a date is still a string and compared exactly.
    expect(valuesEqual("TITLE", "2026-12-15T18:00:00+03:00", "2026-12-15T15:00:00Z")).toBe(false);
  });

  it("null equals only null", () => {
    expect(valuesEqual("DEADLINE", null, null)).toBe(true);
    expect(valuesEqual("DEADLINE", null, "")).toBe(false);
    expect(valuesEqual("GROUP_ID", null, 0)).toBe(false);
    expect(valuesEqual("AUDITORS", null, [])).toBe(false);
  });

  it("id lists: compared as sets of normalised ids", () => {
    expect(valuesEqual("AUDITORS", [6, 2], ["2", "6"])).toBe(true);
    expect(valuesEqual("AUDITORS", ["2"], ["2", "6"])).toBe(false);
    expect(valuesEqual("AUDITORS", [], [])).toBe(true);
  });

  it("strings: exact; trailing whitespace, case and Unicode form are significant", () => {
    expect(valuesEqual("TITLE", "Title ", "Title")).toBe(false);
    expect(valuesEqual("TITLE", "title", "Title")).toBe(false);
    expect(valuesEqual("TITLE", "caf\u00e9", "cafe\u0301")).toBe(false);
    expect(valuesEqual("TITLE", "5", 5)).toBe(false);
  });

  it("unknown fields: canonical JSON equality", () => {
    expect(valuesEqual("RESPONSIBLE", { id: "5", name: "E" }, { name: "E", id: "5" })).toBe(true);
    expect(valuesEqual("TIME_ESTIMATE", "1", 1)).toBe(false);
  });
});

describe("compareBaseline", () => {
  const e = envelope();

  it("MATCH when every compared field equals the baseline", () => {
    const r = compareBaseline(e, read());
    expect(r.verdict).toBe("MATCH");
    expect(r.fields.filter((f) => f.role === "compared").map((f) => [f.field, f.status])).toEqual([
      ["TITLE", "match"],
      ["PRIORITY", "match"],
      ["CHANGED_DATE", "match"],
    ]);
    expect(r.fields.filter((f) => f.role === "invariant").every((f) => f.status === "match")).toBe(true);
    expect(r.moved).toEqual([]);
    expect(r.identity).toMatchObject({ expected: 4, status: "MATCH" });
  });

  it("MATCH across documented spellings: number ids, another offset for the same instant", () => {
    const r = compareBaseline(e, read({ priority: 1, changedDate: "2026-11-25T11:30:05Z" }));
    expect(r.verdict).toBe("MATCH");
  });

  it("MISMATCH when the target changed since the envelope, naming field, expected and actual", () => {
    const r = compareBaseline(
      e,
      read({ title: "Someone else's title", changedDate: "2026-11-30T12:00:00+03:00" }),
    );
    expect(r.verdict).toBe("MISMATCH");
    expect(r.fields.find((f) => f.field === "TITLE")).toMatchObject({
      expected: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      actual: "Someone else's title",
      status: "mismatch",
    });
    expect(r.reason).toMatch(
      /TITLE was "LAB-AGENT-EXEC-002 - BOUND ACTION TEST", now "Someone else's title"/,
    );
    expect(r.reason).toMatch(/changed since 2026-11-25T14:30:05\+03:00/);
  });

  it("MISMATCH on the change marker alone (an unwatched edit happened)", () => {
    expect(compareBaseline(e, read({ changedDate: "2026-11-30T12:00:00+03:00" })).verdict).toBe("MISMATCH");
  });

  it("trailing whitespace is not normalised away", () => {
    expect(compareBaseline(e, read({ title: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST " })).verdict).toBe(
      "MISMATCH",
    );
  });

  it("a missing key is UNKNOWN, a null is a value", () => {
    const task = exampleTask();
    delete task["priority"];
    const r = compareBaseline(e, ok(taskBody(task)));
    expect(r.verdict).toBe("UNKNOWN");
    expect(r.fields.find((f) => f.field === "PRIORITY")).toMatchObject({
      status: "unknown",
      note: 'the answer has no "priority"',
    });
    expect(r.fields.find((f) => f.field === "PRIORITY")).not.toHaveProperty("actual");
    expect(compareBaseline(e, read({ priority: null })).verdict).toBe("MISMATCH");
  });

  it("a definite mismatch outranks an unreadable field", () => {
    const task = exampleTask({ title: "changed" });
    delete task["priority"];
    expect(compareBaseline(e, ok(taskBody(task))).verdict).toBe("MISMATCH");
  });

  const unusable: Array<[string, unknown, RegExp]> = [
    ["text instead of JSON", "<html>502 Bad Gateway</html>", /text, not JSON/],
    ["a JSON array", [1, 2], /not a JSON object/],
    ["a JSON number", 42, /not a JSON object/],
    ["null", null, /not a JSON object/],
    ["no result", { time: {} }, /no "result"/],
    ["an error body", { error: "0", error_description: "wrong task id" }, /an error, not a task/],
    ["result []", { result: [] }, /task 4 not found or not accessible/],
    ["result a string", { result: "ok" }, /"result" is not an object/],
    ["result without task", { result: { tasks: [] } }, /"result.task" is not an object/],
    [
      "task without id",
      { result: { task: { title: "x", priority: "1", changedDate: "2026-11-25T14:30:05+03:00" } } },
      /has no id/,
    ],
  ];
  it("an answer about another task is a definite identity MISMATCH, not UNKNOWN", () => {
    const r = compareBaseline(e, ok(taskBody(exampleTask({ id: "7" }))));
    expect(r.verdict).toBe("MISMATCH");
    expect(r.identity).toEqual({ expected: 4, answered: "7", status: "MISMATCH" });
    expect(r.reason).toMatch(/identity mismatch: the answer is about task string "7", not task 4/);
    expect(r.fields.every((f) => f.status === "unknown")).toBe(true);
  });
  it.each(unusable)("UNKNOWN (never MATCH or MISMATCH) for %s", (_, body, reason) => {
    const r = compareBaseline(e, ok(body));
    expect(r.verdict).toBe("UNKNOWN");
    expect(r.reason).toMatch(reason);
    expect(r.fields.every((f) => f.status === "unknown")).toBe(true);
  });

  it("parses a body handed over as JSON text", () => {
    expect(compareBaseline(e, ok(JSON.stringify(taskBody(exampleTask())))).verdict).toBe("MATCH");
  });

  it("ERROR when the read failed", () => {
    const r = compareBaseline(e, {
      status: "failed",
      error: { kind: "transport_timeout", description: "no answer in 10000 ms" },
    });
    expect(r.verdict).toBe("ERROR");
    expect(r.reason).toMatch(/transport_timeout.*no answer/);
  });

  it("property: MATCH iff every compared field equals its baseline after normalisation", () => {
    const e2 = envelope({
      TITLE: "x",
      PRIORITY: "2",
      RESPONSIBLE_ID: 7,
      AUDITORS: ["1"],
      DEADLINE: "2026-12-31T10:00:00+03:00",
    });
    const titleGen = fc.constantFrom(
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST ",
      "lab-agent-exec-002 - bound action test",
      "other",
    );
    const prioGen = fc.constantFrom<unknown>("1", 1, "2", 2, "01", null);
    const respGen = fc.constantFrom<unknown>("5", 5, "6", "05");
    const auditGen = fc.constantFrom<unknown>(["2", "6"], [6, 2], ["2"], ["2", "6", "7"], []);
    const deadlineGen = fc.constantFrom<unknown>(
      "2026-12-15T18:00:00+03:00",
      "2026-12-15T15:00:00Z",
      "2026-12-15T18:00:00+00:00",
      "2026-12-15T18:00:00",
    );
    const markerGen = fc.constantFrom<unknown>(
      "2026-11-25T14:30:05+03:00",
      "2026-11-25T11:30:05+00:00",
      "2026-11-25T14:30:06+03:00",
    );
    fc.assert(
      fc.property(
        titleGen,
        prioGen,
        respGen,
        auditGen,
        deadlineGen,
        markerGen,
        (title, priority, responsibleId, auditors, deadline, changedDate) => {
          const r = compareBaseline(
            e2,
            read({ title, priority, responsibleId, auditors, deadline, changedDate }),
          );
          // Independent oracle, written from NORMALISATION.md rather than from the code.
          const expectEqual =
            title === "LAB-AGENT-EXEC-002 - BOUND ACTION TEST" &&
            (priority === "1" || priority === 1) &&
            (responsibleId === "5" || responsibleId === 5) &&
            JSON.stringify([...(auditors as unknown[])].map(String).sort()) === '["2","6"]' &&
            (deadline === "2026-12-15T18:00:00+03:00" || deadline === "2026-12-15T15:00:00Z") &&
            changedDate !== "2026-11-25T14:30:06+03:00";
          expect(r.verdict).toBe(expectEqual ? "MATCH" : "MISMATCH");
        },
      ),
      { numRuns: 400 },
    );
  });

  it("property: removing any compared key makes UNKNOWN or MISMATCH, never MATCH", () => {
    fc.assert(
      fc.property(fc.constantFrom("title", "priority", "changedDate"), fc.boolean(), (key, alsoChange) => {
        const task = exampleTask(alsoChange ? { title: "changed" } : {});
        delete task[key];
        const v = compareBaseline(e, ok(taskBody(task))).verdict;
        expect(v).not.toBe("MATCH");
        if (!alsoChange || key === "title") expect(v).toBe("UNKNOWN");
      }),
    );
  });
});
