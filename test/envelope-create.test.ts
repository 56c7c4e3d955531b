import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  CHANGE_MARKER_FIELD,
  createEnvelope,
  defaultPolicy,
  EnvelopeError,
  fieldToTaskKey,
  hashEnvelope,
  madeWhen,
  parseEnvelope,
  taskKeyToField,
  type CreateEnvelopeInput,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";

const NOW = new Date("2026-11-30T10:00:00Z");

function input(over: Partial<CreateEnvelopeInput> = {}): CreateEnvelopeInput {
  return {
    portal: "127.0.0.1:43210",
    taskId: 4,
    params: { TITLE: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST (renamed)" },
    task: exampleTask(),
    requestedBy: "demo-user",
    runContext: { threadId: "thread-1", runId: "run-1" },
    policy: defaultPolicy(),
    now: NOW,
    ...over,
  };
}

function thrown(fn: () => unknown): EnvelopeError {
  try {
    fn();
  } catch (e) {
    if (e instanceof EnvelopeError) return e;
    throw e;
  }
  throw new Error("expected an EnvelopeError");
}

describe("field names", () => {
  it.each([
    ["RESPONSIBLE_ID", "responsibleId"],
    ["TITLE", "title"],
    ["CHANGED_DATE", "changedDate"],
    ["UF_CRM_TASK", "ufCrmTask"],
    ["AUDITORS_DATA", "auditorsData"],
    ["ID", "id"],
  ])("%s <-> %s", (field, key) => {
    expect(fieldToTaskKey(field)).toBe(key);
    expect(taskKeyToField(key)).toBe(field);
  });
});

describe("createEnvelope", () => {
  it("records what is approved and derives the rest from the task read and the policy", () => {
    const e = createEnvelope(input({ params: { TITLE: "New", DEADLINE: "2026-12-20T18:00:00+03:00" } }));
    expect(e).toMatchObject({
      schema: "action-envelope/1",
      revision: 1,
      targetSystem: "bitrix24",
      portal: "127.0.0.1:43210",
      object: { type: "task", id: 4 },
      operation: "update_task",
      params: { TITLE: "New", DEADLINE: "2026-12-20T18:00:00+03:00" },
      requestedBy: "demo-user",
      runContext: { threadId: "thread-1", runId: "run-1" },
      risk: { reversibility: "reversible", level: "medium" },
      policy: { id: "default", version: defaultPolicy().version },
      createdAt: "2026-11-30T10:00:00.000Z",
      expiresAt: "2026-11-30T11:00:00.000Z",
    });
    expect(e.comparedFields).toEqual(["TITLE", "DEADLINE", CHANGE_MARKER_FIELD]);
    expect(e.invariantFields).toEqual([
      "DESCRIPTION",
      "PRIORITY",
      "STATUS",
      "RESPONSIBLE_ID",
      "CREATED_BY",
      "GROUP_ID",
      "AUDITORS",
      "ACCOMPLICES",
      "PARENT_ID",
    ]);
    expect(e.automaticFields).toContain("CHANGED_DATE");
    expect(e.automaticFields).toContain("CHANGED_BY");
    expect(e.baseline.values).toMatchObject({
      TITLE: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      DEADLINE: "2026-12-15T18:00:00+03:00",
      CHANGED_DATE: "2026-11-25T14:30:05+03:00",
      RESPONSIBLE_ID: "5",
      AUDITORS: ["2", "6"],
      PARENT_ID: null,
    });
    expect(e.nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(e.envelopeId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("fingerprints every other task key and keeps none of the kept ones twice", () => {
    const e = createEnvelope(input());
    const keys = Object.keys(e.baseline.fingerprints);
    expect(keys).toEqual(
      expect.arrayContaining(["responsible", "outlookVersion", "timeEstimate", "action", "changedBy"]),
    );
    for (const kept of ["id", "title", "changedDate", "responsibleId", "auditors"])
      expect(keys).not.toContain(kept);
  });

  it("adds consequential fields of the written fields to the automatic ones (RESPONSIBLE_ID -> RESPONSIBLE)", () => {
    const e = createEnvelope(input({ params: { RESPONSIBLE_ID: 3 }, requesterVerifiedBy: "authentication" }));
    expect(e.automaticFields).toContain("RESPONSIBLE");
    expect(e.risk).toEqual({ reversibility: "reversible_external", level: "high" });
    expect(e.expiresAt).toBe("2026-11-30T10:30:00.000Z");
    expect(createEnvelope(input()).automaticFields).not.toContain("RESPONSIBLE");
  });

  it("records how the requester was established (self-declared unless the caller says otherwise); the default policy refuses a self-declared requester a high-risk envelope", () => {
    expect(createEnvelope(input()).requesterVerifiedBy).toBe("self_declared");
    expect(createEnvelope(input({ requesterVerifiedBy: "inbox_session" })).requesterVerifiedBy).toBe(
      "inbox_session",
    );
    const err = thrown(() => createEnvelope(input({ params: { RESPONSIBLE_ID: 3 } })));
    expect(err.code).toBe("PROPOSAL_DENIED");
    expect(err.message).toMatch(
      /REQUESTER_NOT_VERIFIED: the requester demo-user is self-declared .* at or above high risk; this change is high/,
    );
    for (const v of ["authentication", "inbox_session", "signature"] as const) {
      expect(
        createEnvelope(input({ params: { RESPONSIBLE_ID: 3 }, requesterVerifiedBy: v })).risk.level,
      ).toBe("high");
    }
    // Turned off in the policy, a self-declared requester may ask for it.
    expect(
      createEnvelope(
        input({
          params: { RESPONSIBLE_ID: 3 },
          policy: { ...defaultPolicy(), requireVerifiedRequesterAtOrAbove: null },
        }),
      ).risk.level,
    ).toBe("high");
  });

  it("makes a fresh 128-bit nonce and id each time unless given", () => {
    const a = createEnvelope(input()),
      b = createEnvelope(input());
    expect(a.nonce).not.toBe(b.nonce);
    expect(a.envelopeId).not.toBe(b.envelopeId);
    expect(hashEnvelope(a)).not.toBe(hashEnvelope(b));
    const fixed = { nonce: "0123456789abcdef0123456789abcdef", envelopeId: "env-1" };
    expect(hashEnvelope(createEnvelope(input(fixed)))).toBe(hashEnvelope(createEnvelope(input(fixed))));
  });

  it("throws MISSING_FIELD naming the field when the task read lacks a needed key", () => {
    const task = exampleTask();
    delete task["changedDate"];
    delete task["auditors"];
    const err = thrown(() => createEnvelope(input({ task })));
    expect(err.code).toBe("MISSING_FIELD");
    expect(err.message).toMatch(/CHANGED_DATE \(task key "changedDate"\)/);
    expect(err.message).toMatch(/AUDITORS/);
  });

  it("throws WRONG_TASK when the task read is another task", () => {
    const err = thrown(() => createEnvelope(input({ task: exampleTask({ id: "7" }) })));
    expect(err.code).toBe("WRONG_TASK");
    expect(err.message).toMatch(/task 4.*string "7"/);
  });

  it("refuses to build an envelope for a proposal the policy denies", () => {
    expect(thrown(() => createEnvelope(input({ params: { CREATED_BY: 2 } }))).code).toBe("PROPOSAL_DENIED");
    expect(thrown(() => createEnvelope(input({ params: { STATUS: "9" } }))).message).toMatch(
      /INVALID_VALUE: STATUS must be one of/,
    );
    expect(thrown(() => createEnvelope(input({ params: {} }))).code).toBe("PROPOSAL_DENIED");
  });

  it("refuses a portal that is a URL (it would carry the webhook's secret code)", () => {
    const err = thrown(() => createEnvelope(input({ portal: "https://b24.example.test/rest/1/s3cr3t/" })));
    expect(err.code).toBe("INVALID_ENVELOPE");
    expect(err.message).toMatch(/portal/);
    expect(createEnvelope(input({ portal: "b24-abc.bitrix24.ru" })).portal).toBe("b24-abc.bitrix24.ru");
  });

  it("ties revisions together: revision 2 needs the previous hash, revision 1 has none", () => {
    const first = createEnvelope(input());
    const prev = hashEnvelope(first);
    const second = createEnvelope(
      input({ revision: 2, previousEnvelopeHash: prev, envelopeId: first.envelopeId }),
    );
    expect(second.previousEnvelopeHash).toBe(prev);
    expect(thrown(() => createEnvelope(input({ revision: 2 }))).message).toMatch(
      /previousEnvelopeHash is required/,
    );
    expect(thrown(() => createEnvelope(input({ previousEnvelopeHash: prev }))).message).toMatch(
      /previousEnvelopeHash/,
    );
  });

  it("parseEnvelope refuses an envelope whose parts disagree", () => {
    const e = createEnvelope(input());
    expect(() => parseEnvelope({ ...e, comparedFields: ["TITLE"] })).toThrow(
      /comparedFields must be the params fields plus CHANGED_DATE/,
    );
    expect(() => parseEnvelope({ ...e, invariantFields: [...e.invariantFields, "TITLE"] })).toThrow(
      /TITLE is written/,
    );
    expect(() => parseEnvelope({ ...e, expiresAt: e.createdAt })).toThrow(
      /expiresAt must be after createdAt/,
    );
    expect(() => parseEnvelope({ ...e, nonce: "short" })).toThrow(/128 bits/);
    expect(() => parseEnvelope({ ...e, params: { title: "x" } })).toThrow(EnvelopeError);
    expect(() => parseEnvelope({ ...e, baseline: { ...e.baseline, values: {} } })).toThrow(
      /baseline has no value for TITLE/,
    );
    expect(() => parseEnvelope({ ...e, extra: 1 })).toThrow(/extra/);
    expect(parseEnvelope(JSON.parse(JSON.stringify(e)))).toEqual(e);
  });
});

describe("madeWhen: an object the portal stamped to the second, against an envelope stamped to the millisecond", () => {
  it("is before, in the same second (which came first cannot be told) or after, in any offset spelling", () => {
    const createdAt = "2026-12-03T13:16:43.900Z";
    expect(madeWhen("2026-12-03T16:16:42+03:00", createdAt)).toBe("before");
    // Posted at 43.881 or at 43.950: the portal writes both as :43.
    expect(madeWhen("2026-12-03T16:16:43+03:00", createdAt)).toBe("same_second");
    expect(madeWhen("2026-12-03T13:16:44Z", createdAt)).toBe("after");
    expect(madeWhen("not a time", createdAt)).toBeUndefined();
    expect(madeWhen(undefined, createdAt)).toBeUndefined();
    expect(madeWhen(1796300000, createdAt)).toBeUndefined();
  });

  it("property: the portal's stamp of an instant is before, same_second or after exactly as the instant's second is", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }),
        fc.integer({ min: -5_000, max: 5_000 }),
        (created, offset) => {
          const createdAt = new Date(created).toISOString();
          const posted = created + offset;
          const stamp = new Date(Math.floor(posted / 1000) * 1000)
            .toISOString()
            .replace(/\.\d{3}Z$/, "+00:00");
          const [a, b] = [Math.floor(posted / 1000), Math.floor(created / 1000)];
          expect(madeWhen(stamp, createdAt)).toBe(a < b ? "before" : a === b ? "same_second" : "after");
        },
      ),
    );
  });
});
