/**
 * REST 3.0 idempotent writes, the portal and client half (issue 17 B.5): the emulator keeps the first
 * successful answer per Idempotency-Key, replays it with `Idempotent-Replayed: true` without carrying
 * the call out again, and refuses the key with another body (422); the client sends the key and says
 * whether an answer was a replay. Without a key nothing changes (REST 2 behaviour).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { Bitrix24Error } from "../src/bitrix24/errors.js";

let emu: RunningEmulator;
beforeEach(async () => {
  emu = await startEmulator({ port: 0, rate: 0 });
});
afterEach(async () => {
  await emu.close();
});

const make = (timeoutMs = 5_000) =>
  new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0, retryBaseMs: 10, timeoutMs });
const arm = (spec: Record<string, unknown>) =>
  fetch(`${emu.baseUrl}/_emulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(spec),
  });
async function updates(): Promise<Array<{ status: number; fault?: string }>> {
  const body = (await (await fetch(`${emu.baseUrl}/_emulator/calls`)).json()) as {
    calls: Array<{ method: string; status: number; fault?: string }>;
  };
  return body.calls.filter((c) => c.method === "tasks.task.update");
}
const history = async (client: Bitrix24Client) =>
  ((await client.getTaskHistory(4)).result as { list: unknown[] }).list.length;

describe("Idempotency-Key on writes", () => {
  it("the same key and body: the first answer again, marked replayed, the task changed once", async () => {
    const client = make();
    const first = await client.updateTask(4, { TITLE: "Idempotent once" }, { idempotencyKey: "k-1" });
    expect(client.wasReplayed(first)).toBe(false);
    const rows = await history(client);
    const again = await client.updateTask(4, { TITLE: "Idempotent once" }, { idempotencyKey: "k-1" });
    expect(client.wasReplayed(again)).toBe(true);
    expect(again.result.task).toEqual(first.result.task);
    expect(await history(client)).toBe(rows);
    expect((await updates()).map((c) => c.fault ?? "applied")).toEqual(["applied", "idempotent_replay"]);
  });

  it("the same key with another body is a hard error (422), and nothing is applied", async () => {
    const client = make();
    await client.updateTask(4, { TITLE: "First body" }, { idempotencyKey: "k-2" });
    const err = await client.updateTask(4, { TITLE: "Second body" }, { idempotencyKey: "k-2" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Bitrix24Error);
    expect(err).toMatchObject({
      kind: "invalid_request",
      httpStatus: 422,
      code: "IDEMPOTENCY_KEY_REUSED",
      outcomeUnknown: false,
    });
    expect((await client.getTask(4)).result.task.title).toBe("First body");
  });

  it("an answer lost after the write was applied: re-sending the key gets the first answer back, one applied write", async () => {
    await arm({ method: "tasks.task.update", kind: "apply_then_timeout", times: 1 });
    const lost = await make(800)
      .updateTask(4, { TITLE: "Lost answer" }, { idempotencyKey: "k-3" })
      .then(
        () => undefined,
        (e: unknown) => e as Bitrix24Error,
      );
    expect(lost?.kind).toBe("transport_timeout");
    expect(lost?.outcomeUnknown).toBe(true);
    const client = make();
    const replay = await client.updateTask(4, { TITLE: "Lost answer" }, { idempotencyKey: "k-3" });
    expect(client.wasReplayed(replay)).toBe(true);
    expect(replay.result.task.title).toBe("Lost answer");
    expect((await updates()).filter((c) => c.fault !== "idempotent_replay")).toHaveLength(1);
  });

  it("without a key nothing is replayed (REST 2): the same body twice is carried out twice", async () => {
    const client = make();
    const a = await client.updateTask(4, { TITLE: "No key" });
    const b = await client.updateTask(4, { TITLE: "No key" });
    expect(client.wasReplayed(a) || client.wasReplayed(b)).toBe(false);
    expect((await updates()).filter((c) => c.fault === undefined)).toHaveLength(2);
  });
});

describe("through our MCP server (the write handle execute holds)", () => {
  it("passes the key; a repeat comes back replayed with the first answer and is not carried out again", async () => {
    const { openTestApp, startPortal, tempDir } = await import("./support/harness.js");
    const portal = await startPortal();
    const app = await openTestApp(portal, tempDir());
    try {
      const w = app.deps.tools.writeHandle;
      const first = await w.updateTask(4, { TITLE: "Via MCP once" }, { idempotencyKey: "envelope-key-0001" });
      const again = await w.updateTask(4, { TITLE: "Via MCP once" }, { idempotencyKey: "envelope-key-0001" });
      expect(first.ok && first.replayed).toBeFalsy();
      expect(again).toMatchObject({ ok: true, replayed: true });
      expect(again.ok && again.body).toEqual(first.ok && first.body);
      const applied = (await portal.writes()).filter(
        (c) => (c as { fault?: string }).fault !== "idempotent_replay",
      );
      expect(applied).toHaveLength(1);
      // Without a key the tool is called exactly as before.
      expect(await w.updateTask(4, { TITLE: "Via MCP, no key" })).toMatchObject({ ok: true });
    } finally {
      await app.close();
      await portal.emulator.close();
    }
  });
});
