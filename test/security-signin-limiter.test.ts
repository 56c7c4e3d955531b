/**
 * The inbox's sign-in limiter on its own, with a controlled clock: failures keep being counted past the
 * limit (a wrong password past the address limit is still tried and refused), so the wait it reports
 * must run from the last `max` failures, not from the first ever, and its memory must stay bounded.
 */
import { describe, expect, it } from "vitest";
import { SignInLimiter } from "../src/inbox/security.js";

describe("SignInLimiter", () => {
  it("reports the wait until the limit is really lifted when failures go on past it", () => {
    let t = 0;
    const limiter = new SignInLimiter(5, 15 * 60_000, () => t);
    for (let i = 0; i < 5; i++) limiter.fail("addr");
    expect(limiter.retryAfter("addr")).toBe(15 * 60);
    t = 10 * 60_000;
    for (let i = 0; i < 5; i++) limiter.fail("addr");
    // Five failures at minute 10: locked until minute 25, not until minute 15.
    expect(limiter.retryAfter("addr")).toBe(15 * 60);
    t = 15 * 60_000 + 1000;
    expect(limiter.retryAfter("addr")).toBeGreaterThan(0);
    t = 25 * 60_000;
    expect(limiter.retryAfter("addr")).toBe(0);
  });

  it("a success clears only the key it names", () => {
    const limiter = new SignInLimiter(2, 60_000, () => 0);
    for (const key of ["alice", "addr", "alice", "addr"]) limiter.fail(key);
    limiter.succeed("alice");
    expect(limiter.retryAfter("alice")).toBe(0);
    expect(limiter.retryAfter("addr")).toBe(60);
  });
});
