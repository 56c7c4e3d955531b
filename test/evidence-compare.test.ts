/**
 * The pure side of issue 17 A1–A3: the rule each comparison names, the moved-field list with before and
 * now, and identity. Property tests over the field kinds; unit tests on compareBaseline/verifyOutcome.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compareBaseline,
  compareValues,
  createEnvelope,
  defaultPolicy,
  fingerprint,
  NORMALISATION_RULES,
  noChangeReason,
  valuesEqual,
  verifyOutcome,
  type Envelope,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";

function envelope(params: Record<string, unknown> = { TITLE: "Renamed" }, task = exampleTask()): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task,
    requestedBy: "demo-user",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
}
const ok = (body: unknown): ReadResult => ({ status: "ok", body });
const read = (over: Record<string, unknown> = {}) => ok(taskBody(exampleTask(over)));
const ack = { status: "OK" as const, body: {} };
const ruleIds = NORMALISATION_RULES.map((r) => r.id);

describe("compareValues names the rule that decided", () => {
  const fields = ["TITLE", "DEADLINE", "STATUS", "RESPONSIBLE_ID", "AUDITORS", "TASK_CONTROL", "UF_CRM_TASK"];
  const value = fc.oneof(
    fc.constant(null),
    fc.integer({ min: 0, max: 20 }),
    fc.integer({ min: 0, max: 20 }).map(String),
    fc.string({ maxLength: 4 }),
    fc.constantFrom("2026-12-15T18:00:00+03:00", "2026-12-15T15:00:00Z", "2026-12-15T18:00:00"),
    fc.array(fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 5 }).map(String)), {
      maxLength: 3,
    }),
  );

  it("agrees with valuesEqual, names a rule from the table, and is `normalised` only for equal values that are not byte-identical", () => {
    fc.assert(
      fc.property(fc.constantFrom(...fields), value, value, (field, a, b) => {
        const c = compareValues(field, a, b);
        expect(c.equal).toBe(valuesEqual(field, a, b));
        expect(ruleIds).toContain(c.rule);
        if (c.normalised) expect(c.equal).toBe(true);
        if (c.equal && JSON.stringify(a) === JSON.stringify(b)) expect(c.normalised).toBe(false);
      }),
    );
  });

  it.each([
    ["DEADLINE", "2026-12-20T15:00:00Z", "2026-12-20T18:00:00+03:00", "datetime-instant-equal", true],
    ["STATUS", "2", 2, "numeric-string-equal", true],
    ["STATUS", "2", "2", "numeric-string-equal", false],
    ["AUDITORS", [6, 2], ["2", "6"], "id-set-equal", true],
    ["TITLE", "Title ", "Title", "string-exact", false],
    ["DEADLINE", null, "", "null-only-null", false],
    ["UF_CRM_TASK", { a: 1, b: 2 }, { b: 2, a: 1 }, "canonical-json-equal", false],
  ] as const)("%s %j vs %j → %s", (field, a, b, rule, normalised) => {
    const c = compareValues(field, a, b);
    expect(c.rule).toBe(rule);
    expect(c.normalised).toBe(normalised);
  });
});

describe("compareBaseline: every moved field with before and now", () => {
  const e = envelope();
  const invariants: Array<[string, string, unknown]> = [
    ["STATUS", "status", "5"],
    ["PRIORITY", "priority", "2"],
    ["RESPONSIBLE_ID", "responsibleId", "7"],
    ["DEADLINE", "deadline", "2027-01-01T10:00:00+03:00"],
    ["AUDITORS", "auditors", ["9"]],
    ["GROUP_ID", "groupId", "8"],
  ];

  it("names exactly the invariant fields that moved (and the change marker), each with the baseline and the value now; verdict MISMATCH", () => {
    fc.assert(
      fc.property(fc.subarray(invariants, { minLength: 1 }), fc.boolean(), (changed, markerMoved) => {
        const over: Record<string, unknown> = Object.fromEntries(changed.map(([, key, v]) => [key, v]));
        if (markerMoved) over["changedDate"] = "2026-11-30T12:00:00+03:00";
        const r = compareBaseline(e, read(over));
        expect(r.verdict).toBe("MISMATCH");
        const expected = changed
          .map(([f]) => f)
          .concat(markerMoved ? ["CHANGED_DATE"] : [])
          .sort();
        expect(r.moved.map((m) => m.field).sort()).toEqual(expected);
        for (const [field, , now] of changed) {
          const m = r.moved.find((x) => x.field === field)!;
          expect(m).toMatchObject({ role: "invariant", before: e.baseline.values[field], now });
          expect(r.reason).toContain(
            `${field} was ${JSON.stringify(e.baseline.values[field])}, now ${JSON.stringify(now)}`,
          );
          expect(ruleIds).toContain(m.rule!.id);
        }
      }),
      { numRuns: 50 },
    );
  });

  it("a field kept only as a fingerprint is named with its fingerprint as before", () => {
    const r = compareBaseline(e, read({ changedDate: "2026-11-30T12:00:00+03:00", mark: "P" }));
    expect(r.verdict).toBe("MISMATCH");
    expect(r.moved.find((m) => m.field === "MARK")).toEqual({
      field: "MARK",
      taskKey: "mark",
      role: "other",
      beforeFingerprint: fingerprint(null),
      now: "P",
    });
    expect(r.reason).toMatch(/MARK was \(fingerprint [0-9a-f]{16}; value not kept\), now "P"/);
  });

  it("records each field's rule, and `normalised` when it matched only under the rule", () => {
    const r = compareBaseline(e, read({ changedDate: "2026-11-25T11:30:05Z", status: 2 }));
    expect(r.verdict).toBe("MATCH");
    expect(r.fields.find((f) => f.field === "CHANGED_DATE")).toMatchObject({
      status: "match",
      rule: { id: "datetime-instant-equal" },
      normalised: true,
    });
    expect(r.fields.find((f) => f.field === "STATUS")).toMatchObject({
      role: "invariant",
      status: "match",
      rule: { id: "numeric-string-equal" },
      normalised: true,
    });
    expect(r.fields.find((f) => f.field === "TITLE")).toMatchObject({ rule: { id: "string-exact" } });
    expect(r.fields.find((f) => f.field === "TITLE")!.normalised).toBeUndefined();
  });

  it("an invariant the answer leaves out does not decide the verdict; a compared one does", () => {
    const noStatus = exampleTask();
    delete noStatus["status"];
    const r = compareBaseline(e, ok(taskBody(noStatus)));
    expect(r.verdict).toBe("MATCH");
    expect(r.fields.find((f) => f.field === "STATUS")).toMatchObject({ status: "unknown" });
    const noTitle = exampleTask();
    delete noTitle["title"];
    expect(compareBaseline(e, ok(taskBody(noTitle))).verdict).toBe("UNKNOWN");
  });
});

describe("verifyOutcome: moved fields and identity", () => {
  const e = envelope();

  it("lists the written field (before → now) and every automatic or unexpected change, fingerprinted ones with their fingerprint", () => {
    const r = verifyOutcome(
      e,
      ack,
      read({ title: "Renamed", changedDate: "2026-11-30T12:00:00+03:00", mark: "P" }),
    );
    expect(r.verdict).toBe("INVARIANT_VIOLATION");
    expect(r.identity.status).toBe("MATCH");
    expect(r.moved.find((m) => m.field === "TITLE")).toMatchObject({
      role: "requested",
      before: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      now: "Renamed",
      rule: { id: "string-exact" },
    });
    expect(r.moved.find((m) => m.field === "CHANGED_DATE")).toMatchObject({
      role: "automatic",
      before: "2026-11-25T14:30:05+03:00",
    });
    expect(r.moved.find((m) => m.field === "MARK")).toMatchObject({
      role: "other",
      beforeFingerprint: fingerprint(null),
      now: "P",
    });
    expect(r.fields.find((f) => f.field === "MARK")).toMatchObject({
      status: "unexpected",
      baselineFingerprint: fingerprint(null),
    });
  });

  it("an answer about another task is INCONCLUSIVE with the identity recorded as MISMATCH", () => {
    const r = verifyOutcome(e, ack, read({ id: "7", title: "Renamed" }));
    expect(r.verdict).toBe("INCONCLUSIVE");
    expect(r.identity).toEqual({ expected: 4, answered: "7", status: "MISMATCH" });
    expect(r.reason).toMatch(/^identity mismatch: the answer is about task string "7", not task 4/);
  });

  it("a failed read has no identity (UNKNOWN), never MISMATCH", () => {
    const r = verifyOutcome(e, ack, {
      status: "failed",
      error: { kind: "transport_timeout", description: "no answer" },
    });
    expect(r.identity.status).toBe("UNKNOWN");
    expect(compareBaseline(e, read({ id: [] })).identity.status).toBe("UNKNOWN");
  });
});

describe("noChangeReason (NO_CHANGE before approval)", () => {
  it("a proposal whose every requested value equals the current one changes nothing, under the same rules as verification", () => {
    const task = exampleTask();
    expect(noChangeReason({ PRIORITY: 1 }, task)).toBe(
      'the proposal changes nothing: PRIORITY is already "1" (requested 1, equal under numeric-string-equal)',
    );
    expect(noChangeReason({ DEADLINE: "2026-12-15T15:00:00Z", STATUS: "2" }, task)).toMatch(
      /DEADLINE is already .*datetime-instant-equal.*; STATUS is already "2"$/,
    );
    expect(noChangeReason({ TITLE: `${String(task["title"])} ` }, task)).toBeUndefined();
    expect(noChangeReason({ PRIORITY: "1", TITLE: "New" }, task)).toBeUndefined();
    expect(noChangeReason({ UF_CRM_TASK: ["x"] }, task)).toBeUndefined();
  });

  it("agrees with verifyOutcome: a no-op proposal would read back as applied with nothing moved", () => {
    fc.assert(
      fc.property(fc.constantFrom("1", 1, "2", 0), fc.constantFrom("2", 2, "5"), (priority, status) => {
        const task = exampleTask();
        const params = { PRIORITY: priority, STATUS: status };
        const noop = noChangeReason(params, task) !== undefined;
        const e = envelope(params, task);
        const r = verifyOutcome(e, ack, read());
        expect(noop).toBe(r.verdict === "VERIFIED" && r.moved.length === 0);
      }),
    );
  });
});
