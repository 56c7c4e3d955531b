import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  defaultSeed,
  startEmulator,
  type EmulatorSeed,
  type RunningEmulator,
} from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let big: RunningEmulator;

async function list(target: RunningEmulator, params: Record<string, unknown> = {}) {
  const res = await fetch(target.webhookUrl + "tasks.task.list", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, body: (await res.json()) as any };
}
const ids = (body: any) => body.result.tasks.map((t: any) => Number(t.id));

/** 120 tasks: titles "Bulk 001".., status cycling 2/3/5, responsible cycling 1..3. */
function bulkSeed(): EmulatorSeed {
  const base = defaultSeed();
  return {
    users: base.users,
    groups: base.groups,
    tasks: Array.from({ length: 120 }, (_, i) => ({
      id: i + 1,
      title: `Bulk ${String(i + 1).padStart(3, "0")}`,
      createdBy: 1,
      responsibleId: (i % 3) + 1,
      createdDate: "2026-11-01T10:00:00+03:00",
      changedDate: "2026-11-02T10:00:00+03:00",
      status: [2, 3, 5][i % 3],
    })),
  };
}

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  big = await startEmulator({ rate: 0, seed: bulkSeed() });
});
afterAll(async () => {
  await emu.close();
  await big.close();
});

describe("tasks.task.list", () => {
  it("lists only tasks the webhook user may read, ID descending by default, each with subStatus", async () => {
    const { status, body } = await list(emu);
    expect(status).toBe(200);
    expect(ids(body)).toEqual([8, 6, 5, 4, 3, 2, 1]);
    expect(body.total).toBe(7);
    expect(body).not.toHaveProperty("next");
    for (const t of body.result.tasks) expect(t.subStatus).toMatch(/^-?\d$/);
    // Task 2 is open with a deadline in the past: overdue.
    expect(body.result.tasks.find((t: any) => t.id === "2").subStatus).toBe("-1");
    expect(body.result.tasks.find((t: any) => t.id === "4").subStatus).toBe("2");
  });

  it("pages by 50 with start, top-level total and next", async () => {
    const p1 = (await list(big, { order: { ID: "asc" } })).body;
    expect(p1.result.tasks).toHaveLength(50);
    expect([p1.total, p1.next]).toEqual([120, 50]);
    expect(ids(p1)[0]).toBe(1);
    const p2 = (await list(big, { order: { ID: "asc" }, start: 50 })).body;
    expect(ids(p2)[0]).toBe(51);
    expect(p2.next).toBe(100);
    const p3 = (await list(big, { order: { ID: "asc" }, start: "100" })).body;
    expect(p3.result.tasks).toHaveLength(20);
    expect(p3).not.toHaveProperty("next");
    const uncounted = (await list(big, { start: -1 })).body;
    expect(uncounted.result.tasks).toHaveLength(50);
    expect(uncounted).not.toHaveProperty("total");
  });

  it("filters on ID, TITLE, STATUS and RESPONSIBLE_ID with !, %, <, <=, >, >=", async () => {
    const f = async (filter: Record<string, unknown>) =>
      ids((await list(big, { filter, order: { ID: "asc" } })).body);
    expect(await f({ ID: 7 })).toEqual([7]);
    expect(await f({ ID: [3, 5, 400] })).toEqual([3, 5]);
    expect(await f({ "<ID": 4 })).toEqual([1, 2, 3]);
    expect(await f({ "<=ID": 3 })).toEqual([1, 2, 3]);
    expect(await f({ ">ID": 118 })).toEqual([119, 120]);
    expect(await f({ ">=ID": 119 })).toEqual([119, 120]);
    expect(await f({ ">=ID": 10, "<ID": 13, "!ID": 11 })).toEqual([10, 12]);
    expect(await f({ "%TITLE": "bulk 11" })).toEqual([110, 111, 112, 113, 114, 115, 116, 117, 118, 119]);
    expect(await f({ TITLE: "Bulk 00%", "<ID": 4 })).toEqual([1, 2, 3]);
    expect(await f({ STATUS: 5, "<ID": 10 })).toEqual([3, 6, 9]);
    expect(await f({ REAL_STATUS: 3, "<ID": 10 })).toEqual([2, 5, 8]);
    expect(await f({ "!STATUS": [2, 3], "<ID": 10 })).toEqual([3, 6, 9]);
    expect(await f({ RESPONSIBLE_ID: "2", "<ID": 10 })).toEqual([2, 5, 8]);
    expect(await f({ "!RESPONSIBLE_ID": 1, "<ID": 7 })).toEqual([2, 3, 5, 6]);
    const filtered = (await list(big, { filter: { RESPONSIBLE_ID: 1 } })).body;
    expect(filtered.total).toBe(40);
    expect(filtered).not.toHaveProperty("next");
  });

  it("filters on the meta-status -1 (overdue)", async () => {
    expect(ids((await list(emu, { filter: { STATUS: -1 } })).body)).toEqual([2]);
  });

  it("orders by allowed keys and rejects unknown sort keys", async () => {
    const byTitle = (
      await list(emu, { order: { TITLE: "asc" }, select: ["ID", "TITLE"] })
    ).body.result.tasks.map((t: any) => t.title);
    expect(byTitle).toEqual([...byTitle].sort((a: string, b: string) => a.localeCompare(b)));
    const byDeadline = ids((await list(emu, { order: { DEADLINE: "desc" } })).body);
    expect(byDeadline[0]).toBe(8);
    expect(byDeadline.at(-1)).toBe(5); // no deadline sorts last when descending
    const bad = await list(emu, { order: { BOGUS: "asc" } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: "0", error_description: "Invalid sorting key (internal error)" });
  });

  it("narrows items to select (plus id, group, subStatus)", async () => {
    const { body } = await list(emu, { select: ["TITLE", "RESPONSIBLE_ID"], filter: { ID: 4 } });
    expect(Object.keys(body.result.tasks[0]).sort()).toEqual([
      "group",
      "id",
      "responsible",
      "responsibleId",
      "subStatus",
      "title",
    ]);
  });
});

describe("tasks.task.add, history filters, user.current", () => {
  async function call(method: string, params: Record<string, unknown> = {}) {
    const res = await fetch(emu.webhookUrl + method, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(params),
    });
    return { status: res.status, body: (await res.json()) as any };
  }

  it("adds a task with the next id, NEW history row, and the full task in the answer", async () => {
    const r = await call("tasks.task.add", {
      fields: {
        TITLE: "Created by test",
        RESPONSIBLE_ID: 3,
        DEADLINE: "2027-01-10T12:00:00",
        AUDITORS: ["4"],
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.result.task).toMatchObject({
      id: "9",
      title: "Created by test",
      responsibleId: "3",
      createdBy: "1",
      status: "2",
      auditors: ["4"],
    });
    expect(r.body.result.task.deadline).toBe("2027-01-10T12:00:00+03:00");
    expect(r.body.result.task.action.edit).toBe(true);
    const history = (await call("tasks.task.history.list", { taskId: 9 })).body.result.list;
    expect(history.map((h: any) => h.field)).toEqual(["NEW"]);
    expect(history[0].value).toEqual({ from: null, to: null });
    const missing = await call("tasks.task.add", { fields: { DESCRIPTION: "no title" } });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toBe("ERROR_CORE");
    expect(missing.body.error_description).toContain("Task title is not specified<br>");
  });

  it("filters and orders history, hides unreadable tasks, lists nothing for missing ones", async () => {
    await call("tasks.task.update", { taskId: 1, fields: { TITLE: "Q4 vendor report v2", PRIORITY: 2 } });
    const onlyTitle = (await call("tasks.task.history.list", { taskId: 1, filter: { FIELD: "TITLE" } })).body
      .result.list;
    expect(onlyTitle.map((h: any) => h.field)).toEqual(["TITLE"]);
    const desc = (await call("tasks.task.history.list", { taskId: 1, order: { ID: "desc" } })).body.result
      .list;
    expect(desc.at(-1).field).toBe("NEW");
    expect((await call("tasks.task.history.list", { taskId: 999 })).body.result.list).toEqual([]);
    const hidden = await call("tasks.task.history.list", { taskId: 7 });
    expect(hidden.status).toBe(400);
    expect(hidden.body).toEqual({ error: "0", error_description: "Access denied. (internal error)" });
  });

  it("user.current answers the webhook user in UPPER_SNAKE", async () => {
    const r = await call("user.current");
    expect(r.body.result).toMatchObject({ ID: "1", NAME: "Anna", LAST_NAME: "Petrova", ACTIVE: true });
  });
});
