/**
 * `npm start -- --inbox` as a process (src/cli/run-commands.ts start): with ACTION_ENVELOPE_INBOX_USERS it
 * serves the web inbox on a free localhost port, prints its URL, and the approval decided there ends
 * the job; without it, it says how to enable the inbox and runs as before.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword, loadInboxUsers } from "../src/inbox/users.js";
import { CLI, ROOT, envFor, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";
import { signedInSession } from "./support/inbox.js";

let portal: Portal;
beforeAll(async () => {
  portal = await startPortal();
});
afterAll(async () => {
  await portal?.emulator.close();
});

describe("npm start -- --inbox", () => {
  it("serves the inbox on a free port, prints its URL, and an approval there ends the job VERIFIED with one write", async () => {
    const dataDir = tempDir("ae-start-inbox-");
    const usersFile = path.join(dataDir, "inbox-users.json");
    fs.writeFileSync(
      usersFile,
      JSON.stringify({ users: [{ id: "alice", password: await hashPassword("alice-password-1") }] }),
    );
    const child = spawn(
      process.execPath,
      [CLI, "start", "rename task 4 to Started with an inbox", "--inbox"],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          NO_COLOR: "1",
          ...envFor(portal, dataDir, { ACTION_ENVELOPE_INBOX_USERS: usersFile }),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await expect
        .poll(() => out, { timeout: 60_000, interval: 100 })
        .toMatch(/Decide it in the web inbox: (http:\/\/127\.0\.0\.1:\d+)\/t\/(\S+) /);
      expect(out).toMatch(/web inbox: http:\/\/127\.0\.0\.1:\d+\/ \(1 approver account\(s\)/);
      const [, base, threadId] = /Decide it in the web inbox: (http:\/\/127\.0\.0\.1:\d+)\/t\/(\S+) /.exec(
        out,
      )!;
      const req = await signedInSession(base!, "alice", "alice-password-1");
      const card = await (await req(`/t/${threadId}`)).text();
      const field = (name: string) => new RegExp(`name="${name}" value="([^"]+)"`).exec(card)![1]!;
      expect(await portal.writes()).toHaveLength(0);
      const decided = await req(`/t/${threadId}/decide`, {
        csrf: field("csrf"),
        action: "approve",
        envelopeHash: field("envelopeHash"),
        nonce: field("nonce"),
      });
      expect(decided.status).toBe(200);
      expect(await exited).toBe(0);
      expect(out).toContain("VERIFIED");
      expect((await portal.writes()).map((w) => w.params)).toEqual([
        { taskId: 4, fields: { TITLE: "Started with an inbox" } },
      ]);
    } finally {
      if (child.exitCode === null) child.kill("SIGINT");
      await exited;
      if (child.exitCode !== 0) console.error(out, err);
    }
  });

  it("without ACTION_ENVELOPE_INBOX_USERS says how to enable it and runs as before", async () => {
    const r = await runCli(
      ["start", "rename task 5 to No inbox", "--inbox"],
      envFor(portal, tempDir("ae-start-noinbox-"), { ACTION_ENVELOPE_INBOX_USERS: "" }),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("web inbox: not started. --inbox needs ACTION_ENVELOPE_INBOX_USERS");
    expect(r.stdout).toContain("npm run cli -- inbox-user --id <approver> --file inbox-users.json");
    expect(r.stdout).toContain("npm run cli -- approve");
  });
});

describe("inbox-user --file", () => {
  it("creates the users file, adds a second approver, replaces an entry of the same id; the passwords verify; a broken file is left alone", async () => {
    const dir = tempDir("ae-inbox-user-");
    const file = path.join(dir, "users.json");
    const env = { ACTION_ENVELOPE_DATA_DIR: dir };
    const made = await runCli(["inbox-user", "--id", "alice", "--file", file], env, {
      input: "alice-password-1\n",
    });
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toContain(`created alice in a new ${file} (1 account(s))`);
    expect((fs.statSync(file).mode & 0o777).toString(8)).toBe("600");
    const added = await runCli(["inbox-user", "--id", "bob", "--file", file], env, {
      input: "bob-password-22\n",
    });
    expect(added.stdout).toContain(`added bob in ${file} (2 account(s))`);
    const again = await runCli(["inbox-user", "--id", "alice", "--file", file], env, {
      input: "alice-password-new\n",
    });
    expect(again.stdout).toContain(`replaced the entry of alice in ${file} (2 account(s))`);
    const users = loadInboxUsers(file);
    expect(users.ids().sort()).toEqual(["alice", "bob"]);
    expect(await users.verify("bob", "bob-password-22")).toBe("bob");
    expect(await users.verify("alice", "alice-password-new")).toBe("alice");
    expect(await users.verify("alice", "alice-password-1")).toBeUndefined();
    // Not a users file: refused, and left as it was.
    const other = path.join(dir, "other.json");
    fs.writeFileSync(other, '{"not":"users"}');
    const refused = await runCli(["inbox-user", "--id", "carol", "--file", other], env, {
      input: "carol-password-3\n",
    });
    expect(refused.code).not.toBe(0);
    expect(fs.readFileSync(other, "utf8")).toBe('{"not":"users"}');
  });
});
