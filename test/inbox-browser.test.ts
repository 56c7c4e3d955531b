/**
 * The web inbox in a real browser: Debian's Chromium driven by playwright-core, against a real
 * emulator over HTTP, SQLite stores and the graph. Every test counts the emulator's writes for its
 * task. Screenshots of each page go to test-results/inbox/ (artifacts). Skipped, saying why, where no
 * Chromium is installed.
 */
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { submitDecision } from "../src/app/threads.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { defaultPolicy, generateApproverKeyPair } from "../src/envelope/index.js";
import { launchBrowser, noBrowserReason, screenshotPath } from "./support/browser.js";
import { PASSWORDS, startInboxWorld, type InboxWorld } from "./support/inbox.js";

if (noBrowserReason) console.warn(`inbox browser tests skipped: ${noBrowserReason}`);

// Seed tasks 1-5 and 8 are readable and writable by the webhook user (6 and 7 are restricted).
const TITLES = {
  4: "Quarterly plan",
  5: "Budget\u202E7202\u200B plan",
  1: "Hiring plan",
  2: "Release notes",
  8: "Vendor audit",
  3: "Office move",
};

let w: InboxWorld;
let browser: Browser;

const writesFor = async (taskId: number) =>
  (await w.portal.writes()).filter((x) => (x.params as { taskId?: number }).taskId === taskId);

async function signedIn(user: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  await page.goto(`${w.inbox.url}/`);
  expect(page.url()).toBe(`${w.inbox.url}/login`);
  await page.getByLabel("Approver id").fill(user);
  await page.getByLabel("Password").fill(PASSWORDS[user]!);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${w.inbox.url}/`);
  return { context, page };
}

const cardOf = (page: Page, view: ThreadView) => page.goto(`${w.inbox.url}/t/${view.threadId}`);

describe.skipIf(!!noBrowserReason)("web inbox in Chromium", () => {
  beforeAll(async () => {
    w = await startInboxWorld(TITLES);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await w?.close();
  });

  it("signs in, lists the waiting card live, and approves it to VERIFIED with exactly one write", async () => {
    const { context, page } = await signedIn("alice");
    await expect.poll(() => page.locator("#inbox-list").textContent()).toContain("Nothing is waiting");
    // Arrives while the page is open: the list updates over server-sent events, no reload.
    const view = await w.run(4);
    const item = page.locator(`li.item[data-thread="${view.threadId}"]`);
    await item.waitFor();
    expect(await item.textContent()).toContain("requested by demo-user");
    await page.screenshot({ path: screenshotPath("inbox-list"), fullPage: true });

    await item.locator("a").click();
    await page.waitForURL(`**/t/${view.threadId}`);
    expect(await page.locator("code.hash").textContent()).toBe(view.approval!.envelopeHash);
    expect(await page.locator("td pre.after ins.changed").textContent()).toBe("Quarterly plan");
    expect(await page.locator("td pre.before del.changed").textContent()).toBe(
      "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
    );
    await page.screenshot({ path: screenshotPath("card"), fullPage: true });

    // Keyboard-operable: focus the button and press Enter.
    await page.getByRole("button", { name: "Approve exactly this envelope" }).focus();
    await page.keyboard.press("Enter");
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    expect(await page.locator("main").textContent()).toContain("approve by alice (identity authentication)");
    await page.screenshot({ path: screenshotPath("verified"), fullPage: true });
    const writes = await writesFor(4);
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { TITLE: "Quarterly plan" } });

    await page.getByRole("link", { name: "Evidence" }).click();
    expect(await page.locator(".outcome").textContent()).toContain("VERIFIED");
    for (const stage of ["shown", "approved", "invoked", "acknowledged", "observed"])
      expect(await page.locator("table.evidence").textContent()).toContain(stage);
    await page.screenshot({ path: screenshotPath("evidence"), fullPage: true });
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: /Download the evidence bundle/ }).click(),
    ]);
    const tar = fs.readFileSync((await download.path())!);
    expect(tar.subarray(257, 262).toString()).toBe("ustar");
    expect(tar.toString("latin1")).toContain("SHA256SUMS");
    await context.close();
  });

  it("rejects with feedback, shows the revised proposal, and executes only that after its own approval", async () => {
    const view = await w.run(1);
    const { context, page } = await signedIn("bob");
    await cardOf(page, view);
    await page.getByLabel(/Reject, with feedback/).fill('use "Hiring plan 2027" instead');
    await page.getByRole("button", { name: "Reject" }).click();
    await page.locator(".notice").waitFor();
    expect(await page.locator(".notice").textContent()).toContain("new revision (2)");
    expect(await page.locator("td pre.after").textContent()).toContain("Hiring plan 2027");
    expect(await page.locator("h2#card-title").textContent()).toContain("revision 2");
    expect(await writesFor(1)).toHaveLength(0);
    await page.screenshot({ path: screenshotPath("revised"), fullPage: true });
    await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    const writes = await writesFor(1);
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 1, fields: { TITLE: "Hiring plan 2027" } });
    await context.close();
  });

  it("edits the values in the form; the new revision needs a fresh approval, then executes", async () => {
    const view = await w.run(8);
    const { context, page } = await signedIn("bob");
    await cardOf(page, view);
    await page.getByText("Edit the values").click();
    await page.getByLabel("TITLE").fill("Vendor audit (edited)");
    await page.getByRole("button", { name: /Submit the edit/ }).click();
    await page.locator(".notice").waitFor();
    expect(await page.locator("td pre.after").textContent()).toContain("Vendor audit (edited)");
    expect(await writesFor(8)).toHaveLength(0);
    await context.close();
    // bob edited this revision, so someone else approves it.
    const alice = await signedIn("alice");
    await cardOf(alice.page, view);
    expect(await alice.page.locator("dl.facts").textContent()).toContain("Edited by");
    await alice.page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await alice.page.locator(".outcome").first().waitFor();
    expect(await alice.page.locator("h1").textContent()).toContain("VERIFIED");
    expect((await writesFor(8)).map((x) => x.params)).toEqual([
      { taskId: 8, fields: { TITLE: "Vendor audit (edited)" } },
    ]);
    await alice.context.close();
  });

  it("refuses a stale tab (the envelope was revised elsewhere) with no write, and shows the new card", async () => {
    const view = await w.run(2);
    const { context, page } = await signedIn("alice");
    await cardOf(page, view);
    const a = view.approval!;
    // Meanwhile, from the CLI's path: an edit by bob makes revision 2.
    const revised = await submitDecision(w.app, view.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "bob" },
          editedAction: { name: "update_task", args: { taskId: 2, fields: { TITLE: "Release notes v2" } } },
        },
      ],
    });
    expect(revised.approval!.revision).toBe(2);
    // The open tab learns of it over server-sent events.
    await page.locator("#changed-banner").waitFor();
    await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await page.locator("p.refusal").first().waitFor();
    expect(await page.locator("p.refusal").first().textContent()).toContain(
      "the card changed since this page was loaded",
    );
    expect(await page.locator("code.hash").textContent()).toBe(revised.approval!.envelopeHash);
    expect(await page.locator("td pre.after").textContent()).toContain("Release notes v2");
    await page.screenshot({ path: screenshotPath("stale-refused"), fullPage: true });
    expect(await writesFor(2)).toHaveLength(0);
    const now = await viewThread(w.app, view.threadId);
    expect(now.status).toBe("awaiting_approval");
    expect(now.approval!.envelopeHash).toBe(revised.approval!.envelopeHash);
    await context.close();
  });

  it("shows invisible and bidi characters as highlighted markers with a warning", async () => {
    const view = await w.run(5);
    const { context, page } = await signedIn("alice");
    await cardOf(page, view);
    const after = page.locator("td pre.after");
    expect(await after.textContent()).toContain("Budget⟨U+202E⟩7202⟨U+200B⟩ plan");
    expect(await after.locator("mark.invisible").allTextContents()).toEqual(["⟨U+202E⟩", "⟨U+200B⟩"]);
    expect(await page.locator(".warnings").textContent()).toMatch(/RIGHT-TO-LEFT OVERRIDE/);
    // Nothing on the page carries the raw character: it cannot reorder what the approver reads.
    expect(await page.locator("main").innerText()).not.toContain("\u202E");
    await page.screenshot({ path: screenshotPath("invisible-characters"), fullPage: true });
    // Phone width: nothing wider than the screen (long values wrap).
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await page.screenshot({ path: screenshotPath("card-phone"), fullPage: true });
    expect(await writesFor(5)).toHaveLength(0);
    await context.close();
  });

  it("refuses an unauthenticated visitor and a cross-site form post, with no write", async () => {
    const view = await w.run(3);
    const a = view.approval!;
    const anon = await browser.newContext();
    const p = await anon.newPage();
    await p.goto(`${w.inbox.url}/t/${view.threadId}`);
    expect(p.url()).toBe(`${w.inbox.url}/login`);
    await p.screenshot({ path: screenshotPath("sign-in"), fullPage: true });
    await anon.close();

    // A signed-in approver visits another site whose page posts an approval to the inbox.
    const evil = http.createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(`<form id="f" method="post" action="${w.inbox.url}/t/${view.threadId}/decide">
        <input name="action" value="approve"><input name="envelopeHash" value="${a.envelopeHash}"><input name="nonce" value="${a.nonce}"><input name="csrf" value="guess">
        </form><script>document.getElementById("f").submit()</script>`);
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    try {
      const { context, page } = await signedIn("alice");
      const response = page.waitForResponse((r) => r.url().endsWith("/decide"));
      await page.goto(`http://localhost:${(evil.address() as AddressInfo).port}/`, { waitUntil: "commit" });
      const res = await response;
      expect([401, 403]).toContain(res.status());
      await context.close();
    } finally {
      evil.close();
    }
    expect((await viewThread(w.app, view.threadId)).status).toBe("awaiting_approval");
    expect(await writesFor(3)).toHaveLength(0);
  });
  it("answers a structured question in a form generated from its schema: an invalid answer is refused with the reason, a valid one leads to a card; no write until approved", async () => {
    const before = (await writesFor(8)).length;
    const { context, page } = await signedIn("demo-user");
    // Asked while the page is open: the question arrives in the list live, from the journal's index.
    const asked = await w.ask();
    const item = page.locator(`li.item[data-kind="question"][data-thread="${asked.threadId}"]`);
    await item.waitFor();
    expect(await item.textContent()).toContain("Which task do you mean?");
    await item.locator("a").click();
    await page.waitForURL(`**/t/${asked.threadId}`);
    expect(await page.locator("#answer-taskId option").allTextContents()).toEqual(["choose…", "1", "4", "8"]);
    await page.screenshot({ path: screenshotPath("question"), fullPage: true });

    // A value the select does not offer (as a crafted post would send) is refused by the server, with the reason.
    await page.locator("#answer-taskId").evaluate((el) => el.append(new Option("9", "9")));
    await page.getByLabel(/taskId/).selectOption("9");
    await page.getByLabel(/note/).fill("the planning one");
    await page.getByRole("button", { name: "Send the answer" }).click();
    await page.locator("p.refusal").first().waitFor();
    expect(await page.locator("p.refusal").first().textContent()).toContain(
      "Your answer was refused (INVALID_ANSWER): taskId",
    );
    expect((await viewThread(w.app, asked.threadId)).status).toBe("awaiting_input");
    await page.screenshot({ path: screenshotPath("question-refused"), fullPage: true });

    await page.getByLabel(/taskId/).selectOption("8");
    await page.getByLabel(/note/).fill("the planning one");
    await page.getByRole("button", { name: "Send the answer" }).click();
    await page.locator(".notice").waitFor();
    expect(await page.locator(".notice").textContent()).toContain("Your answer was accepted");
    expect(await page.locator("h2#card-title").textContent()).toContain("task 8");
    expect((await writesFor(8)).length).toBe(before);
    await page.getByRole("link", { name: "← Inbox" }).click();
    await expect
      .poll(() => page.locator(`li.item[data-kind="question"][data-thread="${asked.threadId}"]`).count())
      .toBe(0);
    await context.close();

    const alice = await signedIn("alice");
    await cardOf(alice.page, asked);
    await alice.page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await alice.page.locator(".outcome").first().waitFor();
    expect(await alice.page.locator("h1").textContent()).toContain("VERIFIED");
    expect((await writesFor(8)).length).toBe(before + 1);
    await alice.context.close();
  });
});

describe.skipIf(!!noBrowserReason)("web inbox in Chromium, policy requiring signatures", () => {
  let sw: InboxWorld;
  let keyFile: string;
  let signingBrowser: Browser;
  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join((await import("node:os")).tmpdir(), "ae-inbox-keys-"));
    const pair = generateApproverKeyPair("alice");
    keyFile = path.join(dir, "alice.key");
    fs.writeFileSync(keyFile, pair.privateKeyPem, { mode: 0o600 });
    fs.writeFileSync(path.join(dir, "keys.pub"), `${pair.publicKeyLine}\n`);
    const policy = { ...defaultPolicy(), requireSignature: true };
    fs.writeFileSync(path.join(dir, "policy.json"), JSON.stringify(policy));
    sw = await startInboxWorld(TITLES, {
      ACTION_ENVELOPE_POLICY: path.join(dir, "policy.json"),
      ACTION_ENVELOPE_APPROVER_KEYS: path.join(dir, "keys.pub"),
    });
    signingBrowser = await launchBrowser();
    browser = signingBrowser;
  });
  afterAll(async () => {
    await signingBrowser?.close();
    await sw?.close();
  });

  it("signs the decision in the browser with a key imported once (never sent); the runtime verifies it", async () => {
    w = sw;
    const view = await sw.run(4);
    const { context, page } = await signedIn("alice");
    await cardOf(page, view);
    // Unsigned: the page refuses to send it.
    await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await expect
      .poll(() => page.locator("#key-status").textContent())
      .toContain("Import your signing key first");
    expect(await writesFor(4)).toHaveLength(0);
    const sent: string[] = [];
    page.on("request", (r) => sent.push(r.postData() ?? ""));
    await page.locator("#key-file").setInputFiles(keyFile);
    await expect.poll(() => page.locator("#key-status").textContent()).toContain("Key imported");
    await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
    await page.locator(".outcome").first().waitFor();
    expect(await page.locator("h1").textContent()).toContain("VERIFIED");
    const after = await viewThread(sw.app, view.threadId);
    expect(after.state?.decision).toMatchObject({
      type: "approve",
      approverId: "alice",
      verifiedBy: "signature",
    });
    expect(await writesFor(4)).toHaveLength(1);
    // The private key never left the browser.
    const pem = fs.readFileSync(keyFile, "utf8").replace(/-----[^-]+-----|\s/g, "");
    expect(
      sent.some(
        (body) => body.includes(pem.slice(20, 60)) || decodeURIComponent(body).includes(pem.slice(20, 60)),
      ),
    ).toBe(false);
    await context.close();
  });

  it("signs a rejection's feedback with it: the runtime verifies the signature over that text and revises", async () => {
    w = sw;
    const view = await sw.run(1);
    const { context, page } = await signedIn("alice");
    await cardOf(page, view);
    await page.locator("#key-file").setInputFiles(keyFile);
    await expect.poll(() => page.locator("#key-status").textContent()).toContain("Key imported");
    // Sent trimmed, as the server trims it: the signature covers exactly what is recorded.
    await page.getByLabel(/Reject, with feedback/).fill('  use "Hiring plan 2027" instead ');
    await page.getByRole("button", { name: "Reject" }).click();
    await page.locator(".notice").waitFor();
    expect(await page.locator(".notice").textContent()).toContain("new revision (2)");
    const first = await sw.app.deps.journal.getAction(view.approval!.envelopeHash);
    expect(first!.progress.decision).toMatchObject({
      type: "reject",
      approverId: "alice",
      verifiedBy: "signature",
      message: 'use "Hiring plan 2027" instead',
    });
    expect(await writesFor(1)).toHaveLength(0);
    await context.close();
  });
});
