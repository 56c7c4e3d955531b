/**
 * `pending` by object, through the compiled CLI: `--task N` (or `--object N`) lists approvals with an
 * action on task N, `--deal N` those with an action on deal N, a change set when any of its actions is
 * on that object (here its second), and a deal or task with the same number is not the other. Every
 * listing names the object's kind (human line and `--json`'s `object`, with `taskId` kept). Two object
 * flags at once, or an object flag with `--api`, are refused (exit 1). Recorded in process (the offline
 * model for the single proposals, a scripted one for a set on tasks 4 and 3: a set's actions are on
 * tasks only, src/envelope/change-set.ts); nothing is ever written.
 */
import { AIMessage } from "@langchain/core/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRun } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import { inboxListPage } from "../src/inbox/list-page.js";
import { listFragment } from "../src/inbox/pages.js";
import { cardSection } from "../src/inbox/card-view.js";
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

/** Reads tasks 4 and 3, then proposes a set: a1 task 4's status, a2 a comment on task 3. */
const twoTasks: Script = (messages) => {
  const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
  if (tools.includes("propose_change_set")) return new AIMessage("Proposed; waiting for the human.");
  if (!tools.includes("get_task_by_id"))
    return new AIMessage({
      content: "",
      tool_calls: [call("get_task_by_id", { taskId: 4 }), call("get_task_by_id", { taskId: 3 })],
    });
  return new AIMessage({
    content: "",
    tool_calls: [
      call("propose_change_set", {
        actions: [
          { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
          { operation: "add_task_comment", taskId: 3, fields: { POST_MESSAGE: "Ready for review" } },
        ],
        rationale: "requested by the user",
      }),
    ],
  });
};

let portal: Portal;
let env: Record<string, string>;
let deal: ThreadView;
let task: ThreadView;
let set: ThreadView;

beforeAll(async () => {
  portal = await startPortal();
  const dataDir = tempDir("ae-pending-deal-");
  env = envFor(portal, dataDir);
  // Oldest first: the deal, the task with the deal's number, then the set (task 4, then task 3).
  const offline = await openTestApp(portal, dataDir);
  try {
    deal = await startRun(offline, { request: "move deal 3 to WON", requestedBy: "demo-user" });
    task = await startRun(offline, {
      request: "rename task 3 to Listed by its task",
      requestedBy: "demo-user",
    });
  } finally {
    await offline.close();
  }
  const scripted = await openTestApp(portal, dataDir, { model: new ScriptedChatModel(twoTasks) });
  try {
    set = await startRun(scripted, {
      request: "set status of task 4 to awaiting control and comment on task 3: Ready for review",
      requestedBy: "demo-user",
    });
  } finally {
    await scripted.close();
  }
  for (const v of [deal, task, set]) expect(v.status, v.state?.reason ?? "").toBe("awaiting_approval");
  expect(deal.approval!.envelope.object).toEqual({ type: "deal", id: 3 });
  expect(task.approval!.envelope.object).toEqual({ type: "task", id: 3 });
  expect(set.approval!.changeSet!.actions.map((x) => x.envelope.object)).toEqual([
    { type: "task", id: 4 },
    { type: "task", id: 3 },
  ]);
}, 120_000);

afterAll(async () => {
  await portal?.emulator.close();
});

async function listed(...flags: string[]): Promise<{ total: number; threads: string[]; pending: any[] }> {
  const r = await runCli(["pending", "--json", ...flags], env);
  expect(r.code, `${flags.join(" ")}: ${r.stderr}`).toBe(0);
  const page = parseJsonOutput(r.stdout);
  return {
    total: page.total,
    threads: page.pending.map((p: { threadId: string }) => p.threadId),
    pending: page.pending,
  };
}

describe("pending by object", () => {
  it("--deal lists the deal only; --task / --object the task and the set with an action on it; the JSON names each object's kind", async () => {
    const all = await listed();
    expect(all.threads).toEqual([deal.threadId, task.threadId, set.threadId]);
    // Fields added, none renamed: taskId stays the object's id, object adds its kind, operation the single proposal's.
    expect(all.pending[0]).toMatchObject({
      taskId: 3,
      object: { type: "deal", id: 3 },
      operation: "update_deal",
      fields: ["STAGE_ID"],
    });
    expect(all.pending[1]).toMatchObject({
      taskId: 3,
      object: { type: "task", id: 3 },
      operation: "update_task",
      fields: ["TITLE"],
    });
    expect(all.pending[2]).toMatchObject({
      taskId: 4,
      object: { type: "task", id: 4 },
      changeSet: {
        actions: [
          {
            actionId: "a1",
            operation: "update_task",
            taskId: 4,
            object: { type: "task", id: 4 },
            fields: ["STATUS"],
          },
          {
            actionId: "a2",
            operation: "add_task_comment",
            taskId: 3,
            object: { type: "task", id: 3 },
            fields: ["POST_MESSAGE"],
          },
        ],
      },
    });

    // Deal 3: the deal only; not task 3, nor the set whose task 3 comment carries the same number.
    expect(await listed("--deal", "3")).toMatchObject({ total: 1, threads: [deal.threadId] });
    // Task 3 (either flag): the rename and the set through its second action; not the deal.
    expect(await listed("--task", "3")).toMatchObject({ total: 2, threads: [task.threadId, set.threadId] });
    expect(await listed("--object", "3")).toMatchObject({ total: 2, threads: [task.threadId, set.threadId] });
    // Task 4 is the set's first action; there is no deal 4 anywhere.
    expect(await listed("--object", "4")).toMatchObject({ total: 1, threads: [set.threadId] });
    expect(await listed("--deal", "4")).toMatchObject({ total: 0, threads: [] });
    // Paged within the filter.
    expect(await listed("--task", "3", "--limit", "1")).toMatchObject({ total: 2, threads: [task.threadId] });
    expect(await listed("--task", "3", "--limit", "1", "--offset", "1")).toMatchObject({
      total: 2,
      threads: [set.threadId],
    });

    // The human listing names the kind: the deal as a deal (with its operation), a task update as before.
    const human = await runCli(["pending", "--deal", "3"], env);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split("\n").filter((l) => l.trim() !== "");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${deal.threadId}  rev 1  update_deal deal 3 STAGE_ID  high`);
    const byTask = await runCli(["pending", "--task", "3"], env);
    expect(byTask.stdout).toContain(`${task.threadId}  rev 1  task 3 TITLE  `);
    expect(byTask.stdout).toContain(
      `${set.threadId}  rev 1  change set of 2 actions: a1 update_task task 4 STATUS; a2 add_task_comment task 3 POST_MESSAGE`,
    );
    expect(byTask.stdout).not.toContain(deal.threadId);
    expect(await portal.writes()).toEqual([]);
  });

  it("refuses two object flags at once, a non-positive id, and an object flag with --api (exit 1, nothing listed)", async () => {
    const refusals: Array<[string[], RegExp]> = [
      [
        ["--object", "3", "--deal", "3"],
        /--object and --deal each name the one object .*--deal N for a deal/,
      ],
      [["--task", "3", "--deal", "4"], /--task and --deal each name the one object/],
      [["--task", "3", "--object", "3"], /--task and --object each name the one object/],
      [["--deal", "0"], /expected a positive deal id, got "0"/],
      [["--deal", "x3"], /expected a positive deal id/],
      [
        ["--deal", "3", "--api", "http://127.0.0.1:9"],
        /--deal filters the local listing; pending --api lists every waiting approval/,
      ],
    ];
    for (const [flags, message] of refusals) {
      const r = await runCli(["pending", "--json", ...flags], env);
      expect(r.code, `${flags.join(" ")}: ${r.stdout}${r.stderr}`).toBe(1);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).not.toContain(deal.threadId);
    }
    const help = await runCli(["pending", "--help"], env);
    expect(help.stdout).toMatch(/--deal <id>\s+only approvals with an action on this deal/);
    expect(help.stdout).toMatch(/--object <task>\s+the same as --task/);
  });
});

describe("the web inbox names a deal as a deal", () => {
  it("the listing says `update_deal · deal 3`, a task approval `task 3`, the set's actions their tasks; the deal's card reads 'from the deal'", async () => {
    const app = await openTestApp(portal, env["ACTION_ENVELOPE_DATA_DIR"]!);
    try {
      const { items } = await inboxListPage(app, "bob");
      const list = String(listFragment(items));
      // Each row names its object with the title as read, then each change as old → new.
      expect(list).toMatch(
        /deal 3 «[^»]+» <small>· update_deal<\/small><\/span><ul class="changes-short"><li><span class="field">STAGE_ID<\/span>/,
      );
      expect(list).not.toMatch(/task 3 «[^»]+» <small>· update_deal/);
      expect(list).toMatch(
        /task 3 «[^»]+» <small>· update_task<\/small><\/span><ul class="changes-short"><li><span class="field">TITLE<\/span>/,
      );
      expect(list).toMatch(
        /<strong>a1<\/strong> update_task · task 4 «[^»]+»<ul class="changes-short"><li><span class="field">STATUS<\/span>.*<strong>a2<\/strong> add_task_comment · task 3 «/s,
      );
      const row = (await app.deps.journal.currentAction(deal.threadId))!;
      const card = String(cardSection(row));
      expect(card).toContain("Changes: value read from the deal when the envelope was made");
      expect(await portal.writes()).toEqual([]);
    } finally {
      await app.close();
    }
  });
});

describe("run --deal", () => {
  it("puts the deal in the request's scope: the deal named runs to its approval, another deal is refused naming the scope, and a bad id is a usage error", async () => {
    const inScope = await runCli(["run", "move deal 3 to WON", "--deal", "3", "--json", "--no-prompt"], env);
    expect(inScope.code, inScope.stderr).toBe(0);
    const waitingView = parseJsonOutput(inScope.stdout);
    expect(waitingView.status).toBe("awaiting_approval");
    const outside = await runCli(["run", "move deal 3 to WON", "--deal", "4", "--json", "--no-prompt"], env);
    const refused = parseJsonOutput(outside.stdout);
    expect(refused.status).toBe("finished");
    expect(JSON.stringify(refused)).toContain("deal 3 is outside the request's scope (deals 4)");
    const bad = await runCli(["run", "move deal 3 to WON", "--deal", "0"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/expected a positive deal id, got "0"/);
    const help = await runCli(["run", "--help"], env);
    expect(help.stdout).toMatch(/--deal <id>\s+deal id in scope \(repeatable\)/);
    expect(await portal.writes()).toEqual([]);
  });
});
