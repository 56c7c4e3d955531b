/**
 * What the CLI prints from data cannot act on the terminal, each command its own process as a person
 * would run it. The task's title (so the model's rationale), the requester id and a refused approver id
 * carry a screen clear (ESC[2J), an OSC 8 hyperlink, BEL, RIGHT-TO-LEFT OVERRIDE and a line feed that
 * would fake a "FAKE: VERIFIED" line. No stdout or stderr of run, approve, show, pending, audit list or
 * audit show holds any of those bytes; markers such as ⟨U+001B⟩ stand in for them, and --json output
 * parses back to exactly the original data. Also: size caps on arguments, and where keygen writes.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  envFor,
  parseJsonOutput,
  ROOT,
  runCli,
  startPortal,
  tempDir,
  type CliResult,
  type Portal,
} from "./support/harness.js";
import { containingRepository, defaultKeyDir } from "../src/cli/keygen-command.js";

const ATTACK = "\u001b[2J\u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007\u202eexe.txt";
/** A task title: everything above and a line feed that would fake a line of output. */
const TITLE = `Q4 ${ATTACK}\nFAKE: VERIFIED`;
const REQUESTER = `req${ATTACK}\nFAKE: VERIFIED`;
/** Approver ids may not contain whitespace, so no line feed here. */
const MALLORY = `mallory${ATTACK}`;

/** Every byte a terminal would act on or that would hide or reorder text; a line feed is checked separately. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

let portal: Portal;
let env: Record<string, string>;
let threadId: string;
let envelopeHash: string;
const outputs: Record<string, CliResult> = {};

function expectTerminalSafe(name: string, r: CliResult): void {
  for (const [stream, text] of [
    ["stdout", r.stdout],
    ["stderr", r.stderr],
  ] as const) {
    const bytes = Buffer.from(text, "utf8");
    expect(bytes.includes(0x1b), `${name} ${stream} has ESC`).toBe(false);
    expect(bytes.includes(0x07), `${name} ${stream} has BEL`).toBe(false);
    expect(bytes.includes(Buffer.from("\u202e", "utf8")), `${name} ${stream} has RLO`).toBe(false);
    expect(RAW.exec(text)?.[0], `${name} ${stream} has a raw control or bidi character`).toBeUndefined();
    // The line feed inside a single-line field never starts a line of its own.
    expect(
      text.split("\n").filter((l) => l.startsWith("FAKE")),
      `${name} ${stream} has a faked line`,
    ).toEqual([]);
  }
}

async function cli(name: string, args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  const r = await runCli(args, { ...env, ...extra });
  outputs[name] = r;
  return r;
}

beforeAll(async () => {
  portal = await startPortal();
  env = envFor(portal, tempDir("ae-terminal-"));
  const set = await portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE } });
  expect(set.status).toBe(200);

  const run = await cli("run", ["run", "rename task 4 to Q4 report", "--as", REQUESTER]);
  expect(run.code, run.stderr).toBe(0);
  const pending = await cli("pending --json", ["pending", "--json"]);
  const row = JSON.parse(pending.stdout).pending[0];
  threadId = row.threadId;
  envelopeHash = row.envelopeHash;
  // The JSON is the same data: the requester id comes back byte for byte.
  expect(row.requestedBy).toBe(REQUESTER);

  const refused = await cli("approve (refused)", [
    "approve",
    threadId,
    "--hash",
    envelopeHash,
    "--as",
    MALLORY,
  ]);
  expect(refused.code, refused.stderr).toBe(2);
  await cli("pending", ["pending"]);
  await cli("show (waiting)", ["show", threadId]);
  await cli("show --json (waiting)", ["show", threadId, "--json"]);
  await cli("audit list (waiting)", ["audit", "list"]);
  await cli("audit show (waiting)", ["audit", "show", threadId]);

  const approved = await cli("approve", [
    "approve",
    threadId,
    "--hash",
    envelopeHash,
    "--as",
    "demo-approver",
  ]);
  expect(approved.code, approved.stdout + approved.stderr).toBe(0);
  await cli("show (finished)", ["show", threadId]);
  await cli("audit list", ["audit", "list"]);
  await cli("audit show", ["audit", "show", threadId]);
  await cli("audit show --json", ["audit", "show", threadId, "--json"]);
  await cli("audit list --json", ["audit", "list", "--json"]);
  await cli("show (no such thread)", ["show", `t${ATTACK}\nFAKE: VERIFIED`]);
}, 240_000);

afterAll(async () => {
  await portal?.emulator.close();
});

describe("terminal output from data", () => {
  it("no command writes ESC, BEL, RLO or any other control or bidi byte, or a faked line", () => {
    expect(Object.keys(outputs).length).toBeGreaterThanOrEqual(14);
    for (const [name, r] of Object.entries(outputs)) expectTerminalSafe(name, r);
  });

  it("run shows the model's rationale (which quotes the title) and the requester with markers", () => {
    const out = outputs["run"]!.stdout;
    expect(out).toMatch(
      /▸ proposal task 4: .* — the model's reason: .*Q4 ⟨U\+001B⟩\[2J⟨U\+001B⟩\]8;;https:\/\/evil\.example⟨U\+0007⟩click⟨U\+001B⟩\]8;;⟨U\+0007⟩⟨U\+202E⟩exe\.txt⟨U\+000A⟩FAKE: VERIFIED/,
    );
    expect(out).toContain("Requested by: req⟨U+001B⟩[2J");
    expect(out).toContain("⟨U+000A⟩FAKE: VERIFIED (self-declared) (thread");
  });

  it("a refusal that quotes the approver id shows it escaped, when it happens and afterwards", () => {
    const marked =
      "mallory⟨U+001B⟩[2J⟨U+001B⟩]8;;https://evil.example⟨U+0007⟩click⟨U+001B⟩]8;;⟨U+0007⟩⟨U+202E⟩exe.txt";
    expect(outputs["approve (refused)"]!.stdout).toContain(marked);
    expect(outputs["show (waiting)"]!.stdout).toContain(marked);
    expect(outputs["audit show (waiting)"]!.stdout).toContain(marked);
  });

  it("pending, audit list and audit show show the requester on one line, with markers", () => {
    const requester =
      "req⟨U+001B⟩[2J⟨U+001B⟩]8;;https://evil.example⟨U+0007⟩click⟨U+001B⟩]8;;⟨U+0007⟩⟨U+202E⟩exe.txt⟨U+000A⟩FAKE: VERIFIED";
    expect(outputs["pending"]!.stdout).toContain(
      `${threadId}  rev 1  task 4 TITLE  medium  by ${requester} (self-declared)  created`,
    );
    expect(outputs["audit list"]!.stdout).toContain(`${threadId}  by ${requester} (self-declared)  `);
    expect(outputs["audit show"]!.stdout).toContain(
      `Requested by:  ${requester} (self-declared) — "rename task 4 to Q4 report"`,
    );
  });

  it("show of a finished run and audit show escape the written arguments and the card as shown", () => {
    expect(outputs["show (finished)"]!.stdout).toContain("OUTCOME VERIFIED");
    const audit = outputs["audit show"]!.stdout;
    expect(audit).toContain("card as shown:");
    expect(audit).toContain("  |       │Q4 ⟨U+001B⟩[2J");
    expect(audit).toContain("  |       │FAKE: VERIFIED");
  });

  it("an error that quotes the argument escapes it", () => {
    const r = outputs["show (no such thread)"]!;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no thread t⟨U+001B⟩[2J");
    expect(r.stderr).toContain("⟨U+000A⟩FAKE: VERIFIED");
  });

  it("--json output stays valid JSON of exactly the original data", () => {
    const waiting = parseJsonOutput(outputs["show --json (waiting)"]!.stdout);
    expect(waiting.envelope.params.TITLE).toBe("Q4 report");
    expect(waiting.envelope.requestedBy).toBe(REQUESTER);
    expect(waiting.refused.reason).toContain(MALLORY);
    const audit = JSON.parse(outputs["audit show --json"]!.stdout);
    expect(audit.caseRecord.firstPage.requestedBy).toBe(REQUESTER);
    expect(JSON.stringify(audit)).toContain(JSON.stringify(MALLORY).slice(1, -1));
    expect(JSON.parse(outputs["audit list --json"]!.stdout).threads[0].requestedBy).toBe(REQUESTER);
  });
});

describe("size caps at the command line", () => {
  it("refuses over-long arguments with exit 1, naming the argument, the cap and the length received", async () => {
    const long = (n: number) => `${"\u001b[2J".repeat(Math.floor(n / 4))}${"x".repeat(n % 4)}`;
    const cases: Array<{ args: string[]; name: string; length: number; cap: number }> = [
      { args: ["run", long(4_001)], name: "request", length: 4_001, cap: 4_000 },
      { args: ["run", "rename task 4 to X", "--as", long(129)], name: "--as", length: 129, cap: 128 },
      { args: ["show", long(129)], name: "thread", length: 129, cap: 128 },
      { args: ["approve", "t1", "--hash", long(101)], name: "--hash", length: 101, cap: 100 },
      {
        args: ["approve", "t1", "--hash", "sha256:x", "--as", long(200)],
        name: "--as",
        length: 200,
        cap: 128,
      },
      {
        args: ["edit", "t1", "--set", "TITLE=ok", "--set", `TITLE=${long(10_000)}`],
        name: "--set",
        length: 10_006,
        cap: 10_000,
      },
      { args: ["reject", "t1", "--reason", long(4_001)], name: "--reason", length: 4_001, cap: 4_000 },
      { args: ["cancel", "t1", "--reason", "r", "--as", long(129)], name: "--as", length: 129, cap: 128 },
      { args: ["keygen", "--approver", long(129)], name: "--approver", length: 129, cap: 128 },
    ];
    const results = await Promise.all(cases.map((c) => runCli(c.args, env)));
    results.forEach((r, i) => {
      const c = cases[i]!;
      expect(r.code, `${c.args.join(" ").slice(0, 40)}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(
        `${c.name} is too long: ${c.length.toLocaleString("en")} characters received, the limit is ${c.cap.toLocaleString("en")}`,
      );
      // The value itself is not echoed.
      expect(r.stderr.length).toBeLessThan(300);
      expectTerminalSafe(c.name, r);
    });
  }, 120_000);
});

describe("keygen", () => {
  const modeOf = (p: string) => fs.statSync(p).mode & 0o777;

  it("writes to ~/.config/action-envelope/keys by default: directory 0700, private key 0600", async () => {
    const home = tempDir("ae-home-");
    const r = await runCli(["keygen", "--approver", "alice"], { HOME: home, XDG_CONFIG_HOME: "" });
    expect(r.code, r.stderr).toBe(0);
    const dir = path.join(home, ".config", "action-envelope", "keys");
    expect(defaultKeyDir({}, home)).toBe(dir);
    expect(modeOf(dir)).toBe(0o700);
    expect(modeOf(path.join(dir, "alice.key"))).toBe(0o600);
    expect(fs.readFileSync(path.join(dir, "alice.key"), "utf8")).toContain("PRIVATE KEY");
    expect(fs.readFileSync(path.join(dir, "alice.pub"), "utf8")).toMatch(/^alice /);
    expect(r.stdout).toContain(`private key: ${path.join(dir, "alice.key")}`);
    expect(r.stderr).toBe("");
    // A second run never overwrites the private key.
    const again = await runCli(["keygen", "--approver", "alice"], { HOME: home, XDG_CONFIG_HOME: "" });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already exists; refusing to overwrite a private key");
  }, 60_000);

  it("honours an absolute XDG_CONFIG_HOME", async () => {
    const xdg = tempDir("ae-xdg-");
    const r = await runCli(["keygen", "--approver", "bob"], {
      HOME: tempDir("ae-home-"),
      XDG_CONFIG_HOME: xdg,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(modeOf(path.join(xdg, "action-envelope", "keys"))).toBe(0o700);
    expect(modeOf(path.join(xdg, "action-envelope", "keys", "bob.key"))).toBe(0o600);
    expect(defaultKeyDir({ XDG_CONFIG_HOME: "relative/dir" }, "/home/x")).toBe(
      "/home/x/.config/action-envelope/keys",
    );
  }, 60_000);

  it("refuses a default location inside the repository; writes there only with an explicit --out, with a warning", async () => {
    fs.mkdirSync(path.join(ROOT, "test-results"), { recursive: true });
    const scratch = fs.mkdtempSync(path.join(ROOT, "test-results", "keygen-"));
    try {
      const refused = await runCli(["keygen", "--approver", "carol"], {
        HOME: tempDir("ae-home-"),
        XDG_CONFIG_HOME: scratch,
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("refusing to write a private key");
      expect(refused.stderr).toContain("inside the repository working tree");
      expect(fs.existsSync(path.join(scratch, "action-envelope"))).toBe(false);

      const out = path.join(scratch, "approver-keys");
      const explicit = await runCli(["keygen", "--approver", "carol", "--out", out], {});
      expect(explicit.code, explicit.stderr).toBe(0);
      expect(explicit.stderr).toMatch(/^warning: .*approver-keys is inside the repository working tree/);
      expect(modeOf(out)).toBe(0o700);
      expect(modeOf(path.join(out, "carol.key"))).toBe(0o600);
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  }, 60_000);

  it("knows a git working tree from the current directory, and this project's directory", () => {
    const repo = tempDir("ae-repo-");
    fs.mkdirSync(path.join(repo, ".git"));
    const outside = tempDir("ae-outside-");
    expect(containingRepository(path.join(repo, "a", "b"), repo)).toBe(fs.realpathSync(repo));
    expect(containingRepository(outside, repo)).toBeUndefined();
    expect(containingRepository(path.join(ROOT, "approver-keys"), outside)).toBe(fs.realpathSync(ROOT));
  });

  it("approver-keys/ and *.key are git-ignored", () => {
    const ignore = fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8").split("\n");
    expect(ignore).toContain("approver-keys/");
    expect(ignore).toContain("*.key");
  });
});
