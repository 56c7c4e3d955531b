/**
 * The envelope core against the real emulator over HTTP: the default policy's automatic and
 * consequential fields must match what the portal actually changes, or every honest write would end
 * as INVARIANT_VIOLATION. No client code in between: plain fetch, as the portal sees it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import {
  compareBaseline,
  createEnvelope,
  defaultPolicy,
  verifyOutcome,
  type Acknowledgement,
  type ReadResult,
} from "../src/envelope/index.js";

let emu: RunningEmulator;
beforeAll(async () => {
  emu = await startEmulator({ port: 0, rate: 0 });
});
afterAll(async () => {
  await emu.close();
});
beforeEach(async () => {
  await fetch(`${emu.baseUrl}/_emulator/reset`, { method: "POST" });
});

async function call(method: string, params: unknown): Promise<{ status: number; text: string }> {
  const res = await fetch(`${emu.webhookUrl}${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, text: await res.text() };
}

async function read(taskId: number): Promise<ReadResult> {
  const { status, text } = await call("tasks.task.get", { taskId });
  if (status !== 200)
    return { status: "failed", error: { kind: "http", code: String(status), description: text } };
  try {
    return { status: "ok", body: JSON.parse(text) };
  } catch {
    return { status: "ok", body: text };
  }
}

async function write(taskId: number, fields: Record<string, unknown>): Promise<Acknowledgement> {
  const { status, text } = await call("tasks.task.update", { taskId, fields });
  if (status !== 200)
    return { status: "ERROR", error: { kind: "target_rejected", code: String(status), description: text } };
  return { status: "OK", body: JSON.parse(text) };
}

async function envelopeFor(taskId: number, params: Record<string, unknown>) {
  const r = await read(taskId);
  if (r.status !== "ok") throw new Error("baseline read failed");
  const task = (r.body as { result: { task: Record<string, unknown> } }).result.task;
  return createEnvelope({
    portal: new URL(emu.baseUrl).host,
    taskId,
    params,
    task,
    requestedBy: "demo-user",
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "emulator-test" },
    policy: defaultPolicy(),
    now: new Date(),
  });
}

async function arm(fault: Record<string, unknown>) {
  const res = await fetch(`${emu.baseUrl}/_emulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(fault),
  });
  expect(res.status).toBe(200);
}

describe("envelope core against the emulator", () => {
  const changes: Array<Record<string, unknown>> = [
    { TITLE: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST (approved)" },
    { DESCRIPTION: "Line one\nLine two with trailing space " },
    { DEADLINE: "2026-12-20T18:00:00+03:00" },
    { PRIORITY: 2 },
    { STATUS: "5" },
    { STATUS: 3 },
    { RESPONSIBLE_ID: 3 },
    { GROUP_ID: 1 },
    { GROUP_ID: 0 },
    { AUDITORS: [4] },
    { ACCOMPLICES: ["3", "4"] },
    { TITLE: "Renamed", PRIORITY: "0", DEADLINE: "2026-12-31T12:00:00Z" },
  ];
  it.each(changes)("an honest write of %j is MATCH before and VERIFIED after", async (params) => {
    const e = await envelopeFor(4, params);
    expect(compareBaseline(e, await read(4)).verdict).toBe("MATCH");
    const ack = await write(4, params);
    expect(ack.status).toBe("OK");
    const v = verifyOutcome(e, ack, await read(4));
    expect(v.reason).not.toMatch(/unexpected|did:/);
    expect(v.verdict).toBe("VERIFIED");
  });

  it("a portal automation changing another field during the write is INVARIANT_VIOLATION", async () => {
    const params = { TITLE: "Renamed" };
    const e = await envelopeFor(4, params);
    await arm({ method: "tasks.task.update", kind: "side_effect", field: "PRIORITY", value: 2 });
    const ack = await write(4, params);
    const v = verifyOutcome(e, ack, await read(4));
    expect(v.verdict).toBe("INVARIANT_VIOLATION");
    expect(v.fields.find((f) => f.field === "PRIORITY")).toMatchObject({
      status: "violated",
      expected: "1",
      actual: "2",
    });
  });

  it("an acknowledgement without the change applied is VERIFICATION_FAILED, not VERIFIED", async () => {
    const params = { TITLE: "Renamed" };
    const e = await envelopeFor(4, params);
    await arm({ method: "tasks.task.update", kind: "ack_without_apply" });
    const ack = await write(4, params);
    expect(ack.status).toBe("OK");
    const v = verifyOutcome(e, ack, await read(4));
    expect(v.verdict).toBe("VERIFICATION_FAILED");
    expect(v.reason).toMatch(/not applied/);
  });

  it("a change by someone else between approval and write is MISMATCH", async () => {
    const e = await envelopeFor(4, { TITLE: "Renamed" });
    await new Promise((r) => setTimeout(r, 1100)); // the portal's change marker has whole seconds
    await write(4, { PRIORITY: 0 });
    const c = compareBaseline(e, await read(4));
    expect(c.verdict).toBe("MISMATCH");
    expect(c.fields.find((f) => f.field === "CHANGED_DATE")!.status).toBe("mismatch");
  });

  it("a malformed answer is UNKNOWN before the write and INCONCLUSIVE after it", async () => {
    const e = await envelopeFor(4, { TITLE: "Renamed" });
    await arm({ method: "tasks.task.get", kind: "malformed", times: 2 });
    expect(compareBaseline(e, await read(4)).verdict).toBe("UNKNOWN");
    expect(verifyOutcome(e, { status: "OK", body: null }, await read(4)).verdict).toBe("INCONCLUSIVE");
  });

  it("a task the webhook user cannot read answers result: [] and is UNKNOWN", async () => {
    const e = await envelopeFor(4, { TITLE: "Renamed" });
    const hidden = await read(7);
    expect(hidden).toMatchObject({ status: "ok", body: { result: [] } });
    expect(compareBaseline({ ...e, object: { type: "task", id: 7 } }, hidden)).toMatchObject({
      verdict: "UNKNOWN",
      reason: expect.stringMatching(/not found or not accessible/),
    });
  });
});
