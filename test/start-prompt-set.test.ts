/**
 * The main job's prompt for a change set, as a person answers it: `start` (the compiled CLI) on a
 * pseudo-terminal, so the real @inquirer/prompts prompts are drawn and answered with keystrokes as they
 * appear (test/support/pty.ts). The offline model turns "set status of task 4 to awaiting control;
 * comment on it: Ready for review" into a set (a1 the status, a2 the comment). Per action at the
 * prompt: a1 approved, a2 rejected with a reason, sent as `decide` sends it → exactly the a1 write; the
 * whole set approved → both writes, bound to the set hash on the card (no prompt confirms a prefilled
 * hash); the approver id is never filled in unless ACTION_ENVELOPE_DEFAULT_APPROVER names one.
 * Without a terminal the job still only prints the card with `approve` and `decide` and writes nothing.
 * The emulator runs over HTTP in the test process; writes are counted in its call log.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  CLI,
  ROOT,
  envFor,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { KEY, hasScript, runInPty } from "./support/pty.js";

const REQUEST = "set status of task 4 to awaiting control; comment on it: Ready for review";

let portal: Portal;
let env: Record<string, string>;

beforeEach(async () => {
  portal = await startPortal();
  env = envFor(portal, tempDir("ae-start-set-"));
});
afterEach(async () => {
  await portal.emulator.close();
});

describe.runIf(hasScript())("the start prompt for a change set, at a terminal", () => {
  it("decides each action: a1 approved, a2 rejected with a reason → one decision per action, exactly the a1 write, VERIFIED", async () => {
    const r = await runInPty(`node ${CLI} start '${REQUEST}'`, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      steps: [
        // Third choice: decide each action.
        {
          when: /Decision for change set\s+sha256:[0-9a-f]{64}\s+\(revision 1, 2 actions: a1, a2\)[\s\S]*decide each action/,
          keys: KEY.down + KEY.down + KEY.enter,
        },
        { when: /Your approver id/, keys: "alice" + KEY.enter },
        { when: /Action 1 of 2, a1: update_task task 4 \(STATUS\)[\s\S]*reject a1/, keys: KEY.enter },
        {
          when: /Action 2 of 2, a2: add_task_comment task 4 \(POST_MESSAGE\)[\s\S]*reject a2/,
          keys: KEY.down + KEY.enter,
        },
        { when: /Reason for rejecting a2/, keys: "not before the numbers are in" + KEY.enter },
      ],
      timeoutMs: 120_000,
    });
    expect(r.stepsSent, r.text).toBe(5);
    // The decision is bound to the set hash on the card; no prompt asks to confirm a prefilled one.
    expect(r.text).not.toMatch(/hash as shown/i);
    expect(r.code, r.text).toBe(0);
    // The whole-set choices are there too, and the prompt says where an edit is made.
    expect(r.text).toContain("approve the whole set (every action)");
    expect(r.text).toContain("reject the whole set");
    expect(r.text).toMatch(/to edit an action: npm run cli -- decide \S+ --edit/);
    expect(r.text).toMatch(/OUTCOME VERIFIED/);
    const thread = /thread: (\S+)/.exec(r.text)?.[1];
    expect(thread, r.text).toBeDefined();

    const writes = await portal.writes();
    expect(writes.map((w) => w.method)).toEqual(["tasks.task.update"]);
    expect(writes[0]!.params["fields"]).toEqual({ STATUS: "4" });
    expect(await portal.calls("task.commentitem.add")).toHaveLength(0);
    expect((await portal.task(4))["status"]).toBe("4");

    // Recorded as a per-action decision by alice (a partial approval), not a whole-set approval.
    const shown = parseJsonOutput((await runCli(["show", thread!, "--json"], env)).stdout);
    expect(shown).toMatchObject({
      status: "finished",
      outcome: "VERIFIED",
      decision: { type: "approve", approverId: "alice" },
    });
    expect(shown.decision.message).toContain("partial approval");
    const audit = await runCli(["audit", "show", thread!], env);
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toContain("not before the numbers are in");
  }, 150_000);

  it("approves the whole set: both actions written, in order, VERIFIED", async () => {
    const r = await runInPty(`node ${CLI} start '${REQUEST}'`, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      steps: [
        { when: /Decision for change set[\s\S]*approve the whole set/, keys: KEY.enter },
        { when: /Your approver id/, keys: "bob" + KEY.enter },
      ],
      timeoutMs: 120_000,
    });
    expect(r.stepsSent, r.text).toBe(2);
    expect(r.code, r.text).toBe(0);
    expect(r.text).not.toMatch(/Action 1 of 2/);
    expect(r.text).toMatch(/OUTCOME VERIFIED/);
    expect((await portal.writes()).map((w) => w.method)).toEqual([
      "tasks.task.update",
      "task.commentitem.add",
    ]);
  }, 150_000);

  it("the approver id is asked with nothing filled in: Enter alone is not taken; Ctrl-C leaves the set waiting, nothing sent", async () => {
    const r = await runInPty(`node ${CLI} start '${REQUEST}'`, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env, ACTION_ENVELOPE_DEFAULT_APPROVER: "" },
      steps: [
        { when: /Decision for change set[\s\S]*approve the whole set/, keys: KEY.enter },
        { when: /Your approver id/, keys: KEY.enter },
        // Still asked (no invented default): stop there.
        { when: /You must provide a value/, keys: "\u0003" },
      ],
      timeoutMs: 120_000,
    });
    expect(r.stepsSent, r.text).toBe(3);
    expect(r.text).not.toMatch(/Your approver id \(/);
    expect(r.text).toMatch(/You must provide a value/);
    expect(r.text).toMatch(/Stopped at the prompt; nothing was sent\. The thread \S+ keeps waiting/);
    expect(r.code, r.text).toBe(0);
    expect(await portal.writes()).toEqual([]);
    const pending = parseJsonOutput((await runCli(["pending", "--json"], env)).stdout);
    expect(pending.pending).toHaveLength(1);
  }, 150_000);

  it("with ACTION_ENVELOPE_DEFAULT_APPROVER the prompt offers that id and says where it comes from; Enter decides as it", async () => {
    const r = await runInPty(`node ${CLI} start '${REQUEST}'`, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env, ACTION_ENVELOPE_DEFAULT_APPROVER: "carol" },
      steps: [
        { when: /Decision for change set[\s\S]*approve the whole set/, keys: KEY.enter },
        { when: /Your approver id \(default from ACTION_ENVELOPE_DEFAULT_APPROVER\)/, keys: KEY.enter },
      ],
      timeoutMs: 120_000,
    });
    expect(r.stepsSent, r.text).toBe(2);
    expect(r.code, r.text).toBe(0);
    expect(r.text).toMatch(/OUTCOME VERIFIED/);
    const thread = /thread: (\S+)/.exec(r.text)?.[1];
    const shown = parseJsonOutput((await runCli(["show", thread!, "--json"], env)).stdout);
    expect(shown).toMatchObject({ decision: { type: "approve", approverId: "carol" } });
  }, 150_000);
});

describe("the start job for a change set without a terminal", () => {
  it("prints the card with the approve and decide commands, asks nothing, writes nothing; the printed decide command then decides", async () => {
    const r = await runCli(["start", REQUEST], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain("Decision for change set");
    expect(r.stdout).toContain("No terminal to ask at");
    const decide =
      /^\s*npm run cli -- (decide \S+ --hash sha256:[0-9a-f]{64} --approve a1 --reject a2) --as demo-approver\s*$/m.exec(
        r.stdout,
      )?.[1];
    expect(decide, r.stdout).toBeDefined();
    // The reject line names its approver too: no decision command defaults one.
    expect(r.stdout).toMatch(
      /^or reject it with: npm run cli -- reject \S+ --as demo-approver --reason "\.\.\."$/m,
    );
    expect(await portal.writes()).toEqual([]);

    const decided = await runCli([...decide!.split(" "), "--reason", "later", "--json"], env);
    expect(decided.code, decided.stdout + decided.stderr).toBe(0);
    expect(parseJsonOutput(decided.stdout)).toMatchObject({ outcome: "VERIFIED" });
    expect((await portal.writes()).map((w) => w.method)).toEqual(["tasks.task.update"]);
  }, 120_000);
});
