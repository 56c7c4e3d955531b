/**
 * No identity is invented (issue 27): `approve`, `reject`, `edit` and `decide` without `--as` record
 * no default approver unless ACTION_ENVELOPE_DEFAULT_APPROVER is set, and then say so ("deciding as
 * …, from ACTION_ENVELOPE_DEFAULT_APPROVER") before anything is sent; with neither they stop with a
 * usage error naming both and nothing is decided. `decide` says what a partial approval will do before
 * it sends it. Each CLI call is its own process of the compiled CLI; writes counted in the emulator.
 */
import { AIMessage } from "@langchain/core/messages";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startRun } from "../src/app/threads.js";
import {
  envFor,
  openTestApp,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, call, type Script } from "./support/scripted-model.js";

let portal: Portal;
let dataDir: string;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-identity-");
});
afterEach(async () => {
  await portal.emulator.close();
});

describe("decision commands invent no approver", () => {
  it("without --as and without ACTION_ENVELOPE_DEFAULT_APPROVER: reject and approve stop (exit 1) naming both; nothing is decided", async () => {
    const unset = envFor(portal, dataDir, { ACTION_ENVELOPE_DEFAULT_APPROVER: "" });
    const run = await runCli(
      ["run", "rename task 4 to Nobody decided this", "--as", "demo-user", "--json"],
      unset,
    );
    expect(run.code, run.stderr).toBe(0);
    const waiting = parseJsonOutput(run.stdout);
    expect(run.stdout).not.toContain("demo-approver");

    const reject = await runCli(["reject", waiting.threadId, "--reason", "not now"], unset);
    expect(reject.code).toBe(1);
    expect(reject.stderr).toContain("--as <approver-id>");
    expect(reject.stderr).toContain("ACTION_ENVELOPE_DEFAULT_APPROVER");
    const approve = await runCli(["approve", waiting.threadId, "--hash", waiting.envelopeHash], unset);
    expect(approve.code).toBe(1);
    expect(approve.stderr).toContain("--as <approver-id>");

    const show = await runCli(["show", waiting.threadId, "--json"], unset);
    expect(parseJsonOutput(show.stdout).status).toBe("awaiting_approval");
    expect(await portal.writes()).toHaveLength(0);

    // A configured default is used, and said before anything is sent.
    const configured = envFor(portal, dataDir, { ACTION_ENVELOPE_DEFAULT_APPROVER: "bob" });
    const ok = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"],
      configured,
    );
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toContain("deciding as bob, from ACTION_ENVELOPE_DEFAULT_APPROVER");
    expect(parseJsonOutput(ok.stdout)).toMatchObject({
      outcome: "VERIFIED",
      decision: { approverId: "bob", verifiedBy: "self_declared" },
    });
    expect(await portal.writes()).toHaveLength(1);
  }, 60_000);

  it("decide prints what a partial approval does before sending it: a1 runs at once, a2 REJECTED, and the table lists both", async () => {
    const actions = [
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
    ];
    const script: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (tools.includes("propose_change_set")) return new AIMessage("Proposed.");
      if (!tools.includes("get_task_by_id"))
        return new AIMessage({
          content: "",
          tool_calls: [call("get_task_by_id", { taskId: 4 }), call("get_task_by_id", { taskId: 5 })],
        });
      return new AIMessage({
        content: "",
        tool_calls: [call("propose_change_set", { actions, rationale: "requested" })],
      });
    };
    const app = await openTestApp(portal, dataDir, { model: new ScriptedChatModel(script) });
    const view = await startRun(app, { request: "priorities of tasks 4 and 5", requestedBy: "demo-user" });
    await app.close();
    const setHash = view.approval!.changeSet!.setHash;
    const env = envFor(portal, dataDir, { ACTION_ENVELOPE_DEFAULT_APPROVER: "" });
    const r = await runCli(
      [
        "decide",
        view.threadId,
        "--hash",
        setHash,
        "--approve",
        "a1",
        "--reject",
        "a2=leave task 5 alone",
        "--as",
        "alice",
      ],
      env,
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toContain("a1 runs at once on this approval; a2 is not run (REJECTED)");
    expect(r.stdout).toMatch(/a1 +update_task +task 4 +VERIFIED/);
    expect(r.stdout).toMatch(/a2 +update_task +task 5 +REJECTED +REJECTED_BY_HUMAN +not sent/);
    expect(r.stdout).not.toContain("Edited by");
    expect((await portal.writes()).map((w) => w.params["taskId"])).toEqual([4]);
  }, 60_000);
});
