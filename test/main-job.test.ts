/**
 * Acceptance of the main job and the CLI as a person runs them: `npm start` at a real terminal
 * (a pseudo-terminal, so the real @inquirer/prompts prompt is drawn and answered with keystrokes),
 * `npm start` without a terminal, and the two-process `run` / `approve` flow. Every program here is
 * a separate process; writes are counted from the portal's own call log.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ROOT,
  envFor,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type CliResult,
  type Portal,
} from "./support/harness.js";
import { KEY, hasScript, runInPty } from "./support/pty.js";

const DEMO_TITLE = "LAB-AGENT-EXEC-002 - CLEAN TRUE PATH";

/** The caller's environment without any of our settings, as on a fresh clone with no configuration. */
function unconfigured(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(BITRIX24_|ACTION_ENVELOPE_|GROQ_|MODEL$|DATABASE_URL$|NO_COLOR$|LANGSMITH_|LANGCHAIN_)/.test(k))
      delete env[k];
  }
  return { ...env, npm_config_update_notifier: "false", ...extra };
}

function sh(command: string, env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", command], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe.runIf(hasScript())("npm start at a terminal", () => {
  it("draws the real approve / reject / edit prompt; approving at it ends VERIFIED with exit 0", async () => {
    const dataDir = tempDir();
    // The embedded default: no portal, no model configured; only the data directory is moved out of the repo.
    const r = await runInPty("npm start", {
      cwd: ROOT,
      env: unconfigured({ ACTION_ENVELOPE_DATA_DIR: dataDir }),
      steps: [
        {
          when: /Decision for envelope\s+sha256:[0-9a-f]{64}[\s\S]*approve exactly this envelope/,
          keys: KEY.enter,
        },
        { when: /Your approver id/, keys: "demo-approver" + KEY.enter },
      ],
      timeoutMs: 120_000,
    });
    expect(r.stepsSent, r.text).toBe(2);
    // Bound to the hash on the card: no prompt asks to confirm a hash it filled in itself.
    expect(r.text).not.toMatch(/hash as shown/i);
    expect(r.code, r.text).toBe(0);
    expect(r.text).toContain("model:   offline");
    expect(r.text).toContain("embedded Bitrix24 emulator");
    expect(r.text).toMatch(/reject\s*\n.*edit a field/);
    for (const step of [
      "calls get_task_by_id",
      "▸ proposal",
      "approval card",
      "▸ pre-read MATCH",
      "▸ write sent",
      "▸ acknowledgement OK",
      "▸ verification VERIFIED",
    ]) {
      expect(r.text).toContain(step);
    }
    expect(r.text).toMatch(/OUTCOME VERIFIED \(VERIFIED\)/);

    // The embedded portal persisted its state (tasks and call log) under the data directory.
    const portal = await startPortal({ statePath: path.join(dataDir, "emulator.sqlite") });
    try {
      const writes = await portal.writes();
      expect(writes).toHaveLength(1);
      expect(writes[0]!.params["fields"]).toEqual({ TITLE: DEMO_TITLE });
      expect((await portal.task(4))["title"]).toBe(DEMO_TITLE);
    } finally {
      await portal.emulator.close();
    }
  }, 150_000);

  it("with stdout not a terminal it prints the card and the approve command, exits 0, and that command approves", async () => {
    const portal = await startPortal();
    try {
      const dataDir = tempDir();
      const env = unconfigured(envFor(portal, dataDir));
      const outFile = path.join(tempDir(), "start.out");
      // stdin is still the terminal: the rule is about where the card goes, not only where keys come from.
      const r = await runInPty(`npm start > ${outFile}`, { cwd: ROOT, env, timeoutMs: 120_000 });
      const printed = fs.readFileSync(outFile, "utf8");
      expect(r.code, `${r.text}\n${printed}`).toBe(0);
      expect(r.text).not.toContain("Decision for envelope");
      expect(printed).toContain("approval card");
      expect(printed).toContain(`requested: "${DEMO_TITLE}"`);
      const command = /^\s*(npm run cli -- approve \S+ --hash sha256:[0-9a-f]{64} --as \S+)\s*$/m.exec(
        printed,
      )?.[1];
      expect(command, printed).toBeDefined();
      expect(await portal.writes()).toEqual([]);

      const approved = await sh(command!, env);
      expect(approved.code, approved.stderr).toBe(0);
      expect(approved.stdout).toMatch(/OUTCOME VERIFIED/);
      const writes = await portal.writes();
      expect(writes).toHaveLength(1);
      expect(writes[0]!.params["fields"]).toEqual({ TITLE: DEMO_TITLE });
    } finally {
      await portal.emulator.close();
    }
  }, 150_000);
});

describe("two-process CLI: run, then approve from another process", () => {
  let portal: Portal;
  let env: Record<string, string>;

  beforeEach(async () => {
    portal = await startPortal();
    env = envFor(portal, tempDir());
  });
  afterEach(async () => {
    await portal.emulator.close();
  });

  async function runToApproval(): Promise<{
    threadId: string;
    envelopeHash: string;
    envelope: { params: Record<string, unknown> };
  }> {
    const r = await runCli(["run", "rename task 4 to X", "--no-prompt", "--json"], env);
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout);
    expect(out).toMatchObject({ status: "awaiting_approval", envelope: { params: { TITLE: "X" } } });
    for (const key of ["threadId", "envelopeHash", "nonce", "expiresAt", "card"])
      expect(out[key], key).toBeTruthy();
    return out;
  }

  it("approve THREAD --hash H ends VERIFIED (exit 0) with one write equal to the envelope", async () => {
    const waiting = await runToApproval();
    const r = await runCli(["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"], env);
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout);
    expect(out).toMatchObject({
      threadId: waiting.threadId,
      outcome: "VERIFIED",
      envelopeHash: waiting.envelopeHash,
    });
    expect(out.reason).toBeTruthy();
    expect(out.preRead.verdict).toBe("MATCH");
    expect(out.acknowledgement.status).toBe("OK");
    expect(out.verification.verdict).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params["fields"]).toEqual(waiting.envelope.params);
  });

  it("a wrong hash is refused with exit 2, no write, and the approval still waiting", async () => {
    const waiting = await runToApproval();
    const wrong = `sha256:${"0".repeat(64)}`;
    const r = await runCli(["approve", waiting.threadId, "--hash", wrong, "--json"], env);
    expect(r.code, r.stderr).toBe(2);
    const out = parseJsonOutput(r.stdout);
    expect(out).toMatchObject({
      status: "awaiting_approval",
      envelopeHash: waiting.envelopeHash,
      refused: { code: "HASH_MISMATCH" },
    });
    expect(await portal.writes()).toEqual([]);

    const shown = await runCli(["show", waiting.threadId, "--json"], env);
    expect(shown.code).toBe(0);
    expect(parseJsonOutput(shown.stdout).status).toBe("awaiting_approval");
  });

  it("with a real portal configured, start checks it first: a closed port stops it with the check's line and fix, nothing started", async () => {
    const dataDir = tempDir();
    const closed = envFor(portal, dataDir, { BITRIX24_WEBHOOK_URL: "http://127.0.0.1:9/rest/1/abc123/" });
    const r = await runCli(["start", "--no-prompt"], closed);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^FAIL\s+portal\/\S+.*BITRIX24_WEBHOOK_URL/m);
    expect(r.stderr).toContain("npm run cli -- doctor");
    expect(r.stdout).not.toContain("approval card");
    // The emulator passes the same checks and the job goes on to its card.
    const ok = await runCli(["start", "--no-prompt"], envFor(portal, tempDir()));
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^checks: {2}\d+ passed/m);
    expect(ok.stdout).toContain("approval card");
  });

  // A bad setting (exit 1 too) is covered in config.test.ts.
  it("usage errors exit 1 and say what to fix", async () => {
    const missingThread = await runCli(
      ["approve", "no-such-thread", "--hash", `sha256:${"0".repeat(64)}`],
      env,
    );
    expect(missingThread.code, missingThread.stderr).toBe(1);
    expect(missingThread.stderr).toContain("no-such-thread");
    expect(missingThread.stderr).toContain("npm run cli -- pending");

    const shownMissing = await runCli(["show", "no-such-thread"], env);
    expect(shownMissing.code).toBe(1);

    const noHash = await runCli(["approve", "some-thread"], env);
    expect(noHash.code).toBe(1);
    expect(noHash.stderr).toContain("--hash");
    expect(await portal.writes()).toEqual([]);
  });
});
