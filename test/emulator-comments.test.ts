/**
 * task.commentitem.add / get / getlist / delete and tasks.task.add / delete on the emulator over HTTP: documented
 * shapes (positional parameters, UPPER_SNAKE items), documented errors, the task's history row and commentsCount,
 * and the shared write machinery (faults, call log, Idempotency-Key replay) on every new write.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

async function call(
  method: string,
  params: unknown = {},
  headers: Record<string, string> = {},
  on: RunningEmulator = emu,
) {
  const res = await fetch(on.webhookUrl + method, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(params),
  });
  return {
    status: res.status,
    body: (await res.json()) as any,
    replayed: res.headers.get("idempotent-replayed"),
  };
}

/** Sends a write whose answer the armed apply_then_timeout fault holds back; resolves when the client gives up. */
async function lostAnswer(method: string, params: unknown): Promise<string> {
  return fetch(emu.webhookUrl + method, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
    signal: AbortSignal.timeout(400),
  }).then(
    () => "answered",
    () => "timed out",
  );
}

beforeAll(async () => {
  emu = await startEmulator({ rate: 0 });
  control = new EmulatorControl(emu.baseUrl);
});
afterAll(() => emu.close());
beforeEach(() => control.reset());

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+03:00$/;
const core = (description: string) => ({
  status: 400,
  body: { error: "ERROR_CORE", error_description: description },
});

describe("task.commentitem.add", () => {
  it("returns the new id as a number, counts it on the task, writes a COMMENT history row and leaves changedDate alone", async () => {
    const before = (await call("tasks.task.get", { taskId: 4 })).body.result.task;
    expect(before.commentsCount).toBeNull();
    const res = await call("task.commentitem.add", {
      TASKID: 4,
      FIELDS: { POST_MESSAGE: "Checked the envelope" },
    });
    expect(res.status).toBe(200);
    expect(typeof res.body.result).toBe("number");
    const id = res.body.result as number;
    const after = (await call("tasks.task.get", { taskId: 4 })).body.result.task;
    expect(after.commentsCount).toBe("1");
    expect(after.changedDate).toBe(before.changedDate);
    expect(after.changedBy).toBe(before.changedBy);
    const history = (await call("tasks.task.history.list", { taskId: 4 })).body.result.list;
    expect(history.at(-1)).toMatchObject({
      field: "COMMENT",
      value: { from: null, to: String(id) },
      user: { id: 1 },
    });
    const second = (
      await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "And again", AUTHOR_ID: 5 } })
    ).body.result;
    expect(second).toBe(id + 1);
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.commentsCount).toBe("2");
  });

  it("binds its parameters by position: an array body works, and names do not matter", async () => {
    expect((await call("task.commentitem.add", [2, { POST_MESSAGE: "positional" }])).status).toBe(200);
    expect((await call("task.commentitem.add", { a: 2, b: { POST_MESSAGE: "named oddly" } })).status).toBe(
      200,
    );
    const list = (await call("task.commentitem.getlist", { TASKID: 2 })).body.result;
    expect(list.map((c: { POST_MESSAGE: string }) => c.POST_MESSAGE)).toEqual(["named oddly", "positional"]);
  });

  it("answers the documented errors: empty text, no such task or no access, unknown field, wrong types", async () => {
    expect(await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "" } })).toMatchObject(
      core("Comment text not specified<br>"),
    );
    expect(await call("task.commentitem.add", { TASKID: 4, FIELDS: { AUTHOR_ID: 1 } })).toMatchObject(
      core("Comment text not specified<br>"),
    );
    expect(await call("task.commentitem.add", { TASKID: 999, FIELDS: { POST_MESSAGE: "x" } })).toMatchObject(
      core("Insufficient permissions to add a comment.<br>"),
    );
    expect(await call("task.commentitem.add", { TASKID: 7, FIELDS: { POST_MESSAGE: "x" } })).toMatchObject(
      core("Insufficient permissions to add a comment.<br>"),
    );
    expect(
      await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "x", TITLE: "y" } }),
    ).toMatchObject(
      core(
        'TASKS_ERROR_EXCEPTION_#256; Param #1 (arFields) for method ctaskcommentitem::add() must not contain key "TITLE".; 256/TE/WRONG_ARGUMENTS.<br>',
      ),
    );
    expect(
      await call("task.commentitem.add", { TASKID: "four", FIELDS: { POST_MESSAGE: "x" } }),
    ).toMatchObject(
      core(
        'TASKS_ERROR_EXCEPTION_#256; Param #0 (taskId) for method ctaskcommentitem::add() expected to be of type "integer", but given something else.; 256/TE/WRONG_ARGUMENTS.<br>',
      ),
    );
    expect(await call("task.commentitem.add", { TASKID: 4 })).toMatchObject(
      core(
        "TASKS_ERROR_EXCEPTION_#256; Param #1 (arFields) expected by method ctaskcommentitem::add(), but not given.; 256/TE/WRONG_ARGUMENTS.<br>",
      ),
    );
    // The `<br>` travels as PHP's JSON_HEX_TAG escape.
    const raw = await (
      await fetch(emu.webhookUrl + "task.commentitem.add", {
        method: "POST",
        body: JSON.stringify({ TASKID: 4, FIELDS: { POST_MESSAGE: "" } }),
        headers: { "content-type": "application/json" },
      })
    ).text();
    expect(raw).toContain("\\u003Cbr\\u003E");
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.commentsCount).toBeNull();
  });
});

describe("task.commentitem.get and getlist", () => {
  it("returns the documented item shape", async () => {
    const id = (
      await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "Shape check", AUTHOR_ID: 5 } })
    ).body.result;
    const { status, body } = await call("task.commentitem.get", { TASKID: 4, ITEMID: id });
    expect(status).toBe(200);
    expect(body.result).toEqual({
      POST_MESSAGE_HTML: null,
      ID: String(id),
      AUTHOR_ID: "5",
      AUTHOR_NAME: "Elena Kuznetsova",
      AUTHOR_EMAIL: "",
      POST_DATE: expect.stringMatching(ISO_WITH_OFFSET),
      POST_MESSAGE: "Shape check",
      ATTACHED_OBJECTS: {},
    });
  });

  it("get: a missing comment, another task's comment, an unreadable task and a missing ITEMID answer the documented errors", async () => {
    const id = (await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "mine" } })).body
      .result;
    const notFound = core(
      "TASKS_ERROR_EXCEPTION_#512; Check listitem not found or not accessible; 512/TE/ITEM_NOT_FOUND_OR_NOT_ACCESSIBLE.<br>",
    );
    expect(await call("task.commentitem.get", { TASKID: 4, ITEMID: 999 })).toMatchObject(notFound);
    expect(await call("task.commentitem.get", { TASKID: 2, ITEMID: id })).toMatchObject(notFound);
    expect(await call("task.commentitem.get", { TASKID: 7, ITEMID: id })).toMatchObject(notFound);
    // Positional: the item id first is the wrong order, read as TASKID = id, ITEMID = 4.
    expect(await call("task.commentitem.get", { ITEMID: id, TASKID: 4 })).toMatchObject(notFound);
    expect(await call("task.commentitem.get", { TASKID: 4 })).toMatchObject(
      core(
        "TASKS_ERROR_EXCEPTION_#256; Param #1 (itemId) expected by method ctaskcommentitem::get(), but not given.; 256/TE/WRONG_ARGUMENTS.<br>",
      ),
    );
  });

  it("getlist: newest first by default, ORDER and FILTER with prefixes, errors for unknown keys and unreadable tasks", async () => {
    const ids: number[] = [];
    for (const [text, author] of [
      ["one", 1],
      ["two", 5],
      ["three", 1],
    ] as const) {
      ids.push(
        (await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: text, AUTHOR_ID: author } }))
          .body.result,
      );
    }
    const messages = (r: { body: { result: Array<{ POST_MESSAGE: string }> } }) =>
      r.body.result.map((c) => c.POST_MESSAGE);
    const all = await call("task.commentitem.getlist", { TASKID: 4 });
    expect(all.status).toBe(200);
    expect(messages(all)).toEqual(["three", "two", "one"]);
    expect(all.body.total).toBeUndefined();
    expect(messages(await call("task.commentitem.getlist", { TASKID: 4, ORDER: { ID: "asc" } }))).toEqual([
      "one",
      "two",
      "three",
    ]);
    expect(
      messages(
        await call("task.commentitem.getlist", { TASKID: 4, ORDER: { ID: "asc" }, FILTER: { AUTHOR_ID: 1 } }),
      ),
    ).toEqual(["one", "three"]);
    expect(
      messages(await call("task.commentitem.getlist", { TASKID: 4, ORDER: {}, FILTER: { ">ID": ids[0] } })),
    ).toEqual(["three", "two"]);
    expect(
      messages(await call("task.commentitem.getlist", { TASKID: 4, ORDER: {}, FILTER: { "!AUTHOR_ID": 1 } })),
    ).toEqual(["two"]);
    expect((await call("task.commentitem.getlist", { TASKID: 2 })).body.result).toEqual([]);
    // FILTER without ORDER is read as the order (positional), as the docs' error shows.
    expect(
      await call("task.commentitem.getlist", { TASKID: 4, FILTER: { ">=POST_DATE": "2025-01-01" } }),
    ).toMatchObject(
      core(
        'TASKS_ERROR_EXCEPTION_#256; Param #1 (arOrder) for method ctaskcommentitem::getlist() must not contain key ">=POST_DATE".; 256/TE/WRONG_ARGUMENTS.<br>',
      ),
    );
    expect(
      await call("task.commentitem.getlist", { TASKID: 4, ORDER: {}, FILTER: { "%POST_DATE": "2026" } }),
    ).toMatchObject(
      core(
        'TASKS_ERROR_EXCEPTION_#256; Param #2 (arFilter) for method ctaskcommentitem::getlist() must not contain key "%POST_DATE".; 256/TE/WRONG_ARGUMENTS.<br>',
      ),
    );
    expect(await call("task.commentitem.getlist", { TASKID: 7 })).toMatchObject(
      core("TASKS_ERROR_EXCEPTION_#8; Action failed; 8/TE/ACTION_FAILED_TO_BE_PROCESSED.<br>"),
    );
  });
});

describe("task.commentitem.delete", () => {
  it("deletes the webhook user's comment (result true) and lowers commentsCount; others' only as an administrator", async () => {
    const mine = (await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "mine" } })).body
      .result;
    const elenas = (
      await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "hers", AUTHOR_ID: 5 } })
    ).body.result;
    expect(await call("task.commentitem.delete", { TASKID: 4, ITEMID: mine })).toMatchObject({
      status: 200,
      body: { result: true },
    });
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.commentsCount).toBe("1");
    const notAllowed = core("TASKS_ERROR_EXCEPTION_#4; Action is not allowed; 4/TE/ACTION_NOT_ALLOWED.<br>");
    expect(await call("task.commentitem.delete", { TASKID: 4, ITEMID: mine })).toMatchObject(notAllowed);
    expect(await call("task.commentitem.delete", { TASKID: 2, ITEMID: elenas })).toMatchObject(notAllowed);

    // Webhook user 2 is not an administrator: Elena's comment stays.
    const asIvan = await startEmulator({ rate: 0, userId: 2 });
    try {
      const hers = (
        await call(
          "task.commentitem.add",
          { TASKID: 4, FIELDS: { POST_MESSAGE: "hers", AUTHOR_ID: 5 } },
          {},
          asIvan,
        )
      ).body.result;
      expect(await call("task.commentitem.delete", { TASKID: 4, ITEMID: hers }, {}, asIvan)).toMatchObject(
        notAllowed,
      );
    } finally {
      await asIvan.close();
    }
    // User 1 is the portal administrator in the default seed.
    expect(await call("task.commentitem.delete", { TASKID: 4, ITEMID: elenas })).toMatchObject({
      status: 200,
      body: { result: true },
    });
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.commentsCount).toBeNull();
    expect((await call("task.commentitem.getlist", { TASKID: 4 })).body.result).toEqual([]);
  });
});

describe("tasks.task.add and tasks.task.delete", () => {
  it("add returns the full task; delete answers {task: true}, after which get answers result: []", async () => {
    const added = await call("tasks.task.add", { fields: { TITLE: "Temporary", RESPONSIBLE_ID: 3 } });
    expect(added.status).toBe(200);
    const id = Number(added.body.result.task.id);
    expect(added.body.result.task).toMatchObject({ title: "Temporary", responsibleId: "3", createdBy: "1" });
    await call("task.commentitem.add", { TASKID: id, FIELDS: { POST_MESSAGE: "goes with the task" } });
    expect(await call("tasks.task.delete", { taskId: id })).toMatchObject({
      status: 200,
      body: { result: { task: true } },
    });
    expect((await call("tasks.task.get", { taskId: id })).body.result).toEqual([]);
    expect((await call("tasks.task.history.list", { taskId: id })).body.result.list).toEqual([]);
  });

  it("delete answers the documented errors", async () => {
    const noAccess = {
      status: 400,
      body: { error: "1048582", error_description: "No access to delete the task" },
    };
    expect(await call("tasks.task.delete", { taskId: 999 })).toMatchObject(noAccess);
    expect(await call("tasks.task.delete", { taskId: 6 })).toMatchObject(noAccess); // readable, not editable
    expect(await call("tasks.task.delete", { taskId: 5 })).toMatchObject(noAccess); // created by someone else
    expect(await call("tasks.task.delete", { taskId: "x" })).toMatchObject({
      status: 400,
      body: { error: "0", error_description: "wrong task id" },
    });
    expect(await call("tasks.task.delete", {})).toMatchObject({ status: 400, body: { error: "100" } });
    expect((await call("tasks.task.get", { taskId: 5 })).body.result.task.id).toBe("5");
  });
});

describe("the new writes share the write machinery", () => {
  it("apply_then_timeout on each write: applied exactly once, one call in the log with status 0", async () => {
    const cases: Array<[string, unknown, () => Promise<void>]> = [
      [
        "task.commentitem.add",
        { TASKID: 4, FIELDS: { POST_MESSAGE: "lost answer" } },
        async () => {
          expect(
            (await call("task.commentitem.getlist", { TASKID: 4 })).body.result.map(
              (c: { POST_MESSAGE: string }) => c.POST_MESSAGE,
            ),
          ).toEqual(["lost answer"]);
        },
      ],
      [
        "task.commentitem.delete",
        { TASKID: 4, ITEMID: 1 },
        async () => {
          expect((await call("task.commentitem.getlist", { TASKID: 4 })).body.result).toEqual([]);
        },
      ],
      [
        "tasks.task.add",
        { fields: { TITLE: "Lost answer task", RESPONSIBLE_ID: 2 } },
        async () => {
          expect(
            (await call("tasks.task.list", { filter: { TITLE: "Lost answer task" } })).body.result.tasks,
          ).toHaveLength(1);
        },
      ],
      [
        "tasks.task.delete",
        { taskId: 8 },
        async () => {
          expect((await call("tasks.task.get", { taskId: 8 })).body.result).toEqual([]);
        },
      ],
      [
        "crm.deal.update",
        { id: 1, fields: { STAGE_ID: "WON" } },
        async () => {
          expect((await call("crm.deal.get", { id: 1 })).body.result).toMatchObject({
            STAGE_ID: "WON",
            CLOSED: "Y",
          });
        },
      ],
    ];
    for (const [method, params, check] of cases) {
      await control.armFault({ method, kind: "apply_then_timeout" });
      expect(await lostAnswer(method, params)).toBe("timed out");
      const log = await control.calls({ method });
      expect(log).toHaveLength(1);
      expect(log[0]).toMatchObject({ status: 0, fault: "apply_then_timeout" });
      await check();
    }
  });

  it("ack_without_apply and timeout_without_apply apply nothing", async () => {
    await control.armFault({ method: "task.commentitem.add", kind: "ack_without_apply" });
    expect(
      (await call("task.commentitem.add", { TASKID: 4, FIELDS: { POST_MESSAGE: "acknowledged only" } })).body
        .result,
    ).toBeTypeOf("number");
    await control.armFault({ method: "tasks.task.delete", kind: "timeout_without_apply" });
    expect(await lostAnswer("tasks.task.delete", { taskId: 8 })).toBe("timed out");
    expect((await call("task.commentitem.getlist", { TASKID: 4 })).body.result).toEqual([]);
    expect((await call("tasks.task.get", { taskId: 4 })).body.result.task.commentsCount).toBeNull();
    expect((await call("tasks.task.get", { taskId: 8 })).body.result.task.id).toBe("8");
  });

  it("an Idempotency-Key replays the first answer: one comment, one new task, even after a lost answer", async () => {
    const key = { "idempotency-key": "comment-key-0001" };
    await control.armFault({ method: "task.commentitem.add", kind: "apply_then_timeout" });
    const lost = await fetch(emu.webhookUrl + "task.commentitem.add", {
      method: "POST",
      headers: { "content-type": "application/json", ...key },
      body: JSON.stringify({ TASKID: 4, FIELDS: { POST_MESSAGE: "exactly once" } }),
      signal: AbortSignal.timeout(400),
    }).then(
      () => "answered",
      () => "timed out",
    );
    expect(lost).toBe("timed out");
    const resent = await call(
      "task.commentitem.add",
      { TASKID: 4, FIELDS: { POST_MESSAGE: "exactly once" } },
      key,
    );
    expect(resent).toMatchObject({ status: 200, replayed: "true" });
    expect(typeof resent.body.result).toBe("number");
    expect((await call("task.commentitem.getlist", { TASKID: 4 })).body.result).toHaveLength(1);

    const taskKey = { "idempotency-key": "add-task-key-0001" };
    const first = await call(
      "tasks.task.add",
      { fields: { TITLE: "Once only", RESPONSIBLE_ID: 2 } },
      taskKey,
    );
    const again = await call(
      "tasks.task.add",
      { fields: { TITLE: "Once only", RESPONSIBLE_ID: 2 } },
      taskKey,
    );
    expect(again.replayed).toBe("true");
    expect(again.body.result.task.id).toBe(first.body.result.task.id);
    expect(
      (await call("tasks.task.list", { filter: { TITLE: "Once only" } })).body.result.tasks,
    ).toHaveLength(1);
    // Reads ignore the header: getlist is a read even though its name does not end in .list.
    const read = await call(
      "task.commentitem.getlist",
      { TASKID: 4 },
      { "idempotency-key": "comment-key-0001" },
    );
    expect(read).toMatchObject({ status: 200, replayed: null });
  });
});
