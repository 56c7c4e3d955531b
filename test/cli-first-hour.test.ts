/**
 * The CLI's wording in an approver's first hour (issue 27): a refused decision prints the refusal
 * first, not the whole card again; `undo` does not present the code's proposal as the model's words;
 * `show` of a thread the LangGraph API server keeps says where it lives and the command for it; `show`
 * of a revision prints the rejection's feedback and each field changed since the previous revision.
 * Each command its own process over a real emulator (HTTP) and SQLite stores; writes counted.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { startRun, submitDecision } from "../src/app/threads.js";
import { openApp } from "../src/app/open-app.js";
import { eachTestApp, envFor, runCli } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";
import { titleScript } from "./support/inbox.js";

const t = eachTestApp();

beforeEach(async () => {
  await t.open({ model: new ScriptedChatModel(readThenPropose(4, { TITLE: "First hour" })) });
});

describe("the CLI in the first hour", () => {
  it("show of a revision made from a rejection prints the feedback and the per-field diff; show --json carries the same", async () => {
    await t.open({
      model: new ScriptedChatModel(titleScript({ 1: "Hiring plan" })),
    });
    const first = await startRun(t.app, {
      request: "rename task 1 to the proposed title",
      requestedBy: "demo-user",
    });
    const a = first.approval!;
    const revised = await submitDecision(t.app, first.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          message: 'use "Hiring plan 2027" instead',
          approver: { id: "alice" },
        },
      ],
    });
    expect(revised.approval?.revision).toBe(2);
    const env = envFor(t.portal, t.dataDir);
    const shown = await runCli(["show", first.threadId], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      `Revision 2 replaces revision 1 (${a.envelopeHash}), which was rejected by alice`,
    );
    expect(shown.stdout).toContain('  Feedback: use "Hiring plan 2027" instead');
    expect(shown.stdout).toContain('    TITLE: "Hiring plan" → "Hiring plan 2027"');
    const json = await runCli(["show", first.threadId, "--json"], env);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).revisionHistory).toEqual({
      revision: 2,
      previousRevision: 1,
      previousEnvelopeHash: a.envelopeHash,
      decision: { type: "reject", by: "alice", message: 'use "Hiring plan 2027" instead' },
      changes: [{ field: "TITLE", was: "Hiring plan", now: "Hiring plan 2027" }],
    });
    // A first revision has none.
    const other = await startRun(t.app, {
      request: "rename task 4 to the proposed title",
      requestedBy: "demo-user",
    });
    expect(
      JSON.parse((await runCli(["show", other.threadId, "--json"], env)).stdout).revisionHistory,
    ).toBeUndefined();
    expect(await t.portal.writes()).toEqual([]);
  });

  it("a refused approve prints REFUSED with its reason first and no second copy of the card; nothing is written", async () => {
    const waiting = await startRun(t.app, {
      request: "rename task 4 to First hour",
      requestedBy: "demo-user",
    });
    expect(waiting.status).toBe("awaiting_approval");
    const wrong = `sha256:${"0".repeat(64)}`;
    const r = await runCli(
      ["approve", waiting.threadId, "--hash", wrong, "--as", "demo-approver"],
      envFor(t.portal, t.dataDir),
    );
    expect(r.code, r.stderr).toBe(2);
    const lines = r.stdout.split("\n").filter((l) => l.trim() !== "");
    const refusedAt = lines.findIndex((l) => l.startsWith("REFUSED HASH_MISMATCH: "));
    expect(refusedAt, r.stdout).toBeGreaterThanOrEqual(0);
    // Only progress lines come before it; the card is not printed again.
    expect(
      lines.slice(0, refusedAt).every((l) => l.startsWith("▸ ")),
      r.stdout,
    ).toBe(true);
    expect(r.stdout).not.toContain("approval card");
    expect(lines[refusedAt + 1]).toBe(
      `Nothing was applied. The approval still waits, unchanged (revision 1); see its card with: npm run cli -- show ${waiting.threadId}`,
    );
    expect(r.stdout).toContain(`approve ${waiting.threadId} --hash ${waiting.approval!.envelopeHash}`);
    expect(await t.portal.writes()).toEqual([]);
  });

  it("undo's progress says the code proposed it, never `model says`", async () => {
    const waiting = await startRun(t.app, {
      request: "rename task 4 to First hour",
      requestedBy: "demo-user",
    });
    const a = waiting.approval!;
    const done = await submitDecision(t.app, waiting.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
      ],
    });
    expect(done.state!.outcome).toBe("VERIFIED");
    const r = await runCli(["undo", done.threadId, "--as", "demo-user"], envFor(t.portal, t.dataDir));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/model\W+says/);
    expect(r.stdout).toMatch(/undo\W+Undo proposed by code, not by the model/);
    expect((await t.portal.writes()).length).toBe(1);
  });

  it("the model's question and its proposal's reason are labelled as the model's words", async () => {
    const env = { ...envFor(t.portal, t.dataDir), MODEL: "offline" };
    // The offline model asks which task when the request names none.
    const asked = await runCli(["run", "rename the task to Labelled", "--no-prompt"], env);
    expect(asked.code, asked.stderr).toBe(0);
    expect(asked.stdout).toContain("──────── question (the model's words) ────────");
    const threadId = /npm run cli -- answer (\S+)/.exec(asked.stdout)?.[1];
    expect(threadId, asked.stdout).toBeDefined();
    const answered = await runCli(["answer", threadId!, "--set", "taskId=4"], env);
    expect(answered.code, answered.stderr).toBe(0);
    expect(answered.stdout).toMatch(/▸ proposal task 4: \{"TITLE":"Labelled"\} — the model's reason: /);
    expect((await t.portal.writes()).length).toBe(0);
  });

  it("show of a thread the API server keeps names where it lives and the command for it, not `no thread`", async () => {
    // Same journal, another checkpointer: what this data directory sees of a run the LangGraph API server keeps.
    const elsewhere = await startRun(openApp(t.app.deps, { checkpointer: new MemorySaver() }), {
      request: "rename task 4 to First hour",
      requestedBy: "demo-user",
    });
    expect(elsewhere.status).toBe("awaiting_approval");
    const r = await runCli(["show", elsewhere.threadId], envFor(t.portal, t.dataDir));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`thread ${elsewhere.threadId} waits for approval on the LangGraph API server`);
    expect(r.stderr).toContain(`npm run cli -- show ${elsewhere.threadId} --api <URL>`);
    expect(r.stderr).not.toContain("no thread");
    const unknown = await runCli(["show", "no-such-thread"], envFor(t.portal, t.dataDir));
    expect(unknown.stderr).toContain('no thread no-such-thread; list waiting ones with "pending"');
    expect(await t.portal.writes()).toEqual([]);
  });
});
