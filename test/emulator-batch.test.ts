import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

async function batch(params: Record<string, unknown>) {
  const res = await fetch(emu.webhookUrl + "batch", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, body: (await res.json()) as any };
}

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  control = new EmulatorControl(emu.baseUrl);
});
afterAll(() => emu.close());
beforeEach(() => control.reset());

describe("batch", () => {
  it("runs method?query commands and splits results, errors, totals, next and times", async () => {
    const { status, body } = await batch({
      halt: 0,
      cmd: {
        get_task: "tasks.task.get?taskId=4&select[]=ID&select[]=TITLE",
        upd: "tasks.task.update?taskId=4&fields[TITLE]=Batched",
        bad: "tasks.task.get?taskId=abc",
        list: "tasks.task.list?filter[ID]=4",
        nope: "tasks.task.fly",
      },
    });
    expect(status).toBe(200);
    const r = body.result;
    expect(Object.keys(r).sort()).toEqual([
      "result",
      "result_error",
      "result_next",
      "result_time",
      "result_total",
    ]);
    expect(r.result.get_task.task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect(r.result.upd.task.title).toBe("Batched");
    expect(r.result.list.tasks.map((t: any) => t.id)).toEqual(["4"]);
    expect(r.result_error).toEqual({
      bad: { error: "0", error_description: "wrong task id" },
      nope: { error: "ERROR_METHOD_NOT_FOUND", error_description: "Method not found!" },
    });
    expect(r.result_total).toEqual({ list: 1 });
    expect(r.result_next).toEqual([]);
    expect(Object.keys(r.result_time).sort()).toEqual(["bad", "get_task", "list", "nope", "upd"]);
    expect(body.time).toHaveProperty("date_start");
    const calls = await control.calls();
    expect(calls.filter((c) => c.viaBatch).map((c) => c.method)).toEqual([
      "tasks.task.get",
      "tasks.task.update",
      "tasks.task.get",
      "tasks.task.list",
      "tasks.task.fly",
    ]);
    expect(calls.at(-1)).toMatchObject({ method: "batch", status: 200 });
  });

  it("halt stops at the first error", async () => {
    const { body } = await batch({
      halt: 1,
      cmd: {
        a: "tasks.task.update?taskId=6&fields[TITLE]=x",
        b: "tasks.task.update?taskId=4&fields[TITLE]=Never",
      },
    });
    expect(body.result.result).toEqual([]);
    expect(Object.keys(body.result.result_error)).toEqual(["a"]);
    const get = (await (await fetch(emu.webhookUrl + "tasks.task.get?taskId=4")).json()) as any;
    expect(get.result.task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
  });

  it("takes a list of commands and refers to earlier results with $result[key][path]", async () => {
    const { body } = await batch({
      cmd: [
        "tasks.task.get?taskId=8&select[]=TITLE",
        "tasks.task.update?taskId=4&fields[TITLE]=$result[0][task][title]",
      ],
    });
    expect(Array.isArray(body.result.result)).toBe(true);
    expect(body.result.result[1].task.title).toBe("LAB-AGENT-EXEC-003 - DEFERRED FOLLOW-UP");
  });

  it("refuses nested batch and more than 50 commands", async () => {
    const nested = await batch({ cmd: { inner: "batch?cmd[x]=user.current" } });
    expect(nested.body.result.result_error.inner.error).toBe("ERROR_BATCH_METHOD_NOT_ALLOWED");
    const cmd = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`c${i}`, "user.current"]));
    const tooMany = await batch({ cmd });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toBe("ERROR_BATCH_LENGTH_EXCEEDED");
    expect((await batch({ cmd: Object.fromEntries(Object.entries(cmd).slice(0, 50)) })).status).toBe(200);
  });
});
