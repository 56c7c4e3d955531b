/**
 * A new task (add_task) end to end — the graph, our MCP server over stdio and the emulator over HTTP —
 * on the two places where "task 0" (a create's envelope object) used to stand for every new task:
 *  - the object lease: a create's lease is keyed on its title (what verification finds the new task
 *    by when the answer is lost), so after a create whose answer was lost another create with a
 *    different title proceeds, while one with the same title ends TARGET_BUSY naming that title;
 *  - an edit: a create names no object, so an edit of it sends {fields} (or taskId 0) and becomes a
 *    new revision (through submitDecision, the CLI's edit and the web inbox's edit form); an edit
 *    naming an existing task is refused OUT_OF_SCOPE.
 * Writes are counted in the emulator's call log.
 */
import { describe, expect, it } from "vitest";
import { AIMessage } from "@langchain/core/messages";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { objectKeyOf } from "../src/store/action-machine.js";
import fs from "node:fs";
import path from "node:path";
import { startInbox } from "../src/inbox/server.js";
import { hashPassword, loadInboxUsers } from "../src/inbox/users.js";
import {
  eachTestApp,
  envFor,
  objectLeaseOf,
  openTestApp,
  parseJsonOutput,
  runCli,
  until,
} from "./support/harness.js";
import { ScriptedChatModel, call } from "./support/scripted-model.js";
import { signedInSession } from "./support/inbox.js";

const FIRST = "LEASE-CREATE first report";
const OTHER = "LEASE-CREATE other report";
const EDITED = "LEASE-CREATE edited title";

const t = eachTestApp();

/** Proposes add_task with the title the request quotes, for user 5. */
const proposeQuoted = () =>
  new ScriptedChatModel((messages) => {
    if (messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change"))
      return new AIMessage("Proposed; waiting for the human.");
    const request = messages.find((m) => m.getType() === "human");
    const title = /"([^"]+)"/.exec(String(request?.content ?? ""))?.[1] ?? "untitled";
    return new AIMessage({
      content: "",
      tool_calls: [
        call("propose_change", {
          operation: "add_task",
          fields: { TITLE: title, RESPONSIBLE_ID: "5" },
          rationale: "requested by the user",
        }),
      ],
    });
  });

async function open(env: Record<string, string> = {}): Promise<App> {
  await t.open({ model: proposeQuoted(), env });
  return t.app;
}

async function waitingCreate(title: string): Promise<ThreadView> {
  const view = await startRun(t.app, {
    request: `create a task "${title}" for user 5`,
    requestedBy: "demo-user",
  });
  expect(view.status, view.state?.reason ?? "").toBe("awaiting_approval");
  expect(view.approval!.envelope).toMatchObject({
    operation: "add_task",
    object: { type: "task", id: 0 },
    params: { TITLE: title },
  });
  return view;
}

function approve(view: ThreadView): { decisions: unknown[] } {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

function edit(view: ThreadView, args: Record<string, unknown>): { decisions: unknown[] } {
  const a = view.approval!;
  return {
    decisions: [
      {
        type: "edit",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "alice" },
        editedAction: { name: "add_task", args },
      },
    ],
  };
}

const titled = async (title: string) =>
  (
    (await t.portal.rest("tasks.task.list", { filter: { TITLE: title } })).body.result.tasks as Array<{
      id: string;
      title: string;
    }>
  ).filter((t) => t.title === title);
const adds = async () =>
  (await t.portal.writes()).map((w) => ((w.params["fields"] as Record<string, unknown>) ?? {})["TITLE"]);

describe("the object lease of a create is keyed on its title", () => {
  it("after a create whose answer was lost (lease kept), a create with another title proceeds and is VERIFIED; one with the same title ends TARGET_BUSY naming that title, nothing sent", async () => {
    await open({
      BITRIX24_IDEMPOTENCY: "off",
      BITRIX24_TIMEOUT_MS: "1500",
      ACTION_ENVELOPE_OBJECT_WAIT_MS: "300",
    });
    const first = await waitingCreate(FIRST);
    const other = await waitingCreate(OTHER);
    const same = await waitingCreate(FIRST);
    await t.portal.fault({ method: "tasks.task.add", kind: "apply_then_timeout", times: 1 });
    const lost = await submitDecision(t.app, first.threadId, approve(first));
    expect(lost.state!.outcome, lost.state!.reason ?? "").toBe("INCONCLUSIVE");
    // Kept until it runs out: the lost write may still be listed late.
    expect((await objectLeaseOf(t.dataDir, objectKeyOf(first.approval!.envelope)))?.owner).toBe(
      first.approval!.envelopeHash,
    );

    const proceeded = await submitDecision(t.app, other.threadId, approve(other));
    expect(proceeded.state!.outcome, proceeded.state!.reason ?? "").toBe("VERIFIED");
    expect(await titled(OTHER)).toHaveLength(1);

    const busy = await submitDecision(t.app, same.threadId, approve(same));
    expect(busy.state!.outcome).toBe("NOT_EXECUTED");
    expect(busy.state!.reasonCode).toBe("TARGET_BUSY");
    expect(busy.state!.reason).toContain(`a new task titled "${FIRST}"`);
    expect(busy.state!.reason).not.toContain("task 0");
    expect(busy.state!.reason).toContain(`thread ${first.threadId}`);
    expect(busy.state!.preRead ?? null).toBeNull();

    // One send for the lost one, one for the other title, none for the same title.
    expect(await adds()).toEqual([FIRST, OTHER]);
    expect(await titled(FIRST)).toHaveLength(1);
    // Different titles are different objects to lease; the same title is one.
    expect(objectKeyOf(first.approval!.envelope)).not.toBe(objectKeyOf(other.approval!.envelope));
    expect(objectKeyOf(first.approval!.envelope)).toBe(objectKeyOf(same.approval!.envelope));
    expect(objectKeyOf(first.approval!.envelope)).not.toMatch(/\|task\|0$/);
  });

  it("two creates with different titles approved at once both proceed while one holds its lease: two writes, both VERIFIED", async () => {
    await open({ ACTION_ENVELOPE_OBJECT_WAIT_MS: "300", BITRIX24_TIMEOUT_MS: "6000" });
    const first = await waitingCreate(FIRST);
    const other = await waitingCreate(OTHER);
    // The first create is held 1.5 s by the emulator, far past the other's 300 ms wait bound.
    await t.portal.fault({ method: "tasks.task.add", kind: "latency", ms: 1500, times: 1 });
    const firstDone = submitDecision(t.app, first.threadId, approve(first));
    const deadline = Date.now() + 5000;
    while ((await t.app.deps.journal.getAction(first.approval!.envelopeHash))?.phase !== "intent") {
      if (Date.now() > deadline) throw new Error("the first create never reached intent");
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await objectLeaseOf(t.dataDir, objectKeyOf(first.approval!.envelope)))?.owner).toBe(
      first.approval!.envelopeHash,
    );
    const otherDone = await submitDecision(t.app, other.threadId, approve(other));
    expect(otherDone.state!.outcome, otherDone.state!.reason ?? "").toBe("VERIFIED");
    expect((await firstDone).state!.outcome).toBe("VERIFIED");
    expect((await adds()).sort()).toEqual([FIRST, OTHER].sort());
  });
});

describe("an edit of a create names no object", () => {
  it("through submitDecision: {fields} with an edited TITLE is a new revision; taskId 7 is refused OUT_OF_SCOPE; approved, exactly one task with the edited title", async () => {
    await open();
    const view = await waitingCreate(FIRST);
    expect(view.approval!.actionRequests[0].args).toEqual({ fields: { TITLE: FIRST, RESPONSIBLE_ID: "5" } });

    const existing = await submitDecision(
      t.app,
      view.threadId,
      edit(view, { taskId: 7, fields: { TITLE: EDITED, RESPONSIBLE_ID: "5" } }),
    );
    expect(
      existing.approval!.lastRefusal,
      JSON.stringify(existing.state?.reason ?? existing.status),
    ).toMatchObject({ code: "OUT_OF_SCOPE" });
    expect(existing.approval!.lastRefusal?.reason).toContain("names task 7");
    expect(existing.approval!.envelope.revision).toBe(1);

    // Exactly the args the approval showed, with the title changed.
    const edited = await submitDecision(
      t.app,
      view.threadId,
      edit(view, { fields: { TITLE: EDITED, RESPONSIBLE_ID: "5" } }),
    );
    expect(edited.status, edited.approval?.lastRefusal?.reason ?? "").toBe("awaiting_approval");
    expect(edited.approval!.lastRefusal ?? null).toBeNull();
    expect(edited.approval!.envelope).toMatchObject({
      revision: 2,
      operation: "add_task",
      object: { type: "task", id: 0 },
      params: { TITLE: EDITED, RESPONSIBLE_ID: "5" },
    });
    expect(await t.portal.writes()).toHaveLength(0);

    const done = await submitDecision(t.app, view.threadId, approve(edited));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    expect(await adds()).toEqual([EDITED]);
    expect(await titled(EDITED)).toHaveLength(1);
    expect(await titled(FIRST)).toHaveLength(0);
  });

  it("taskId 0 (as the inbox sends it) is read as the new task too", async () => {
    await open();
    const view = await waitingCreate(FIRST);
    const edited = await submitDecision(
      t.app,
      view.threadId,
      edit(view, { taskId: 0, fields: { TITLE: EDITED, RESPONSIBLE_ID: "5" } }),
    );
    expect(edited.approval!.lastRefusal ?? null).toBeNull();
    expect(edited.approval!.envelope).toMatchObject({ revision: 2, params: { TITLE: EDITED } });
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("through the CLI: edit --set TITLE=… makes revision 2 with the edited title; approved, one task with it", async () => {
    await open();
    const view = await waitingCreate(FIRST);
    await t.close();
    const env = envFor(t.portal, t.dataDir);
    const editRun = await runCli(
      ["edit", view.threadId, "--set", `TITLE=${EDITED}`, "--as", "alice", "--json"],
      env,
    );
    expect(editRun.code, editRun.stdout + editRun.stderr).toBe(0);
    const edited = parseJsonOutput(editRun.stdout);
    expect(edited).toMatchObject({
      status: "awaiting_approval",
      revision: 2,
      envelope: { operation: "add_task", params: { TITLE: EDITED, RESPONSIBLE_ID: "5" } },
    });
    const approved = await runCli(
      ["approve", view.threadId, "--hash", edited.envelopeHash, "--as", "bob", "--json"],
      env,
    );
    expect(approved.code, approved.stdout + approved.stderr).toBe(0);
    expect(parseJsonOutput(approved.stdout).outcome).toBe("VERIFIED");
    expect(await adds()).toEqual([EDITED]);
    expect(await titled(EDITED)).toHaveLength(1);
  });

  it("through the web inbox: the edit form of an add_task makes revision 2 with the edited title; nothing is written", async () => {
    const usersFile = path.join(t.dataDir, "inbox-users.json");
    fs.writeFileSync(
      usersFile,
      JSON.stringify({ users: [{ id: "alice", password: await hashPassword("alice-password-1") }] }),
    );
    await open({ ACTION_ENVELOPE_INBOX_USERS: usersFile });
    const view = await waitingCreate(FIRST);
    const inbox = await startInbox({
      app: t.app,
      users: loadInboxUsers(t.app.deps.config.inboxUsersPath),
      pollMs: 200,
    });
    try {
      const req = await signedInSession(inbox.url, "alice", "alice-password-1");
      const card = await (await req(`/t/${view.threadId}`)).text();
      const field = (name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(card)![1]!;
      const res = await req(`/t/${view.threadId}/decide`, {
        csrf: field("csrf"),
        action: "edit",
        envelopeHash: view.approval!.envelopeHash,
        nonce: view.approval!.nonce,
        "field.TITLE": EDITED,
        "field.RESPONSIBLE_ID": "5",
      });
      const page = await res.text();
      expect(res.status, page.slice(0, 2000)).toBe(200);
      const now = await viewThread(t.app, view.threadId);
      expect(now.approval!.lastRefusal ?? null).toBeNull();
      expect(now.approval!.envelope).toMatchObject({
        revision: 2,
        operation: "add_task",
        params: { TITLE: EDITED, RESPONSIBLE_ID: "5" },
        editedBy: "alice",
      });
      expect(await t.portal.writes()).toHaveLength(0);
    } finally {
      await inbox.close();
    }
  });
});

describe("a new task is found on the one page of tasks carrying its title", () => {
  it("with 55 tasks of that title already (more than a page of 50), the create is VERIFIED as the one new task; the pre-read and the verification ask for newest first explicitly, whatever the portal's default order", async () => {
    const title = "PAGE-CREATE weekly report";
    for (let i = 0; i < 55; i++) {
      const made = await t.portal.rest("tasks.task.add", { fields: { TITLE: title, RESPONSIBLE_ID: 5 } });
      expect(made.status).toBe(200);
    }
    // The portal stamps to the second: the envelope is made in a later second than those tasks.
    await new Promise((r) => setTimeout(r, 1050 - (Date.now() % 1000)));
    await open();
    const view = await waitingCreate(title);
    const before = (await t.portal.calls("tasks.task.list")).length;
    const writesBefore = (await t.portal.writes()).length;
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state!.outcome, done.state!.reason ?? "").toBe("VERIFIED");
    const lists = (await t.portal.calls("tasks.task.list")).slice(before);
    // One list by the pre-read, one by the verification, each with the order stated.
    expect(lists.map((c) => [c.params["filter"], c.params["order"]])).toEqual([
      [{ TITLE: title }, { ID: "desc" }],
      [{ TITLE: title }, { ID: "desc" }],
    ]);
    expect((await adds()).slice(writesBefore)).toEqual([title]);
    expect((await t.portal.rest("tasks.task.list", { filter: { TITLE: title } })).body.total).toBe(56);
  });
});

describe("a create whose object lease ran out while its process was paused", () => {
  it("another create of the same title took the object and made its task meanwhile: read again before the write, STALE_STATE naming that task, no second task", async () => {
    const title = "PAUSED-CREATE monthly report";
    const env = { ACTION_ENVELOPE_OBJECT_LEASE_MS: "400" };
    await open(env);
    const first = await waitingCreate(title);
    const second = await waitingCreate(title);
    const other = await openTestApp(t.portal, t.dataDir, { model: proposeQuoted(), env });
    try {
      // A stops at its write step's lease check (the pre-read's hold reads the lease first), past its lease.
      const journal = t.app.deps.journal as unknown as Record<
        string,
        (...args: unknown[]) => Promise<unknown>
      >;
      const through = journal["objectLease"]!.bind(journal);
      let go!: () => void;
      const gate = new Promise<void>((r) => (go = r));
      let calls = 0;
      let stopped = false;
      journal["objectLease"] = async (...args) => {
        if (++calls === 2) {
          stopped = true;
          await gate;
        }
        return through(...args);
      };
      const paused = submitDecision(t.app, first.threadId, approve(first));
      await until("A to stop after its pre-read", async () => stopped, 200, 10);
      await new Promise((r) => setTimeout(r, 500));
      const made = await submitDecision(other, second.threadId, approve(second));
      expect(made.state!.outcome, made.state!.reason ?? "").toBe("VERIFIED");
      const madeId = String(made.state!.verification?.created?.id);
      go();
      const view = await paused;
      expect(view.state!.outcome, view.state!.reason ?? "").toBe("NOT_EXECUTED");
      expect(view.state!.reasonCode).toBe("STALE_STATE");
      expect(view.state!.reason).toContain(
        `task(s) ${madeId} titled ${JSON.stringify(title)} appeared since`,
      );
      expect(await adds()).toEqual([title]);
      expect(await titled(title)).toHaveLength(1);
    } finally {
      await other.close();
    }
  });
});
