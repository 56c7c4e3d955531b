/**
 * Change sets in the web inbox in a real browser (Debian's Chromium driven by playwright-core): a set
 * approved as a whole, a set decided action by action with the form's radio buttons, and, under a
 * policy requiring signatures, per-action decisions each signed in the browser over the set's hash,
 * nonce and its actionId (the payload signedPayloadOf builds), verified by the runtime. Writes counted
 * in the emulator's call log. Skipped, saying why, where no Chromium is installed.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { defaultPolicy, generateApproverKeyPair } from "../src/envelope/index.js";
import { launchBrowser, noBrowserReason, screenshotPath } from "./support/browser.js";
import { PASSWORDS } from "./support/inbox.js";
import {
  SET_COMMENT as COMMENT,
  startSetWorld,
  type SetAction,
  type SetWorld,
} from "./support/inbox-sets.js";

if (noBrowserReason) console.warn(`inbox change-set browser tests skipped: ${noBrowserReason}`);

const WHOLE = `rename task 2 to Release notes 2027 and comment on task 2: ${COMMENT}`;
const PER_ACTION = `set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`;
const SETS: Record<string, SetAction[]> = {
  [WHOLE]: [
    { operation: "update_task", taskId: 2, fields: { TITLE: "Release notes 2027" } },
    { operation: "add_task_comment", taskId: 2, fields: { POST_MESSAGE: COMMENT } },
  ],
  [PER_ACTION]: [
    { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
    { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
  ],
};

async function signedIn(
  browser: Browser,
  w: SetWorld,
  user: string,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${w.inbox.url}/login`);
  await page.getByLabel("Approver id").fill(user);
  await page.getByLabel("Password").fill(PASSWORDS[user]!);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${w.inbox.url}/`);
  return { context, page };
}

async function waiting(w: SetWorld, request: string): Promise<ThreadView> {
  const view = await w.propose(request);
  expect(view.status).toBe("awaiting_approval");
  expect(view.approval!.changeSet).toBeDefined();
  return view;
}

/** Decides a2 reject, a1 approve with the per-action form's radio buttons. */
async function approveFirstRejectSecond(page: Page): Promise<void> {
  // Each action's choice is beside its card.
  await page.locator("#decision-a1-approve").check();
  await page.locator("#decision-a2-reject").check();
  await page.getByRole("button", { name: "Submit these 2 decisions together" }).click();
  await page.locator(".outcome").first().waitFor();
}

describe.skipIf(!!noBrowserReason)("change sets in the web inbox, in Chromium", () => {
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

  it("lists the set once, shows its header and both cards, and approves it as a whole: both actions VERIFIED, two writes in order", async () => {
    const { context, page } = await signedIn(browser, w, "alice");
    const view = await waiting(w, WHOLE);
    const cs = view.approval!.changeSet!;
    const item = page.locator(`li.item[data-thread="${view.threadId}"]`);
    await item.waitFor();
    expect(await item.count()).toBe(1);
    expect(await item.textContent()).toContain("change set of 2 actions");
    await item.locator("a").click();
    await page.waitForURL(`**/t/${view.threadId}`);
    expect(await page.locator("code.hash").textContent()).toBe(cs.setHash);
    expect(await page.locator(".chain-rule").textContent()).toContain(
      "stops at the first action that is not VERIFIED",
    );
    expect(await page.locator("section.card.set-action").count()).toBe(2);
    expect(
      await page.locator('section.card[data-action-id="a1"] td pre.after ins.changed').textContent(),
    ).toContain("2027");
    expect(await page.locator('section.card[data-action-id="a2"] td pre.after').textContent()).toBe(
      `"${COMMENT}"`,
    );
    await page.screenshot({ path: screenshotPath("set-card"), fullPage: true });
    await page.getByRole("button", { name: "Approve the whole set (2 actions, in this order)" }).click();
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    expect(await page.locator('table.set-outcomes tr[data-action-id="a1"]').textContent()).toContain(
      "VERIFIED",
    );
    expect(await page.locator('table.set-outcomes tr[data-action-id="a2"]').textContent()).toContain(
      "VERIFIED",
    );
    await page.screenshot({ path: screenshotPath("set-verified"), fullPage: true });
    expect((await w.writesOn(2)).map((x) => x.method)).toEqual(["tasks.task.update", "task.commentitem.add"]);
    await context.close();
  });

  it("decides action by action in one submission: the approved update runs, the rejected comment does not", async () => {
    const view = await waiting(w, PER_ACTION);
    const { context, page } = await signedIn(browser, w, "bob");
    await page.goto(`${w.inbox.url}/t/${view.threadId}`);
    await approveFirstRejectSecond(page);
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    expect(await page.locator("ul.per-action-decisions").textContent()).toMatch(/a1: approve.*a2: reject/s);
    await page.screenshot({ path: screenshotPath("set-per-action"), fullPage: true });
    expect((await w.writesOn(4)).map((x) => x.method)).toEqual(["tasks.task.update"]);
    const after = await viewThread(w.app, view.threadId);
    expect(after.state?.decision).toMatchObject({ approverId: "bob", verifiedBy: "authentication" });
    await context.close();
  });
});

describe.skipIf(!!noBrowserReason)(
  "change sets in the web inbox, in Chromium, policy requiring signatures",
  () => {
    let w: SetWorld;
    let browser: Browser;
    let keyFile: string;
    beforeAll(async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ae-inbox-set-keys-"));
      const pair = generateApproverKeyPair("alice");
      keyFile = path.join(dir, "alice.key");
      fs.writeFileSync(keyFile, pair.privateKeyPem, { mode: 0o600 });
      fs.writeFileSync(path.join(dir, "keys.pub"), `${pair.publicKeyLine}\n`);
      fs.writeFileSync(
        path.join(dir, "policy.json"),
        JSON.stringify({ ...defaultPolicy(), requireSignature: true }),
      );
      w = await startSetWorld(SETS, {
        ACTION_ENVELOPE_POLICY: path.join(dir, "policy.json"),
        ACTION_ENVELOPE_APPROVER_KEYS: path.join(dir, "keys.pub"),
      });
      browser = await launchBrowser();
    });
    afterAll(async () => {
      await browser?.close();
      await w?.close();
    });

    it("signs each per-action decision in the browser (set hash, nonce, actionId, a rejection's feedback); the runtime verifies every signature", async () => {
      const view = await waiting(w, PER_ACTION);
      const { context, page } = await signedIn(browser, w, "alice");
      await page.goto(`${w.inbox.url}/t/${view.threadId}`);
      await page.locator("#key-file").setInputFiles(keyFile);
      await expect.poll(() => page.locator("#key-status").textContent()).toContain("Key imported");
      // The feedback is sent trimmed; the signature covers that text.
      await page.locator("#message-a2").fill("  no comment on this task, please  ");
      await approveFirstRejectSecond(page);
      expect(await page.locator("h1").textContent()).toContain("VERIFIED");
      const after = await viewThread(w.app, view.threadId);
      expect(after.state?.decision).toMatchObject({ approverId: "alice", verifiedBy: "signature" });
      const first = await w.app.deps.journal.getAction(view.approval!.changeSet!.actions[0]!.envelopeHash);
      expect(first!.progress.decision).toMatchObject({
        envelopeHash: view.approval!.changeSet!.setHash,
        verifiedBy: "signature",
      });
      const second = await w.app.deps.journal.getAction(view.approval!.changeSet!.actions[1]!.envelopeHash);
      expect(second!.progress.decision).toMatchObject({
        setPlan: {
          perAction: [
            { actionId: "a1", type: "approve" },
            { actionId: "a2", type: "reject", message: "no comment on this task, please" },
          ],
        },
      });
      expect((await w.writesOn(4)).map((x) => x.method)).toEqual(["tasks.task.update"]);
      await context.close();
    });
  },
);
