/**
 * Bitrix24's per-method time limit (429 OPERATION_TIME_LIMIT) is its own error kind with the reset
 * time, never retried (not for reads, never for writes), and the emulator produces it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { Bitrix24Error } from "../src/bitrix24/errors.js";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

let portal: Portal;
let app: App | undefined;

beforeEach(async () => {
  portal = await startPortal();
});
afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

describe("OPERATION_TIME_LIMIT", () => {
  it("a read: kind operation_time_limit with operatingResetAt, one call, not retried", async () => {
    const client = new Bitrix24Client({
      webhookUrl: portal.emulator.webhookUrl,
      rate: 0,
      retryBaseMs: 10,
      maxReadRetries: 3,
    });
    await portal.fault({
      method: "tasks.task.get",
      kind: "operation_time_limit",
      resetInSeconds: 300,
      times: 1,
    });
    const before = Math.floor(Date.now() / 1000);
    const err = await client.getTask(4).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Bitrix24Error);
    const e = err as Bitrix24Error;
    expect(e).toMatchObject({
      kind: "operation_time_limit",
      httpStatus: 429,
      code: "OPERATION_TIME_LIMIT",
      outcomeUnknown: false,
    });
    expect(e.operatingResetAt).toBeGreaterThanOrEqual(before + 299);
    expect(e.description).toMatch(
      /per-method time limit blocks tasks\.task\.get until \d{4}-\d{2}-\d{2}T.*; not retried/,
    );
    expect(e.toData()).toMatchObject({ kind: "operation_time_limit", operatingResetAt: e.operatingResetAt });
    expect(await portal.calls("tasks.task.get")).toHaveLength(1);
  });

  it("a write: sent once, never retried; the run ends REJECTED_BY_TARGET with the kind in the acknowledgement", async () => {
    app = await openTestApp(portal, tempDir(), {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Time limited" })),
    });
    const view = await startRun(app, { request: "rename task 4 to Time limited", requestedBy: "demo-user" });
    await portal.fault({ method: "tasks.task.update", kind: "operation_time_limit", times: 0 });
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
      ],
    });
    expect(await portal.writes()).toHaveLength(1);
    expect(done.state?.acknowledgement).toMatchObject({
      status: "ERROR",
      error: { kind: "operation_time_limit", code: "OPERATION_TIME_LIMIT" },
    });
    expect(done.state?.outcome).toBe("REJECTED_BY_TARGET");
    expect(done.state?.reason).toMatch(/OPERATION_TIME_LIMIT/);
  });
});
