/**
 * Runs stopped between the steps of an approved action, and the journal rows a writer of the data
 * directory edits while they wait (test/close-seal.test.ts, test/withheld-evidence.test.ts): a rename
 * waiting for approval, its approval in a run made to stop on the way, and the action's progress
 * column read and rewritten by SQL on the backend the suite runs on.
 */
import { expect } from "vitest";
import { startRun, submitDecision } from "../../src/app/threads.js";
import type { ThreadView } from "../../src/app/view-thread.js";
import { approvalOf, journalSql, type TestApp } from "./harness.js";
import { ScriptedChatModel, readThenPropose } from "./scripted-model.js";

/** A rename of task `taskId` to `title`, waiting for approval in a newly opened app. */
export async function renameWaiting(t: TestApp, taskId: number, title: string): Promise<ThreadView> {
  const app = await t.open({ model: new ScriptedChatModel(readThenPropose(taskId, { TITLE: title })) });
  const view = await startRun(app, {
    request: `rename task ${taskId} to ${title}`,
    requestedBy: "demo-user",
  });
  expect(view.status).toBe("awaiting_approval");
  return view;
}

/** Approves `view` in a run made to stop on the way; the action's hash, its row left at `phase`. */
export async function approvedUntilStopped(t: TestApp, view: ThreadView, phase: string): Promise<string> {
  await expect(submitDecision(t.app, view.threadId, approvalOf(view))).rejects.toThrow(/stopped/);
  const hash = view.approval!.envelopeHash;
  const [row] = await journalSql(t.dataDir, "SELECT phase FROM T.actions WHERE envelope_hash = ?", [hash]);
  expect(row!["phase"]).toBe(phase);
  return hash;
}

/** The action's progress column as the journal stores it. */
export async function actionProgress(t: TestApp, envelopeHash: string): Promise<Record<string, unknown>> {
  const [row] = await journalSql(t.dataDir, "SELECT progress_json FROM T.actions WHERE envelope_hash = ?", [
    envelopeHash,
  ]);
  return JSON.parse(String(row!["progress_json"])) as Record<string, unknown>;
}

/** Rewrites the action's progress column, as a writer without the journal key can. */
export const setActionProgress = (t: TestApp, envelopeHash: string, progress: unknown) =>
  journalSql(t.dataDir, "UPDATE T.actions SET progress_json = ? WHERE envelope_hash = ?", [
    JSON.stringify(progress),
    envelopeHash,
  ]);
