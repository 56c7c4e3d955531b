/**
 * Compensation (src/envelope/compensation.ts), pure: the restore is exactly the envelope's recorded
 * before-values of the fields it wrote, and "the task still shows what our write left" holds exactly
 * when nothing differs from the verification read (any key, not only the change marker).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createEnvelope, defaultPolicy } from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";
import { changedSinceWrite, compensationOf } from "../src/envelope/compensation.js";

const NOW = new Date("2026-11-30T10:00:00Z");
const before = exampleTask();

function envelopeFor(params: Record<string, unknown>) {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task: before,
    requestedBy: "demo-user",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: NOW,
  });
}

const title = fc
  .string({ minLength: 1, maxLength: 40 })
  .filter((s) => s.trim() === s && s !== before["title"]);

describe("compensationOf", () => {
  it("restores each written field to its recorded before-value, and keeps what was written", () => {
    fc.assert(
      fc.property(title, fc.constantFrom("0", "2"), (t, priority) => {
        const e = envelopeFor({ TITLE: t, PRIORITY: priority });
        const after = { ...before, title: t, priority };
        const plan = compensationOf(e, taskBody(after));
        expect(plan.ok).toBe(true);
        if (!plan.ok) return;
        expect(plan.fields).toEqual({ TITLE: before["title"], PRIORITY: before["priority"] });
        expect(plan.wrote).toEqual({ TITLE: t, PRIORITY: priority });
        expect(plan.afterWrite).toEqual(after);
      }),
    );
  });
});

describe("compensationOf refuses what cannot be restored", () => {
  it("an irreversible (or read-only) change, and a field whose before-value was kept only as a fingerprint", () => {
    const e = envelopeFor({ TITLE: "ours" });
    const after = taskBody({ ...before, title: "ours" });
    for (const reversibility of ["irreversible", "read_only"] as const) {
      const plan = compensationOf({ ...e, risk: { ...e.risk, reversibility } }, after);
      expect(plan).toMatchObject({ ok: false, code: "NOT_REVERSIBLE" });
    }
    const { TITLE: _kept, ...others } = e.baseline.values;
    const plan = compensationOf({ ...e, baseline: { ...e.baseline, values: others } }, after);
    expect(plan).toMatchObject({ ok: false, code: "NO_BEFORE_VALUE" });
    expect(compensationOf(e, after).ok).toBe(true);
  });
});

describe("changedSinceWrite", () => {
  it("empty exactly when the task equals the verification read; otherwise names every differing key", () => {
    const keys = Object.keys(before).filter((k) => typeof before[k] === "string" && k !== "title");
    fc.assert(
      fc.property(title, fc.subarray(keys), fc.string({ maxLength: 10 }), (t, moved, suffix) => {
        const e = envelopeFor({ TITLE: t });
        const after: Record<string, unknown> = { ...before, title: t };
        const plan = compensationOf(e, taskBody(after));
        if (!plan.ok) throw new Error(plan.reason);
        const now: Record<string, unknown> = { ...after };
        for (const k of moved) now[k] = `${String(after[k])}~${suffix}`;
        const changed = changedSinceWrite(plan, now);
        expect(changed.length).toBe(moved.length);
        expect(changedSinceWrite(plan, { ...after })).toEqual([]);
      }),
    );
  });

  it("a written field someone changed is named with what we wrote and what it is now", () => {
    const e = envelopeFor({ TITLE: "ours" });
    const plan = compensationOf(e, taskBody({ ...before, title: "ours" }));
    if (!plan.ok) throw new Error(plan.reason);
    expect(changedSinceWrite(plan, { ...before, title: "theirs" })).toEqual([
      { field: "TITLE", ours: "ours", now: "theirs", written: true },
    ]);
  });

  it("the object's change marker is flagged as such and named first, whatever order the keys come in", () => {
    const e = envelopeFor({ TITLE: "ours" });
    const after = { ...before, title: "ours" };
    const plan = compensationOf(e, taskBody(after));
    if (!plan.ok) throw new Error(plan.reason);
    const changed = changedSinceWrite(plan, {
      ...after,
      description: "edited",
      changedDate: "2026-11-30T12:00:00+03:00",
    });
    expect(changed.map((c) => [c.field, c.marker ?? false])).toEqual([
      ["CHANGED_DATE", true],
      ["DESCRIPTION", false],
    ]);
    expect(changed[0]!.ours).toBe(before["changedDate"]);
  });
});
