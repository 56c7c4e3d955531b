/**
 * People by name (issue 17, B3): user.get in the emulator, the REST client and our MCP server (a read
 * tool, allowlisted like the others); names next to user ids on the card, read by code when the
 * envelope is built and recorded with it; edits that name a person (RESPONSIBLE_ID=Bob Smith) resolved
 * to exactly one active user, or refused. Real emulator over HTTP, our MCP server over stdio.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/bitrix24/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { createBitrix24Tools, type Bitrix24Tools } from "../src/tools/bitrix24-tools.js";

async function rest(emu: RunningEmulator, method: string, params: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${emu.webhookUrl}${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(params) });
  return { status: res.status, body: await res.json() };
}
const ids = (body: any) => (body.result as Array<{ ID: string }>).map((u) => Number(u.ID));

describe("user.get in the emulator", () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
  });
  afterAll(async () => {
    await emu.close();
  });

  it("answers the documented shape: result[] in UPPER_SNAKE with string ids, total, time", async () => {
    const { status, body } = await rest(emu, "user.get", { ID: 5 });
    expect(status).toBe(200);
    expect(body.total).toBe(1);
    expect(body.time).toMatchObject({ start: expect.any(Number), finish: expect.any(Number) });
    expect(body.result[0]).toMatchObject({ ID: "5", ACTIVE: true, NAME: "Elena", LAST_NAME: "Kuznetsova", EMAIL: "elena.kuznetsova@example.test", USER_TYPE: "employee", UF_DEPARTMENT: [1] });
  });

  it("filters with the documented prefixes, NAME_SEARCH and ACTIVE; dismissed users only when asked", async () => {
    expect(ids((await rest(emu, "user.get", { FILTER: { "@ID": [6, 2, 99] } })).body)).toEqual([2, 6]);
    expect(ids((await rest(emu, "user.get", { filter: { NAME: "Iva%" } })).body)).toEqual([2]);
    expect(ids((await rest(emu, "user.get", { filter: { "%LAST_NAME": "mor" } })).body)).toEqual([8, 9]);
    expect(ids((await rest(emu, "user.get", { filter: { NAME_SEARCH: "bob smith" } })).body)).toEqual([7, 10]);
    expect(ids((await rest(emu, "user.get", { filter: { NAME_SEARCH: "bob smith", ACTIVE: true } })).body)).toEqual([7]);
    expect(ids((await rest(emu, "user.get", { filter: { ACTIVE: false } })).body)).toEqual([10]);
    expect(ids((await rest(emu, "user.get", { filter: { "!@ID": [1, 2, 3, 4, 5, 6] }, SORT: "ID", ORDER: "desc" })).body)).toEqual([10, 9, 8, 7]);
  });

  it("pages by 50 with start, total and next", async () => {
    const big = await startEmulator({
      port: 0,
      rate: 0,
      seed: { users: Array.from({ length: 120 }, (_, i) => ({ id: i + 1, name: `User${i + 1}`, login: `u${i + 1}` })), tasks: [] },
    });
    try {
      const first = (await rest(big, "user.get", {})).body;
      expect([first.result.length, first.total, first.next]).toEqual([50, 120, 50]);
      const last = (await rest(big, "user.get", { start: 100 })).body;
      expect([last.result.length, last.total, last.next]).toEqual([20, 120, undefined]);
      expect(last.result[0].ID).toBe("101");
    } finally {
      await big.close();
    }
  });

  it("needs the user scope (or user_brief / user_basic): 403 insufficient_scope otherwise", async () => {
    const taskOnly = await startEmulator({ port: 0, rate: 0, scopes: ["task"] });
    const brief = await startEmulator({ port: 0, rate: 0, scopes: ["task", "user_brief"] });
    try {
      const refused = await rest(taskOnly, "user.get", { ID: 5 });
      expect(refused).toEqual({ status: 403, body: { error: "insufficient_scope", error_description: "The request requires higher privileges than provided by the webhook token" } });
      const ok = await rest(brief, "user.get", { ID: 5 });
      expect(ok.status).toBe(200);
      expect(ok.body.result[0].NAME).toBe("Elena");
      expect(ok.body.result[0]).not.toHaveProperty("EMAIL");
    } finally {
      await taskOnly.close();
      await brief.close();
    }
  });
});

describe("user.get through the REST client and the MCP server", () => {
  let emu: RunningEmulator;
  let tools: Bitrix24Tools;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    tools = await createBitrix24Tools({ mode: "stdio", env: { BITRIX24_WEBHOOK_URL: emu.webhookUrl, BITRIX24_RATE: "0" } });
  });
  afterAll(async () => {
    await tools.close();
    await emu.close();
  });

  it("the client checks the shape and keeps total and next", async () => {
    const client = new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0 });
    const body = await client.getUsers({ filter: { NAME_SEARCH: "Alex Morgan", ACTIVE: true } });
    expect(body.total).toBe(2);
    expect(body.result.map((u) => u.ID)).toEqual(["8", "9"]);
  });

  it("get_users is a read tool offered to the model, bound to user.get, read-only", async () => {
    expect(tools.readTools.map((t) => t.name)).toContain("get_users");
    expect(tools.roles.getUsers).toEqual({ toolName: "get_users", method: "user.get", readOnly: true });
    expect(tools.missingRoles).toEqual([]);
    const res = await tools.read("getUsers", { filter: { "@ID": [5] } });
    expect(res.ok && (res.body as any).result[0].LAST_NAME).toBe("Kuznetsova");
    const viaModel = await tools.readTools.find((t) => t.name === "get_users")!.invoke({ filter: { NAME_SEARCH: "Bob" } });
    expect(JSON.parse(viaModel as string).result.map((u: any) => u.ID)).toEqual(["7", "10"]);
  });
});
