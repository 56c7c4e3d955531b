import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

async function call(method: string, params: Record<string, unknown> = {}) {
  const res = await fetch(emu.webhookUrl + method, {
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

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+03:00$/;

describe("tasks.task.get", () => {
  it("returns task 4 with camelCase string values, dates with offset, group, creator, responsible and action", async () => {
    const { status, body } = await call("tasks.task.get", { taskId: 4 });
    expect(status).toBe(200);
    const task = body.result.task;
    expect(task).toMatchObject({
      id: "4",
      title: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      responsibleId: "5",
      priority: "1",
      groupId: "3",
      status: "2",
      auditors: ["2", "6"],
      accomplices: ["3"],
      group: { id: "3", name: "Agent Lab" },
      creator: { id: "1", name: "Anna Petrova" },
      responsible: { id: "5", name: "Elena Kuznetsova" },
    });
    expect(task.deadline).toMatch(ISO_WITH_OFFSET);
    expect(task.changedDate).toMatch(/^2026-11-/);
    expect(task.action.edit).toBe(true);
    expect(Object.keys(body.time).sort()).toEqual(
      [
        "date_finish",
        "date_start",
        "duration",
        "finish",
        "operating",
        "operating_reset_at",
        "processing",
        "start",
      ].sort(),
    );
  });

  it("answers 200 with result [] for a missing task and for one the webhook user cannot read", async () => {
    expect((await call("tasks.task.get", { taskId: 999 })).body.result).toEqual([]);
    const hidden = await call("tasks.task.get", { taskId: 7 });
    expect(hidden.status).toBe(200);
    expect(hidden.body.result).toEqual([]);
  });

  it("marks task 6 readable but not editable", async () => {
    const { body } = await call("tasks.task.get", { taskId: 6 });
    expect(body.result.task.id).toBe("6");
    expect(body.result.task.action.edit).toBe(false);
  });

  it("rejects a bad or missing taskId like the portal", async () => {
    for (const taskId of ["abc", 0, -3, 1.5]) {
      const r = await call("tasks.task.get", { taskId });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: "0", error_description: "wrong task id" });
    }
    const missing = await call("tasks.task.get", {});
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe("100");
  });

  it("narrows the answer to select plus the always-present keys", async () => {
    const { body } = await call("tasks.task.get", { taskId: 4, select: ["TITLE", "DEADLINE"] });
    expect(Object.keys(body.result.task).sort()).toEqual(
      ["action", "deadline", "favorite", "group", "id", "title"].sort(),
    );
    const withUf = await call("tasks.task.get", { taskId: 4, select: ["ID", "UF_CRM_TASK"] });
    expect(withUf.body.result.task).toHaveProperty("ufTaskWebdavFiles");
    const notArray = await call("tasks.task.get", { taskId: 4, select: "TITLE" });
    expect(notArray.status).toBe(400);
    expect(notArray.body.error).toBe("100");
  });
});

describe("tasks.task.update", () => {
  it("changes only the given keys, bumps changedDate/changedBy, writes history and returns the task like get", async () => {
    const before = (await call("tasks.task.get", { taskId: 4 })).body.result.task;
    const { status, body } = await call("tasks.task.update", {
      taskId: 4,
      fields: { TITLE: "Renamed", DEADLINE: "2026-12-31T18:00:00+03:00", AUDITORS: [4] },
    });
    expect(status).toBe(200);
    const after = body.result.task;
    expect(after.title).toBe("Renamed");
    expect(after.deadline).toBe("2026-12-31T18:00:00+03:00");
    expect(after.auditors).toEqual(["4"]);
    expect(after.description).toBe(before.description);
    expect(after.responsibleId).toBe(before.responsibleId);
    expect(after.changedBy).toBe("1");
    expect(after.changedDate).not.toBe(before.changedDate);
    expect(after.changedDate).toMatch(ISO_WITH_OFFSET);
    expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task).toEqual(after);

    const history = (await call("tasks.task.history.list", { taskId: 4 })).body.result.list;
    const fields = history.map((h: any) => h.field);
    expect(fields).toEqual(["NEW", "TITLE", "DEADLINE", "AUDITORS"]);
    const title = history[1];
    expect(typeof title.id).toBe("number");
    expect(title.value).toEqual({ from: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST", to: "Renamed" });
    expect(title.user).toMatchObject({ id: 1, name: "Anna", lastName: "Petrova" });
    expect(history[3].value).toEqual({ from: "2,6", to: "4" });
  });

  it("needs non-empty fields", async () => {
    for (const params of [{ taskId: 4 }, { taskId: 4, fields: {} }]) {
      const r = await call("tasks.task.update", params);
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        error: "100",
        error_description: "Could not find value for parameter {fields} (internal error)",
      });
    }
  });

  it("refuses tasks the webhook user may not edit, and unknown tasks, without changing anything", async () => {
    for (const taskId of [6, 7, 999]) {
      const r = await call("tasks.task.update", { taskId, fields: { TITLE: "nope" } });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        error: "0",
        error_description: "Action on the task is not allowed (internal error)",
      });
    }
    expect((await call("tasks.task.get", { taskId: 6 })).body.result.task.title).toBe(
      "Payroll reconciliation for November",
    );
  });

  it("answers ERROR_CORE with <br>-terminated lines for invalid values and applies nothing", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ STATUS: 9 }, "Invalid status<br>"],
      [{ PRIORITY: 3 }, "Invalid priority<br>"],
      [{ DEADLINE: "next tuesday" }, 'Invalid value in the "Deadline" field<br>'],
      [{ RESPONSIBLE_ID: 77 }, 'The user specified in the "Assignee" field is not found<br>'],
      [{ TITLE: "  " }, "Task title is not specified<br>"],
      [{ TITLE: "ok", STATUS: 0 }, "Invalid status<br>"],
    ];
    for (const [fields, message] of cases) {
      const r = await call("tasks.task.update", { taskId: 4, fields });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: "ERROR_CORE", error_description: message });
    }
    const task = (await call("tasks.task.get", { taskId: 4 })).body.result.task;
    expect(task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect((await call("tasks.task.history.list", { taskId: 4 })).body.result.list).toHaveLength(1);
  });

  it("names unknown field keys instead of ignoring them", async () => {
    const r = await call("tasks.task.update", { taskId: 4, fields: { title: "lower-case key", TITLE: "x" } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("ERROR_ARGUMENT");
    expect(r.body.error_description).toContain("title");
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.title).toBe(
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    );
  });

  it("records status side fields", async () => {
    const done = (await call("tasks.task.update", { taskId: 4, fields: { STATUS: "5" } })).body.result.task;
    expect(done.status).toBe("5");
    expect(done.closedBy).toBe("1");
    expect(done.closedDate).toMatch(ISO_WITH_OFFSET);
    expect(done.statusChangedBy).toBe("1");
  });
});

describe("call log", () => {
  it("lists every REST call with lower-cased method, merged params and status", async () => {
    await call("TASKS.TASK.GET", { taskId: 4 });
    await call("tasks.task.update", { taskId: 6, fields: { TITLE: "x" } });
    const calls = await control.calls();
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ seq: 1, method: "tasks.task.get", params: { taskId: 4 }, status: 200 });
    expect(calls[1]).toMatchObject({ method: "tasks.task.update", status: 400, error: "0" });
    expect(calls[0]!.time).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });
});
