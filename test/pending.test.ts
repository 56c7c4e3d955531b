/**
 * `pending` from the journal's index alone: waiting approvals listed without loading a checkpoint,
 * each row's seal checked, with filters and paging; a row whose seal fails is named, never listed as
 * an approval. Real runs (scripted model, MCP over stdio, emulator over HTTP, real stores).
 */
import path from "node:path";
import Database from "better-sqlite3";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startRun } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { pendingPage } from "./support/pending-page.js";
import { hashEnvelope } from "../src/envelope/index.js";
import {
  envFor,
  journalSql,
  openTestApp,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, call } from "./support/scripted-model.js";
import { usingPostgres } from "./support/postgres.js";

let portal: Portal;
let dataDir: string;
let app: App | undefined;
let now = new Date();

/** Reads the task named in the request, then proposes a new title for it. */
const proposeForRequestedTask = (messages: BaseMessage[]) => {
  const request = String(messages.find((m) => m.getType() === "human")?.content ?? "");
  const taskId = Number(/task (\d+)/.exec(request)?.[1]);
  const title = /to (.+)$/.exec(request)?.[1] ?? "X";
  const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
  if (tools.includes("propose_change")) return new AIMessage("Proposed.");
  if (!tools.includes("get_task_by_id"))
    return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId })] });
  return new AIMessage({
    content: "",
    tool_calls: [call("propose_change", { taskId, fields: { TITLE: title }, rationale: "asked" })],
  });
};

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
  now = new Date();
  app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(proposeForRequestedTask),
    clock: () => now,
  });
});
afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

async function wait(request: string, requestedBy: string) {
  const v = await startRun(app!, { request, requestedBy });
  expect(v.status).toBe("awaiting_approval");
  return v;
}

describe("pending", () => {
  it("lists from the index with task, fields, risk and expiry; filters by requester, task and age; pages", async () => {
    const a = await wait("rename task 4 to First", "demo-user");
    now = new Date(now.getTime() + 60_000);
    const b = await wait("rename task 5 to Second", "alice");
    now = new Date(now.getTime() + 60_000);
    const c = await wait("rename task 4 to Third", "demo-user");

    const all = await pendingPage(app!);
    expect(all.total).toBe(3);
    expect(all.pending.map((p) => p.threadId)).toEqual([a.threadId, b.threadId, c.threadId]);
    expect(all.pending[0]).toMatchObject({
      envelopeHash: a.approval!.envelopeHash,
      taskId: 4,
      fields: ["TITLE"],
      requestedBy: "demo-user",
      revision: 1,
      expired: false,
    });
    expect(all.damaged).toEqual([]);

    expect((await pendingPage(app!, { requestedBy: "alice" })).pending.map((p) => p.threadId)).toEqual([
      b.threadId,
    ]);
    expect((await pendingPage(app!, { taskId: 4 })).pending.map((p) => p.threadId)).toEqual([
      a.threadId,
      c.threadId,
    ]);
    expect((await pendingPage(app!, { olderThanMs: 90_000 })).pending.map((p) => p.threadId)).toEqual([
      a.threadId,
    ]);
    const page2 = await pendingPage(app!, { limit: 2, offset: 2 });
    expect(page2).toMatchObject({ total: 3, offset: 2 });
    expect(page2.pending.map((p) => p.threadId)).toEqual([c.threadId]);
    expect((await pendingPage(app!, { decidableBy: "mallory" })).pending).toEqual([]);
    expect((await pendingPage(app!, { decidableBy: "demo-approver" })).pending).toHaveLength(3);
    expect((await pendingPage(app!)).pending).toHaveLength(3);
  });

  it.skipIf(!!process.env["ACTION_ENVELOPE_TEST_DATABASE_URL"])(
    "a row whose seal fails is named as damaged, never listed as an approval",
    async () => {
      const a = await wait("rename task 4 to Sealed", "demo-user");
      const b = await wait("rename task 5 to Edited later", "demo-user");
      const db = new Database(path.join(dataDir, "journal.sqlite"));
      try {
        db.prepare("UPDATE actions SET mac = ? WHERE envelope_hash = ?").run(
          "0".repeat(64),
          b.approval!.envelopeHash,
        );
      } finally {
        db.close();
      }
      const page = await pendingPage(app!);
      expect(page.pending.map((p) => p.threadId)).toEqual([a.threadId]);
      expect(page.damaged).toEqual([{ threadId: b.threadId, envelopeHash: b.approval!.envelopeHash }]);
    },
  );

  it("the CLI: filters, paging, --mine needs --as, and a bad duration is a usage error", async () => {
    const a = await wait("rename task 4 to One", "demo-user");
    // Listed oldest first; rows registered at one instant are ordered by hash.
    now = new Date(now.getTime() + 1_000);
    const b = await wait("rename task 5 to Two", "demo-user");
    await app!.close();
    app = undefined;
    const env = envFor(portal, dataDir);
    const page = parseJsonOutput((await runCli(["pending", "--json", "--object", "5"], env)).stdout);
    expect(page).toMatchObject({ total: 1, offset: 0, damaged: [] });
    expect(page.pending.map((p: { threadId: string }) => p.threadId)).toEqual([b.threadId]);
    const text = await runCli(["pending", "--limit", "1", "--mine", "--as", "demo-approver"], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(a.threadId);
    expect(text.stdout).not.toContain(b.threadId);
    const more = /\(1 shown of 2; --cursor (\S+) for more\)/.exec(text.stdout);
    expect(more, text.stdout).not.toBeNull();
    const rest = await runCli(
      ["pending", "--limit", "1", "--mine", "--as", "demo-approver", "--cursor", more![1]!],
      env,
    );
    expect(rest.code, rest.stderr).toBe(0);
    expect(rest.stdout).toContain(b.threadId);
    expect(rest.stdout).not.toContain(a.threadId);
    expect(rest.stdout).toContain("(1 shown of 2; no more)");
    const noAs = await runCli(["pending", "--mine"], env);
    expect(noAs.code).toBe(1);
    expect(noAs.stderr).toContain("--mine needs --as");
    const bad = await runCli(["pending", "--older-than", "soon"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("expected a duration like 30m");
  });

  it("an approval an older version indexed (its approvals row, no action row) is adopted once when the stores open, checked against its checkpoint, then listed and carried out", async () => {
    const a = await wait("rename task 4 to Indexed by an older version", "demo-user");
    const b = await wait("rename task 5 to Current", "demo-user");
    // c's checkpoint is rewritten (an API client's updateState, or a writer of the data directory) to an
    // envelope the policy would not build: another risk level and a year to live.
    const c = await wait("rename task 5 to Rewritten in its checkpoint", "demo-user");
    const real = c.approval!.envelope;
    const forged = {
      ...real,
      requestedBy: "ceo",
      risk: { ...real.risk, level: real.risk.level === "low" ? "high" : "low" },
      expiresAt: new Date(Date.parse(real.createdAt) + 365 * 86_400_000).toISOString(),
    } as typeof real;
    const forgedHash = hashEnvelope(forged);
    await app!.graph.updateState({ configurable: { thread_id: c.threadId } }, { envelope: forged });
    await journalSql(dataDir, "DELETE FROM T.actions WHERE thread_id = ?", [c.threadId]);
    await app!.close();
    app = undefined;
    // What an older version left: a's approval only in its approvals table (no action row), and a row
    // for b under a hash b's checkpoint does not hash to (an edited checkpoint or index).
    expect(
      await journalSql(dataDir, "DELETE FROM T.actions WHERE envelope_hash = ? RETURNING envelope_hash", [
        a.approval!.envelopeHash,
      ]),
    ).toHaveLength(1);
    // PostgreSQL's first migration creates that table (this version's first open renamed it); SQLite's older schema did.
    if (usingPostgres) await journalSql(dataDir, "ALTER TABLE T.approvals_adopted RENAME TO approvals");
    else
      await journalSql(
        dataDir,
        "CREATE TABLE T.approvals (envelope_hash TEXT PRIMARY KEY, thread_id TEXT NOT NULL, revision INTEGER NOT NULL, requested_by TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT NOT NULL, status TEXT NOT NULL)",
      );
    for (const [hash, threadId] of [
      [a.approval!.envelopeHash, a.threadId],
      [`sha256:${"0".repeat(64)}`, b.threadId],
      [forgedHash, c.threadId],
    ]) {
      await journalSql(
        dataDir,
        "INSERT INTO T.approvals (envelope_hash, thread_id, revision, requested_by, created_at, expires_at, status) VALUES (?, ?, 1, 'demo-user', ?, ?, 'pending')",
        [hash, threadId, a.approval!.envelope.createdAt, a.approval!.envelope.expiresAt],
      );
    }
    const env = envFor(portal, dataDir);
    const out = await runCli(["pending", "--json"], env);
    expect(out.code, out.stderr).toBe(0);
    const page = parseJsonOutput(out.stdout);
    expect(page).toMatchObject({ total: 2, damaged: [] });
    // The checkpoint hashes to its row, which proves nothing: it is not what the policy builds, so not adopted.
    expect(out.stderr).toContain(
      `the older version's approval ${forgedHash} of thread ${c.threadId} was not adopted: expected risk`,
    );
    expect(await journalSql(dataDir, "SELECT 1 FROM T.actions WHERE thread_id = ?", [c.threadId])).toEqual(
      [],
    );
    // Both were registered at the same instant of the test's clock: the order between them is not the point.
    expect(
      page.pending
        .map((p: { threadId: string; envelopeHash: string }) => [p.threadId, p.envelopeHash])
        .sort(),
    ).toEqual(
      [
        [a.threadId, a.approval!.envelopeHash],
        [b.threadId, b.approval!.envelopeHash],
      ].sort(),
    );
    expect(page.pending.find((p: { threadId: string }) => p.threadId === a.threadId)).toMatchObject({
      taskId: 4,
      fields: ["TITLE"],
    });
    // Adopted once: the table is renamed out of the way, and the row that did not match adopted nothing.
    expect(await journalSql(dataDir, "SELECT envelope_hash FROM T.approvals")).toEqual([]);
    expect(await journalSql(dataDir, "SELECT envelope_hash FROM T.approvals_adopted")).toHaveLength(3);
    expect(
      (
        await journalSql(dataDir, "SELECT envelope_hash FROM T.actions WHERE thread_id = ?", [b.threadId])
      ).map((r) => r["envelope_hash"]),
    ).toEqual([b.approval!.envelopeHash]);
    const approved = await runCli(["approve", a.threadId, "--hash", a.approval!.envelopeHash, "--json"], env);
    expect(approved.code, approved.stderr).toBe(0);
    expect(parseJsonOutput(approved.stdout)).toMatchObject({ outcome: "VERIFIED" });
    expect(await portal.writes()).toHaveLength(1);
  });

  it("pending and show open no MCP connection: they work with an unreachable MCP endpoint, where approve fails", async () => {
    const a = await wait("rename task 4 to Read only", "demo-user");
    await app!.close();
    app = undefined;
    // A run or a decision fails at the MCP connection; reading a thread or the list needs none.
    const env = envFor(portal, dataDir, { BITRIX24_MCP_URL: "http://127.0.0.1:9/mcp" });
    const listed = await runCli(["pending", "--json"], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(parseJsonOutput(listed.stdout).pending.map((p: { threadId: string }) => p.threadId)).toEqual([
      a.threadId,
    ]);
    const shown = await runCli(["show", a.threadId], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`--hash ${a.approval!.envelopeHash}`);
    const approve = await runCli(["approve", a.threadId, "--hash", a.approval!.envelopeHash], env);
    expect(approve.code).toBe(2);
    expect(approve.stderr).toContain("127.0.0.1:9/mcp");
  });
});
