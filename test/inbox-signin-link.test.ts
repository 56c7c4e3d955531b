/**
 * The inbox one command away: `npm start -- --inbox` on the offline demo (embedded emulator, offline
 * model, no users file) serves the inbox and prints a one-time sign-in link for the demo approver.
 * In Chromium (1280 px) the link signs in and the approval is decided there; used again (390 px, and
 * over HTTP) it is refused. Each sign-in is printed like a password sign-in. Over real HTTP: an expired
 * link is refused, and a link never signs in from another computer's address (nor is one issued for
 * an inbox on a non-loopback address). Writes are counted in the embedded emulator's call log.
 */
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { createInboxApp, startInbox } from "../src/inbox/server.js";
import { SignInLinks } from "../src/inbox/security.js";
import { parseInboxUsers } from "../src/inbox/users.js";
import type { App } from "../src/app/open-app.js";
import { CLI, ROOT, openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import { launchBrowser, noBrowserReason, screenshotPath } from "./support/browser.js";

if (noBrowserReason) console.warn(`inbox sign-in link browser test skipped: ${noBrowserReason}`);

/** The caller's environment without any of our settings, as on a fresh clone with no configuration. */
function unconfigured(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(BITRIX24_|ACTION_ENVELOPE_|GROQ_|MODEL$|DATABASE_URL$|NO_COLOR$|LANGSMITH_|LANGCHAIN_)/.test(k))
      delete env[k];
  }
  return { ...env, NO_COLOR: "1", ...extra };
}

const NO_USERS = parseInboxUsers('{"users":[]}', "test");

describe.skipIf(!!noBrowserReason)("npm start -- --inbox on the offline demo", () => {
  it("prints a one-time link; Chromium signs in with it and approves; used again it is refused (browser and HTTP)", async () => {
    const dataDir = tempDir("ae-signin-link-");
    const child = spawn(process.execPath, [CLI, "start", "rename task 4 to Signed in by link", "--inbox"], {
      cwd: ROOT,
      env: unconfigured({ ACTION_ENVELOPE_DATA_DIR: dataDir }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const browser = await launchBrowser();
    try {
      await expect
        .poll(() => out, { timeout: 90_000, interval: 100 })
        .toMatch(/Decide it in the web inbox: (http:\/\/127\.0\.0\.1:\d+)\/t\/(\S+) /);
      expect(out).toMatch(/web inbox: http:\/\/127\.0\.0\.1:\d+\/ \(no password accounts;/);
      expect(out).toContain(
        "sign in as demo-approver, the offline demo's approver, with this one-time link (this computer only, once, until ",
      );
      const link = /^\s+(http:\/\/127\.0\.0\.1:\d+\/login\/once\/[A-Za-z0-9_-]{43})$/m.exec(out)?.[1];
      expect(link, out).toBeDefined();
      const [, base, threadId] = /Decide it in the web inbox: (http:\/\/127\.0\.0\.1:\d+)\/t\/(\S+) /.exec(
        out,
      )!;

      // 1280 px: the link signs in as demo-approver and lands on the list, where the approval waits.
      const wide = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await wide.newPage();
      await page.goto(link!);
      await page.waitForURL(`${base}/`);
      expect(await page.locator("header").textContent()).toContain("demo-approver");
      await page.locator(`li.item[data-thread="${threadId}"]`).waitFor();
      await page.screenshot({ path: screenshotPath("signin-link-list-1280"), fullPage: true });
      expect(out).toMatch(
        /web inbox: demo-approver signed in \(one-time link\) from (::ffff:)?127\.0\.0\.1 at \d{4}-/,
      );

      // 390 px, another browser context: the same link again is refused; no session, no second sign-in.
      const narrow = await browser.newContext({ viewport: { width: 390, height: 900 } });
      const again = await narrow.newPage();
      const second = await again.goto(link!);
      expect(second?.status()).toBe(401);
      expect(await again.locator("p.refusal").textContent()).toContain(
        "This sign-in link was used already or has expired",
      );
      expect(await again.getByLabel("Approver id").count()).toBe(1);
      await again.screenshot({ path: screenshotPath("signin-link-used-390"), fullPage: true });
      expect((await narrow.cookies()).map((c) => c.name)).not.toContain("__Host-ae-inbox");
      // Over HTTP too: refused, and no session cookie is set.
      const http = await fetch(link!, { redirect: "manual" });
      expect(http.status).toBe(401);
      expect(http.headers.getSetCookie().some((c) => c.startsWith("__Host-ae-inbox="))).toBe(false);
      expect(out.match(/signed in \(/g)).toHaveLength(1);

      // The signed-in approver decides in the 1280 px window: the job ends VERIFIED with one write.
      await page.goto(`${base}/t/${threadId}`);
      await page.screenshot({ path: screenshotPath("signin-link-card-1280"), fullPage: true });
      await page.getByRole("button", { name: "Approve exactly this envelope" }).click();
      expect(await exited).toBe(0);
      expect(out).toContain("VERIFIED");
      await narrow.close();
      await wide.close();
    } finally {
      await browser.close();
      if (child.exitCode === null) child.kill("SIGINT");
      await exited;
      if (child.exitCode !== 0) console.error(out, err);
    }
    const portal = await startPortal({ statePath: path.join(dataDir, "emulator.sqlite") });
    try {
      expect((await portal.writes()).map((w) => w.params)).toEqual([
        { taskId: 4, fields: { TITLE: "Signed in by link" } },
      ]);
    } finally {
      await portal.emulator.close();
    }
  }, 180_000);
});

describe("one-time sign-in links over HTTP", () => {
  let portal: Portal | undefined;
  let app: App | undefined;
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
    await app?.close();
    app = undefined;
    await portal?.emulator.close();
    portal = undefined;
  });
  async function openApp(): Promise<App> {
    portal = await startPortal();
    app = await openTestApp(portal, tempDir("ae-signin-link-http-"));
    return app;
  }

  it("a link past its lifetime is refused and spent; one within it signs in once", async () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const links = new SignInLinks(60_000, () => now);
    const inbox = await startInbox({ app: await openApp(), users: NO_USERS, port: 0, signInLinks: links });
    closers.push(() => inbox.close());
    const late = inbox.signInLink("alice");
    now += 60_001;
    const refused = await fetch(late.url, { redirect: "manual" });
    expect(refused.status).toBe(401);
    expect(await refused.text()).toContain("used already or has expired");
    now -= 60_001;
    // Spent by the refused attempt: back within its lifetime it still does not sign in.
    expect((await fetch(late.url, { redirect: "manual" })).status).toBe(401);
    const fresh = inbox.signInLink("alice");
    const ok = await fetch(fresh.url, { redirect: "manual" });
    expect(ok.status).toBe(303);
    const cookie = ok.headers.getSetCookie().find((c) => c.startsWith("__Host-ae-inbox="));
    expect(cookie).toBeDefined();
    const list = await fetch(`${inbox.url}/`, {
      headers: { cookie: cookie!.split(";")[0]!, accept: "text/html" },
      redirect: "manual",
    });
    expect(list.status).toBe(200);
    expect(await list.text()).toContain("alice");
    // One audit record: the sign-in by link (the refused, expired link signed no one in).
    const audited = (await app!.deps.audit.records()).filter((r) => r.event.startsWith("inbox_sign"));
    expect(audited).toHaveLength(1);
    expect(audited[0]).toMatchObject({
      event: "inbox_signed_in",
      approver: { id: "alice" },
      received: { method: "one-time link" },
    });
  });

  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((a) => a && !a.internal && a.family === "IPv4")?.address;

  it.runIf(external)(
    "a link never signs in from another address, and an inbox on a non-loopback address issues none",
    async () => {
      const a = await openApp();
      const links = new SignInLinks();
      const { token } = links.issue("alice");
      // The inbox's app on every interface, reached over this computer's non-loopback address.
      const web = createInboxApp({ app: a, users: NO_USERS, signInLinks: links }, () => true);
      const server = await new Promise<Server>((resolve) => {
        const s = serve({ fetch: web.fetch, port: 0, hostname: "0.0.0.0" }, () =>
          resolve(s as Server),
        ) as Server;
      });
      closers.push(() => new Promise((resolve) => server.close(() => resolve())));
      const port = (server.address() as AddressInfo).port;
      const remote = await fetch(`http://${external}:${port}/login/once/${token}`, { redirect: "manual" });
      expect(remote.status).toBe(403);
      expect(await remote.text()).toContain("works only on the computer that printed it");
      // Refused before it was read: the same link still signs in from loopback.
      expect(
        (await fetch(`http://127.0.0.1:${port}/login/once/${token}`, { redirect: "manual" })).status,
      ).toBe(303);

      const open = await startInbox({ app: a, users: NO_USERS, port: 0, host: "0.0.0.0" });
      closers.push(() => open.close());
      expect(() => open.signInLink("alice")).toThrow(/only for an inbox on this computer's loopback address/);
    },
  );
});
