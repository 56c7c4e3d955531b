/**
 * No second send after a rollback or a deleted write-ahead row (issue 26, rows 4 and 6), and a sealed
 * write-ahead row (item 2). A writer of the data directory (or the database) without the journal key
 * edits the journal; the write anchor beside the key, which it cannot reach, tells a journal put back
 * from one where the write never went out. Writes are counted in the emulator's call log; recovery and
 * approvals run in CLI processes of their own.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import {
  approvalOf,
  eachTestPortal,
  envFor,
  journalSql,
  killedWhen,
  openTestApp,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  tempDir,
  type Portal,
  TASK_READS_FAIL,
} from "./support/harness.js";
import { AIMessage } from "@langchain/core/messages";
import { ScriptedChatModel, call, readThenPropose } from "./support/scripted-model.js";
import { TEST_DATABASE_URL, schemaFor, usingPostgres } from "./support/postgres.js";

const PG_BIN = "/usr/lib/postgresql/15/bin";

const TEXT = "Approved once: the Q3 numbers are final.";
let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

const commentWrites = async () => (await portal.writes()).filter((w) => w.method === "task.commentitem.add");

/**
 * A copy of the stores taken now, and a function that puts it back: the data directory's files, or
 * (PostgreSQL) a pg_dump of the test's schema restored with pg_restore --clean.
 */
function snapshot(): () => void {
  if (usingPostgres) {
    const dump = path.join(tempDir("ae-dump-"), "journal.dump");
    execFileSync(path.join(PG_BIN, "pg_dump"), [
      "-Fc",
      "-n",
      schemaFor(dataDir),
      "-f",
      dump,
      TEST_DATABASE_URL!,
    ]);
    return () => {
      execFileSync(path.join(PG_BIN, "pg_restore"), [
        "--clean",
        "--if-exists",
        "-d",
        TEST_DATABASE_URL!,
        dump,
      ]);
    };
  }
  const copy = `${dataDir}.copy`;
  fs.cpSync(dataDir, copy, { recursive: true });
  return () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.cpSync(copy, dataDir, { recursive: true });
  };
}

/** Waits into the next second of the clock (the portal stamps comments and tasks to the second). */
async function nextSecond(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
}

/** A comment on task 4 waiting for approval, recorded by an in-process app that is closed again. */
async function waitingComment(): Promise<ThreadView> {
  const app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(readThenPropose(4, { POST_MESSAGE: TEXT }, "add_task_comment")),
  });
  try {
    const view = await startRun(app, { request: `comment on task 4: ${TEXT}`, requestedBy: "demo-user" });
    expect(view.status).toBe("awaiting_approval");
    return view;
  } finally {
    await app.close();
  }
}

async function approveInProcess(view: ThreadView): Promise<void> {
  const app = await openTestApp(portal, dataDir);
  try {
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
      ],
    });
    expect(done.state!.outcome).toBe("VERIFIED");
  } finally {
    await app.close();
  }
}

async function auditOf(threadId: string, env: Record<string, string>): Promise<string> {
  const r = await runCli(["audit", "show", threadId, "--json"], env);
  return JSON.stringify(parseJsonOutput(r.stdout));
}

describe("no second send after a rollback or a deleted write-ahead row", () => {
  it("row 4: a VERIFIED comment, its action set back to pre_read, the thread reopened and its write-ahead row deleted: recover sends nothing, ROLLBACK_DETECTED audited", async () => {
    const env = envFor(portal, dataDir);
    const view = await waitingComment();
    await approveInProcess(view);
    expect(await commentWrites()).toHaveLength(1);
    const hash = view.approval!.envelopeHash;

    const [action] = await journalSql(
      dataDir,
      "SELECT progress_json FROM T.actions WHERE envelope_hash = ?",
      [hash],
    );
    const progress = JSON.parse(action!["progress_json"] as string) as Record<string, unknown>;
    // What the row held at pre_read: the decision and the pre-read, with their seals.
    const { decision, decisionSeal, preRead, preReadSeal } = progress;
    await journalSql(
      dataDir,
      "UPDATE T.actions SET phase = 'pre_read', progress_json = ? WHERE envelope_hash = ?",
      [JSON.stringify({ decision, decisionSeal, preRead, preReadSeal }), hash],
    );
    await journalSql(dataDir, "UPDATE T.threads SET closed_json = NULL WHERE thread_id = ?", [view.threadId]);
    await journalSql(dataDir, "DELETE FROM T.executions WHERE envelope_hash = ?", [hash]);

    const r = await runCli(["recover", view.threadId, "--json"], env);
    const out = parseJsonOutput(r.stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "INCONCLUSIVE",
      reasonCode: "ROLLBACK_DETECTED",
    });
    expect(out.reason).toMatch(/journal is behind its write anchor/);
    expect(out.reason).toMatch(/holds no such entry and has the action at pre_read/);
    expect(await commentWrites()).toHaveLength(1);
    const audit = await auditOf(view.threadId, env);
    expect(audit).toContain("ROLLBACK_DETECTED");
    expect(audit).toContain("tamper_detected");
  });

  it("an approved rename its pre-read could not read (PRECHECK_ERROR), put back at decided with its thread reopened once the portal answers again: recover sends nothing, ROLLBACK_DETECTED", async () => {
    const env = envFor(portal, dataDir);
    const TITLE = "PUT BACK AFTER ITS CLOSE";
    const title = async () =>
      String((await portal.rest("tasks.task.get", { taskId: 4 })).body.result.task.title);
    const original = await title();
    const app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE })),
    });
    let view: ThreadView;
    try {
      view = await startRun(app, { request: `rename task 4 to ${TITLE}`, requestedBy: "demo-user" });
      expect(view.status).toBe("awaiting_approval");
      // The portal fails every read while the approval arrives: the pre-read stops the write.
      await portal.fault(TASK_READS_FAIL);
      const stopped = await submitDecision(app, view.threadId, approvalOf(view));
      expect(stopped.state).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "PRECHECK_ERROR" });
    } finally {
      await app.close();
      await portal.clearFaults();
    }
    // The portal answers again and the task is as approved; the writer puts the action back where it
    // stood after its (sealed) approval, and reopens the thread.
    const hash = view.approval!.envelopeHash;
    const [row] = await journalSql(dataDir, "SELECT progress_json FROM T.actions WHERE envelope_hash = ?", [
      hash,
    ]);
    const {
      closed: _c,
      closeSeal: _s,
      preRead: _p,
      ...decided
    } = JSON.parse(row!["progress_json"] as string) as Record<string, unknown>;
    expect(decided).toHaveProperty("decisionSeal");
    await journalSql(
      dataDir,
      "UPDATE T.actions SET phase = 'decided', progress_json = ? WHERE envelope_hash = ?",
      [JSON.stringify(decided), hash],
    );
    await journalSql(dataDir, "UPDATE T.threads SET closed_json = NULL WHERE thread_id = ?", [view.threadId]);

    const r = await runCli(["recover", view.threadId, "--json"], env);
    const out = parseJsonOutput(r.stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "NOT_EXECUTED",
      reasonCode: "ROLLBACK_DETECTED",
    });
    expect(out.reason).toMatch(/was closed at \S+ with nothing sent/);
    expect(out.reason).toMatch(/the journal has it at decided/);
    expect(await portal.writes()).toEqual([]);
    expect(await title()).toBe(original);
    expect(await auditOf(view.threadId, env)).toContain("tamper_detected");
  });

  it("row 6: the data directory copied while the comment waits, approved (VERIFIED), the copy put back, the same approval sent again: no second comment", async () => {
    const env = envFor(portal, dataDir);
    const view = await waitingComment();
    const putBack = snapshot();
    const args = ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"];
    const first = parseJsonOutput((await runCli(args, env)).stdout);
    expect(first.outcome).toBe("VERIFIED");
    expect(await commentWrites()).toHaveLength(1);

    putBack();
    const again = await runCli(args, env);
    const out = parseJsonOutput(again.stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "INCONCLUSIVE",
      reasonCode: "ROLLBACK_DETECTED",
    });
    expect(out.reason).toMatch(/journal is behind its write anchor/);
    expect(await commentWrites()).toHaveLength(1);
    expect(await auditOf(view.threadId, env)).toContain("ROLLBACK_DETECTED");
  });

  it("row 6 without the anchor (lost with its key folder): the pre-read finds the approved comment already posted and sends nothing (ALREADY_EXECUTED)", async () => {
    const env = envFor(portal, dataDir);
    const view = await waitingComment();
    // The portal stamps the comment to the second: posted in a later second than the envelope, it is
    // told apart as made after it (in the same second it could not be: PRECHECK_UNKNOWN).
    await nextSecond();
    const putBack = snapshot();
    const args = ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"];
    expect(parseJsonOutput((await runCli(args, env)).stdout).outcome).toBe("VERIFIED");

    putBack();
    fs.rmSync(`${env["ACTION_ENVELOPE_JOURNAL_KEY_FILE"]}.anchor`);
    const out = parseJsonOutput((await runCli(args, env)).stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "NOT_EXECUTED",
      reasonCode: "ALREADY_EXECUTED",
    });
    expect(out.reason).toMatch(/already has a comment with the approved text/);
    expect(await commentWrites()).toHaveLength(1);
  });

  it("a sealed write-ahead row: flipping a plain REST 2 entry to the Idempotency-Key protocol is refused (ENVELOPE_TAMPERED), nothing re-sent", async () => {
    const env = envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: "off" });
    const view = await recordPendingRename(portal, dataDir, "REST 2, FLIPPED", { env });
    await portal.fault({ method: "tasks.task.update", kind: "apply_then_timeout", times: 1 });
    await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      { ...env, BITRIX24_TIMEOUT_MS: "30000" },
      "the write to reach the portal",
      async () => (await portal.calls("tasks.task.update")).length > 0,
    );
    expect(await portal.writes()).toHaveLength(1);

    const hash = view.approval!.envelopeHash;
    const [row] = await journalSql(
      dataDir,
      "SELECT args_json, ack_json FROM T.executions WHERE envelope_hash = ?",
      [hash],
    );
    expect(row!["ack_json"]).toBeNull();
    const args = JSON.parse(row!["args_json"] as string) as Record<string, unknown>;
    expect(args["protocol"]).toBeUndefined();
    await journalSql(dataDir, "UPDATE T.executions SET args_json = ? WHERE envelope_hash = ?", [
      JSON.stringify({ ...args, protocol: "rest3-idempotency-key" }),
      hash,
    ]);

    const out = parseJsonOutput(
      (await runCli(["recover", view.threadId, "--json"], { ...env, BITRIX24_IDEMPOTENCY: "on" })).stdout,
    );
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "INCONCLUSIVE",
      reasonCode: "ENVELOPE_TAMPERED",
    });
    expect(out.reason).toMatch(/seal under the journal key does not hold/);
    expect(await portal.writes()).toHaveLength(1);
    expect(await auditOf(view.threadId, env)).toContain("ENVELOPE_TAMPERED");
  });

  it("an unsealed legacy write-ahead row (written before rows were sealed): recovery refuses it precisely (ENVELOPE_TAMPERED), audited, nothing re-sent", async () => {
    const env = envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: "on" });
    const view = await recordPendingRename(portal, dataDir, "LEGACY ROW", { env });
    await portal.fault({ method: "tasks.task.update", kind: "apply_then_timeout", times: 1 });
    await killedWhen(
      ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
      { ...env, BITRIX24_TIMEOUT_MS: "30000" },
      "the write to reach the portal",
      async () => (await portal.calls("tasks.task.update")).length > 0,
    );
    expect(await portal.writes()).toHaveLength(1);

    // The row as a version before the seal wrote it: the same call, no MAC. With its seal the Idempotency-Key call would be re-sent.
    const hash = view.approval!.envelopeHash;
    const [row] = await journalSql(
      dataDir,
      "SELECT mac, ack_json FROM T.executions WHERE envelope_hash = ?",
      [hash],
    );
    expect(row!["ack_json"]).toBeNull();
    expect(row!["mac"]).not.toBeNull();
    await journalSql(dataDir, "UPDATE T.executions SET mac = NULL WHERE envelope_hash = ?", [hash]);

    const out = parseJsonOutput((await runCli(["recover", view.threadId, "--json"], env)).stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "INCONCLUSIVE",
      reasonCode: "ENVELOPE_TAMPERED",
    });
    expect(out.reason).toMatch(
      /write-ahead entry of action \S+ was changed outside this program \(expected a sealed write-ahead row, found an unsealed legacy row/,
    );
    expect(out.reason).not.toMatch(/arguments|operation/);
    expect(await portal.writes()).toHaveLength(1);
    const audit = await auditOf(view.threadId, env);
    expect(audit).toContain("tamper_detected");
    expect(audit).toContain("found an unsealed legacy row");
  });

  it("a new task, the data directory put back and the anchor lost: the pre-read finds the task already created and sends nothing (ALREADY_EXECUTED)", async () => {
    const env = envFor(portal, dataDir);
    const TITLE = "Created once: Q4 report";
    const model = new ScriptedChatModel((messages) => {
      if (messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change"))
        return new AIMessage("Proposed; waiting for the human.");
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            operation: "add_task",
            fields: { TITLE, RESPONSIBLE_ID: "5" },
            rationale: "requested by the user",
          }),
        ],
      });
    });
    const app = await openTestApp(portal, dataDir, { model });
    let view: ThreadView;
    try {
      view = await startRun(app, {
        request: `create a task "${TITLE}" for user 5`,
        requestedBy: "demo-user",
      });
      expect(view.status).toBe("awaiting_approval");
    } finally {
      await app.close();
    }
    await nextSecond();
    const putBack = snapshot();
    const args = ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"];
    expect(parseJsonOutput((await runCli(args, env)).stdout).outcome).toBe("VERIFIED");
    putBack();
    fs.rmSync(`${env["ACTION_ENVELOPE_JOURNAL_KEY_FILE"]}.anchor`);
    const out = parseJsonOutput((await runCli(args, env)).stdout);
    expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
      outcome: "NOT_EXECUTED",
      reasonCode: "ALREADY_EXECUTED",
    });
    expect((await portal.writes()).filter((w) => w.method === "tasks.task.add")).toHaveLength(1);
  });
});
