import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { Bitrix24Error, type Bitrix24ErrorKind } from "../src/bitrix24/errors.js";
import { redactWebhook, type Bitrix24ClientOptions } from "../src/bitrix24/transport.js";

const CODE = "client-test-secret-code";

interface CallRow {
  seq: number;
  method: string;
  params: Record<string, unknown>;
  status: number;
}

async function control(
  emu: RunningEmulator,
  path: string,
  method: "GET" | "POST" | "DELETE",
  body?: unknown,
): Promise<unknown> {
  const res = await fetch(`${emu.baseUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? null : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`emulator control ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

const arm = (emu: RunningEmulator, fault: Record<string, unknown>) =>
  control(emu, "/_emulator/faults", "POST", fault);
const calls = async (emu: RunningEmulator, method?: string) => {
  const all = ((await control(emu, "/_emulator/calls", "GET")) as { calls: CallRow[] }).calls;
  return method ? all.filter((c) => c.method === method) : all;
};

/** Awaits a rejection, checks it is a Bitrix24Error of `kind`, and that the webhook code leaks nowhere. */
async function expectKind(promise: Promise<unknown>, kind: Bitrix24ErrorKind): Promise<Bitrix24Error> {
  const err = await promise.then(
    (value) => {
      throw new Error(
        `expected a Bitrix24Error of kind ${kind}, got success: ${JSON.stringify(value).slice(0, 200)}`,
      );
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Bitrix24Error);
  const b = err as Bitrix24Error;
  expect(b.kind, b.message).toBe(kind);
  expect(b.message).not.toContain(CODE);
  expect(JSON.stringify(b.toData())).not.toContain(CODE);
  return b;
}

describe("Bitrix24Client against the emulator", () => {
  let emu: RunningEmulator;
  const make = (extra: Partial<Bitrix24ClientOptions> = {}) =>
    new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0, retryBaseMs: 20, ...extra });

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 0 });
  });
  afterAll(async () => {
    await emu?.close();
  });
  beforeEach(async () => {
    await control(emu, "/_emulator/reset", "POST", {});
  });

  describe("typed results", () => {
    it("getTask returns the full documented body of task 4", async () => {
      const body = await make().getTask(4);
      const task = body.result.task;
      expect(task.id).toBe("4");
      expect(task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
      expect(task.responsibleId).toBe("5");
      expect(task.priority).toBe("1");
      expect(task.groupId).toBe("3");
      expect(task.action?.edit).toBe(true);
      expect(body.time).toBeTypeOf("object");
    });

    it("getTask with select sends it and still validates", async () => {
      const body = await make().getTask(4, ["ID", "TITLE", "DEADLINE"]);
      expect(body.result.task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
      const [call] = await calls(emu, "tasks.task.get");
      expect(call?.params.select).toEqual(["ID", "TITLE", "DEADLINE"]);
    });

    it("listTasks returns result.tasks and a numeric total", async () => {
      const body = await make().listTasks({});
      expect(Array.isArray(body.result.tasks)).toBe(true);
      expect(body.result.tasks.length).toBeGreaterThan(0);
      expect(typeof body.total).toBe("number");
      expect(body.result.tasks.some((t) => t.id === "4")).toBe(true);
      // Task 7 is invisible to the webhook user, so a list must not show it either.
      expect(body.result.tasks.some((t) => t.id === "7")).toBe(false);
    });

    it("listTasks passes filter, order and start", async () => {
      const body = await make().listTasks({ filter: { ID: 4 }, order: { ID: "asc" }, start: 0 });
      expect(body.result.tasks.map((t) => t.id)).toEqual(["4"]);
      const [call] = await calls(emu, "tasks.task.list");
      expect(call?.params).toMatchObject({ filter: { ID: 4 }, order: { ID: "asc" }, start: 0 });
    });

    it("getTaskHistory returns result.list rows", async () => {
      const body = await make().getTaskHistory(4);
      expect(Array.isArray(body.result.list)).toBe(true);
      for (const row of body.result.list) {
        expect(typeof row.field).toBe("string");
        expect(typeof row.createdDate).toBe("string");
      }
    });

    it("updateTask changes the task, returns it, and a fresh get and the history show the change", async () => {
      const client = make();
      const body = await client.updateTask(4, { TITLE: "Renamed by the client test" });
      expect(body.result.task.title).toBe("Renamed by the client test");
      expect((await client.getTask(4)).result.task.title).toBe("Renamed by the client test");
      const history = await client.getTaskHistory(4);
      expect(history.result.list.some((r) => r.field === "TITLE")).toBe(true);
      expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    });

    it("currentUser returns the webhook user", async () => {
      const body = await make().currentUser();
      expect(String(body.result.ID)).toBe("1");
    });

    it("portal is host:port and never the code", () => {
      const client = make();
      expect(client.portal).toBe(`127.0.0.1:${emu.port}`);
      expect(client.portal).not.toContain(CODE);
    });
  });

  describe("error kinds", () => {
    it("auth: a wrong webhook code gives 401 INVALID_CREDENTIALS, without echoing the code", async () => {
      const wrong = emu.webhookUrl.replace(CODE, "wrong-code-123");
      const client = new Bitrix24Client({ webhookUrl: wrong, rate: 0 });
      const err = await expectKind(client.getTask(4), "auth");
      expect(err.httpStatus).toBe(401);
      expect(err.code).toBe("INVALID_CREDENTIALS");
      expect(err.message).not.toContain("wrong-code-123");
    });

    it("access_denied: update of a task the user may read but not edit", async () => {
      const err = await expectKind(make().updateTask(6, { TITLE: "nope" }), "access_denied");
      expect(err.httpStatus).toBe(400);
      expect(err.code).toBe("0");
      expect(err.outcomeUnknown).toBe(false);
    });

    it("not_found: get of a task the user cannot see (result: [])", async () => {
      const err = await expectKind(make().getTask(7), "not_found");
      expect(err.httpStatus).toBe(200);
    });

    it("invalid_request: wrong task id, code 100 for empty fields, unknown method", async () => {
      const client = make();
      const wrongId = await expectKind(
        client.call("tasks.task.get", { taskId: 0 }, "read"),
        "invalid_request",
      );
      expect(wrongId.code).toBe("0");
      expect(wrongId.description).toMatch(/wrong task id/);
      const empty = await expectKind(client.updateTask(4, {}), "invalid_request");
      expect(empty.code).toBe("100");
      const unknown = await expectKind(client.call("tasks.task.nosuch", {}, "read"), "invalid_request");
      expect(unknown.httpStatus).toBe(404);
      expect(unknown.code).toBe("ERROR_METHOD_NOT_FOUND");
    });

    it("invalid_request: a bad taskId or method name is refused before any call", async () => {
      const client = make();
      await expectKind(client.getTask(-3), "invalid_request");
      await expectKind(client.getTask(1.5), "invalid_request");
      await expectKind(client.call("../../_emulator/reset", {}, "write"), "invalid_request");
      expect(await calls(emu)).toHaveLength(0);
    });

    it("invalid_request: ERROR_CORE validation (empty title)", async () => {
      const err = await expectKind(make().updateTask(4, { TITLE: "" }), "invalid_request");
      expect(err.code).toBe("ERROR_CORE");
    });

    it("rate_limited: 503 QUERY_LIMIT_EXCEEDED on a read is retried a bounded number of times", async () => {
      await arm(emu, {
        method: "tasks.task.get",
        kind: "error",
        status: 503,
        error: "QUERY_LIMIT_EXCEEDED",
        description: "Too many requests",
        times: 0,
      });
      const err = await expectKind(make({ maxReadRetries: 2 }).getTask(4), "rate_limited");
      expect(err.httpStatus).toBe(503);
      expect(await calls(emu, "tasks.task.get")).toHaveLength(3);
    });

    it("rate_limited on a write: not applied by the portal, so it is retried and applied once", async () => {
      await arm(emu, {
        method: "tasks.task.update",
        kind: "error",
        status: 503,
        error: "QUERY_LIMIT_EXCEEDED",
        description: "Too many requests",
        times: 1,
      });
      const client = make();
      const body = await client.updateTask(4, { TITLE: "After one 503" });
      expect(body.result.task.title).toBe("After one 503");
      const updates = await calls(emu, "tasks.task.update");
      expect(updates.map((c) => c.status)).toEqual([503, 200]);
      const history = await client.getTaskHistory(4);
      expect(history.result.list.filter((r) => r.field === "TITLE")).toHaveLength(1);
    });

    it("a 5xx on a write is reported once, not retried, and its outcome is unknown", async () => {
      // A 500/502/504 may come while the portal is carrying the write out (or after it did): it is not
      // a refusal, so the outcome is unknown, as for a lost answer.
      for (const status of [500, 502, 504]) {
        await arm(emu, {
          method: "tasks.task.update",
          kind: "error",
          status,
          error: "INTERNAL_SERVER_ERROR",
          description: "boom",
          times: 1,
        });
        const err = await expectKind(make().updateTask(4, { TITLE: "x" }), "target_rejected");
        expect(err.httpStatus).toBe(status);
        expect(err.outcomeUnknown).toBe(true);
        expect(err.description).toMatch(/may or may not have been applied/);
      }
      expect(await calls(emu, "tasks.task.update")).toHaveLength(3);
    });

    it("a 503 OVERLOAD_LIMIT on a write: the portal did not run it, so the outcome is known", async () => {
      await arm(emu, {
        method: "tasks.task.update",
        kind: "error",
        status: 503,
        error: "OVERLOAD_LIMIT",
        description: "REST API is blocked due to overload.",
        times: 1,
      });
      const err = await expectKind(make().updateTask(4, { TITLE: "x" }), "target_rejected");
      expect(err.outcomeUnknown).toBe(false);
      expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    });

    it("a 5xx on a read leaves no outcome open: a read changes nothing", async () => {
      await arm(emu, {
        method: "tasks.task.get",
        kind: "error",
        status: 500,
        error: "INTERNAL_SERVER_ERROR",
        description: "boom",
        times: 0,
      });
      const err = await expectKind(make({ maxReadRetries: 0 }).getTask(4), "target_rejected");
      expect(err.outcomeUnknown).toBe(false);
    });

    it("target_rejected: a 5xx on a read is retried, then reported", async () => {
      await arm(emu, {
        method: "tasks.task.get",
        kind: "error",
        status: 502,
        error: "BAD_GATEWAY",
        description: "upstream",
        times: 0,
      });
      await expectKind(make({ maxReadRetries: 1 }).getTask(4), "target_rejected");
      expect(await calls(emu, "tasks.task.get")).toHaveLength(2);
    });

    it("transport_timeout: connection refused is a transport failure with a known outcome", async () => {
      const dead = await startEmulator({ port: 0, code: CODE });
      const url = dead.webhookUrl;
      await dead.close();
      const err = await expectKind(
        new Bitrix24Client({ webhookUrl: url, rate: 0, maxReadRetries: 0 }).getTask(4),
        "transport_timeout",
      );
      expect(err.outcomeUnknown).toBe(false);
    });

    it("malformed_response: 200 with a non-JSON body keeps the raw body", async () => {
      await arm(emu, { method: "tasks.task.get", kind: "malformed" });
      const err = await expectKind(make().getTask(4), "malformed_response");
      expect(err.httpStatus).toBe(200);
      expect(err.rawBody).toBeTypeOf("string");
      expect(err.rawBody!.length).toBeGreaterThan(0);
    });

    it("malformed_response: 200 JSON that is not the documented shape", async () => {
      const raw = JSON.stringify({ result: { item: { id: 4 } } });
      await arm(emu, { method: "tasks.task.get", kind: "malformed", body: raw });
      const err = await expectKind(make().getTask(4), "malformed_response");
      expect(err.rawBody).toBe(raw);
      expect(err.description).toMatch(/result\.task/);
    });
  });

  describe("fault modes", () => {
    it("latency: a slow answer within the timeout is still a success", async () => {
      await arm(emu, { method: "tasks.task.get", kind: "latency", ms: 150, times: 1 });
      const body = await make().getTask(4);
      expect(body.result.task.id).toBe("4");
    });

    it("latency beyond timeoutMs: transport_timeout on a read, retried", async () => {
      // Generous margins: on a loaded machine a 300 ms budget can expire on the healthy retry too.
      await arm(emu, { method: "tasks.task.get", kind: "latency", ms: 3_000, times: 1 });
      const err = await expectKind(
        make({ timeoutMs: 1_500, maxReadRetries: 0 }).getTask(4),
        "transport_timeout",
      );
      expect(err.outcomeUnknown).toBe(true);
      // The same slow answer with one retry allowed: the second attempt is not delayed.
      await arm(emu, { method: "tasks.task.get", kind: "latency", ms: 3_000, times: 1 });
      const body = await make({ timeoutMs: 1_500, maxReadRetries: 1 }).getTask(4);
      expect(body.result.task.id).toBe("4");
      // The emulator logs a delayed call when it finally answers; wait for both, so they cannot land in
      // the next test's call log.
      for (let i = 0; i < 100 && (await calls(emu, "tasks.task.get")).length < 3; i++)
        await new Promise((r) => setTimeout(r, 50));
      expect(await calls(emu, "tasks.task.get")).toHaveLength(3);
    });

    it("error: an armed error answer is classified like a real one", async () => {
      await arm(emu, {
        method: "tasks.task.get",
        kind: "error",
        status: 403,
        error: "insufficient_scope",
        description: "The request requires higher privileges than provided by the webhook token",
      });
      const err = await expectKind(make().getTask(4), "auth");
      expect(err.code).toBe("insufficient_scope");
    });

    it("error: a numeric error code is compared as a string", async () => {
      await arm(emu, {
        method: "tasks.task.history.list",
        kind: "malformed",
        body: JSON.stringify({ error: 0, error_description: "Access denied. (internal error)" }),
      });
      const err = await expectKind(make().getTaskHistory(4), "access_denied");
      expect(err.code).toBe("0");
    });

    it("apply_then_timeout: outcome unknown, exactly one update call, the change did land", async () => {
      await arm(emu, { method: "tasks.task.update", kind: "apply_then_timeout" });
      const client = make({ timeoutMs: 400 });
      const err = await expectKind(
        client.updateTask(4, { TITLE: "Applied but unanswered" }),
        "transport_timeout",
      );
      expect(err.outcomeUnknown).toBe(true);
      expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
      expect((await client.getTask(4)).result.task.title).toBe("Applied but unanswered");
    });

    it("timeout_without_apply: outcome unknown, exactly one update call, nothing changed", async () => {
      await arm(emu, { method: "tasks.task.update", kind: "timeout_without_apply" });
      const client = make({ timeoutMs: 400 });
      const before = (await client.getTask(4)).result.task.title;
      const err = await expectKind(client.updateTask(4, { TITLE: "Never applied" }), "transport_timeout");
      expect(err.outcomeUnknown).toBe(true);
      expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
      expect((await client.getTask(4)).result.task.title).toBe(before);
    });

    it("timeout_without_apply on a read: retried and then answered", async () => {
      await arm(emu, { method: "tasks.task.get", kind: "timeout_without_apply", times: 1 });
      const body = await make({ timeoutMs: 2_000, maxReadRetries: 2 }).getTask(4);
      expect(body.result.task.id).toBe("4");
      expect(await calls(emu, "tasks.task.get")).toHaveLength(2);
    });

    it("a held connection dropped by the portal after the request was sent: outcome unknown", async () => {
      const other = await startEmulator({ port: 0, code: CODE, rate: 0 });
      try {
        await arm(other, { method: "tasks.task.update", kind: "apply_then_timeout" });
        const client = new Bitrix24Client({ webhookUrl: other.webhookUrl, rate: 0, timeoutMs: 30_000 });
        const pending = client.updateTask(4, { TITLE: "dropped" });
        // Wait until the emulator has logged the call, then make it drop the connection.
        for (let i = 0; i < 100 && (await calls(other, "tasks.task.update")).length === 0; i++)
          await new Promise((r) => setTimeout(r, 20));
        const closing = other.close();
        const err = await expectKind(pending, "transport_timeout");
        expect(err.outcomeUnknown).toBe(true);
        await closing;
      } finally {
        await other.close().catch(() => undefined);
      }
    });

    it("ack_without_apply: the client sees success, a fresh get shows no change", async () => {
      await arm(emu, { method: "tasks.task.update", kind: "ack_without_apply" });
      const client = make();
      const before = (await client.getTask(4)).result.task.title;
      await client.updateTask(4, { TITLE: "Acknowledged only" });
      expect((await client.getTask(4)).result.task.title).toBe(before);
    });

    it("side_effect: the client sees success, a fresh get shows the extra change", async () => {
      await arm(emu, { method: "tasks.task.update", kind: "side_effect", field: "PRIORITY", value: "2" });
      const client = make();
      expect((await client.getTask(4)).result.task.priority).toBe("1");
      await client.updateTask(4, { TITLE: "With a side effect" });
      const after = (await client.getTask(4)).result.task;
      expect(after.title).toBe("With a side effect");
      expect(after.priority).toBe("2");
    });

    it("malformed on a write: reported as malformed_response, not retried", async () => {
      await arm(emu, { method: "tasks.task.update", kind: "malformed" });
      // A 200 that cannot be read says nothing about whether the write was carried out.
      expect(
        (await expectKind(make().updateTask(4, { TITLE: "x" }), "malformed_response")).outcomeUnknown,
      ).toBe(true);
      expect(await calls(emu, "tasks.task.update")).toHaveLength(1);
    });
  });
});

describe("rate limiting against the emulator's leaky bucket", () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, code: CODE, rate: 20, burst: 10 });
  });
  afterAll(async () => {
    await emu?.close();
  });
  beforeEach(async () => {
    await control(emu, "/_emulator/reset", "POST", {});
  });

  it("without the client bucket, a burst gets 503 QUERY_LIMIT_EXCEEDED", async () => {
    const client = new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0, maxReadRetries: 0 });
    const results = await Promise.allSettled(Array.from({ length: 40 }, () => client.getTask(4)));
    const limited = results.filter(
      (r) => r.status === "rejected" && (r.reason as Bitrix24Error).kind === "rate_limited",
    );
    expect(limited.length).toBeGreaterThan(0);
    expect((await calls(emu)).filter((c) => c.status === 503).length).toBe(limited.length);
  });

  it("with the client bucket matching the portal, 120 concurrent requests see no 503", async () => {
    // The portal drains by the time it handles a request, the client by the time it sends one, so the
    // headroom is how long a request may lag on its way: 5 of 10 at 20/s is 250 ms (the defaults, 5 of 50
    // at 2/s, allow 2.5 s). With headroom 1 (50 ms) a loaded test machine sees 503s from lag alone.
    const client = new Bitrix24Client({
      webhookUrl: emu.webhookUrl,
      rate: 20,
      burst: 10,
      headroom: 5,
      maxReadRetries: 0,
    });
    const results = await Promise.all(Array.from({ length: 120 }, () => client.getTask(4)));
    expect(results).toHaveLength(120);
    const log = await calls(emu);
    expect(log).toHaveLength(120);
    expect(log.filter((c) => c.status === 503)).toHaveLength(0);
  });
});

describe("redactWebhook and configuration", () => {
  it("masks the code of a webhook URL", () => {
    expect(redactWebhook("https://example.bitrix24.com/rest/1/abc123secret/")).toBe(
      "https://example.bitrix24.com/rest/1/***/",
    );
    expect(redactWebhook("http://127.0.0.1:4100/rest/17/abc123secret")).toBe(
      "http://127.0.0.1:4100/rest/17/***/",
    );
    expect(redactWebhook("http://127.0.0.1:4100/something/else")).toBe("http://127.0.0.1:4100/***");
    expect(redactWebhook("not a url abc123secret")).toBe("***");
  });

  it("rejects a URL that is not a webhook, without echoing the code", () => {
    expect(() => new Bitrix24Client({ webhookUrl: "https://example.com/rest/abc123secret/" })).toThrow(
      /expected webhookUrl/,
    );
    try {
      new Bitrix24Client({ webhookUrl: "ftp://example.com/rest/1/abc123secret/" });
      throw new Error("expected a throw");
    } catch (e) {
      expect((e as Error).message).toMatch(/expected webhookUrl/);
      expect((e as Error).message).not.toContain("abc123secret");
    }
  });
});
