/**
 * The scope derived by code from a request's own words (src/hitl/scope.ts): a request in Russian, as
 * the project's users write them, names its tasks and deals ("задачу 4", "задачи 4 и 5", "сделку 3")
 * and its fields ("заголовок", "приоритет", "срок") as surely as an English one; a list or a range of
 * ids names each of them; and an id inside a quoted value (a new title "Close task 7") names no
 * object. A model proposing outside that scope is refused OUT_OF_SCOPE before any card exists, with
 * no write in the emulator's call log. The graph, our MCP server over stdio, the emulator over HTTP.
 */
import { describe, expect, it } from "vitest";
import { startRun } from "../src/app/threads.js";
import type { ThreadView } from "../src/app/view-thread.js";
import { checkProposal, defaultPolicy } from "../src/envelope/index.js";
import { deriveScope } from "../src/hitl/scope.js";
import { eachTestApp } from "./support/harness.js";
import { AIMessage } from "@langchain/core/messages";
import {
  ScriptedChatModel,
  call,
  readThenPropose,
  readThenProposeSet,
  type Script,
  type SetAction,
} from "./support/scripted-model.js";

const t = eachTestApp();

async function run(request: string): Promise<ThreadView> {
  return startRun(t.app, { request, requestedBy: "demo-user" });
}

/** The run ended before anyone was asked: refused OUT_OF_SCOPE, no card, nothing sent. */
async function refusedOutOfScope(view: ThreadView, what: string): Promise<void> {
  expect(view.status, `${what}: ${view.state?.reason ?? ""}`).toBe("finished");
  expect(view.approval, what).toBeUndefined();
  expect(view.state!.reasonCode, what).toBe("DENIED_BY_POLICY");
  expect(view.state!.reason, what).toMatch(/^OUT_OF_SCOPE: /);
  expect(view.state!.card ?? null, what).toBeNull();
  expect(await t.portal.writes(), what).toEqual([]);
}

describe("a request in Russian is scoped like one in English", () => {
  const RENAME_4 = "Переименуй задачу 4 в «Квартальный отчёт»";

  it("'переименуй задачу 4': the model's rename of task 5 is refused OUT_OF_SCOPE, nothing shown or sent", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(5, { TITLE: "Квартальный отчёт" })) });
    const view = await run(RENAME_4);
    await refusedOutOfScope(view, "task 5");
    expect(view.state!.reason).toContain("task 5 is outside the request's scope (tasks 4)");
  });

  it("'переименуй задачу 4': the model's change of task 4's responsible person is refused OUT_OF_SCOPE", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(4, { RESPONSIBLE_ID: "1" })) });
    const view = await run(RENAME_4);
    await refusedOutOfScope(view, "RESPONSIBLE_ID");
    expect(view.state!.reason).toContain("field RESPONSIBLE_ID outside the request's scope (TITLE)");
  });

  it("'переименуй задачу 4': the rename the request asks for is shown for approval, task 4, TITLE", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Квартальный отчёт" })) });
    const view = await run(RENAME_4);
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    expect(view.approval!.envelope.object).toEqual({ type: "task", id: 4 });
    expect(Object.keys(view.approval!.envelope.params)).toEqual(["TITLE"]);
    expect(await t.portal.writes()).toEqual([]);
  });
});

describe("a list of ids names each of them and no other", () => {
  const set = (third: number): SetAction[] => [
    { operation: "update_task", taskId: 4, fields: { TITLE: "Set one" } },
    { operation: "update_task", taskId: 5, fields: { TITLE: "Set two" } },
    { operation: "update_task", taskId: third, fields: { TITLE: "Set three" } },
  ];

  it("'rename tasks 4 and 5': a change set that also renames task 8 is refused OUT_OF_SCOPE", async () => {
    await t.open({ model: new ScriptedChatModel(readThenProposeSet(set(8))) });
    const view = await run("rename tasks 4 and 5 to Set one and Set two");
    await refusedOutOfScope(view, "task 8 in a set");
    expect(view.state!.reason).toContain("task 8 is outside the request's scope (tasks 4, 5)");
  });

  it("'переименуй задачи 4 и 5': the same set is refused OUT_OF_SCOPE", async () => {
    await t.open({ model: new ScriptedChatModel(readThenProposeSet(set(8))) });
    const view = await run("Переименуй задачи 4 и 5: «Set one» и «Set two»");
    await refusedOutOfScope(view, "task 8 in a set, Russian");
  });
});

describe("an id inside a quoted value names no object", () => {
  it("'rename task 4 to \"Close task 2\"': the model's rename of task 2 is refused OUT_OF_SCOPE", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(2, { TITLE: "Close task 2" })) });
    const view = await run('rename task 4 to "Close task 2"');
    await refusedOutOfScope(view, "task 2 named in the new title");
    expect(view.state!.reason).toContain("task 2 is outside the request's scope (tasks 4)");
  });

  it("«Закрыть задачу 2» as task 4's new title names task 4 only", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(2, { TITLE: "Закрыть задачу 2" })) });
    const view = await run("Переименуй задачу 4 в «Закрыть задачу 2»");
    await refusedOutOfScope(view, "task 2 named in the new Russian title");
  });
});

describe("a request about existing objects that asks for no new one reaches no create", () => {
  /** Proposes add_task with `fields` at once (a create reads nothing first). */
  const proposeCreate =
    (fields: Record<string, unknown>): Script =>
    (messages) =>
      messages.some((m) => m.getType() === "tool")
        ? new AIMessage("Proposed; waiting for the human.")
        : new AIMessage({
            content: "",
            tool_calls: [call("propose_change", { operation: "add_task", fields, rationale: "requested" })],
          });

  it("'rename task 4 to X and assign it to user 5': the model's new task titled X for user 5 is refused OUT_OF_SCOPE", async () => {
    await t.open({
      model: new ScriptedChatModel(proposeCreate({ TITLE: "Vendor audit", RESPONSIBLE_ID: "5" })),
    });
    const view = await run("rename task 4 to Vendor audit and assign it to user 5");
    await refusedOutOfScope(view, "add_task for a rename");
    expect(view.state!.reason).toContain("operation add_task is outside the request's scope");
  });

  it("'переименуй задачу 4 и назначь ответственным пользователя 5': the same new task is refused OUT_OF_SCOPE", async () => {
    await t.open({ model: new ScriptedChatModel(proposeCreate({ TITLE: "Аудит", RESPONSIBLE_ID: "5" })) });
    const view = await run("Переименуй задачу 4 в «Аудит» и назначь ответственным пользователя 5");
    await refusedOutOfScope(view, "add_task for a Russian rename");
  });

  it("'create a task … for user 5' is shown for approval as a new task", async () => {
    await t.open({
      model: new ScriptedChatModel(proposeCreate({ TITLE: "Vendor audit", RESPONSIBLE_ID: "5" })),
    });
    const view = await run('create a task "Vendor audit" for user 5 like task 4');
    expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
    expect(view.approval!.envelope.operation).toBe("add_task");
  });
});

describe("deriveScope: the words of a request", () => {
  const policy = defaultPolicy();

  it("names the tasks and deals of Russian requests, in every case form, with № and lists and ranges", () => {
    for (const [request, taskIds, dealIds] of [
      ["Переименуй задачу 4 в «Отчёт»", [4], undefined],
      ["Задача 4: поменяй заголовок", [4], undefined],
      ["в задаче №4 поменяй срок", [4], undefined],
      ["поставь задачам 4, 5 и 8 высокий приоритет", [4, 5, 8], undefined],
      ["задачи 4–6: статус «в работе»", [4, 5, 6], undefined],
      ["tasks 4, 5 and 8: priority high", [4, 5, 8], undefined],
      ["tasks #4 & #5: priority high", [4, 5], undefined],
      ["переведи сделку 3 в стадию WON", undefined, [3]],
      ["сделки 3 и 4: сумма 1000", undefined, [3, 4]],
      ["в сделке 3 и задаче 4 поменяй ответственного", [4], [3]],
    ] as const) {
      const scope = deriveScope(request);
      expect(scope.taskIds, request).toEqual(taskIds);
      expect(scope.dealIds, request).toEqual(dealIds);
    }
  });

  it("names the fields of Russian requests", () => {
    for (const [request, field] of [
      ["Переименуй задачу 4 в «Отчёт»", "TITLE"],
      ["поменяй название задачи 4", "TITLE"],
      ["перенеси срок задачи 4 на 15 января", "DEADLINE"],
      ["поставь задаче 4 высокий приоритет", "PRIORITY"],
      ["смени статус задачи 4", "STATUS"],
      ["назначь ответственным за задачу 4 Ивана", "RESPONSIBLE_ID"],
      ["обнови описание задачи 4", "DESCRIPTION"],
      ["оставь комментарий к задаче 4: готово", "POST_MESSAGE"],
      ["переведи сделку 3 на стадию WON", "STAGE_ID"],
      ["поменяй сумму сделки 3 на 1000", "OPPORTUNITY"],
    ] as const) {
      expect(deriveScope(request).fields, request).toContain(field);
    }
  });

  it("a create in Russian is about a new task's fields; an update of task 4 is not a create", () => {
    expect(deriveScope("Создай задачу «Сверка» для Ивана").fields).toEqual(
      expect.arrayContaining(["TITLE", "RESPONSIBLE_ID", "DEADLINE"]),
    );
    expect(deriveScope("поставь задаче 4 высокий приоритет")).toEqual({ taskIds: [4], fields: ["PRIORITY"] });
  });

  it("a Russian request's scope refuses what it does not name and allows what it does", () => {
    const scope = deriveScope("Переименуй задачу 4 в «Квартальный отчёт»");
    expect(scope).toEqual({ taskIds: [4], fields: ["TITLE"] });
    const update = (taskId: number, fields: Record<string, unknown>) =>
      checkProposal(policy, scope, { operation: "update_task", taskId, fields });
    expect(update(4, { TITLE: "Квартальный отчёт" }).allowed).toBe(true);
    expect(update(40, { TITLE: "Квартальный отчёт" })).toMatchObject({
      allowed: false,
      code: "OUT_OF_SCOPE",
    });
    expect(update(4, { PRIORITY: "2" })).toMatchObject({ allowed: false, code: "OUT_OF_SCOPE" });
  });

  it("text in quotes is a value: its ids and field words widen nothing", () => {
    expect(deriveScope('rename task 4 to "Close task 7 by the deadline"')).toEqual({
      taskIds: [4],
      fields: ["TITLE"],
    });
    expect(deriveScope("переименуй задачу 4 в «Срок по сделке 3»")).toEqual({
      taskIds: [4],
      fields: ["TITLE"],
    });
  });
});
