import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

// Compares the emulator's answers with response bodies recorded from real portals / the official docs
// (test/fixtures/bitrix24/README.md). The emulator may return a subset of a fixture's keys, but every key it
// returns must exist in the fixture with a value of the same kind and format.

const fixture = (name: string): any =>
  JSON.parse(readFileSync(new URL(`./fixtures/bitrix24/${name}`, import.meta.url), "utf8"));

type Kind = "null" | "date" | "numeric-string" | "string" | "boolean" | "number" | "array" | "object";

function kindOf(v: unknown): Kind {
  if (v === null) return "null";
  if (typeof v === "string") {
    if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/.test(v)) return "date";
    if (/^-?\d+$/.test(v)) return "numeric-string";
    return "string";
  }
  if (typeof v === "boolean") return "boolean";
  if (typeof v === "number") return "number";
  // PHP prints an empty associative array as [], so [] stands for an empty object too.
  if (Array.isArray(v)) return "array";
  return "object";
}

function compatible(fixtureValue: unknown, ours: unknown): boolean {
  const f = kindOf(fixtureValue);
  const o = kindOf(ours);
  if (f === o) return true;
  if (f === "null" || o === "null") return true; // nullable fields: the other samples below pin their format
  if (f === "array" && o === "object" && Array.isArray(fixtureValue) && fixtureValue.length === 0)
    return true;
  if (o === "array" && f === "object" && Array.isArray(ours) && ours.length === 0) return true;
  // A free-text field may happen to hold only digits.
  return f === "string" && o === "numeric-string";
}

/** Walks `ours` and reports keys missing from the fixture and values of another kind. */
function diffShape(fix: any, ours: any, path: string, problems: string[], deep = true): void {
  for (const [key, value] of Object.entries(ours)) {
    const p = `${path}.${key}`;
    if (!(key in fix)) {
      problems.push(`${p}: not in the recorded body`);
      continue;
    }
    const f = fix[key];
    if (!compatible(f, value))
      problems.push(
        `${p}: recorded ${kindOf(f)} (${JSON.stringify(f)}), emulator ${kindOf(value)} (${JSON.stringify(value)})`,
      );
    if (deep && kindOf(f) === "object" && kindOf(value) === "object" && !/Data$/.test(key))
      diffShape(f, value, p, problems);
  }
}

/** Name-based format rules for keys the recordings only show as null (closedDate, statusChangedBy, ...). */
function checkFormats(task: Record<string, unknown>, problems: string[]): void {
  for (const [key, value] of Object.entries(task)) {
    if (value === null) continue;
    if (/Date$|^deadline$/.test(key) && kindOf(value) !== "date")
      problems.push(`${key}: expected an ISO date with offset, got ${JSON.stringify(value)}`);
    if (/^(id|.+Id|.+By)$/.test(key) && key !== "siteId" && kindOf(value) !== "numeric-string")
      problems.push(`${key}: expected a numeric string, got ${JSON.stringify(value)}`);
  }
}

function deepMerge(a: any, b: any): any {
  if (kindOf(a) !== "object" || kindOf(b) !== "object") return b;
  const out: any = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in a ? deepMerge(a[k], v) : v;
  return out;
}

let emu: RunningEmulator;
async function call(method: string, params: Record<string, unknown> = {}) {
  const res = await fetch(emu.webhookUrl + method, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, text: await res.text() };
}
const body = async (method: string, params: Record<string, unknown> = {}) =>
  JSON.parse((await call(method, params)).text);

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  // A closed task (status side fields set) and a written task widen the samples.
  await call("tasks.task.update", { taskId: 2, fields: { STATUS: 5 } });
});
afterAll(() => emu.close());

const READABLE = [1, 2, 3, 4, 5, 6, 8];
const ESSENTIAL_TASK_KEYS = [
  "id",
  "title",
  "description",
  "status",
  "priority",
  "responsibleId",
  "createdBy",
  "createdDate",
  "changedBy",
  "changedDate",
  "deadline",
  "groupId",
  "auditors",
  "accomplices",
  "group",
  "creator",
  "responsible",
];

describe("answers match recorded Bitrix24 bodies", () => {
  it("tasks.task.get: every key and value format matches the recorded body; essential keys present", async () => {
    const recorded = fixture("tasks.task.get.json");
    const problems: string[] = [];
    for (const taskId of READABLE) {
      const ours = await body("tasks.task.get", { taskId });
      expect(Object.keys(ours).sort()).toEqual(["result", "time"]);
      diffShape(recorded.result.task, ours.result.task, `get(${taskId})`, problems);
      checkFormats(ours.result.task, problems);
      for (const k of [...ESSENTIAL_TASK_KEYS, "action", "checklist"])
        if (!(k in ours.result.task)) problems.push(`get(${taskId}) lacks ${k}`);
      expect(Object.keys(ours.result.task.action).sort()).toEqual(
        Object.keys(recorded.result.task.action).sort(),
      );
      diffShape(recorded.time, ours.time, "time", problems);
      expect(Object.keys(ours.time).sort()).toEqual(Object.keys(recorded.time).sort());
    }
    expect(problems).toEqual([]);
  });

  it("tasks.task.update: same shape as the recorded update answer", async () => {
    const recorded = fixture("tasks.task.update.json");
    const ours = await body("tasks.task.update", {
      taskId: 4,
      fields: { TITLE: "Another task title", PRIORITY: "1" },
    });
    const problems: string[] = [];
    // The recorded update lacks sprintId/backlogId/action.take that its get twin has; compare with their union.
    const union = deepMerge(fixture("tasks.task.get.json").result.task, recorded.result.task);
    diffShape(union, ours.result.task, "update", problems);
    checkFormats(ours.result.task, problems);
    expect(problems).toEqual([]);
    expect(ours.result.task.changedDate).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+03:00$/);
  });

  it("tasks.task.list: items have the recorded keys and formats, with subStatus; total and time at top level", async () => {
    const recorded = fixture("tasks.task.list.json").result.tasks[0];
    const docs = fixture("tasks.task.list.docs.json");
    const ours = await body("tasks.task.list");
    expect(Object.keys(ours).sort()).toEqual(Object.keys(docs).sort());
    expect(typeof ours.total).toBe("number");
    const problems: string[] = [];
    for (const item of ours.result.tasks) {
      diffShape(recorded, item, `list(${item.id})`, problems);
      checkFormats(item, problems);
      for (const k of [...ESSENTIAL_TASK_KEYS, "subStatus"])
        if (!(k in item)) problems.push(`list(${item.id}) lacks ${k}`);
    }
    const narrowed = await body("tasks.task.list", {
      select: ["ID", "TITLE", "DEADLINE", "RESPONSIBLE_ID", "AUDITORS"],
    });
    for (const item of narrowed.result.tasks)
      diffShape(docs.result.tasks[0], item, `narrow(${item.id})`, problems, false);
    expect(problems).toEqual([]);
  });

  it("tasks.task.history.list: rows have numeric ids, field, value.from/to and the recorded user object", async () => {
    const recorded = fixture("tasks.task.history.list.json").result.list;
    await call("tasks.task.update", {
      taskId: 4,
      fields: { TITLE: "History sample", DEADLINE: "2027-01-15" },
    });
    const ours = await body("tasks.task.history.list", { taskId: 4 });
    const problems: string[] = [];
    for (const row of ours.result.list) {
      const twin = recorded.find((r: any) => r.field === row.field) ?? recorded[3];
      diffShape(twin, row, `history(${row.field})`, problems);
      expect(Object.keys(row).sort()).toEqual(Object.keys(twin).sort());
      expect(Object.keys(row.user).sort()).toEqual(Object.keys(twin.user).sort());
    }
    expect(problems).toEqual([]);
    expect(ours.result.list.find((r: any) => r.field === "DEADLINE").value.to).toMatch(/^\d+$/);
  });

  it("error bodies equal the documented ones", async () => {
    const errors = fixture("errors.json");
    const cases: [string, Promise<{ status: number; text: string }>, number][] = [
      ["wrongTaskId", call("tasks.task.get", { taskId: "abc" }), 400],
      ["taskIdMissing", call("tasks.task.get", {}), 400],
      ["actionNotAllowed", call("tasks.task.update", { taskId: 6, fields: { TITLE: "x" } }), 400],
      ["fieldsMissing", call("tasks.task.update", { taskId: 4 }), 400],
      ["invalidStatus", call("tasks.task.update", { taskId: 4, fields: { STATUS: 42 } }), 400],
      ["assigneeNotFound", call("tasks.task.update", { taskId: 4, fields: { RESPONSIBLE_ID: 4242 } }), 400],
      ["invalidSortingKey", call("tasks.task.list", { order: { NO_SUCH_KEY: "asc" } }), 400],
      ["historyAccessDenied", call("tasks.task.history.list", { taskId: 7 }), 400],
      ["methodNotFound", call("tasks.task.explode", {}), 404],
    ];
    for (const [name, pending, status] of cases) {
      const r = await pending;
      expect({ name, status: r.status, body: JSON.parse(r.text) }).toEqual({
        name,
        status,
        body: errors[name],
      });
    }
    const bad = await fetch(emu.baseUrl + "/rest/1/wrong-code/tasks.task.get?taskId=4");
    expect([bad.status, await bad.json()]).toEqual([401, errors.invalidCredentials]);
    // `<br>` travels as \u003Cbr\u003E, like PHP's JSON_HEX_TAG output in the docs.
    expect((await call("tasks.task.update", { taskId: 4, fields: { STATUS: 42 } })).text).toContain(
      "Invalid status\\u003Cbr\\u003E",
    );
  });
});
