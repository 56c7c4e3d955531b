import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

async function call(method: string, params: Record<string, unknown> = {}, signal?: AbortSignal) {
  const res = await fetch(emu.webhookUrl + method, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
    signal,
  });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers };
}
const json = async (method: string, params: Record<string, unknown> = {}) => {
  const r = await call(method, params);
  return { status: r.status, body: JSON.parse(r.text) as any };
};
const title = async (taskId = 4) =>
  (await json("tasks.task.get", { taskId })).body.result.task.title as string;

/** Sends a call that the emulator will hold open; aborts it once the call shows up in the log. */
async function callUntilLogged(method: string, params: Record<string, unknown>) {
  const ac = new AbortController();
  const pending = call(method, params, ac.signal).then(
    () => "answered",
    (e: Error) => e.name,
  );
  for (let i = 0; i < 200; i++) {
    const calls = await control.calls({ method });
    if (calls.length > 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  ac.abort();
  return pending;
}

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  control = new EmulatorControl(emu.baseUrl);
});
afterAll(() => emu.close());
beforeEach(() => control.reset());

describe("faults", () => {
  it("error: answers the given status/error once, applies nothing, then behaves normally", async () => {
    const armed = await control.armFault({
      method: "tasks.task.update",
      kind: "error",
      status: 500,
      error: "INTERNAL_SERVER_ERROR",
      description: "boom",
    });
    expect(armed).toMatchObject({ method: "tasks.task.update", kind: "error", times: 1 });
    const r = await json("tasks.task.update", { taskId: 4, fields: { TITLE: "A" } });
    expect(r.status).toBe(500);
    expect(r.body).toEqual({ error: "INTERNAL_SERVER_ERROR", error_description: "boom" });
    expect(await title()).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect((await json("tasks.task.update", { taskId: 4, fields: { TITLE: "B" } })).status).toBe(200);
    const calls = await control.calls({ method: "tasks.task.update" });
    expect(calls.map((c) => [c.status, c.fault])).toEqual([
      [500, "error"],
      [200, undefined],
    ]);
  });

  it("matches the method case-insensitively and fires N times", async () => {
    await control.armFault({
      method: "TASKS.TASK.GET",
      kind: "error",
      status: 503,
      error: "QUERY_LIMIT_EXCEEDED",
      description: "Too many requests",
      times: 2,
    });
    expect((await json("tasks.task.get", { taskId: 4 })).status).toBe(503);
    expect((await json("Tasks.Task.Get", { taskId: 4 })).status).toBe(503);
    expect((await json("tasks.task.get", { taskId: 4 })).status).toBe(200);
  });

  it("times: 0 keeps firing until cleared", async () => {
    await control.armFault({ method: "tasks.task.list", kind: "error", status: 502, times: 0 });
    for (let i = 0; i < 3; i++) expect((await json("tasks.task.list")).status).toBe(502);
    await control.clearFaults();
    expect((await json("tasks.task.list")).status).toBe(200);
  });

  it("latency: delays matching calls and still answers", async () => {
    await control.armFault({ method: "tasks.task.get", kind: "latency", ms: 50 });
    const r = await json("tasks.task.get", { taskId: 4 });
    expect(r.status).toBe(200);
    expect(r.body.result.task.id).toBe("4");
  });

  it("ack_without_apply: answers success with the would-be task but the portal is unchanged", async () => {
    await control.armFault({ method: "tasks.task.update", kind: "ack_without_apply" });
    const r = await json("tasks.task.update", { taskId: 4, fields: { TITLE: "Acked" } });
    expect(r.status).toBe(200);
    expect(r.body.result.task.title).toBe("Acked");
    expect(await title()).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect((await json("tasks.task.history.list", { taskId: 4 })).body.result.list).toHaveLength(1);
  });

  it("apply_then_timeout: applies the change and never answers", async () => {
    await control.armFault({ method: "tasks.task.update", kind: "apply_then_timeout" });
    expect(await callUntilLogged("tasks.task.update", { taskId: 4, fields: { TITLE: "Applied" } })).toBe(
      "AbortError",
    );
    expect(await title()).toBe("Applied");
    const [logged] = await control.calls({ method: "tasks.task.update" });
    expect(logged).toMatchObject({ status: 0, fault: "apply_then_timeout" });
  });

  it("timeout_without_apply: never answers and changes nothing", async () => {
    await control.armFault({ method: "tasks.task.update", kind: "timeout_without_apply" });
    expect(await callUntilLogged("tasks.task.update", { taskId: 4, fields: { TITLE: "Lost" } })).toBe(
      "AbortError",
    );
    expect(await title()).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
  });

  it("side_effect: applies the call and also changes another field as user 1, with a history row", async () => {
    await control.armFault({
      method: "tasks.task.update",
      kind: "side_effect",
      field: "PRIORITY",
      value: "2",
      userId: 1,
    });
    const r = await json("tasks.task.update", { taskId: 4, fields: { TITLE: "With automation" } });
    expect(r.status).toBe(200);
    expect(r.body.result.task.priority).toBe("1");
    const task = (await json("tasks.task.get", { taskId: 4 })).body.result.task;
    expect(task).toMatchObject({ title: "With automation", priority: "2" });
    const history = (await json("tasks.task.history.list", { taskId: 4 })).body.result.list;
    expect(history.map((h: any) => h.field)).toEqual(["NEW", "TITLE", "PRIORITY"]);
    expect(history[2]).toMatchObject({ value: { from: "1", to: "2" }, user: { id: 1 } });
  });

  it("malformed: HTTP 200 with a body that is not the documented shape (applied by default)", async () => {
    await control.armFault({ method: "tasks.task.update", kind: "malformed" });
    const r = await call("tasks.task.update", { taskId: 4, fields: { TITLE: "Garbled" } });
    expect(r.status).toBe(200);
    expect(() => JSON.parse(r.text)).toThrow();
    expect(await title()).toBe("Garbled");

    await control.armFault({
      method: "tasks.task.update",
      kind: "malformed",
      body: '{"result":{"unexpected":true}}',
      apply: false,
    });
    const r2 = await call("tasks.task.update", { taskId: 4, fields: { TITLE: "Not applied" } });
    expect(JSON.parse(r2.text)).toEqual({ result: { unexpected: true } });
    expect(await title()).toBe("Garbled");
  });

  it("rejects an invalid fault spec with a Bitrix-shaped 400", async () => {
    const res = await fetch(`${emu.baseUrl}/_emulator/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ method: "tasks.task.update", kind: "explode" }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toBe("INVALID_FAULT");
  });
});

describe("close", () => {
  it("does not hang on a connection held open by a timeout fault", async () => {
    const own = await startEmulator({ rate: 0 });
    const ctl = new EmulatorControl(own.baseUrl);
    await ctl.armFault({ method: "tasks.task.get", kind: "timeout_without_apply" });
    const pending = fetch(own.webhookUrl + "tasks.task.get?taskId=4").then(
      () => "answered",
      () => "connection closed",
    );
    for (let i = 0; i < 200 && (await ctl.calls()).length === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    await own.close();
    expect(await pending).toBe("connection closed");
  });
});
