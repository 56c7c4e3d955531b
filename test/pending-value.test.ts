/**
 * The pending resume value's channel (src/hitl/pending-value.ts): a node's clear names the value it
 * took and clears that value only, so a clear LangGraph replays from an earlier task of the same step
 * does not erase a decision written after it. Pure, property-tested.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { afterPendingWrite, settledPending } from "../src/hitl/pending-value.js";

/** What a node writes when it has taken `seen`. */
const taken = (seen: unknown): unknown => settledPending({ pendingDecision: null }, seen).pendingDecision;

describe("the pending resume value", () => {
  it("a clear of the value that is pending clears it", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(afterPendingWrite(v, taken(v))).toBeNull();
      }),
    );
  });

  it("a clear of another value keeps what is pending: a replayed clear does not erase a newer decision", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (seen, current) => {
        fc.pre(JSON.stringify(seen) !== JSON.stringify(current));
        expect(afterPendingWrite(current, taken(seen))).toBe(current);
      }),
    );
  });

  it("any other write is the new value, null included", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (current, next) => {
        fc.pre(!(typeof next === "object" && next !== null && "takenPending" in next));
        expect(afterPendingWrite(current, next)).toBe(next);
      }),
    );
    expect(afterPendingWrite({ decisions: [] }, null)).toBeNull();
  });

  it("a resume, the replayed clear of an earlier task, then the judging node's own clear", () => {
    const approval = { decisions: [{ type: "approve", envelopeHash: "sha256:ab", nonce: "n" }] };
    let value: unknown = null;
    const write = (next: unknown) => (value = afterPendingWrite(value, next));
    write(approval);
    write(taken(null));
    expect(value).toBe(approval);
    write(taken(approval));
    expect(value).toBeNull();
  });

  it("only an update that clears the value is changed", () => {
    const update: { needsResync: boolean; pendingDecision?: unknown } = { needsResync: true };
    expect(settledPending(update, "x")).toBe(update);
    const chat = { pendingDecision: "approve" };
    expect(settledPending(chat, "x")).toBe(chat);
    expect(settledPending({ needsResync: true, pendingDecision: null }, "x")).toEqual({
      needsResync: true,
      pendingDecision: taken("x"),
    });
  });
});
