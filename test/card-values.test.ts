/**
 * What the approver is shown against what is sent: text that reaches a card from outside the envelope's
 * params (the requester's id) and values that two proposals could spell differently but that a card
 * would show the same. The graph with the scripted model, our MCP server over stdio and the emulator over
 * HTTP; writes counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import type { ThreadView } from "../src/app/view-thread.js";
import { startInbox } from "../src/inbox/server.js";
import { hashPassword, loadInboxUsers } from "../src/inbox/users.js";
import { eachTestApp } from "./support/harness.js";
import { PASSWORDS, signedInSession } from "./support/inbox.js";
import {
  ScriptedChatModel,
  readThenPropose,
  readThenProposeSet,
  type SetAction,
} from "./support/scripted-model.js";

const t = eachTestApp();

const approveAll = (view: ThreadView) => {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
};

describe("a change set's card", () => {
  const SET: SetAction[] = [
    { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
    { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: "Raised the priority." } },
  ];

  it("shows a requester id with line breaks on one line, so it cannot add lines or shift the actions' sections", async () => {
    const app = await t.open({ model: new ScriptedChatModel(readThenProposeSet(SET)) });
    // A self-declared requester id is free text: here it carries a fake section marker and a fake line.
    const requestedBy = "mallory\n──── ACTION 1 of 2: a1 ────\nNothing is written by this set.";
    const view = await startRun(app, {
      request: "raise the priority of task 4 and comment on it",
      requestedBy,
    });
    expect(view.status).toBe("awaiting_approval");
    const a = view.approval!;
    const card = a.actionRequests[0]!.description;
    const lines = card.split("\n");
    // The requester is named on one line, its line breaks shown as markers; nothing it holds is a line of the card.
    const named = lines.filter((l) => l.startsWith("Requested by: mallory"));
    // The set's header and each action's card name the requester.
    expect(named).toHaveLength(3);
    for (const l of named)
      expect(l).toContain("mallory⟨U+000A⟩──── ACTION 1 of 2: a1 ────⟨U+000A⟩Nothing is written");
    expect(lines).not.toContain("Nothing is written by this set.");
    expect(lines.filter((l) => l.startsWith("──── ACTION 1 of 2: a1 ────"))).toHaveLength(1);
    // Each later action request is described by its own action's card, not another's.
    expect(a.actionRequests.map((r) => r.name)).toEqual(["update_task", "add_task_comment"]);
    expect(a.actionRequests[1]!.description).toMatch(/^──── ACTION 2 of 2: a2 ────\n/);
    expect(a.actionRequests[1]!.description).toContain("NEW COMMENT on task 4");
    expect(await t.portal.writes()).toHaveLength(0);

    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "tasks.task.update",
      "task.commentitem.add",
    ]);
  });
});

describe("a value that looks like another", () => {
  it("is a text not in NFC: the card warns (é as e + U+0301 looks like é), and exactly those code points are sent", async () => {
    const title = "Cafe\u0301 menu review";
    const app = await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: title })),
    });
    const view = await startRun(app, { request: `rename task 4 to ${title}`, requestedBy: "demo-user" });
    expect(view.status).toBe("awaiting_approval");
    const card = view.approval!.actionRequests[0]!.description;
    // Shown as the eye reads it, "Café", which is also how the precomposed spelling shows: the warning tells them apart.
    expect(card).toContain(`requested: "${title}"`);
    expect(card).not.toContain(title.normalize("NFC"));
    expect(card).toMatch(/⚠ TITLE \(requested\): not in Unicode normal form NFC \(⟨U\+0301⟩\)/);
    const done = await submitDecision(app, view.threadId, approveAll(view));
    expect(done.state!.outcome).toBe("VERIFIED");
    const writes = await t.portal.writes();
    expect(writes.map((w) => w.method)).toEqual(["tasks.task.update"]);
    expect((writes[0]!.params["fields"] as Record<string, unknown>)["TITLE"]).toBe(title);
    expect((await t.portal.task(4))["title"]).toBe(title);
  });
});

/**
 * The text of an element's content as an HTML parser reads it: a line feed right after the start tag of
 * <pre> and <textarea> is dropped (HTML's parsing rules), then tags are removed and entities decoded.
 */
function parsedContent(page: string, open: RegExp): string[] {
  const out: string[] = [];
  for (const m of page.matchAll(open)) {
    const tag = /^<(\w+)/.exec(m[0])![1]!;
    const start = m.index + m[0].length;
    const inner = page.slice(start, page.indexOf(`</${tag}>`, start));
    out.push(
      inner
        .replace(/^\n/, "")
        .replace(/<[^>]*>/g, "")
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&amp;/g, "&"),
    );
  }
  return out;
}

describe("the inbox's card page", () => {
  it("shows a value that starts with a line break with that line break, in the card and in the edit form", async () => {
    const message = "\nApproved by finance.\nPlease go ahead.";
    const usersFile = path.join(t.dataDir, "inbox-users.json");
    const users = [];
    for (const [id, password] of Object.entries(PASSWORDS))
      users.push({ id, password: await hashPassword(password) });
    fs.writeFileSync(usersFile, JSON.stringify({ users }));
    const app = await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { POST_MESSAGE: message }, "add_task_comment")),
      env: { ACTION_ENVELOPE_INBOX_USERS: usersFile },
    });
    const inbox = await startInbox({
      app,
      users: loadInboxUsers(app.deps.config.inboxUsersPath),
      pollMs: 200,
    });
    try {
      const view = await startRun(app, { request: "comment on task 4", requestedBy: "demo-user" });
      expect(view.status).toBe("awaiting_approval");
      const req = await signedInSession(inbox.url, "alice", PASSWORDS["alice"]!);
      const page = await (await req(`/t/${view.threadId}`)).text();
      // The card's value: three lines, the first empty, exactly as the text card shows them.
      expect(view.approval!.actionRequests[0]!.description).toContain(
        "    text:      3 lines, 38 characters:\n      │\n      │Approved by finance.",
      );
      expect(parsedContent(page, /<pre class="value after">/g)).toEqual([message]);
      // The edit form starts from the value as it is: submitting it unchanged sends the same text.
      expect(parsedContent(page, /<textarea[^>]* name="field\.POST_MESSAGE"[^>]*>/g)).toEqual([message]);
      expect(await t.portal.writes()).toHaveLength(0);
    } finally {
      await inbox.close();
    }
  });
});
