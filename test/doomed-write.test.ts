/**
 * A write the envelope-time read already proves will be refused — no edit right (task 6: the acting
 * user's `action.edit` is false), an object that does not exist — ends before the approval with the
 * reason: NOT_EXECUTED with a precise code, audited, and no human is asked (no interrupt, nothing
 * pending). In process through the graph, and through the compiled CLI (`run`, `pending`, `audit list`).
 * Writes are counted in the emulator's call log.
 */
import { describe, expect, it } from "vitest";
import { AIMessage } from "@langchain/core/messages";
import { startRun } from "../src/app/threads.js";
import { pendingPage } from "./support/pending-page.js";
import { eachTestApp, envFor, parseJsonOutput, runCli } from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose, type Script } from "./support/scripted-model.js";

const t = eachTestApp("ae-doomed-");

async function run(request: string, script: Script) {
  const app = await t.open({ model: new ScriptedChatModel(script) });
  return startRun(app, { request, requestedBy: "demo-user" });
}

describe("a write the portal has already refused is not put before an approver", () => {
  it("no edit right (action.edit=false): NOT_EXECUTED NOT_PERMITTED before any approval, nothing pending, no write", async () => {
    const view = await run("rename task 6 to Something", readThenPropose(6, { TITLE: "Something" }));
    expect(view.status).toBe("finished");
    expect(view.approval).toBeUndefined();
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("NOT_PERMITTED");
    expect(view.state?.reason).toContain("action.edit=false");
    expect(view.state?.envelopeHash ?? null).toBeNull();
    expect((await pendingPage(t.app, {})).total).toBe(0);
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("a deadline the task's read refuses (action.changeDeadline=false): NOT_PERMITTED before any approval; the portal refuses it too", async () => {
    // The emulator's rights fixture, over the seed: task 4 stays editable, its deadline does not.
    const rights = `${t.portal.emulator.baseUrl}/_emulator/tasks/4/rights`;
    const denied = await fetch(rights, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ deny: ["changeDeadline"] }),
    });
    expect(denied.status).toBe(200);
    const read = await t.portal.rest("tasks.task.get", { taskId: 4 });
    expect(read.body.result.task.action).toMatchObject({ edit: true, changeDeadline: false });
    const view = await run(
      "move task 4's deadline",
      readThenPropose(4, { DEADLINE: "2027-03-01T12:00:00+03:00" }),
    );
    expect(view.approval).toBeUndefined();
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("NOT_PERMITTED");
    expect(view.state?.reason).toContain("DEADLINE needs action.changeDeadline, which is false");
    expect((await pendingPage(t.app, {})).total).toBe(0);
    expect(await t.portal.writes()).toHaveLength(0);
    // What the read said is what the portal does: a direct deadline write is refused, a title write is not.
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 4, fields: { DEADLINE: "2027-03-01T12:00:00" } }))
        .status,
    ).toBe(400);
    expect(
      (await t.portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "Still editable" } })).status,
    ).toBe(200);
  });

  it("a task that does not exist: NOT_EXECUTED TARGET_NOT_FOUND before any approval, no write", async () => {
    const view = await run("rename task 99 to Something", readThenPropose(99, { TITLE: "Something" }));
    expect(view.approval).toBeUndefined();
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("TARGET_NOT_FOUND");
    expect(view.state?.reason).toContain("task 99 does not exist");
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("a change set with one doomed action ends before approval, naming the action", async () => {
    const actions = [
      { operation: "update_task", taskId: 4, fields: { TITLE: "Fine" } },
      { operation: "update_task", taskId: 6, fields: { TITLE: "Refused" } },
    ];
    const script: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (tools.includes("propose_change_set")) return new AIMessage("Proposed.");
      if (!tools.includes("get_task_by_id"))
        return new AIMessage({
          content: "",
          tool_calls: [call("get_task_by_id", { taskId: 4 }), call("get_task_by_id", { taskId: 6 })],
        });
      return new AIMessage({
        content: "",
        tool_calls: [call("propose_change_set", { actions, rationale: "requested by the user" })],
      });
    };
    const view = await run("rename tasks 4 and 6", script);
    expect(view.approval).toBeUndefined();
    expect(view.state?.reasonCode).toBe("NOT_PERMITTED");
    expect(view.state?.reason).toMatch(/^a2: .*task 6/);
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it('from the CLI: `run "rename task 6 …"` prints the reason and exits 2; nothing pending; audited', async () => {
    const env = envFor(t.portal, t.dataDir);
    const r = await runCli(["run", "rename task 6 to Something", "--as", "demo-user", "--json"], env);
    expect(r.code, r.stderr).toBe(2);
    const out = parseJsonOutput(r.stdout);
    expect(out).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "NOT_PERMITTED" });
    const human = await runCli(["run", "rename task 6 to Other", "--as", "demo-user"], env);
    expect(human.code).toBe(2);
    expect(human.stdout + human.stderr).toContain("NOT_PERMITTED");
    expect(human.stdout).not.toContain("approve ");
    const pending = await runCli(["pending", "--json"], env);
    expect(pending.code, pending.stderr).toBe(0);
    expect(JSON.stringify(parseJsonOutput(pending.stdout))).not.toContain(out.threadId);
    const audit = await runCli(["audit", "list", "--json"], env);
    const threads = JSON.parse(audit.stdout).threads as Array<Record<string, unknown>>;
    expect(threads.find((t) => t.threadId === out.threadId)).toMatchObject({ outcome: "NOT_EXECUTED" });
    expect(await t.portal.writes()).toHaveLength(0);
  }, 60_000);
});
