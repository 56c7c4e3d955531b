/**
 * The inbox list, a revision's page and a change set's page as a person reads them (issue 27), in
 * Debian's Chromium driven by playwright-core at 1280 and 390 px wide, against a real emulator over
 * HTTP, SQLite stores and the graph. Screenshots go to test-results/inbox/. Skipped, saying why, where
 * no Chromium is installed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startRun, submitDecision } from "../src/app/threads.js";
import { openApp } from "../src/app/open-app.js";
import { setDecisions } from "../src/cli/decisions.js";
import { launchBrowser, noBrowserReason, screenshotPath } from "./support/browser.js";
import { PASSWORDS, startInboxWorld, type InboxWorld } from "./support/inbox.js";
import { SET_COMMENT, startSetWorld, type SetAction, type SetWorld } from "./support/inbox-sets.js";

if (noBrowserReason) console.warn(`inbox list browser tests skipped: ${noBrowserReason}`);

const TITLES = {
  4: "Quarterly plan",
  1: "Hiring plan",
  8: "Vendor audit",
  2: "Release notes",
  3: "Office move",
};
const WIDTHS = [1280, 390] as const;

async function signedIn(
  browser: Browser,
  url: string,
  user: string,
  width: number,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${url}/login`);
  await page.getByLabel("Approver id").fill(user);
  await page.getByLabel("Password").fill(PASSWORDS[user]!);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${url}/`);
  return { context, page };
}

describe.skipIf(!!noBrowserReason)("the inbox list and a revision's page, in Chromium", () => {
  let w: InboxWorld;
  let browser: Browser;
  beforeAll(async () => {
    w = await startInboxWorld(TITLES);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  it("rows name the task's title, each change old → new, requester, times; soonest expiry first; tags say who decides", async () => {
    const first = await w.run(4);
    const edited = await w.run(8);
    const a = edited.approval!;
    // bob edits task 8's proposal: revision 2 is his, so he waits for another approver on it.
    await submitDecision(w.app, edited.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "bob" },
          editedAction: { name: "update_task", args: { taskId: 8, fields: { TITLE: "Vendor audit (bob)" } } },
        },
      ],
    });
    // A run the LangGraph API server keeps (same journal, another checkpointer): decided there.
    const elsewhere = await startRun(openApp(w.app.deps, { checkpointer: new MemorySaver() }), {
      request: "rename task 3 to the proposed title",
      requestedBy: "demo-user",
    });
    expect(elsewhere.status).toBe("awaiting_approval");

    for (const width of WIDTHS) {
      const { context, page } = await signedIn(browser, w.inbox.url, "bob", width);
      const row = (id: string) => page.locator(`li.item[data-thread="${id}"]`);
      await row(first.threadId).waitFor();
      const text = (await row(first.threadId).textContent())!.replace(/\s+/g, " ");
      expect(text).toContain("task 4 «LAB-AGENT-EXEC-002 - BOUND ACTION TEST»");
      expect(text).toContain("TITLE: LAB-AGENT-EXEC-002 - BOUND ACTI… → Quarterly plan");
      expect(text).toContain("requested by demo-user");
      expect(text).toMatch(/requested \d{4}-\d\d-\d\dT/);
      expect(text).toMatch(/expires in \d+ (min|h)/);
      expect(await row(first.threadId).locator(".tag").count()).toBe(0);
      // The edited one: bob may not approve what he wrote.
      const mine = (await row(edited.threadId).locator(".tags").textContent())!;
      expect(mine).toContain("waiting for another approver");
      expect(mine).toContain("you edited this");
      expect(await row(edited.threadId).textContent()).toContain("Vendor audit (bob)");
      expect(await row(elsewhere.threadId).locator(".tags").textContent()).toContain(
        "decide on the API server",
      );
      // Soonest expiry first: the edit gave task 8's revision a fresh expiry, so it comes after task 4's.
      const expiries = await page
        .locator("li.item")
        .evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset["expiresAt"]!));
      expect(expiries).toEqual([...expiries].sort((x, y) => Date.parse(x) - Date.parse(y)));
      const order = await page
        .locator("li.item")
        .evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset["thread"]!));
      expect(order.indexOf(edited.threadId)).toBeGreaterThan(order.indexOf(first.threadId));
      // No two rows read the same.
      const rows = await page.locator("li.item").allTextContents();
      expect(new Set(rows.map((r) => r.replace(/\s+/g, " "))).size).toBe(rows.length);
      // The local time is shown beside UTC.
      expect(await row(first.threadId).locator(".local-time").count()).toBe(1);
      await page.screenshot({ path: screenshotPath(`list-${width}`), fullPage: true });

      // The editor's page: waiting for another approver, no Approve button.
      await page.goto(`${w.inbox.url}/t/${edited.threadId}`);
      expect(await page.locator("p.waiting").textContent()).toContain("Waiting for another approver.");
      expect(await page.getByRole("button", { name: "Approve exactly this envelope" }).count()).toBe(0);
      // The revision says what it replaced: bob's edit, and the title as revision 1 asked and as now.
      const history = page.locator("section.revision-history");
      expect(await history.locator("h3").textContent()).toContain(
        "Revision 2 replaces revision 1, which edited by bob",
      );
      expect(await history.locator("td pre.previous").textContent()).toBe('"Vendor audit"');
      expect(await history.locator("td pre.current ins.changed").textContent()).toBe(" (bob)");
      await page.screenshot({ path: screenshotPath(`edited-revision-${width}`), fullPage: true });
      await context.close();
    }
    expect(await w.portal.writes()).toHaveLength(0);
  }, 180_000);

  it("a revision made from a rejection shows the feedback and the diff; narrow screens keep the labels", async () => {
    const view = await w.run(1);
    for (const width of WIDTHS) {
      const { context, page } = await signedIn(browser, w.inbox.url, "alice", width);
      await page.goto(`${w.inbox.url}/t/${view.threadId}`);
      if (width === WIDTHS[0]) {
        await page.getByLabel(/Reject, with feedback/).fill('use "Hiring plan 2027" instead');
        await page.getByRole("button", { name: "Reject", exact: true }).click();
        await page.locator(".notice").waitFor();
      }
      const history = page.locator("section.revision-history");
      expect(await history.locator("h3").textContent()).toContain("which rejected by alice");
      expect(await history.locator("p.feedback").textContent()).toBe(
        'Feedback: use "Hiring plan 2027" instead',
      );
      expect(await history.locator("td pre.previous").textContent()).toBe('"Hiring plan"');
      expect(await history.locator("td pre.current ins.changed").textContent()).toBe(" 2027");
      // alice rejected, she did not write revision 2: she may approve it.
      expect(await page.getByRole("button", { name: "Approve exactly this envelope" }).count()).toBe(1);
      // The before/requested labels stay on a narrow screen (the header row is hidden there).
      const label = await page
        .locator("table.changes:not(.revision-diff) td[data-label=Before]")
        .first()
        .evaluate((el) => getComputedStyle(el, "::before").content);
      expect(label).toBe(width === 390 ? '"Before"' : "none");
      await page.screenshot({ path: screenshotPath(`rejected-revision-${width}`), fullPage: true });
      // The evidence names the stage by what happened: revision 1 was rejected, nothing approved yet.
      await page.goto(`${w.inbox.url}/t/${view.threadId}/evidence`);
      const stages = await page.locator("table.evidence tbody td:first-child").allTextContents();
      expect(stages).toContain("rejected");
      expect(stages).not.toContain("approved");
      await context.close();
    }
    expect(await w.portal.writes()).toHaveLength(0);
  }, 180_000);
});

describe.skipIf(!!noBrowserReason)("the notice after a decision follows the outcome, in Chromium", () => {
  let w: InboxWorld;
  let browser: Browser;
  beforeAll(async () => {
    w = await startInboxWorld(TITLES);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  it("an approval whose run ends NOT_EXECUTED is not announced as a green success", async () => {
    const view = await w.run(2);
    // The task changes after the card was made: the pre-read finds it stale and nothing is written.
    expect(
      (await w.portal.rest("tasks.task.update", { taskId: 2, fields: { TITLE: "Changed meanwhile" } }))
        .status,
    ).toBe(200);
    const before = (await w.portal.writes()).length;
    const { context, page } = await signedIn(browser, w.inbox.url, "alice", 1280);
    await page.goto(`${w.inbox.url}/t/${view.threadId}`);
    await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("NOT_EXECUTED");
    const notice = page.locator("p.notice.warn");
    expect(await notice.textContent()).toMatch(
      /^Your approve was recorded, but the run ended NOT_EXECUTED \(STALE_STATE\)/,
    );
    expect(await page.locator("text=was accepted").count()).toBe(0);
    await page.screenshot({ path: screenshotPath("not-executed-notice-1280"), fullPage: true });
    expect((await w.portal.writes()).length).toBe(before);
    await context.close();
  }, 120_000);
});

const PER_ACTION = `set status of task 4 to awaiting control, rename task 2 to Release notes 2027 and comment on task 4: ${SET_COMMENT}`;
const REVISED =
  "rename task 1 to Q4 vendor report, rename task 3 to Invoice rounding 2027 and comment on task 1: ready";
const SETS: Record<string, SetAction[]> = {
  [REVISED]: [
    { operation: "update_task", taskId: 1, fields: { TITLE: "Q4 vendor report" } },
    { operation: "update_task", taskId: 3, fields: { TITLE: "Invoice rounding 2027" } },
    { operation: "add_task_comment", taskId: 1, fields: { POST_MESSAGE: "ready" } },
  ],
  [PER_ACTION]: [
    { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
    { operation: "update_task", taskId: 2, fields: { TITLE: "Release notes 2027" } },
    { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: SET_COMMENT } },
  ],
};

describe.skipIf(!!noBrowserReason)("a change set's page, in Chromium", () => {
  let w: SetWorld;
  let browser: Browser;
  beforeAll(async () => {
    w = await startSetWorld(SETS);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  it("puts a decision control beside each action, folds what must stay, says a3 expects what a1 wrote; the finished table lists a2 REJECTED", async () => {
    const view = await w.propose(PER_ACTION);
    expect(view.status).toBe("awaiting_approval");
    for (const width of WIDTHS) {
      const { context, page } = await signedIn(browser, w.inbox.url, "alice", width);
      await page.goto(`${w.inbox.url}/t/${view.threadId}`);
      for (const id of ["a1", "a2", "a3"]) {
        const card = page.locator(`section.card[data-action-id="${id}"]`);
        const control = card.locator("aside.action-control");
        expect(await control.locator(`#decision-${id}-approve`).isVisible()).toBe(true);
        const title = (await card.locator("h2").boundingBox())!;
        const box = (await control.boundingBox())!;
        // Beside the card on a wide screen; below its title on a phone.
        if (width === 1280) expect(box.x).toBeGreaterThan(title.x + 300);
        else expect(box.y).toBeGreaterThan(title.y);
        // Folded by default.
        expect(await card.locator("details.invariants").getAttribute("open")).toBeNull();
      }
      expect(
        await page.locator('section.card[data-action-id="a3"] .expects-summary').textContent(),
      ).toContain("Expects what a1 wrote: STATUS");
      await page.screenshot({ path: screenshotPath(`set-page-${width}`), fullPage: true });
      if (width === 1280) {
        const height = await page.evaluate(() => document.documentElement.scrollHeight);
        expect(height).toBeLessThan(2841);
      }
      await context.close();
    }
    const { context, page } = await signedIn(browser, w.inbox.url, "alice", 1280);
    await page.goto(`${w.inbox.url}/t/${view.threadId}`);
    await page.locator("#decision-a1-approve").check();
    await page.locator("#decision-a2-reject").check();
    await page.locator("#message-a2").fill("not this quarter");
    await page.locator("#decision-a3-approve").check();
    await page.getByRole("button", { name: "Submit these 3 decisions together" }).click();
    // a3 posts a comment (reversible_external), which the default policy does not run after a partial
    // approval: a1 and a3 come back as revision 2, which alice may approve (rejecting is not an edit).
    await page.locator(".notice").waitFor();
    expect(await page.locator(".notice").textContent()).toContain(
      "A new revision (2) now waits for a fresh approval.",
    );
    await page.getByRole("button", { name: /Approve the whole set/ }).click();
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    const rowOf = (id: string) => page.locator(`table.set-outcomes tr[data-action-id="${id}"]`);
    expect(await rowOf("a1").textContent()).toContain("VERIFIED");
    expect(await rowOf("a2").textContent()).toContain("REJECTED");
    expect(await rowOf("a2").textContent()).toContain("rejected by alice in revision 1: not this quarter");
    expect(await rowOf("a2").textContent()).toContain("not sent");
    expect(await rowOf("a3").textContent()).toContain("VERIFIED");
    await page.screenshot({ path: screenshotPath("set-finished-1280"), fullPage: true });
    await page.setViewportSize({ width: 390, height: 900 });
    await page.screenshot({ path: screenshotPath("set-finished-390"), fullPage: true });
    expect((await w.writesOn(2)).length).toBe(0);
    expect((await w.writesOn(4)).map((x) => x.method)).toEqual(["tasks.task.update", "task.commentitem.add"]);
    await context.close();
  }, 240_000);

  it("a revision of the set says what replaced what: who decided, the rejected action with its reason, each edited field old → new", async () => {
    const view = await w.propose(REVISED);
    expect(view.status).toBe("awaiting_approval");
    const cs = view.approval!.changeSet!;
    // alice approves a1, edits a2's title and rejects a3 with a reason: revision 2 is hers to wait on.
    const next = await submitDecision(
      w.app,
      view.threadId,
      setDecisions(view, {
        as: "alice",
        hash: cs.setHash,
        approve: ["a1"],
        edit: ["a2"],
        set: ["a2.TITLE=Invoice rounding 2028"],
        reject: ["a3=not this week"],
      }),
    );
    expect(next.approval?.revision).toBe(2);
    for (const width of WIDTHS) {
      const { context, page } = await signedIn(browser, w.inbox.url, "bob", width);
      await page.goto(`${w.inbox.url}/t/${view.threadId}`);
      const history = page.locator("section.set-revision");
      expect(await history.locator("h3").textContent()).toContain(
        "Revision 2 replaces revision 1, which edited by alice",
      );
      expect(await history.locator('ul.dropped li[data-action-id="a3"]').textContent()).toContain(
        "a3 (add_task_comment task 1) is no longer in the set: rejected — not this week",
      );
      expect(await history.locator('ul.dropped li[data-action-id="a3"] q').textContent()).toBe(
        "not this week",
      );
      const rows = history.locator("table.revision-diff tbody tr");
      expect(await rows.count()).toBe(1);
      expect((await rows.first().locator("th").textContent())!.trim()).toBe("a2");
      expect(await rows.first().locator("td[data-label=Field]").textContent()).toBe("TITLE");
      expect(await rows.first().locator("pre.previous").textContent()).toBe('"Invoice rounding 2027"');
      expect(await rows.first().locator("pre.current").textContent()).toBe('"Invoice rounding 2028"');
      expect(await rows.first().locator("pre.current ins.changed").textContent()).toBe("8");
      await page.screenshot({ path: screenshotPath(`set-revision-${width}`), fullPage: true });
      await context.close();
    }
    expect(await w.writesOn(1, 3)).toEqual([]);
  }, 180_000);
});
