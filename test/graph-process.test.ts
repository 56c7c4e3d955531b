/**
 * Durability across processes: a run stops at the interrupt, every object is closed, and a NEW
 * process resumes it from the checkpoint on disk. Also: a process killed right after sending the
 * write, two processes resuming at once, and a committed checkpoint recorded by an earlier build.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { startEmulator } from "../src/offline-demo/emulator/index.js";
import {
  RESUME_PROCESS,
  ROOT,
  eachTestPortal,
  envFor,
  journalHasRows,
  killedWhen,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  until,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";
import { usingPostgres } from "./support/postgres.js";

const NEW_TITLE = "LAB-AGENT-EXEC-002 - CLEAN TRUE PATH";

let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

/** Runs to the interrupt in this process, then closes everything so only the files remain. */
const recordPending = (env: Record<string, string> = {}): Promise<ThreadView> =>
  recordPendingRename(portal, dataDir, NEW_TITLE, {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
    env,
  });

const env = (extra: Record<string, string> = {}) => envFor(portal, dataDir, extra);

describe("resume by a new process", () => {
  it("approve → VERIFIED, one write equal to the envelope's params", async () => {
    const view = await recordPending();
    const r = await runCli(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
    );
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout);
    expect(out.outcome).toBe("VERIFIED");
    expect(out.verification.verdict).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: view.approval!.envelope.params });
  });

  it("reject → REJECTED_BY_HUMAN, no write", async () => {
    const view = await recordPending();
    const r = await runCli(["reject", view.threadId, "--reason", "wrong task", "--json"], env());
    expect(r.code).toBe(2);
    expect(parseJsonOutput(r.stdout).reasonCode).toBe("REJECTED_BY_HUMAN");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("edit → a new revision waiting, no write", async () => {
    const view = await recordPending();
    const r = await runCli(
      ["edit", view.threadId, "--set", "TITLE=Edited in another process", "--json"],
      env(),
    );
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout);
    expect(out.status).toBe("awaiting_approval");
    expect(out.revision).toBe(2);
    expect(out.envelope.params).toEqual({ TITLE: "Edited in another process" });
    expect(out.envelopeHash).not.toBe(view.approval!.envelopeHash);
    expect(await portal.writes()).toHaveLength(0);
  });

  it("wrong hash → refused (exit 2), still waiting, no write", async () => {
    const view = await recordPending();
    const r = await runCli(["approve", view.threadId, "--hash", `sha256:${"a".repeat(64)}`, "--json"], env());
    expect(r.code).toBe(2);
    const out = parseJsonOutput(r.stdout);
    expect(out.status).toBe("awaiting_approval");
    expect(out.refused.code).toBe("HASH_MISMATCH");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("wrong nonce → refused, no write", async () => {
    const view = await recordPending();
    const resume = {
      decisions: [
        {
          type: "approve",
          envelopeHash: view.approval!.envelopeHash,
          nonce: "f".repeat(32),
          approver: { id: "alice" },
        },
      ],
    };
    const r = await runCli([view.threadId, JSON.stringify(resume)], env(), { script: RESUME_PROCESS });
    const out = parseJsonOutput(r.stdout);
    expect(out.refused.code).toBe("NONCE_MISMATCH");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("expired → APPROVAL_EXPIRED, no write", async () => {
    const view = await recordPending({ ACTION_ENVELOPE_TTL_SECONDS: "1" });
    await until(
      "the envelope to expire",
      async () => Date.now() > Date.parse(view.approval!.expiresAt) + 100,
    );
    const r = await runCli(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
    );
    expect(r.code).toBe(2);
    expect(parseJsonOutput(r.stdout).reasonCode).toBe("APPROVAL_EXPIRED");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("replayed decision after the thread ended → refused, no second write", async () => {
    const view = await recordPending();
    const args = ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"];
    expect((await runCli(args, env())).code).toBe(0);
    const again = await runCli(args, env());
    expect(again.code).toBe(2);
    expect(parseJsonOutput(again.stdout).refused.code).toBe("THREAD_ENDED");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("crashes and races", () => {
  it("a process SIGKILLed right after sending the write is recovered without a second write", async () => {
    const view = await recordPending();
    // Hold the write in the emulator so the kill lands after the request left but before any answer.
    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: 2500, times: 1 });
    const killed = await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      env(),
      "the write held in the emulator",
      async () => (await journalHasRows(dataDir, "executions")) && (await portal.faultsArmed()) === 0,
      { graceMs: 100 },
    );
    expect(killed.signal ?? killed.code).toBeTruthy();
    // The request was already on the wire: the emulator applies it when the latency ends.
    await until("the held write to land", async () => (await portal.writes()).length === 1);

    const r = await runCli(["recover", view.threadId, "--json"], env());
    const out = parseJsonOutput(r.stdout);
    expect(out.outcome).toBe("INCONCLUSIVE");
    expect(out.acknowledgement.status).toBe("MISSING");
    expect(out.verification.verdict).toBe("INCONCLUSIVE");
    expect(await portal.writes()).toHaveLength(1);
    expect((await portal.task(4)).title).toBe(NEW_TITLE);
  });

  it("a write that was sent and never answered is INCONCLUSIVE on recovery (it may still land), never re-sent", async () => {
    const view = await recordPending();
    await portal.fault({ method: "tasks.task.update", kind: "timeout_without_apply", times: 1 });
    await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash],
      env({ BITRIX24_TIMEOUT_MS: "30000" }),
      "the write to reach the portal",
      async () => (await portal.calls()).some((c) => c.method === "tasks.task.update"),
    );
    const r = await runCli(["recover", view.threadId, "--json"], env());
    const out = parseJsonOutput(r.stdout);
    // The emulator's timeout_without_apply never applies the write, but nothing the client saw says so:
    // the answer is lost, the fresh read shows the change not applied *yet*, and the write may still land.
    // A timeout is neither success nor failure, so the outcome is INCONCLUSIVE, not VERIFICATION_FAILED.
    expect(out.outcome).toBe("INCONCLUSIVE");
    expect(out.acknowledgement.status).toBe("MISSING");
    expect(out.verification.reason).toContain("may still land");
    expect(await portal.writes()).toHaveLength(1);
  });

  it("two processes resuming the same thread at once: one write, the other is refused", async () => {
    const view = await recordPending();
    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: 1500, times: 1 });
    const args = ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"];
    const [a, b] = await Promise.all([runCli(args, env()), runCli(args, env())]);
    const codes = [a.code, b.code].sort();
    expect(codes).toEqual([0, 2]);
    const loser = a.code === 2 ? a : b;
    expect(["IN_PROGRESS", "THREAD_ENDED"]).toContain(parseJsonOutput(loser.stdout).refused.code);
    expect(await portal.writes()).toHaveLength(1);
  });
});

// The fixture is a set of SQLite files; a PostgreSQL run has nothing to load them into.
describe.skipIf(usingPostgres)("checkpoint recorded by an earlier build", () => {
  it("the committed pending approval still resumes to VERIFIED", async () => {
    const fixture = path.join(ROOT, "test/fixtures/pending-approval");
    const meta = JSON.parse(fs.readFileSync(path.join(fixture, "meta.json"), "utf8"));
    fs.cpSync(path.join(fixture, "data"), dataDir, { recursive: true });
    // Same portal identity as when it was recorded: the envelope names 127.0.0.1:<port>.
    const emulator = await startEmulator({ port: meta.port, rate: 0 });
    const fixturePortal: Portal = { ...portal, emulator };
    const { openTestApp: open } = await import("./support/harness.js");
    const app = await open(fixturePortal, dataDir, {
      clock: () => new Date(Date.parse(meta.createdAt) + 60_000),
    });
    try {
      const resume = {
        decisions: [
          {
            type: "approve",
            envelopeHash: meta.envelopeHash,
            nonce: meta.nonce,
            approver: { id: "demo-approver" },
          },
        ],
      };
      const done = await submitDecision(app, meta.threadId, resume);
      expect(done.state?.outcome).toBe("VERIFIED");
      const calls = await (await fetch(`${emulator.baseUrl}/_emulator/calls`)).json();
      const writes = calls.calls.filter((c: { method: string }) => c.method === "tasks.task.update");
      expect(writes).toHaveLength(1);
      expect(writes[0].params).toEqual({ taskId: 4, fields: meta.params });
    } finally {
      await app.close();
      await emulator.close();
    }
  });
});
