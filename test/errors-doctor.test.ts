/**
 * `doctor` (issue 17 B.1) against a healthy emulator, a wrong webhook code (401), a closed port and a
 * webhook without the task scope; the model's endpoint unreachable. One line per check with the fix;
 * exit 0 only when all pass. Nothing is written to the portal.
 */
import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { generateApproverKeyPair } from "../src/envelope/index.js";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { runDoctor } from "../src/cli/doctor-command.js";
import { renderDoctor, type DoctorCheck } from "../src/cli/doctor-check.js";
import { ROOT, runCli, tempDir } from "./support/harness.js";

let emu: RunningEmulator | undefined;
afterEach(async () => {
  await emu?.close();
  emu = undefined;
});

function envWith(webhookUrl: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const dataDir = tempDir("ae-doctor-");
  return {
    ...(webhookUrl ? { BITRIX24_WEBHOOK_URL: webhookUrl } : {}),
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir}.journal.key`,
    MODEL: "offline",
    BITRIX24_TIMEOUT_MS: "2000",
    ...extra,
  };
}

const find = (checks: DoctorCheck[], area: string, name: string) =>
  checks.find((c) => c.area === area && c.name === name);
const failed = (checks: DoctorCheck[]) => checks.filter((c) => c.status === "fail");
async function writes(e: RunningEmulator) {
  const body = (await (await fetch(`${e.baseUrl}/_emulator/calls`)).json()) as {
    calls: Array<{ method: string }>;
  };
  return body.calls.filter(
    (c) =>
      c.method !== "tasks.task.get" &&
      c.method !== "tasks.task.list" &&
      c.method !== "scope" &&
      c.method !== "user.current" &&
      c.method !== "user.get",
  );
}

describe("doctor", () => {
  it("a healthy emulator: every check passes, the webhook user and its edit right are named, nothing is written", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const checks = await runDoctor({ env: envWith(emu.webhookUrl), cwd: ROOT, taskId: 4 });
    expect(failed(checks)).toEqual([]);
    expect(find(checks, "portal", "scopes")).toMatchObject({
      status: "pass",
      detail: expect.stringContaining("task"),
    });
    expect(find(checks, "portal", "identity")?.detail).toMatch(/^acting as user 1 /);
    expect(find(checks, "portal", "edit right")).toMatchObject({
      status: "pass",
      detail: "the webhook user may edit task 4",
    });
    expect(find(checks, "portal", "people's names")).toMatchObject({
      status: "pass",
      detail: expect.stringContaining("user.get answers (scope user)"),
    });
    expect(find(checks, "stores", "sqlite")?.status).toBe("pass");
    // The default policy accepts self-declared approvers: said, as a warning, for a real portal.
    expect(find(checks, "policy", "approver identity")).toMatchObject({
      status: "warn",
      fix: expect.stringContaining("requireSignature"),
    });
    expect(renderDoctor(checks)).toMatch(/all checks passed\n$/);
    expect(await writes(emu)).toEqual([]);
  });

  it("a wrong webhook code: the portal check fails with the 401 and says to copy the webhook URL again", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const wrong = emu.webhookUrl.replace("emulator-secret-code", "wrong-code");
    const checks = await runDoctor({ env: envWith(wrong), cwd: ROOT });
    const reach = find(checks, "portal", "reachable")!;
    expect(reach.status).toBe("fail");
    expect(reach.detail).toMatch(/^auth \(HTTP 401 INVALID_CREDENTIALS\)/);
    expect(reach.fix).toMatch(/BITRIX24_WEBHOOK_URL/);
    expect(reach.detail).not.toContain("wrong-code");
  });

  it("a closed port: not reachable, the request was not sent, check the host and port", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const url = emu.webhookUrl;
    await emu.close();
    emu = undefined;
    const checks = await runDoctor({ env: envWith(url), cwd: ROOT });
    const reach = find(checks, "portal", "reachable")!;
    expect(reach).toMatchObject({
      status: "fail",
      fix: expect.stringContaining("host and port in BITRIX24_WEBHOOK_URL"),
    });
    expect(reach.detail).toMatch(/could not connect .*ECONNREFUSED.*the request was not sent/);
    expect(reach.detail).not.toMatch(/may or may not/);
  });

  it("a webhook without the task scope: the scope check fails and names the scope to add", async () => {
    emu = await startEmulator({ port: 0, rate: 0, scopes: ["user", "crm"] });
    const checks = await runDoctor({ env: envWith(emu.webhookUrl), cwd: ROOT });
    expect(find(checks, "portal", "scopes")).toMatchObject({
      status: "fail",
      detail: "the webhook's scopes are user, crm; it needs task",
      fix: expect.stringContaining("add Tasks (task)"),
    });
    expect(find(checks, "portal", "edit right")).toBeUndefined();
  });

  it("a webhook without a user scope: names will be unavailable (a warning, not a failure), and which scope to add", async () => {
    emu = await startEmulator({ port: 0, rate: 0, scopes: ["task"] });
    const checks = await runDoctor({ env: envWith(emu.webhookUrl), cwd: ROOT, taskId: 4 });
    expect(find(checks, "portal", "people's names")).toMatchObject({
      status: "warn",
      detail:
        'the webhook has no user scope (user, user_brief or user_basic): cards will show user ids with "name unavailable", and edits must give user ids, not names',
      fix: expect.stringContaining("add Users (user, or user_brief)"),
    });
    expect(failed(checks).filter((c) => c.area === "portal")).toEqual([]);
  });

  it("a Groq endpoint that cannot be reached: MODEL_UNREACHABLE with the fix", async () => {
    const checks = await runDoctor({
      env: envWith(undefined, {
        MODEL: "groq/llama-3.3-70b-versatile",
        GROQ_API_KEY: "gsk_x",
        GROQ_BASE_URL: "http://127.0.0.1:9",
      }),
      cwd: ROOT,
    });
    expect(find(checks, "portal", "webhook")?.status).toBe("skip");
    expect(find(checks, "model", "endpoint")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("[MODEL_UNREACHABLE]"),
      fix: expect.stringContaining("GROQ_BASE_URL"),
    });
  });

  it("the CLI prints one line per check and exits 0 only when all pass", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const ok = await runCli(["doctor", "--task", "4"], envWith(emu.webhookUrl));
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^PASS {2}portal\/reachable/m);
    expect(ok.stdout).toMatch(/all checks passed/);
    const bad = await runCli(["doctor"], envWith(emu.webhookUrl.replace("emulator-secret-code", "nope")));
    expect(bad.code).toBe(2);
    expect(bad.stdout).toMatch(/^FAIL {2}portal\/reachable .* — fix: /m);
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});

describe("doctor and deals (update_deal)", () => {
  it("a webhook without crm: a warning (not a failure) that deal operations (update_deal) will fail, and to add the crm scope; the CLI still exits 0", async () => {
    emu = await startEmulator({ port: 0, rate: 0, scopes: ["task", "user"] });
    const checks = await runDoctor({ env: envWith(emu.webhookUrl), cwd: ROOT, taskId: 4 });
    const deal = checks.find((c) => c.area === "portal" && /update_deal/.test(c.detail));
    expect(deal).toMatchObject({
      status: "warn",
      detail: expect.stringMatching(/no crm scope: deal operations \(update_deal\) will fail/),
      fix: expect.stringContaining("add CRM (crm)"),
    });
    expect(failed(checks)).toEqual([]);
    const cli = await runCli(["doctor", "--task", "4"], envWith(emu.webhookUrl));
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(/^WARN {2}portal\/\S+ .*update_deal.* — fix: .*\(crm\)/m);
  }, 60_000);

  it("a webhook with crm: no deal warning; the policy line lists update_deal's approvers next to update_task's", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const checks = await runDoctor({ env: envWith(emu.webhookUrl), cwd: ROOT, taskId: 4 });
    expect(
      checks.filter((c) => c.status === "warn" && /crm|update_deal/.test(`${c.detail} ${c.fix ?? ""}`)),
    ).toEqual([]);
    expect(find(checks, "portal", "deal scope")).toMatchObject({
      status: "pass",
      detail: expect.stringContaining("update_deal"),
    });
    // policy/default.json: task-approvers for update_task, deal-approvers (no carol) for update_deal.
    expect(find(checks, "policy", "policy file")?.detail).toMatch(
      /update_task approvers: alice, bob, carol, demo-approver; update_deal approvers: alice, bob, demo-approver$/,
    );
  });
});

describe("doctor: approver keys when signatures are required", () => {
  it("names an approver of any allowed operation without a key (a deal approver too), and passes once every one has one", async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    const dir = tempDir("ae-doctor-keys-");
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, "policy", "default.json"), "utf8"));
    policy.requireSignature = true;
    policy.approvers.groups["deal-approvers"] = ["dave"];
    const policyFile = path.join(dir, "policy.json");
    fs.writeFileSync(policyFile, JSON.stringify(policy));
    const keysDir = path.join(dir, "keys");
    fs.mkdirSync(keysDir);
    const taskApprovers = ["alice", "bob", "carol", "demo-approver"];
    for (const id of taskApprovers)
      fs.writeFileSync(path.join(keysDir, `${id}.pub`), `${generateApproverKeyPair(id).publicKeyLine}\n`);
    const env = { ACTION_ENVELOPE_POLICY: policyFile, ACTION_ENVELOPE_APPROVER_KEYS: keysDir };
    const without = await runDoctor({ env: envWith(emu.webhookUrl, env), cwd: ROOT });
    expect(find(without, "policy", "approver keys")).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("dave has no public key"),
    });
    fs.writeFileSync(path.join(keysDir, "dave.pub"), `${generateApproverKeyPair("dave").publicKeyLine}\n`);
    const withAll = await runDoctor({ env: envWith(emu.webhookUrl, env), cwd: ROOT });
    expect(find(withAll, "policy", "approver keys")).toMatchObject({
      status: "pass",
      detail: expect.stringContaining("signatures required"),
    });
  });
});
