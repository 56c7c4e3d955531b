import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  checkPlan,
  checkProposal,
  defaultPolicy,
  parsePolicy,
  PolicyError,
  type Policy,
  type Proposal,
} from "../src/envelope/index.js";
import defaultJson from "../policy/default.json" with { type: "json" };

const update = (fields: Record<string, unknown>, taskId = 4): Proposal => ({
  operation: "update_task",
  taskId,
  fields,
});

function refusal(policy: Policy, scope: Parameters<typeof checkProposal>[1], p: Proposal) {
  const r = checkProposal(policy, scope, p);
  if (r.allowed) throw new Error(`expected a refusal, got ${JSON.stringify(r)}`);
  return r;
}

describe("policy file", () => {
  it("the shipped default parses and says what the design says", () => {
    const p = defaultPolicy();
    expect(p.id).toBe("default");
    expect(p.version).toMatch(/^\d{4}-\d{2}-\d{2}\.\d+$/);
    const op = p.operations["update_task"]!;
    expect(op).toMatchObject({
      allowed: true,
      requiresApproval: true,
      ttlSeconds: 3600,
      reversibility: "reversible",
      level: "medium",
    });
    expect(Object.keys(op.fields)).toEqual(
      expect.arrayContaining([
        "TITLE",
        "DESCRIPTION",
        "DEADLINE",
        "PRIORITY",
        "STATUS",
        "RESPONSIBLE_ID",
        "GROUP_ID",
        "AUDITORS",
        "ACCOMPLICES",
      ]),
    );
    expect(p.operations["delete_task"]!.allowed).toBe(false);
    // A new task needs an approval like any change; it is never deleted by the agent.
    expect(p.operations["add_task"]).toMatchObject({ allowed: true, requiresApproval: true });
    expect(p.approvers.allowUnauthenticated).toBe(true);
    expect(p.approvers.defaultRequester).toBe("demo-user");
    expect(p.approvers.groups["task-approvers"]).toContain("demo-approver");
    expect(p.approvers.groups["task-approvers"]).not.toContain("demo-user");
    expect(p.separationOfDuties).toEqual({ requesterMayNotApproveAtOrAbove: "medium" });
    expect(p.overrides["separation_of_duties"]!.role).toBe("override-officer");
    expect(p.requireSignature).toBe(false);
    expect(p.escalationGroup).toBe("task-leads");
  });

  it("defaultPolicy returns an independent copy each time", () => {
    const a = defaultPolicy();
    a.operations["update_task"]!.allowed = false;
    expect(defaultPolicy().operations["update_task"]!.allowed).toBe(true);
  });

  it("fills defaults for optional sections", () => {
    const minimal = {
      id: "m",
      version: "1",
      operations: {
        update_task: {
          allowed: true,
          reversibility: "reversible",
          level: "low",
          requiresApproval: true,
          ttlSeconds: 60,
        },
      },
      watchedFields: [],
      automaticFields: ["CHANGED_DATE"],
      approvers: { allowUnauthenticated: false },
    };
    const p = parsePolicy(minimal);
    expect(p.requireSignature).toBe(false);
    expect(p.separationOfDuties).toBeNull();
    expect(p.overrides).toEqual({});
    expect(p.operations["update_task"]!.fields).toEqual({});
  });

  const broken: Array<[string, (j: any) => void, RegExp]> = [
    [
      "an unknown field",
      (j) => (j.operations.update_task.fields.UF_WHATEVER = { allowed: true }),
      /UF_WHATEVER is not a known field of update_task/,
    ],
    [
      "a read-only field allowed",
      (j) => (j.operations.update_task.fields.CHANGED_DATE = { allowed: true }),
      /CHANGED_DATE is read-only/,
    ],
    [
      "an override of a non-overridable gate",
      (j) => (j.overrides.expiry = { role: "override-officer" }),
      /gate expiry can never be overridden/,
    ],
    [
      "an override of an unknown gate",
      (j) => (j.overrides.speed = { role: "override-officer" }),
      /unknown gate speed/,
    ],
    [
      "an override role that is not defined",
      (j) => (j.overrides.separation_of_duties.role = "nobody"),
      /role nobody is not defined/,
    ],
    [
      "an approver group that is not defined",
      (j) => j.approvers.approverGroups.push("ghosts"),
      /group ghosts is not defined/,
    ],
    [
      "an unknown level",
      (j) => (j.operations.update_task.level = "extreme"),
      /operations\.update_task\.level/,
    ],
    ["an unknown reversibility", (j) => (j.operations.update_task.reversibility = "maybe"), /reversibility/],
    ["a TTL of zero", (j) => (j.operations.update_task.ttlSeconds = 0), /ttlSeconds/],
    ["an unknown key (typo)", (j) => (j.requireSignatures = true), /requireSignatures/],
    [
      "allowedValues outside the enum",
      (j) => (j.operations.update_task.fields.STATUS.allowedValues = ["9"]),
      /not values of STATUS: 9/,
    ],
    ["a lower-case field", (j) => (j.operations.update_task.fields.title = { allowed: true }), /UPPER_SNAKE/],
    [
      "a watched field that is also automatic",
      (j) => j.automaticFields.push("TITLE"),
      /TITLE is both watched and automatic/,
    ],
    [
      "an escalation group that is not defined",
      (j) => (j.escalationGroup = "nobody"),
      /group nobody is not defined/,
    ],
    [
      "a deal operation without its own watched fields",
      (j) => delete j.operations.update_deal.watchedFields,
      /update_deal acts on a deal, so it needs its own watchedFields/,
    ],
    [
      "a deal operation without its own automatic fields",
      (j) => delete j.operations.update_deal.automaticFields,
      /update_deal acts on a deal, so it needs its own automaticFields/,
    ],
  ];
  it("a deal operation the policy denies needs no field lists of its own", () => {
    const j = structuredClone(defaultJson) as any;
    j.operations.update_deal.allowed = false;
    delete j.operations.update_deal.watchedFields;
    delete j.operations.update_deal.automaticFields;
    expect(parsePolicy(j).operations["update_deal"]!.allowed).toBe(false);
  });

  it.each(broken)("refuses %s, naming where", (_, mutate, message) => {
    const j = structuredClone(defaultJson) as any;
    mutate(j);
    expect(() => parsePolicy(j)).toThrow(PolicyError);
    expect(() => parsePolicy(j)).toThrow(message);
  });
});

describe("checkProposal", () => {
  const policy = defaultPolicy();

  it("allows an in-scope update and derives risk, approval and TTL from the policy", () => {
    expect(checkProposal(policy, { taskIds: [4], fields: ["TITLE"] }, update({ TITLE: "Renamed" }))).toEqual({
      allowed: true,
      risk: { reversibility: "reversible", level: "medium" },
      requiresApproval: true,
      ttlSeconds: 3600,
    });
  });

  it("takes the highest level and reversibility and the shortest TTL over the fields", () => {
    expect(checkProposal(policy, {}, update({ PRIORITY: "2", RESPONSIBLE_ID: 3 }))).toEqual({
      allowed: true,
      risk: { reversibility: "reversible_external", level: "high" },
      requiresApproval: true,
      ttlSeconds: 1800,
    });
  });

  it("refuses another task as OUT_OF_SCOPE, naming it", () => {
    const r = refusal(policy, { taskIds: [4] }, update({ TITLE: "x" }, 7));
    expect(r.code).toBe("OUT_OF_SCOPE");
    expect(r.reasons.join()).toMatch(/task 7 is outside the request's scope \(tasks 4\)/);
  });

  it("refuses another field as OUT_OF_SCOPE, naming it", () => {
    const r = refusal(
      policy,
      { taskIds: [4], fields: ["DEADLINE"] },
      update({ DEADLINE: "2026-12-20T18:00:00+03:00", RESPONSIBLE_ID: 1 }),
    );
    expect(r.code).toBe("OUT_OF_SCOPE");
    expect(r.reasons.join()).toMatch(/field RESPONSIBLE_ID outside the request's scope \(DEADLINE\)/);
  });

  it("refuses another operation: OUT_OF_SCOPE when the scope names operations, DENIED_OPERATION by policy", () => {
    const scoped = refusal(
      policy,
      { taskIds: [4], operations: ["update_task"] },
      { operation: "delete_task", taskId: 4, fields: { ID: 4 } },
    );
    expect(scoped.code).toBe("OUT_OF_SCOPE");
    expect(scoped.reasons.join()).toMatch(/operation delete_task is outside/);
    expect(scoped.reasons.join()).toMatch(/delete_task is denied by policy default@.*cannot be undone/);
    const r = refusal(
      policy,
      { taskIds: [4] },
      { operation: "delete_task", taskId: 4, fields: { TITLE: "x" } },
    );
    expect(r.code).toBe("DENIED_OPERATION");
    expect(
      refusal(policy, {}, { operation: "archive_task", taskId: 4, fields: { TITLE: "x" } }).reasons.join(),
    ).toMatch(/archive_task is not in policy/);
  });

  it("an empty scope list allows nothing; an absent one does not restrict", () => {
    expect(refusal(policy, { taskIds: [] }, update({ TITLE: "x" })).code).toBe("OUT_OF_SCOPE");
    expect(refusal(policy, { fields: [] }, update({ TITLE: "x" })).code).toBe("OUT_OF_SCOPE");
    expect(checkProposal(policy, {}, update({ TITLE: "x" })).allowed).toBe(true);
  });

  it("refuses denied and unknown fields as DENIED_FIELD with the reason", () => {
    expect(refusal(policy, {}, update({ CREATED_BY: 2 })).reasons.join()).toMatch(
      /CREATED_BY is denied by policy default@.*: the creator/,
    );
    expect(refusal(policy, {}, update({ UF_CRM_TASK: ["C_1"] })).reasons.join()).toMatch(
      /UF_CRM_TASK has no rule .* so it is denied/,
    );
    expect(refusal(policy, {}, update({ title: "x" })).reasons.join()).toMatch(
      /"title" is not an UPPER_SNAKE/,
    );
    expect(refusal(policy, {}, update({ TITLE: "ok", CREATED_BY: 2 })).code).toBe("DENIED_FIELD");
  });

  const badValues: Array<[Record<string, unknown>, RegExp]> = [
    [
      { STATUS: "8" },
      /STATUS must be one of "1" \(new\), "2" \(waiting\), "3" \(in progress\), "4" \(awaiting control\), "5" \(completed\), "6" \(deferred\), "7" \(declined\) \(a code, or its name in an edit\), got "8"/,
    ],
    [{ STATUS: "in progress" }, /STATUS must be one of/],
    [
      { PRIORITY: 3 },
      /PRIORITY must be one of "0" \(low\), "1" \(medium\), "2" \(high\) \(a code, or its name in an edit\), got 3/,
    ],
    [{ PRIORITY: "01" }, /PRIORITY must be one of/],
    [{ DEADLINE: "tomorrow" }, /DEADLINE must be an ISO 8601 date-time with offset/],
    [{ DEADLINE: "2026-12-20T18:00:00" }, /DEADLINE must be an ISO 8601 date-time with offset/],
    [{ DEADLINE: "2026-02-30T18:00:00+03:00" }, /DEADLINE must be/],
    [{ DEADLINE: "2026-12-20T18:00:00.500+03:00" }, /whole seconds/],
    [{ DEADLINE: 1766242800 }, /DEADLINE must be an ISO 8601 date-time string with offset, got number/],
    [{ TITLE: "" }, /TITLE must have at least 1 characters, got 0/],
    [{ TITLE: "x".repeat(256) }, /TITLE must have at most 255 characters, got 256/],
    [{ TITLE: 42 }, /TITLE must be a string, got number/],
    [{ TITLE: "bad \ud800 surrogate" }, /TITLE contains an unpaired UTF-16 surrogate/],
    // The portal stores a task's title trimmed: the approved value would never be what the task holds.
    [{ TITLE: "Quarterly report " }, /TITLE must not start or end with whitespace, got "Quarterly report "/],
    [{ TITLE: "\uFEFFtitle" }, /TITLE must not start or end with whitespace/],
    [{ TITLE: "\nreport" }, /TITLE must not start or end with whitespace/],
    [{ RESPONSIBLE_ID: "abc" }, /RESPONSIBLE_ID must be an id/],
    [{ RESPONSIBLE_ID: 0 }, /RESPONSIBLE_ID must be an id \(integer ≥ 1/],
    [{ RESPONSIBLE_ID: "05" }, /RESPONSIBLE_ID must be an id/],
    [{ RESPONSIBLE_ID: 1.5 }, /RESPONSIBLE_ID must be an id/],
    [{ AUDITORS: "2,6" }, /AUDITORS must be an array of ids, got string/],
    [{ AUDITORS: ["2", "2"] }, /AUDITORS lists id 2 twice/],
    [{ AUDITORS: ["2", "x"] }, /AUDITORS\[1\] must be an id/],
    [
      { ACCOMPLICES: Array.from({ length: 51 }, (_, i) => i + 1) },
      /ACCOMPLICES must list at most 50 ids, got 51/,
    ],
    [{ GROUP_ID: -1 }, /GROUP_ID must be an id \(integer ≥ 0/],
    [{}, /fields is empty/],
  ];
  it.each(badValues)("refuses %j as INVALID_VALUE with field and reason", (fields, reason) => {
    const r = refusal(policy, {}, update(fields));
    expect(r.code).toBe("INVALID_VALUE");
    expect(r.reasons.join("; ")).toMatch(reason);
  });

  it("accepts the value spellings Bitrix24 accepts", () => {
    for (const fields of [
      { STATUS: 3 },
      { STATUS: "5" },
      { PRIORITY: 0 },
      { PRIORITY: "2" },
      { GROUP_ID: 0 },
      { GROUP_ID: "3" },
      { DEADLINE: "2026-12-20T18:00:00Z" },
      { DEADLINE: "2026-12-20T18:00:00-05:30" },
      { AUDITORS: [] },
      { AUDITORS: [2, "6"] },
      { TITLE: "x".repeat(255) },
      { DESCRIPTION: "" },
    ]) {
      expect(checkProposal(policy, {}, update(fields)), JSON.stringify(fields)).toMatchObject({
        allowed: true,
      });
    }
  });

  it("a policy may narrow an enum with allowedValues", () => {
    const j = structuredClone(defaultJson) as any;
    j.operations.update_task.fields.STATUS.allowedValues = ["2", "3"];
    const narrow = parsePolicy(j);
    expect(refusal(narrow, {}, update({ STATUS: "5" })).reasons.join()).toMatch(
      /STATUS must be one of "2" \(waiting\), "3" \(in progress\) \(a code, or its name in an edit\), got "5"/,
    );
  });

  it("lists every problem but leads with the most fundamental", () => {
    const r = refusal(policy, { taskIds: [4] }, update({ STATUS: "9", CREATED_BY: 1 }, 5));
    expect(r.code).toBe("OUT_OF_SCOPE");
    expect(r.reasons).toHaveLength(3);
    expect(r.reasons[1]).toMatch(/CREATED_BY/);
    expect(r.reasons[2]).toMatch(/STATUS/);
  });

  it("property: a field outside the scope is always refused before approval, whatever its value", () => {
    const allowed = [
      "TITLE",
      "DESCRIPTION",
      "DEADLINE",
      "PRIORITY",
      "STATUS",
      "RESPONSIBLE_ID",
      "GROUP_ID",
      "AUDITORS",
      "ACCOMPLICES",
    ];
    fc.assert(
      fc.property(
        fc.subarray(allowed, { minLength: 1 }),
        fc.constantFrom(...allowed),
        fc.jsonValue({ maxDepth: 1 }),
        (scopeFields, field, value) => {
          fc.pre(!scopeFields.includes(field));
          const r = checkProposal(policy, { taskIds: [4], fields: scopeFields }, update({ [field]: value }));
          expect(r).toMatchObject({ allowed: false, code: "OUT_OF_SCOPE" });
        },
      ),
    );
  });
});

describe("chain rule", () => {
  const policy = defaultPolicy();

  it("a plan is as risky as its riskiest action and expires with the shortest TTL", () => {
    const r = checkPlan(policy, {}, [
      update({ TITLE: "a" }),
      update({ RESPONSIBLE_ID: 2 }, 5),
      update({ PRIORITY: "0" }, 6),
    ]);
    expect(r).toEqual({
      allowed: true,
      risk: { reversibility: "reversible_external", level: "high" },
      requiresApproval: true,
      ttlSeconds: 1800,
    });
  });

  it("one refused action refuses the plan, naming which", () => {
    const r = checkPlan(policy, {}, [
      update({ TITLE: "a" }),
      { operation: "delete_task", taskId: 4, fields: { TITLE: "x" } },
    ]);
    expect(r).toMatchObject({ allowed: false, code: "DENIED_OPERATION", index: 1 });
    expect(!r.allowed && r.reasons[0]).toMatch(/^action 2: /);
    expect(checkPlan(policy, {}, [])).toMatchObject({ allowed: false });
  });

  it("property: a plan's class is never lower than any of its actions'", () => {
    const fieldsGen = fc.constantFrom<Record<string, unknown>>(
      { TITLE: "a" },
      { RESPONSIBLE_ID: 3 },
      { PRIORITY: "0" },
      { AUDITORS: ["1"] },
      { STATUS: "3" },
    );
    fc.assert(
      fc.property(fc.array(fieldsGen, { minLength: 1, maxLength: 6 }), (list) => {
        const plan = checkPlan(
          policy,
          {},
          list.map((f) => update(f)),
        );
        if (!plan.allowed) throw new Error("plan refused");
        for (const f of list) {
          const one = checkProposal(policy, {}, update(f));
          if (!one.allowed) throw new Error("action refused");
          const order = ["low", "medium", "high", "critical"];
          const rev = ["read_only", "reversible", "reversible_external", "irreversible"];
          expect(order.indexOf(plan.risk.level)).toBeGreaterThanOrEqual(order.indexOf(one.risk.level));
          expect(rev.indexOf(plan.risk.reversibility)).toBeGreaterThanOrEqual(
            rev.indexOf(one.risk.reversibility),
          );
        }
      }),
    );
  });
});
