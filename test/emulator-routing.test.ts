import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EmulatorControl, startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";

let emu: RunningEmulator;
let control: EmulatorControl;

beforeAll(async () => {
  emu = await startEmulator({ rate: 0, maxBodyBytes: 4096 });
  control = new EmulatorControl(emu.baseUrl);
});
afterAll(() => emu.close());
beforeEach(() => control.reset());

const lastCall = async () => (await control.calls()).at(-1)!;

describe("routing and parameters", () => {
  it("serves the webhook URL with and without .json, any method-name case, GET and POST", async () => {
    expect(emu.webhookUrl).toBe(`${emu.baseUrl}/rest/1/emulator-secret-code/`);
    for (const path of ["tasks.task.get", "tasks.task.get.json", "TASKS.Task.GET", "Tasks.Task.Get.JSON"]) {
      const res = await fetch(`${emu.webhookUrl}${path}?taskId=4`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(((await res.json()) as any).result.task.id).toBe("4");
    }
    const post = await fetch(`${emu.webhookUrl}tasks.task.get.json`, {
      method: "POST",
      body: new URLSearchParams({ taskId: "4" }),
    });
    expect(post.status).toBe(200);
    expect((await control.calls()).every((c) => c.method === "tasks.task.get")).toBe(true);
  });

  it("parses PHP-style brackets in forms and query strings", async () => {
    const form = "taskId=4&fields[TITLE]=From+a+form&fields[AUDITORS][]=2&fields[AUDITORS][]=3";
    const res = await fetch(`${emu.webhookUrl}tasks.task.update`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form,
    });
    const task = ((await res.json()) as any).result.task;
    expect(task.title).toBe("From a form");
    expect(task.auditors).toEqual(["2", "3"]);
    expect((await lastCall()).params).toEqual({
      taskId: "4",
      fields: { TITLE: "From a form", AUDITORS: ["2", "3"] },
    });

    const q = await fetch(`${emu.webhookUrl}tasks.task.get?taskId=4&select[]=ID&select[]=TITLE`);
    expect(Object.keys(((await q.json()) as any).result.task)).toContain("title");
  });

  it("reads multipart form bodies with brackets too", async () => {
    const form = new FormData();
    form.append("taskId", "4");
    form.append("select[]", "TITLE");
    const res = await fetch(`${emu.webhookUrl}tasks.task.get`, { method: "POST", body: form });
    expect(Object.keys(((await res.json()) as any).result.task)).toEqual(
      expect.arrayContaining(["id", "title"]),
    );
    expect((await lastCall()).params).toEqual({ taskId: "4", select: ["TITLE"] });
  });

  it("filters the call log by method and sequence", async () => {
    await fetch(`${emu.webhookUrl}user.current`);
    await fetch(`${emu.webhookUrl}tasks.task.get?taskId=4`);
    await fetch(`${emu.webhookUrl}user.current`);
    expect((await control.calls({ method: "USER.CURRENT" })).map((c) => c.seq)).toEqual([1, 3]);
    expect((await control.calls({ since: 2 })).map((c) => c.seq)).toEqual([3]);
  });

  it("merges query and body, body winning on the same key", async () => {
    const res = await fetch(`${emu.webhookUrl}tasks.task.update?taskId=4&fields[TITLE]=from-query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ fields: { TITLE: "from-body" } }),
    });
    expect(((await res.json()) as any).result.task.title).toBe("from-body");
    expect((await lastCall()).params).toEqual({ taskId: "4", fields: { TITLE: "from-body" } });
  });

  it("treats an invalid JSON body as no parameters, like the portal", async () => {
    const res = await fetch(`${emu.webhookUrl}tasks.task.get?taskId=4`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(res.status).toBe(200);
    const noId = await fetch(`${emu.webhookUrl}tasks.task.get`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"taskId": 4',
    });
    expect(noId.status).toBe(400);
    expect(((await noId.json()) as any).error).toBe("100");
  });

  it("answers 401 INVALID_CREDENTIALS for a wrong code or user, and logs it", async () => {
    for (const url of [
      `${emu.baseUrl}/rest/1/wrong/tasks.task.get`,
      `${emu.baseUrl}/rest/2/emulator-secret-code/tasks.task.get`,
    ]) {
      const res = await fetch(`${url}?taskId=4`);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: "INVALID_CREDENTIALS",
        error_description: "Invalid request credentials",
      });
    }
    expect((await control.calls()).map((c) => c.status)).toEqual([401, 401]);
  });

  it("answers 404 ERROR_METHOD_NOT_FOUND for unknown methods and a missing method segment", async () => {
    for (const path of ["tasks.task.complete", "crm.lead.get", ""]) {
      const res = await fetch(`${emu.webhookUrl}${path}`, { method: "POST" });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({
        error: "ERROR_METHOD_NOT_FOUND",
        error_description: "Method not found!",
      });
    }
  });

  it("answers 413 in Bitrix shape for a body over maxBodyBytes, applying nothing", async () => {
    const res = await fetch(`${emu.webhookUrl}tasks.task.update`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ taskId: 4, fields: { DESCRIPTION: "x".repeat(5000) } }),
    });
    expect(res.status).toBe(413);
    const body = (await res.json()) as any;
    expect(Object.keys(body).sort()).toEqual(["error", "error_description"]);
    const get = (await (await fetch(`${emu.webhookUrl}tasks.task.get?taskId=4`)).json()) as any;
    expect(get.result.task.description).not.toContain("xxxx");
    expect((await control.calls())[0]).toMatchObject({ method: "tasks.task.update", status: 413 });
  });

  it("survives hostile input without crashing and keeps answering in Bitrix shape", async () => {
    const bodies: [string, string][] = [
      ["tasks.task.update", JSON.stringify({ taskId: 4, fields: "TITLE=x" })],
      ["tasks.task.update", JSON.stringify({ taskId: 4, fields: [1, 2] })],
      ["tasks.task.update", JSON.stringify({ taskId: { $gt: 1 }, fields: { TITLE: "x" } })],
      [
        "tasks.task.update",
        JSON.stringify({ taskId: 4, fields: { TITLE: { nested: true }, AUDITORS: "abc", GROUP_ID: 99 } }),
      ],
      ["tasks.task.list", JSON.stringify({ filter: "ID=1", order: [], start: "abc", select: { a: 1 } })],
      ["tasks.task.list", JSON.stringify({ filter: { ">DEADLINE": "not a date", ID: [] } })],
      ["batch", JSON.stringify({ cmd: "tasks.task.get" })],
      ["batch", JSON.stringify({ cmd: { a: 12, b: null } })],
      ["tasks.task.history.list", JSON.stringify({ taskId: [4] })],
    ];
    for (const [method, body] of bodies) {
      const res = await fetch(`${emu.webhookUrl}${method}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      expect(res.status).toBeLessThan(500);
      const json = (await res.json()) as any;
      expect("result" in json || ("error" in json && "error_description" in json)).toBe(true);
    }
    const task = ((await (await fetch(`${emu.webhookUrl}tasks.task.get?taskId=4`)).json()) as any).result
      .task;
    expect(task.title).toBe("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect(task.groupId).toBe("3");
  });

  it("rejects other HTTP methods and unknown paths in Bitrix shape", async () => {
    const put = await fetch(`${emu.webhookUrl}tasks.task.get`, { method: "PUT" });
    expect(put.status).toBe(405);
    expect(Object.keys((await put.json()) as object).sort()).toEqual(["error", "error_description"]);
    const other = await fetch(`${emu.baseUrl}/nothing-here`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as any).error).toBe("NOT_FOUND");
  });

  it("does not log control endpoint calls", async () => {
    await control.calls();
    await control.clearFaults();
    expect(await control.calls()).toEqual([]);
  });
});
