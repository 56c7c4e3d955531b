/**
 * A write that pacing would hold too long is refused unsent, so it can never leave after the caller
 * (the MCP call, the execute node) stopped waiting and recorded the acknowledgement as missing.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { Bitrix24Error } from "../src/bitrix24/errors.js";
import { startPortal, type Portal } from "./support/harness.js";

let portal: Portal;
beforeEach(async () => {
  portal = await startPortal();
});
afterEach(async () => {
  await portal.emulator.close();
});

describe("write delay bound", () => {
  it("refuses a write that would wait past maxWriteDelayMs, with nothing sent", async () => {
    const client = new Bitrix24Client({
      webhookUrl: portal.emulator.webhookUrl,
      rate: 0.5,
      burst: 2,
      headroom: 0,
      maxWriteDelayMs: 200,
    });
    await client.getTask(4);
    await client.getTask(4); // the bucket is now full: the next slot is 2 s away
    const err = await client.updateTask(4, { TITLE: "late" }).catch((e) => e);
    expect(err).toBeInstanceOf(Bitrix24Error);
    expect(err.kind).toBe("rate_limited");
    expect(err.outcomeUnknown).toBe(false);
    expect(err.description).toContain("not sent");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("sends a write whose wait fits the bound", async () => {
    const client = new Bitrix24Client({
      webhookUrl: portal.emulator.webhookUrl,
      rate: 10,
      burst: 2,
      headroom: 0,
      maxWriteDelayMs: 2000,
    });
    await client.getTask(4);
    await client.getTask(4);
    await client.updateTask(4, { TITLE: "in time" });
    expect(await portal.writes()).toHaveLength(1);
  });
});
