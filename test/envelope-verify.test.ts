import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createEnvelope,
  defaultPolicy,
  verifyOutcome,
  type Acknowledgement,
  type Envelope,
  type ReadResult,
} from "../src/envelope/index.js";
import { exampleTask, taskBody } from "./support/examples.js";

function envelope(params: Record<string, unknown> = { TITLE: "Renamed", PRIORITY: "2" }): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task: exampleTask(),
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "t" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
}
const e = envelope();
const WRITTEN = {
  title: "Renamed",
  priority: "2",
  changedDate: "2026-11-30T13:00:02+03:00",
  changedBy: "1",
  outlookVersion: "2",
  activityDate: "2026-11-30T13:00:02+03:00",
};
const read = (over: Record<string, unknown> = {}): ReadResult => ({
  status: "ok",
  body: taskBody(exampleTask(over)),
});
const ackOk: Acknowledgement = { status: "OK", body: taskBody(exampleTask(WRITTEN)) };
const ackTimeout: Acknowledgement = {
  status: "ERROR",
  error: { kind: "transport_timeout", description: "no answer within 10000 ms", outcomeUnknown: true },
};
const ackMissing: Acknowledgement = {
  status: "MISSING",
  reason: "the process stopped after sending the write",
};

describe("verifyOutcome", () => {
  it("VERIFIED: requested values present, invariants unchanged, bookkeeping changes classified automatic", () => {
    const r = verifyOutcome(e, ackOk, read(WRITTEN));
    expect(r.verdict).toBe("VERIFIED");
    expect(r.fields.filter((f) => f.role === "requested").map((f) => [f.field, f.status])).toEqual([
      ["TITLE", "applied"],
      ["PRIORITY", "applied"],
    ]);
    expect(r.fields.filter((f) => f.role === "invariant").every((f) => f.status === "unchanged")).toBe(true);
    expect(
      r.fields
        .filter((f) => f.status === "automatic")
        .map((f) => f.field)
        .sort(),
    ).toEqual(["ACTIVITY_DATE", "CHANGED_DATE", "OUTLOOK_VERSION"]);
  });

  it('VERIFIED with number spellings of the approved values (PRIORITY 2 vs "2")', () => {
    expect(verifyOutcome(envelope({ PRIORITY: 2 }), ackOk, read({ priority: "2" })).verdict).toBe("VERIFIED");
  });

  it("VERIFICATION_FAILED 'not applied' when the read still shows the baseline and the target answered", () => {
    const r = verifyOutcome(e, ackOk, read());
    expect(r.verdict).toBe("VERIFICATION_FAILED");
    expect(r.reason).toMatch(/the change was not applied/);
    expect(r.fields.find((f) => f.field === "TITLE")).toMatchObject({
      status: "not_applied",
      expected: "Renamed",
      actual: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    });
    const rejected = verifyOutcome(
      e,
      {
        status: "ERROR",
        error: { kind: "target_rejected", code: "0", description: "Action on the task is not allowed" },
      },
      read(),
    );
    expect(rejected.verdict).toBe("VERIFICATION_FAILED");
    expect(rejected.reason).toMatch(/target_rejected 0: Action on the task is not allowed/);
  });

  it("INCONCLUSIVE, not 'not applied', when the read still shows the baseline but the write's outcome is unknown: it may still land", () => {
    // A timeout (or a 5xx) to a write is neither success nor failure: the write may be carried out
    // after this read, so the read can only say "not yet".
    for (const ack of [ackTimeout, ackMissing]) {
      const r = verifyOutcome(e, ack, read(), undefined, "2026-11-30T10:00:05.000Z");
      expect(r.verdict).toBe("INCONCLUSIVE");
      expect(r.reason).toMatch(
        /^the change is not applied as of the read after the write at 2026-11-30T10:00:05.000Z: /,
      );
      expect(r.reason).toContain("may still land");
      expect(r.reason).not.toMatch(/the change was not applied/);
      expect(r.fields.find((f) => f.field === "TITLE")).toMatchObject({ status: "not_applied" });
    }
    // Only part showing, the rest at the baseline: the rest may still land as well.
    expect(verifyOutcome(e, ackMissing, read({ title: "Renamed" })).verdict).toBe("INCONCLUSIVE");
    // A third value is someone else's change whatever our write does: still a failure, with the doubt said.
    const third = verifyOutcome(e, ackMissing, read({ ...WRITTEN, title: "Renamed (by someone else)" }));
    expect(third.verdict).toBe("VERIFICATION_FAILED");
    expect(third.reason).toContain("may still land");
    // An error that says the outcome is known (outcomeUnknown false) stays a definite failure.
    const known = verifyOutcome(
      e,
      {
        status: "ERROR",
        error: {
          kind: "target_rejected",
          code: "OVERLOAD_LIMIT",
          description: "blocked",
          httpStatus: 503,
          outcomeUnknown: false,
        },
      },
      read(),
    );
    expect(known.verdict).toBe("VERIFICATION_FAILED");
    expect(known.reason).toMatch(/the change was not applied/);
  });

  it("VERIFICATION_FAILED when a requested field holds a third value, or only part was applied", () => {
    const third = verifyOutcome(e, ackOk, read({ ...WRITTEN, title: "Renamed (by someone else)" }));
    expect(third.verdict).toBe("VERIFICATION_FAILED");
    expect(third.fields.find((f) => f.field === "TITLE")!.status).toBe("wrong_value");
    const partial = verifyOutcome(e, ackOk, read({ ...WRITTEN, priority: "1" }));
    expect(partial.verdict).toBe("VERIFICATION_FAILED");
    expect(partial.reason).toMatch(/does not hold the approved values: PRIORITY \(not applied/);
  });

  it("INVARIANT_VIOLATION when a watched field changed as a side effect", () => {
    const r = verifyOutcome(e, ackOk, read({ ...WRITTEN, deadline: "2027-01-01T00:00:00+03:00" }));
    expect(r.verdict).toBe("INVARIANT_VIOLATION");
    expect(r.fields.find((f) => f.field === "DEADLINE")).toMatchObject({
      status: "violated",
      expected: "2026-12-15T18:00:00+03:00",
      actual: "2027-01-01T00:00:00+03:00",
    });
    expect(r.reason).toMatch(
      /DEADLINE \(now "2027-01-01T00:00:00\+03:00", was "2026-12-15T18:00:00\+03:00"\)/,
    );
  });

  it("INVARIANT_VIOLATION when an unwatched, non-automatic field changed (fingerprint)", () => {
    const r = verifyOutcome(e, ackOk, read({ ...WRITTEN, timeEstimate: "3600" }));
    expect(r.verdict).toBe("INVARIANT_VIOLATION");
    expect(r.fields.find((f) => f.taskKey === "timeEstimate")).toMatchObject({
      field: "TIME_ESTIMATE",
      status: "unexpected",
      actual: "3600",
    });
  });

  it("a fingerprinted field that had already moved at the pre-read, and is the same now, is not blamed on the write", () => {
    // The pre-read allowed it (it compares only compared and invariant fields); the write did not touch it.
    const preRead = taskBody(exampleTask({ timeEstimate: "3600" }));
    const r = verifyOutcome(e, ackOk, read({ ...WRITTEN, timeEstimate: "3600" }), preRead);
    expect(r.verdict).toBe("VERIFIED");
    expect(r.fields.find((f) => f.taskKey === "timeEstimate")).toMatchObject({
      status: "changed_before_write",
      actual: "3600",
    });
    expect(r.reason).toContain(
      "changed before the write (seen at the pre-read, not by this write): TIME_ESTIMATE",
    );
    // Moved again after the pre-read: that is a change during or after the write, a violation.
    expect(verifyOutcome(e, ackOk, read({ ...WRITTEN, timeEstimate: "7200" }), preRead).verdict).toBe(
      "INVARIANT_VIOLATION",
    );
    // Without the pre-read's answer (a record from before it was kept), the move cannot be placed: a violation.
    expect(verifyOutcome(e, ackOk, read({ ...WRITTEN, timeEstimate: "3600" })).verdict).toBe(
      "INVARIANT_VIOLATION",
    );
    expect(
      verifyOutcome(e, ackOk, read({ ...WRITTEN, timeEstimate: "3600" }), { error: "unreadable" }).verdict,
    ).toBe("INVARIANT_VIOLATION");
  });

  it("consequences of a written field are automatic (responsible after RESPONSIBLE_ID), not for other writes", () => {
    const newResponsible = {
      id: "3",
      name: "Maria Volkova",
      link: "/company/personal/user/3/",
      icon: "",
      workPosition: "Developer",
    };
    const reassign = envelope({ RESPONSIBLE_ID: 3 });
    const r = verifyOutcome(
      reassign,
      ackOk,
      read({ responsibleId: "3", responsible: newResponsible, changedDate: "2026-11-30T13:00:00+03:00" }),
    );
    expect(r.verdict).toBe("VERIFIED");
    expect(r.fields.find((f) => f.taskKey === "responsible")!.status).toBe("automatic");
    expect(verifyOutcome(e, ackOk, read({ ...WRITTEN, responsible: newResponsible })).verdict).toBe(
      "INVARIANT_VIOLATION",
    );
  });

  it("INCONCLUSIVE when the state matches but the acknowledgement is an error or missing", () => {
    for (const ack of [ackTimeout, ackMissing]) {
      const r = verifyOutcome(e, ack, read(WRITTEN));
      expect(r.verdict).toBe("INCONCLUSIVE");
      expect(r.reason).toMatch(/holds the approved values .* not proven/);
    }
  });

  it("an acknowledgement alone never verifies: failed or unusable reads are INCONCLUSIVE", () => {
    const failed = verifyOutcome(e, ackOk, {
      status: "failed",
      error: { kind: "rate_limited", code: "QUERY_LIMIT_EXCEEDED", description: "Too many requests" },
    });
    expect(failed.verdict).toBe("INCONCLUSIVE");
    expect(failed.reason).toMatch(/verification read failed \(rate_limited QUERY_LIMIT_EXCEEDED/);
    for (const body of [
      "not json",
      { result: [] },
      taskBody(exampleTask({ ...WRITTEN, id: "8" })),
      { result: { task: "x" } },
    ]) {
      expect(verifyOutcome(e, ackOk, { status: "ok", body }).verdict).toBe("INCONCLUSIVE");
    }
  });

  it("INCONCLUSIVE when a requested or invariant key is missing from an otherwise usable answer", () => {
    const task = exampleTask(WRITTEN);
    delete task["groupId"];
    const r = verifyOutcome(e, ackOk, { status: "ok", body: taskBody(task) });
    expect(r.verdict).toBe("INCONCLUSIVE");
    expect(r.fields.find((f) => f.field === "GROUP_ID")!.status).toBe("unknown");
  });

  it("property: VERIFIED only with ack OK, a usable read, every requested value applied and nothing else changed; not applied yet with the outcome unknown is INCONCLUSIVE", () => {
    const acks = fc.constantFrom<Acknowledgement>(ackOk, ackTimeout, ackMissing, {
      status: "OK",
      body: "garbage",
    });
    const titles = fc.constantFrom("Renamed", "Renamed ", "LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    const priorities = fc.constantFrom<unknown>("2", 2, "1");
    const deadlines = fc.constantFrom(
      "2026-12-15T18:00:00+03:00",
      "2026-12-15T15:00:00Z",
      "2026-12-16T18:00:00+03:00",
    );
    const estimates = fc.constantFrom("0", "60");
    const readFails = fc.boolean();
    fc.assert(
      fc.property(
        acks,
        titles,
        priorities,
        deadlines,
        estimates,
        readFails,
        (ack, title, priority, deadline, timeEstimate, fails) => {
          const r: ReadResult = fails
            ? { status: "failed", error: { kind: "transport_timeout", description: "t" } }
            : read({ ...WRITTEN, title, priority, deadline, timeEstimate });
          const v = verifyOutcome(e, ack, r).verdict;
          const applied = title === "Renamed" && (priority === "2" || priority === 2);
          const intact = deadline !== "2026-12-16T18:00:00+03:00" && timeEstimate === "0";
          // With the write's outcome unknown, a field still at its baseline may yet be written: only a third
          // value (a title with a trailing space: neither approved nor baseline) is a definite failure.
          const unknownOutcome = ack.status !== "OK";
          const onlyNotYet = title !== "Renamed ";
          const oracle = fails
            ? "INCONCLUSIVE"
            : !intact
              ? "INVARIANT_VIOLATION"
              : !applied
                ? unknownOutcome && onlyNotYet
                  ? "INCONCLUSIVE"
                  : "VERIFICATION_FAILED"
                : ack.status === "OK"
                  ? "VERIFIED"
                  : "INCONCLUSIVE";
          expect(v).toBe(oracle);
        },
      ),
      { numRuns: 300 },
    );
  });
});
