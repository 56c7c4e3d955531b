/**
 * The CLI's wording in an approver's first hour (issue 27): a refused decision prints the refusal
 * first, not the whole card again; `undo` does not present the code's proposal as the model's words;
 * `show` of a thread the LangGraph API server keeps says where it lives and the command for it.
 * Each command its own process over a real emulator (HTTP) and SQLite stores; writes counted.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { openApp, startRun, submitDecision, type App } from "../src/app/threads.js";
import { useDeps } from "../src/runtime/deps.js";
import { envFor, openTestApp, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

let portal: Portal;
let dataDir: string;
let app: App;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
  app = await openTestApp(portal, dataDir, { model: new ScriptedChatModel(readThenPropose(4, { TITLE: "First hour" })) });
});

afterEach(async () => {
  await app.close();
  await portal.emulator.close();
});

describe("the CLI in the first hour", () => {
  it("a refused approve prints REFUSED with its reason first and no second copy of the card; nothing is written", async () => {
    const waiting = await startRun(app, { request: "rename task 4 to First hour", requestedBy: "demo-user" });
    expect(waiting.status).toBe("awaiting_approval");
    const wrong = `sha256:${"0".repeat(64)}`;
    const r = await runCli(["approve", waiting.threadId, "--hash", wrong, "--as", "demo-approver"], envFor(portal, dataDir));
    expect(r.code, r.stderr).toBe(2);
    const lines = r.stdout.split("\n").filter((l) => l.trim() !== "");
    const refusedAt = lines.findIndex((l) => l.startsWith("REFUSED HASH_MISMATCH: "));
    expect(refusedAt, r.stdout).toBeGreaterThanOrEqual(0);
    // Only progress lines come before it; the card is not printed again.
    expect(lines.slice(0, refusedAt).every((l) => l.startsWith("▸ ")), r.stdout).toBe(true);
    expect(r.stdout).not.toContain("approval card");
    expect(lines[refusedAt + 1]).toBe(`Nothing was applied. The approval still waits, unchanged (revision 1); see its card with: npm run cli -- show ${waiting.threadId}`);
    expect(r.stdout).toContain(`approve ${waiting.threadId} --hash ${waiting.approval!.envelopeHash}`);
    expect(await portal.writes()).toEqual([]);
  });

  it("undo's progress says the code proposed it, never `model says`", async () => {
    const waiting = await startRun(app, { request: "rename task 4 to First hour", requestedBy: "demo-user" });
    const a = waiting.approval!;
    const done = await submitDecision(app, waiting.threadId, { decisions: [{ type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } }] });
    expect(done.state!.outcome).toBe("VERIFIED");
    const r = await runCli(["undo", done.threadId, "--as", "demo-user"], envFor(portal, dataDir));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/model\W+says/);
    expect(r.stdout).toMatch(/undo\W+Undo proposed by code, not by the model/);
    expect((await portal.writes()).length).toBe(1);
  });

  it("show of a thread the API server keeps names where it lives and the command for it, not `no thread`", async () => {
    // Same journal, another checkpointer: what this data directory sees of a run the LangGraph API server keeps.
    const elsewhere = await startRun(openApp(app.deps, { checkpointer: new MemorySaver() }), { request: "rename task 4 to First hour", requestedBy: "demo-user" });
    useDeps(app.deps);
    expect(elsewhere.status).toBe("awaiting_approval");
    const r = await runCli(["show", elsewhere.threadId], envFor(portal, dataDir));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`thread ${elsewhere.threadId} waits for approval on the LangGraph API server`);
    expect(r.stderr).toContain(`npm run cli -- show ${elsewhere.threadId} --api <URL>`);
    expect(r.stderr).not.toContain("no thread");
    const unknown = await runCli(["show", "no-such-thread"], envFor(portal, dataDir));
    expect(unknown.stderr).toContain('no thread no-such-thread; list waiting ones with "pending"');
    expect(await portal.writes()).toEqual([]);
  });
});
