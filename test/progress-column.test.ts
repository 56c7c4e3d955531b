/** The progress column a move writes (src/store/action-rows.ts progressColumn): JSON.stringify's text, parts serialised once. */
import { describe, expect, it } from "vitest";
import { progressColumn } from "../src/store/action-rows.js";
import type { ActionProgress } from "../src/store/action-machine.js";

describe("progressColumn", () => {
  it("writes the text JSON.stringify writes and returns what parsing that text gives, frozen", () => {
    const progress = {
      refusalsCounted: 0,
      refusalsSeen: 1,
      decision: { type: "approve", at: new Date(0), skipped: undefined },
      lastRefusal: undefined,
    } as unknown as ActionProgress;
    const column = progressColumn("sha256:progress-column-1", progress);
    expect(column.text).toBe(JSON.stringify(progress));
    expect(column.progress).toEqual(JSON.parse(column.text));
    expect("lastRefusal" in column.progress).toBe(false);
    expect(Object.isFrozen(column.progress)).toBe(true);
    expect(Object.isFrozen(column.progress.decision)).toBe(true);
  });

  it("keeps the parts a row already carried and serialises only the new one", () => {
    const first = progressColumn("sha256:progress-column-2", {
      refusalsCounted: 0,
      refusalsSeen: 0,
      decision: { type: "approve" } as ActionProgress["decision"],
    });
    const added = { verdict: "MATCH", raw: { title: "a \u2028 b" } };
    const next = progressColumn("sha256:progress-column-2", {
      ...first.progress,
      preRead: added as unknown as ActionProgress["preRead"],
    });
    expect(next.progress.decision).toBe(first.progress.decision);
    expect(next.progress.preRead).toEqual(added);
    expect(next.text).toBe(JSON.stringify({ ...first.progress, preRead: added }));
    // A part changed in place cannot happen: the stored parts are frozen.
    expect(() => {
      (next.progress.preRead as unknown as { verdict: string }).verdict = "MISMATCH";
    }).toThrow(TypeError);
  });
});
