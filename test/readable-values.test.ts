/**
 * Readable cards and name-based edits (issue 17, B3): STATUS and PRIORITY codes are shown with their
 * documented names next to them; an edit may name the value (PRIORITY=high) and the envelope still
 * holds the exact code; an unknown name is refused listing codes and names.
 */
import { describe, expect, it } from "vitest";
import {
  createEnvelope,
  defaultPolicy,
  hashEnvelope,
  renderCard,
  validateDecision,
  type Envelope,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";
import { codesForNames, enumCodeOf, enumLabel } from "../src/envelope/fields.js";
import { editDecision } from "../src/cli/decisions.js";
import type { ThreadView } from "../src/app/view-thread.js";

function envelope(params: Record<string, unknown>): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task: exampleTask(),
    requestedBy: "demo-user",
    runContext: { threadId: "thread-1" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
}

describe("enum names", () => {
  it("names and codes as documented (priority 0 low, 1 medium, 2 high; status 2 waiting … 6 deferred)", () => {
    expect(enumLabel("PRIORITY", "2")).toBe("high");
    expect(enumLabel("PRIORITY", 1)).toBe("medium");
    expect(enumLabel("STATUS", "3")).toBe("in progress");
    expect(enumLabel("TITLE", "2")).toBeUndefined();
    expect(enumCodeOf("PRIORITY", "High")).toBe("2");
    expect(enumCodeOf("PRIORITY", "normal")).toBe("1");
    expect(enumCodeOf("PRIORITY", "2")).toBe("2");
    expect(enumCodeOf("STATUS", "in_progress")).toBe("3");
    expect(enumCodeOf("STATUS", "Completed")).toBe("5");
    expect(enumCodeOf("PRIORITY", "urgent")).toBeUndefined();
    expect(codesForNames({ PRIORITY: "high", STATUS: "deferred", TITLE: "high" })).toEqual({
      PRIORITY: "2",
      STATUS: "6",
      TITLE: "high",
    });
  });

  it("the card shows the name next to the code, before and requested, in text and markdown", () => {
    const e = envelope({ PRIORITY: "2", STATUS: "5" });
    const text = renderCard(e, hashEnvelope(e), "text").text;
    expect(text).toMatch(/requested: "2" \(high\)/);
    expect(text).toMatch(/requested: "5" \(completed\)/);
    expect(text).toMatch(/before: +"\d" \((low|medium|high)\)/);
    const md = renderCard(e, hashEnvelope(e), "markdown").text;
    expect(md).toContain("Requested (high):");
    expect(md).toContain("Requested (completed):");
  });

  it("an edit naming the value is checked and proposed as the exact code; an unknown name is refused with the choices", () => {
    const e = envelope({ PRIORITY: "1" });
    const ctx = {
      now: new Date("2026-11-30T10:05:00Z"),
      policy: defaultPolicy(),
      threadId: "thread-1",
      envelopeHash: hashEnvelope(e),
      nonceConsumed: false,
      supersededHashes: [],
      publicKeys: new Map(),
      scope: { taskIds: [4] },
    };
    const edit = (fields: Record<string, unknown>) => ({
      type: "edit",
      envelopeHash: hashEnvelope(e),
      nonce: e.nonce,
      approver: { id: "alice" },
      editedAction: { name: "update_task", args: { taskId: 4, fields } },
    });
    expect(validateDecision(e, edit({ PRIORITY: "high" }), ctx)).toMatchObject({
      ok: true,
      edit: { proposal: { fields: { PRIORITY: "2" } } },
    });
    const refused = validateDecision(e, edit({ PRIORITY: "urgent" }), ctx);
    expect(refused.ok).toBe(false);
    expect(JSON.stringify(refused)).toMatch(/"2\\" \(high\)/);
  });

  it("the CLI's --set PRIORITY=high builds an edit holding the code", () => {
    const e = envelope({ PRIORITY: "1" });
    const view = {
      threadId: "thread-1",
      approval: { envelope: e, envelopeHash: hashEnvelope(e), nonce: e.nonce },
    } as unknown as ThreadView;
    const resume = editDecision(view, { as: "alice", set: ["PRIORITY=high", "STATUS=in progress"] }) as {
      decisions: Array<{ editedAction: { args: { fields: Record<string, unknown> } } }>;
    };
    expect(resume.decisions[0]!.editedAction.args.fields).toEqual({ PRIORITY: "2", STATUS: "3" });
  });
});
