/**
 * Change sets in the web inbox over plain HTTP: listed once, shown as the set's header and every
 * action's card, decided as a whole or action by action (one submission, the set's hash and nonce,
 * one approver), an incomplete per-action form refused before anything is sent, and each action's
 * outcome on the thread page afterwards (PARTIALLY_EXECUTED shown as such). Real emulator over HTTP,
 * SQLite stores and the graph, with a scripted model proposing the set; writes counted in the
 * emulator's call log.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { PASSWORDS } from "./support/inbox.js";
import {
  SET_COMMENT as COMMENT,
  startSetWorld,
  type SetAction,
  type SetWorld,
} from "./support/inbox-sets.js";

/** Each request (by its text) and the change set the model proposes for it. */
const SETS: Record<string, SetAction[]> = {
  [`set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`]: [
    { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
    { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
  ],
  [`rename task 2 to Release notes 2027 and comment on task 2: ${COMMENT}`]: [
    { operation: "update_task", taskId: 2, fields: { TITLE: "Release notes 2027" } },
    { operation: "add_task_comment", taskId: 2, fields: { POST_MESSAGE: COMMENT } },
  ],
  [`rename task 1 to CS-1 renamed, rename task 3 to CS-3 renamed and comment on task 1: ${COMMENT}`]: [
    { operation: "update_task", taskId: 1, fields: { TITLE: "CS-1 renamed" } },
    { operation: "update_task", taskId: 3, fields: { TITLE: "CS-3 renamed" } },
    { operation: "add_task_comment", taskId: 1, fields: { POST_MESSAGE: COMMENT } },
  ],
  [`rename task 8 to Vendor audit 2027 and comment on task 8: ${COMMENT}`]: [
    { operation: "update_task", taskId: 8, fields: { TITLE: "Vendor audit 2027" } },
    { operation: "add_task_comment", taskId: 8, fields: { POST_MESSAGE: COMMENT } },
  ],
  [`rename task 5 to Budget 2027 and comment on task 5: ${COMMENT}`]: [
    { operation: "update_task", taskId: 5, fields: { TITLE: "Budget 2027" } },
    { operation: "add_task_comment", taskId: 5, fields: { POST_MESSAGE: COMMENT } },
  ],
};
const REQUESTS = Object.keys(SETS);

class Client {
  cookies = new Map<string, string>();
  constructor(readonly base: string) {}
  async req(
    p: string,
    init: RequestInit & { form?: Array<[string, string]> | Record<string, string> } = {},
  ): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    if (!headers.has("accept")) headers.set("accept", "text/html");
    let body = init.body;
    if (init.form) {
      body = new URLSearchParams(init.form).toString();
      headers.set("content-type", "application/x-www-form-urlencoded");
    }
    const res = await fetch(this.base + p, { ...init, headers, body, redirect: "manual" });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      const value = pair!.slice(eq + 1);
      if (value === "" || /max-age=0/i.test(c)) this.cookies.delete(pair!.slice(0, eq));
      else this.cookies.set(pair!.slice(0, eq), value);
    }
    return res;
  }
  async signIn(user: string): Promise<void> {
    const page = await (await this.req("/login")).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    expect(
      (await this.req("/login", { method: "POST", form: { csrf, user, password: PASSWORDS[user]! } })).status,
    ).toBe(303);
  }
  async csrf(): Promise<string> {
    return /name="csrf" value="([^"]+)"/.exec(await (await this.req("/")).text())![1]!;
  }
}

let w: SetWorld;

beforeAll(async () => {
  w = await startSetWorld(SETS);
});
afterAll(async () => {
  await w?.close();
});

async function waitingSet(request: string): Promise<ThreadView> {
  const view = await w.propose(request);
  expect(view.status).toBe("awaiting_approval");
  expect(view.approval!.changeSet).toBeDefined();
  return view;
}

const writesOn = (...taskIds: number[]) => w.writesOn(...taskIds);

describe("a change set in the inbox over HTTP", () => {
  it("is listed once, shown with the set's header and every action's card, and bound to the set's hash and nonce", async () => {
    const view = await waitingSet(REQUESTS[0]!);
    const cs = view.approval!.changeSet!;
    const [a1, a2] = cs.actions;
    const alice = new Client(w.inbox.url);
    await alice.signIn("alice");
    const list = await (await alice.req("/")).text();
    // One index row per action, one list item for the set, carrying the set's hash.
    expect(list.split(`data-thread="${view.threadId}"`)).toHaveLength(2);
    expect(list).toContain(`data-hash="${cs.setHash}"`);
    expect(list).not.toContain(`data-hash="${a1!.envelopeHash}"`);
    expect(list).toContain("change set of 2 actions, in order");
    expect(list).toMatch(
      /<li data-action-id="a1"><strong>a1<\/strong> update_task · task 4 «[^<]+»<ul class="changes-short"><li><span class="field">STATUS<\/span>: <span class="old">[^<]+<\/span> → <span class="new">awaiting control \(4\)<\/span>/,
    );
    expect(list).toMatch(
      /<li data-action-id="a2"><strong>a2<\/strong> add_task_comment · task 4 «[^<]+»<ul class="changes-short"><li><span class="field">POST_MESSAGE<\/span>: <span class="old">new<\/span>/,
    );
    expect(list).toMatch(new RegExp(`data-risk="${cs.set.risk.level}" data-thread="${view.threadId}"`));

    const page = await (await alice.req(`/t/${view.threadId}`)).text();
    expect(page).toContain(`<code class="hash">${cs.setHash}</code>`);
    expect(page).toContain("Change set of 2 actions · revision 1");
    expect(page).toContain(
      "the set stops at the first action that is not VERIFIED, and the actions after it are not run",
    );
    expect(page).toContain(
      `<span class="risk risk-${cs.set.risk.level}">${cs.set.risk.level}</span> · ${cs.set.risk.reversibility}`,
    );
    expect(page).toContain(`datetime="${cs.set.expiresAt}"`);
    // Every action's card, in order: the update's change, the comment as a new comment, what must stay.
    expect(page).toMatch(
      /<section class="card set-action[^"]*"[^>]*data-envelope-hash="[^"]+" data-action-id="a1">/,
    );
    expect(page).toMatch(
      /<section class="card set-action[^"]*"[^>]*data-envelope-hash="[^"]+" data-action-id="a2">/,
    );
    expect(page.indexOf('data-action-id="a1">')).toBeLessThan(page.indexOf('data-action-id="a2">'));
    expect(page).toContain("1 of 2 · a1</span> update_task on task 4");
    expect(page).toContain("2 of 2 · a2</span> add_task_comment on task 4");
    expect(page).toContain("New comment: what will be posted");
    expect(page).toContain("<em>new comment</em>");
    expect(page).toContain(COMMENT);
    // What must stay unchanged is folded by default on a set's cards.
    expect(
      page.match(/<details class="invariants"><summary>Must stay unchanged \(\d+ fields\)<\/summary>/g),
    ).toHaveLength(2);
    // a1 changes STATUS of task 4, which a2 (on the same task) must find unchanged: a2 expects what a1 wrote.
    expect(page).toMatch(
      /<tr class="expects" data-expects="a1"><th scope="row">STATUS<\/th><td><pre class="value">&quot;4&quot;<\/pre>.*?expects what a1 wrote/s,
    );
    expect(page).toContain("Expects what a1 wrote: STATUS must hold the value written earlier in this set.");
    // Each action's decision control is beside its card, in the per-action form by its form attribute.
    expect(page).toMatch(
      /data-action-id="a1">\s*<h2 id="card-title-a1">[\s\S]*?<\/h2>\s*<aside class="action-control" aria-label="Your decision on a1"><fieldset class="per-action" form="per-action-form" data-action-id="a1"/,
    );
    expect(page).toContain(
      '<input type="radio" form="per-action-form" id="decision-a2-reject" name="decision.a2" value="reject" required>',
    );
    // Every form names the set's hash and nonce, never an action's own.
    const hashes = [...page.matchAll(/name="envelopeHash" value="([^"]+)"/g)].map((m) => m[1]);
    const nonces = [...page.matchAll(/name="nonce" value="([^"]+)"/g)].map((m) => m[1]);
    expect(hashes.length).toBeGreaterThanOrEqual(4);
    expect(new Set(hashes)).toEqual(new Set([cs.setHash]));
    expect(new Set(nonces)).toEqual(new Set([cs.set.nonce]));
    expect(page).not.toContain(`value="${a2!.envelope.nonce}"`);
    expect(page).toContain("Approve the whole set (2 actions, in this order)");
    expect(page).toContain('name="decision.a1" value="reject"');
    expect(page).toContain('name="edit.a2.field.POST_MESSAGE"');
    expect(await writesOn(4)).toHaveLength(0);
  });

  it("refuses an incomplete or ambiguous per-action form before anything is sent; then one approved and one rejected runs only the approved one", async () => {
    const view = await waitingSet(REQUESTS[0]!);
    const cs = view.approval!.changeSet!;
    const alice = new Client(w.inbox.url);
    await alice.signIn("alice");
    const csrf = await alice.csrf();
    const bound: Array<[string, string]> = [
      ["csrf", csrf],
      ["envelopeHash", cs.setHash],
      ["nonce", cs.set.nonce],
      ["action", "per-action"],
    ];
    const post = (extra: Array<[string, string]>) =>
      alice.req(`/t/${view.threadId}/decide`, { method: "POST", form: [...bound, ...extra] });
    const refusalsBefore = (await w.app.deps.journal.currentAction(view.threadId))!.progress.refusalsSeen;

    const cases: Array<[Array<[string, string]>, string]> = [
      [[["decision.a1", "approve"]], "no decision for a2"],
      [
        [
          ["decision.a1", "approve"],
          ["decision.a1", "reject"],
          ["decision.a2", "approve"],
        ],
        "a1 named more than once",
      ],
      [
        [
          ["decision.a1", "approve"],
          ["decision.a2", "approve"],
          ["decision.a9", "reject"],
        ],
        "the change set has no action a9",
      ],
      [
        [
          ["decision.a1", "approve"],
          ["decision.a2", "maybe"],
        ],
        "a2: choose approve, reject or edit",
      ],
      [[], "no decision for a1, a2"],
    ];
    for (const [extra, reason] of cases) {
      const res = await post(extra);
      expect(res.status, reason).toBe(422);
      const text = await res.text();
      expect(text).toContain("Nothing was sent: decide every action of the change set exactly once (a1, a2)");
      expect(text).toContain(reason);
      // The card is shown again with the refusal.
      expect(text).toContain(`<code class="hash">${cs.setHash}</code>`);
    }
    // Nothing reached the graph: no refusal recorded, still waiting, nothing written.
    expect((await w.app.deps.journal.currentAction(view.threadId))!.progress.refusalsSeen).toBe(
      refusalsBefore,
    );
    expect((await viewThread(w.app, view.threadId)).status).toBe("awaiting_approval");
    expect(await writesOn(4)).toHaveLength(0);

    // Before submitting, the form says what rejecting each action does: rejecting the comment leaves the
    // update (reversible) to run at once; rejecting the update leaves a comment on the same task, which
    // depends on it and comes back for a fresh approval that alice may give herself.
    const form = await (await alice.req(`/t/${view.threadId}`)).text();
    expect(form).toContain(
      "If you reject a2 and approve the others: a1 runs at once on this approval; a2 is not run (REJECTED).",
    );
    expect(form).toMatch(
      /If you reject a1 and approve the others: a2 will NOT run on this decision: a2 depends on rejected a1 \(both change task 4;[^<]*\)\. a2 comes back as a new revision to be approved by any approver of these actions, you included/,
    );

    // One approved, one rejected (listed out of order: matched by id), one submission.
    const res = await post([
      ["decision.a2", "reject"],
      ["message.a2", "no comment needed"],
      ["decision.a1", "approve"],
    ]);
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain("Your per-action decision was accepted.");
    expect(page).toContain('<span class="outcome">VERIFIED</span>');
    expect(page).toContain("Decided action by action");
    expect(page).toMatch(/<strong>a1<\/strong>: approve/);
    expect(page).toMatch(/<strong>a2<\/strong>: reject \(no comment needed\)/);
    const writes = await writesOn(4);
    expect(writes.map((w) => w.method)).toEqual(["tasks.task.update"]);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { STATUS: "4" } });
    expect(await w.portal.calls("task.commentitem.add")).toHaveLength(0);
    // The journal holds one decision by alice, per action, bound to the set.
    const rows = await Promise.all(cs.actions.map((a) => w.app.deps.journal.getAction(a.envelopeHash)));
    const d = rows[0]!.progress.decision!;
    expect(d).toMatchObject({
      envelopeHash: cs.setHash,
      nonce: cs.set.nonce,
      approverId: "alice",
      verifiedBy: "authentication",
    });
    expect(d.setPlan!.perAction).toEqual([
      { actionId: "a1", type: "approve" },
      { actionId: "a2", type: "reject", message: "no comment needed" },
    ]);
  });

  it("approves the whole set in one decision: both actions run in order and the page shows how each ended", async () => {
    const view = await waitingSet(REQUESTS[1]!);
    const cs = view.approval!.changeSet!;
    const bob = new Client(w.inbox.url);
    await bob.signIn("bob");
    const csrf = await bob.csrf();
    // An action's own hash is not the set's: refused as a stale card, nothing sent.
    const own = await bob.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: {
        csrf,
        action: "approve",
        envelopeHash: cs.actions[0]!.envelopeHash,
        nonce: cs.actions[0]!.envelope.nonce,
      },
    });
    expect(own.status).toBe(409);
    expect(await writesOn(2)).toHaveLength(0);

    const res = await bob.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: { csrf, action: "approve", envelopeHash: cs.setHash, nonce: cs.set.nonce },
    });
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain("Your approve of the whole set was accepted.");
    expect(page).toContain('<h1>Finished: <span class="outcome">VERIFIED</span></h1>');
    expect(page).toContain("Change set of 2 actions: how each ended");
    expect(page).toMatch(
      /<tr data-action-id="a1"><th scope="row">a1<\/th><td[^>]*>update_task<\/td><td[^>]*>task 2<\/td>\s*<td[^>]*><span class="outcome outcome-VERIFIED">VERIFIED<\/span><\/td><td[^>]*>VERIFIED<\/td>/,
    );
    expect(page).toMatch(
      /<tr data-action-id="a2"><th scope="row">a2<\/th><td[^>]*>add_task_comment<\/td><td[^>]*>task 2<\/td>\s*<td[^>]*><span class="outcome outcome-VERIFIED">VERIFIED<\/span><\/td><td[^>]*>VERIFIED<\/td>/,
    );
    expect((await writesOn(2)).map((w) => w.method)).toEqual(["tasks.task.update", "task.commentitem.add"]);
    const after = await viewThread(w.app, view.threadId);
    expect(after.state?.decision).toMatchObject({
      type: "approve",
      approverId: "bob",
      envelopeHash: cs.setHash,
      verifiedBy: "authentication",
    });
  });

  it("shows PARTIALLY_EXECUTED as such, with each action's outcome and reason code", async () => {
    const view = await waitingSet(REQUESTS[2]!);
    const cs = view.approval!.changeSet!;
    // Someone changes task 3 after the card was shown: a2's pre-read differs, the chain stops there.
    expect((await w.portal.rest("tasks.task.update", { taskId: 3, fields: { PRIORITY: "2" } })).status).toBe(
      200,
    );
    const alice = new Client(w.inbox.url);
    await alice.signIn("alice");
    const csrf = await alice.csrf();
    const res = await alice.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: { csrf, action: "approve", envelopeHash: cs.setHash, nonce: cs.set.nonce },
    });
    expect(res.status).toBe(200);
    await res.text();
    const page = await (await alice.req(`/t/${view.threadId}`)).text();
    expect(page).toContain('<h1>Finished: <span class="outcome">PARTIALLY_EXECUTED</span></h1>');
    expect(page).toContain("Partially executed:");
    expect(page).toMatch(
      /data-action-id="a1">.*?outcome-VERIFIED">VERIFIED<\/span><\/td><td[^>]*>VERIFIED<\/td>/s,
    );
    expect(page).toMatch(
      /data-action-id="a2">.*?outcome-NOT_EXECUTED">NOT_EXECUTED<\/span><\/td><td[^>]*>STALE_STATE<\/td>/s,
    );
    expect(page).toMatch(
      /data-action-id="a3">.*?outcome-NOT_EXECUTED">NOT_EXECUTED<\/span><\/td><td[^>]*>CHAIN_STOPPED<\/td>/s,
    );
    const ours = (await writesOn(1, 3)).filter(
      (w) =>
        w.method !== "tasks.task.update" ||
        (w.params as { fields?: { PRIORITY?: unknown } }).fields?.PRIORITY === undefined,
    );
    expect(ours.map((w) => [w.method, (w.params as { taskId?: number }).taskId])).toEqual([
      ["tasks.task.update", 1],
    ]);
    expect(await w.portal.calls("task.commentitem.add")).toHaveLength(1); // the earlier whole-set approval's comment on task 2 only
  });

  it("lets the requester cancel the whole set (set hash and nonce): every action ends NOT_EXECUTED, nothing written", async () => {
    const view = await waitingSet(REQUESTS[4]!);
    const cs = view.approval!.changeSet!;
    const requester = new Client(w.inbox.url);
    await requester.signIn("demo-user");
    const list = await (await requester.req("/")).text();
    expect(list).toMatch(
      new RegExp(`data-thread="${view.threadId}" data-hash="${cs.setHash}" data-kind="set"`),
    );
    expect(list).toContain("you may cancel it");
    const page = await (await requester.req(`/t/${view.threadId}`)).text();
    expect(page).not.toContain("Approve the whole set (2 actions");
    expect(page).toContain("You may not approve this change set");
    expect(page).not.toContain("Decide action by action");
    const csrf = await requester.csrf();
    // The requester may not approve, not even action by action.
    const approve = await requester.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: [
        ["csrf", csrf],
        ["envelopeHash", cs.setHash],
        ["nonce", cs.set.nonce],
        ["action", "per-action"],
        ["decision.a1", "approve"],
        ["decision.a2", "approve"],
      ],
    });
    expect(approve.status).toBe(403);
    const res = await requester.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: { csrf, action: "cancel", envelopeHash: cs.setHash, nonce: cs.set.nonce, reason: "not needed" },
    });
    expect(res.status).toBe(200);
    const done = await res.text();
    expect(done).toContain('<span class="outcome">NOT_EXECUTED</span>');
    expect(done).toMatch(
      /data-action-id="a1">.*?outcome-NOT_EXECUTED">NOT_EXECUTED<\/span><\/td><td[^>]*>CANCELLED<\/td>/s,
    );
    expect(done).toMatch(
      /data-action-id="a2">.*?outcome-NOT_EXECUTED">NOT_EXECUTED<\/span><\/td><td[^>]*>CANCELLED<\/td>/s,
    );
    expect((await viewThread(w.app, view.threadId)).state?.reasonCode).toBe("CANCELLED");
    expect(await writesOn(5)).toHaveLength(0);
  });

  it("an edit of one action in the per-action form makes a new revision of the set, shown for a fresh approval; nothing is written", async () => {
    const view = await waitingSet(REQUESTS[3]!);
    const cs = view.approval!.changeSet!;
    const bob = new Client(w.inbox.url);
    await bob.signIn("bob");
    const csrf = await bob.csrf();
    const res = await bob.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: [
        ["csrf", csrf],
        ["envelopeHash", cs.setHash],
        ["nonce", cs.set.nonce],
        ["action", "per-action"],
        ["decision.a1", "approve"],
        ["decision.a2", "edit"],
        ["edit.a2.field.POST_MESSAGE", "Shorter."],
      ],
    });
    expect(res.status).toBe(200);
    const page = await res.text();
    // bob wrote revision 2 by his edit: he is told it waits for another approver, and is offered no Approve.
    expect(page).toContain(
      "Your per-action decision was accepted. A new revision (2) now waits for a fresh approval by another approver.",
    );
    expect(page).toContain("<strong>Waiting for another approver.</strong> You edited this change set");
    expect(page).not.toContain(`<button type="submit" class="approve">Approve the whole set`);
    expect(page).toMatch(/id="decision-a1-approve" name="decision.a1" value="approve" required disabled>/);
    const now = await viewThread(w.app, view.threadId);
    expect(now.status).toBe("awaiting_approval");
    expect(now.approval!.changeSet!.set.revision).toBe(2);
    expect(now.approval!.changeSet!.set.editedBy).toBe("bob");
    expect(page).toContain(`<code class="hash">${now.approval!.envelopeHash}</code>`);
    expect(page).toContain("Shorter.");
    // The same per-action form again, from a tab still showing revision 1: refused as stale, nothing sent.
    const stale = await bob.req(`/t/${view.threadId}/decide`, {
      method: "POST",
      form: [
        ["csrf", csrf],
        ["envelopeHash", cs.setHash],
        ["nonce", cs.set.nonce],
        ["action", "per-action"],
        ["decision.a1", "approve"],
        ["decision.a2", "approve"],
      ],
    });
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain("the card changed since this page was loaded");
    expect((await viewThread(w.app, view.threadId)).approval!.envelopeHash).toBe(now.approval!.envelopeHash);
    expect(await writesOn(8)).toHaveLength(0);
  });
});
