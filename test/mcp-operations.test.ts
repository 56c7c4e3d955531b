/**
 * The deal, comment and task add/delete operations end to end: our MCP server over stdio, the REST client inside it,
 * and the emulator over HTTP. Read roles answer the documented bodies and refuse crafted write arguments; write
 * roles go through writeHandle.call only, exactly one tools/call each, with the Idempotency-Key forwarded.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { createBitrix24Tools, type Bitrix24Tools } from "../src/tools/bitrix24-tools.js";
import type { McpCallResult } from "../src/tools/mcp-call.js";
import { READ_METHODS, READ_ROLES, WRITE_ROLES, type WriteRole } from "../src/tools/tool-roles.js";

const CODE = "mcp-operations-secret-code";

function ok(res: McpCallResult): any {
  if (!res.ok) throw new Error(`expected ok, got ${JSON.stringify(res.error)}`);
  expect(JSON.parse(res.text)).toEqual(res.body);
  return res.body;
}
function failed(res: McpCallResult) {
  if (res.ok) throw new Error(`expected an error, got ${res.text.slice(0, 200)}`);
  expect(res.text).not.toContain(CODE);
  return res.error;
}

describe("deals, comments and task add/delete over MCP stdio", () => {
  let emu: RunningEmulator;
  let control: EmulatorControl;
  let tools: Bitrix24Tools;

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
    control = new EmulatorControl(emu.baseUrl);
    tools = await createBitrix24Tools({
      mode: "stdio",
      env: { BITRIX24_WEBHOOK_URL: emu.webhookUrl, BITRIX24_TIMEOUT_MS: "1500", BITRIX24_RATE: "0" },
    });
  });
  afterAll(async () => {
    await tools?.close();
    await emu?.close();
  });
  beforeEach(() => control.reset());

  it("binds each role to its tool and method; write tools are never offered to the model", () => {
    expect(
      Object.fromEntries(
        Object.entries(tools.roles).map(([role, b]) => [role, [b.toolName, b.method, b.readOnly]]),
      ),
    ).toEqual({
      getTask: ["get_task_by_id", "tasks.task.get", true],
      listTasks: ["list_tasks", "tasks.task.list", true],
      getHistory: ["get_task_history", "tasks.task.history.list", true],
      getUsers: ["get_users", "user.get", true],
      getDeal: ["get_deal", "crm.deal.get", true],
      listDeals: ["search_deals", "crm.deal.list", true],
      listTaskComments: ["list_task_comments", "task.commentitem.getlist", true],
      getTaskComment: ["get_task_comment", "task.commentitem.get", true],
      updateTask: ["update_task", "tasks.task.update", false],
      addTaskComment: ["add_task_comment", "task.commentitem.add", false],
      addTask: ["add_task", "tasks.task.add", false],
      updateDeal: ["update_deal", "crm.deal.update", false],
      deleteTaskComment: ["delete_task_comment", "task.commentitem.delete", false],
      deleteTask: ["delete_task", "tasks.task.delete", false],
    });
    const offered = tools.readTools.map((t) => t.name);
    for (const role of WRITE_ROLES) {
      expect(offered).not.toContain(tools.roles[role].toolName);
      expect(READ_METHODS.has(tools.roles[role].method)).toBe(false);
    }
    for (const t of tools.readTools) {
      expect(
        READ_METHODS.has(String((t as { metadata?: Record<string, unknown> }).metadata?.["bitrix24Method"])),
      ).toBe(true);
    }
  });

  it("get_deal and search_deals return the Bitrix24 bodies; a missing deal is not_found, a hidden one access_denied", async () => {
    const deal = ok(await tools.read("getDeal", { dealId: 3 }));
    expect(deal.result).toMatchObject({
      ID: "3",
      STAGE_ID: "EXECUTING",
      OPPORTUNITY: "48500.50",
      CURRENCY_ID: "RUB",
      CLOSED: "N",
    });
    const list = ok(await tools.read("listDeals", { filter: { STAGE_ID: "NEW" } }));
    expect(list.result.map((d: { ID: string }) => d.ID)).toEqual(["1", "4"]);
    expect(list.total).toBe(2);
    expect(failed(await tools.read("getDeal", { dealId: 99 }))).toMatchObject({
      kind: "not_found",
      code: "",
      httpStatus: 400,
      description: "Not found",
    });
    const tool = tools.readTools.find((t) => t.name === "get_deal")!;
    expect(JSON.parse((await tool.invoke({ dealId: 1 })) as string).result.TITLE).toBe(
      "Office chairs for the Kazan branch",
    );
  });

  it("update_deal through writeHandle.call: result true, one crm.deal.update, the change shows on a re-read", async () => {
    const body = ok(
      await tools.writeHandle.call("updateDeal", {
        dealId: 1,
        fields: { STAGE_ID: "WON", OPPORTUNITY: 5200 },
      }),
    );
    expect(body.result).toBe(true);
    expect(await control.calls({ method: "crm.deal.update" })).toHaveLength(1);
    expect(ok(await tools.read("getDeal", { dealId: 1 })).result).toMatchObject({
      STAGE_ID: "WON",
      STAGE_SEMANTIC_ID: "S",
      CLOSED: "Y",
      OPPORTUNITY: "5200.00",
    });
    expect(
      failed(await tools.writeHandle.call("updateDeal", { dealId: 99, fields: { TITLE: "x" } })),
    ).toMatchObject({ kind: "not_found", outcomeUnknown: false });
    expect(
      failed(await tools.writeHandle.call("updateDeal", { dealId: 4, fields: { TITLE: "x" } })),
    ).toMatchObject({ kind: "access_denied", code: "" });
  });

  it("comments: add returns the id, list and get show it, delete removes it", async () => {
    const added = ok(
      await tools.writeHandle.call("addTaskComment", {
        taskId: 4,
        fields: { POST_MESSAGE: "Approved by the envelope" },
      }),
    );
    expect(typeof added.result).toBe("number");
    const listed = ok(await tools.read("listTaskComments", { taskId: 4 }));
    expect(listed.result).toEqual([
      expect.objectContaining({
        ID: String(added.result),
        AUTHOR_ID: "1",
        POST_MESSAGE: "Approved by the envelope",
      }),
    ]);
    const one = ok(await tools.read("getTaskComment", { taskId: 4, commentId: added.result }));
    expect(one.result.AUTHOR_NAME).toBe("Anna Petrova");
    expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.commentsCount).toBe("1");
    expect(
      ok(await tools.writeHandle.call("deleteTaskComment", { taskId: 4, commentId: added.result })).result,
    ).toBe(true);
    expect(failed(await tools.read("getTaskComment", { taskId: 4, commentId: added.result }))).toMatchObject({
      kind: "not_found",
      code: "ERROR_CORE",
    });
    expect(
      failed(await tools.writeHandle.call("deleteTaskComment", { taskId: 4, commentId: added.result })),
    ).toMatchObject({ kind: "access_denied" });
    expect(
      failed(
        await tools.writeHandle.call("addTaskComment", {
          taskId: 7,
          fields: { POST_MESSAGE: "hidden task" },
        }),
      ),
    ).toMatchObject({ kind: "access_denied" });
    // AUTHOR_ID is optional and passed through.
    const asElena = ok(
      await tools.writeHandle.call("addTaskComment", {
        taskId: 4,
        fields: { POST_MESSAGE: "as Elena", AUTHOR_ID: 5 },
      }),
    );
    expect(
      ok(await tools.read("getTaskComment", { taskId: 4, commentId: asElena.result })).result.AUTHOR_ID,
    ).toBe("5");
  });

  it("add_task and delete_task: the full new task, then {task: true} and the task is gone", async () => {
    const added = ok(
      await tools.writeHandle.call("addTask", { fields: { TITLE: "Created over MCP", RESPONSIBLE_ID: 3 } }),
    );
    const id = Number(added.result.task.id);
    expect(added.result.task).toMatchObject({ title: "Created over MCP", responsibleId: "3" });
    expect(ok(await tools.writeHandle.call("deleteTask", { taskId: id })).result).toEqual({ task: true });
    expect(failed(await tools.read("getTask", { taskId: id })).kind).toBe("not_found");
    expect(failed(await tools.writeHandle.call("deleteTask", { taskId: id }))).toMatchObject({
      kind: "access_denied",
      code: "1048582",
    });
    expect(
      failed(await tools.writeHandle.call("addTask", { fields: { TITLE: "No assignee" } })),
    ).toMatchObject({ kind: "invalid_request", code: "ERROR_CORE" });
  });

  it("apply_then_timeout on each write role: outcome unknown, exactly one applied write in the call log", async () => {
    const cases: Array<[WriteRole, string, Record<string, unknown>]> = [
      ["addTaskComment", "task.commentitem.add", { taskId: 4, fields: { POST_MESSAGE: "maybe" } }],
      ["deleteTaskComment", "task.commentitem.delete", { taskId: 4, commentId: 1 }],
      ["addTask", "tasks.task.add", { fields: { TITLE: "Maybe created", RESPONSIBLE_ID: 2 } }],
      ["deleteTask", "tasks.task.delete", { taskId: 8 }],
      ["updateDeal", "crm.deal.update", { dealId: 2, fields: { TITLE: "Maybe renamed" } }],
      ["updateTask", "tasks.task.update", { taskId: 4, fields: { TITLE: "Maybe renamed" } }],
    ];
    for (const [role, method, args] of cases) {
      await control.armFault({ method, kind: "apply_then_timeout" });
      const error = failed(await tools.writeHandle.call(role, args));
      expect(error, role).toMatchObject({ kind: "transport_timeout", outcomeUnknown: true });
      const log = await control.calls({ method });
      expect(log, role).toHaveLength(1);
      expect(log[0]).toMatchObject({ status: 0, fault: "apply_then_timeout" });
    }
    // Each was applied once.
    expect(ok(await tools.read("listTaskComments", { taskId: 4 })).result).toEqual([]);
    expect(
      ok(await tools.read("listTasks", { filter: { TITLE: "Maybe created" } })).result.tasks,
    ).toHaveLength(1);
    expect(failed(await tools.read("getTask", { taskId: 8 })).kind).toBe("not_found");
    expect(ok(await tools.read("getDeal", { dealId: 2 })).result.TITLE).toBe("Maybe renamed");
    expect(ok(await tools.read("getTask", { taskId: 4 })).result.task.title).toBe("Maybe renamed");
  });

  it("the idempotencyKey option travels as the Idempotency-Key: a resend after a lost answer is replayed, not applied again", async () => {
    for (const [role, method, args, otherFields] of [
      [
        "addTaskComment",
        "task.commentitem.add",
        { taskId: 4, fields: { POST_MESSAGE: "exactly once" } },
        { POST_MESSAGE: "other" },
      ],
      ["updateDeal", "crm.deal.update", { dealId: 3, fields: { OPPORTUNITY: 1 } }, { TITLE: "other" }],
    ] as Array<[WriteRole, string, Record<string, unknown>, Record<string, unknown>]>) {
      const key = `key-${role}-0001`;
      await control.armFault({ method, kind: "apply_then_timeout" });
      expect(failed(await tools.writeHandle.call(role, args, { idempotencyKey: key })).outcomeUnknown).toBe(
        true,
      );
      const resent = await tools.writeHandle.call(role, args, { idempotencyKey: key });
      expect(resent).toMatchObject({ ok: true, replayed: true });
      expect((await control.calls({ method })).map((c) => c.fault)).toEqual([
        "apply_then_timeout",
        "idempotent_replay",
      ]);
      // The same key with other arguments is refused, not applied.
      expect(
        failed(await tools.writeHandle.call(role, { ...args, fields: otherFields }, { idempotencyKey: key })),
      ).toMatchObject({ kind: "invalid_request", httpStatus: 422 });
      expect((await control.calls({ method })).map((c) => c.fault)).toEqual([
        "apply_then_timeout",
        "idempotent_replay",
        "idempotency_conflict",
      ]);
    }
    expect(ok(await tools.read("listTaskComments", { taskId: 4 })).result).toHaveLength(1);
    expect(ok(await tools.read("getDeal", { dealId: 3 })).result.OPPORTUNITY).toBe("1.00");
  });

  it("read roles refuse write arguments and write roles; nothing is written", async () => {
    expect(failed(await tools.read("getDeal", { dealId: 1, fields: { TITLE: "smuggled" } })).kind).toBe(
      "invalid_request",
    );
    expect(failed(await tools.read("listDeals", { filter: { ID: 1 }, method: "crm.deal.update" })).kind).toBe(
      "invalid_request",
    );
    expect(
      failed(await tools.read("listTaskComments", { taskId: 4, fields: { POST_MESSAGE: "smuggled" } })).kind,
    ).toBe("invalid_request");
    expect(
      failed(await tools.read("getTaskComment", { taskId: 4, commentId: 1, idempotencyKey: "abcdefgh1" }))
        .kind,
    ).toBe("invalid_request");
    for (const role of WRITE_ROLES) expect(() => tools.read(role as never, {})).toThrow(/expected one of/);
    expect(() => tools.writeHandle.call("getDeal" as never, { dealId: 1 })).toThrow(/expected one of/);
    const searchTool = tools.readTools.find((t) => t.name === "search_deals")!;
    await expect(
      searchTool.invoke({ filter: { ID: 1 }, fields: { TITLE: "smuggled" } } as never),
    ).rejects.toThrow();
    // Strict write schemas refuse unknown keys too.
    expect(
      failed(
        await tools.writeHandle.call("addTaskComment", {
          taskId: 4,
          fields: { POST_MESSAGE: "x", TITLE: "y" },
        }),
      ).kind,
    ).toBe("invalid_request");
    const writes = (await control.calls()).filter((c) => !READ_METHODS.has(c.method));
    expect(writes).toEqual([]);
  });

  it("scope: without crm the deal tools answer auth errors; the task tools still work", async () => {
    const noCrm = await startEmulator({ port: 0, code: CODE, rate: 0, scopes: ["task", "user"] });
    const other = await createBitrix24Tools({
      mode: "stdio",
      env: { BITRIX24_WEBHOOK_URL: noCrm.webhookUrl, BITRIX24_RATE: "0" },
    });
    try {
      expect(failed(await other.read("getDeal", { dealId: 1 }))).toMatchObject({
        kind: "auth",
        code: "insufficient_scope",
        httpStatus: 403,
      });
      expect(
        failed(await other.writeHandle.call("updateDeal", { dealId: 1, fields: { TITLE: "x" } })),
      ).toMatchObject({ kind: "auth", outcomeUnknown: false });
      expect(ok(await other.read("getTask", { taskId: 4 })).result.task.id).toBe("4");
    } finally {
      await other.close();
      await noCrm.close();
    }
  });
});

describe("role mapping guard", () => {
  it("refuses to map any read role onto any write role's tool, before connecting", async () => {
    const names: Record<string, string> = {
      updateTask: "update_task",
      addTaskComment: "add_task_comment",
      addTask: "add_task",
      updateDeal: "update_deal",
      deleteTaskComment: "delete_task_comment",
      deleteTask: "delete_task",
    };
    for (const read of READ_ROLES) {
      for (const write of WRITE_ROLES) {
        await expect(
          createBitrix24Tools({
            mode: "url",
            url: "http://127.0.0.1:9/mcp",
            toolNames: { [read]: names[write] },
          }),
          `${read} -> ${write}`,
        ).rejects.toThrow(
          new RegExp(`${read} must name a read tool, but it names "${names[write]}", the ${write} tool`),
        );
      }
    }
  });
});
