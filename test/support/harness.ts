/**
 * Test harness: a real emulator over HTTP, our MCP server over stdio, SQLite files in a fresh
 * directory. Only the model is scripted. Writes are counted from the emulator's own call log.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach } from "vitest";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { startEmulator, type RunningEmulator } from "../../src/offline-demo/emulator/index.js";
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { startRun } from "../../src/app/threads.js";
import { openApp, type App } from "../../src/app/open-app.js";
import { type ThreadView } from "../../src/app/view-thread.js";
import type { CompileOptions } from "../../src/graph/graph.js";
import type { ObjectLease, Phase } from "../../src/store/action-machine.js";
import { toLease, type LeaseRow } from "../../src/store/journal.js";
import { adminQuery, databaseEnv, schemaFor, usingPostgres } from "./postgres.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const TSX = path.join(ROOT, "node_modules/.bin/tsx");
/**
 * The compiled CLI as `npm run cli` and the installed command run it: bundled (scripts/build.mjs).
 * test/support/build-dist.ts (vitest globalSetup) rebuilds dist/ and the bundle before any test when
 * src/ is newer, so this is never stale.
 */
export const CLI = path.join(ROOT, "dist/cli-bundle/main.js");

/** The emulator's methods that change the portal: what "one write" is counted against. */
export const WRITE_METHODS: ReadonlySet<string> = new Set([
  "tasks.task.update",
  "tasks.task.add",
  "tasks.task.delete",
  "task.commentitem.add",
  "task.commentitem.update",
  "task.commentitem.delete",
  "crm.deal.update",
  "batch",
]);

export interface PortalCall {
  method: string;
  params: Record<string, unknown>;
  status: number;
  time: string;
}

export interface Portal {
  emulator: RunningEmulator;
  /** Each call as the emulator logged it, `time` when it answered. */
  calls(method?: string): Promise<Array<PortalCall>>;
  writes(): Promise<Array<PortalCall>>;
  fault(spec: Record<string, unknown>): Promise<void>;
  /** How many armed fault firings are left: a held request has consumed its latency fault on arrival. */
  faultsArmed(): Promise<number>;
  clearFaults(): Promise<void>;
  /** A direct call to the portal, as a person editing the task in Bitrix24 would make. */
  rest(method: string, params: Record<string, unknown>): Promise<{ status: number; body: any }>;
  task(id: number): Promise<Record<string, any>>;
}

export async function startPortal(opts: { statePath?: string } = {}): Promise<Portal> {
  const emulator = await startEmulator({
    port: 0,
    rate: 0,
    ...(opts.statePath ? { statePath: opts.statePath } : {}),
  });
  const calls = async (method?: string) => {
    const res = await fetch(`${emulator.baseUrl}/_emulator/calls`);
    const body = (await res.json()) as { calls: PortalCall[] };
    return method ? body.calls.filter((c) => c.method === method) : body.calls;
  };
  const rest = async (method: string, params: Record<string, unknown>) => {
    const res = await fetch(`${emulator.webhookUrl}${method}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(params),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  return {
    emulator,
    calls,
    // Every call of a method that changes the portal, whatever the operation.
    writes: async () => (await calls()).filter((c) => WRITE_METHODS.has(c.method)),
    async fault(spec) {
      const res = await fetch(`${emulator.baseUrl}/_emulator/faults`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(spec),
      });
      if (!res.ok) throw new Error(`arming fault failed: ${res.status} ${await res.text()}`);
    },
    async faultsArmed() {
      const res = await fetch(`${emulator.baseUrl}/_emulator/faults`);
      return ((await res.json()) as { faults: unknown[] }).faults.length;
    },
    async clearFaults() {
      await fetch(`${emulator.baseUrl}/_emulator/faults`, { method: "DELETE" });
    },
    rest,
    async task(id: number) {
      const r = await rest("tasks.task.get", { taskId: id });
      return r.body.result.task;
    },
  };
}

export function tempDir(prefix = "ae-test-"): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * The repository's default policy (policy/default.json) with its requester rule off
 * (requireVerifiedRequesterAtOrAbove: null), written once per test process. Tests run their requests
 * as self-declared requesters (in process, the CLI, an open API server) and are about other things
 * than who asked; the default policy would end every high-risk one REQUESTER_NOT_VERIFIED. The rule
 * itself is tested against the real default policy in test/requester-verification.test.ts.
 */
export function selfDeclaredRequestersPolicy(change: (policy: any) => void = () => {}): string {
  const policy = JSON.parse(fs.readFileSync(DEFAULT_POLICY, "utf8"));
  policy.requireVerifiedRequesterAtOrAbove = null;
  change(policy);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "ae-policy-")), "policy.json");
  fs.writeFileSync(file, JSON.stringify(policy, null, 2));
  return file;
}
export const DEFAULT_POLICY = path.join(ROOT, "policy/default.json");
// One policy file per test file: files that share a worker (vitest.config.ts, "shared-worker") share this
// module, and each file's temporary folder, where the file lives, is deleted after that file.
let testPolicy: string | undefined;

/**
 * The fixture of the crash and recovery files: before each test a fresh emulator and data directory,
 * handed to `use`; after it the emulator is closed.
 */
export function eachTestPortal(use: (fixture: { portal: Portal; dataDir: string }) => void): void {
  let portal: Portal | undefined;
  beforeEach(async () => {
    portal = await startPortal();
    use({ portal, dataDir: tempDir() });
  });
  afterEach(async () => {
    await portal?.emulator.close();
    portal = undefined;
  });
}

export function envFor(
  portal: Portal,
  dataDir: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  if (testPolicy === undefined || !fs.existsSync(testPolicy)) testPolicy = selfDeclaredRequestersPolicy();
  return {
    // A test that needs another policy (or the real default) names it in extra.
    ACTION_ENVELOPE_POLICY: testPolicy,
    BITRIX24_WEBHOOK_URL: portal.emulator.webhookUrl,
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    MODEL: "offline",
    BITRIX24_RATE: "0",
    BITRIX24_TIMEOUT_MS: "2000",
    // The CLI invents no approver: the decision commands' default is this explicit setting (a test that
    // needs it unset passes ACTION_ENVELOPE_DEFAULT_APPROVER: "" in extra).
    ACTION_ENVELOPE_DEFAULT_APPROVER: "demo-approver",
    // The journal's MAC key lives beside the data directory, never in it (and never in the real home).
    ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir.replace(/\/+$/, "")}.journal.key`,
    // SQLite files in dataDir, or (ACTION_ENVELOPE_TEST_DATABASE_URL set) a PostgreSQL schema of dataDir's own.
    ...databaseEnv(dataDir),
    ...extra,
  };
}

/**
 * A process that dies just before the journal records the action's move to `phase`: that move fails
 * once (the journal is left where it was), the run errors inside the step that made it, and its
 * checkpoint stays before that step. The steps after an approval run in one step, so this, not a
 * pause, is how a run stopped between them is made.
 */
export function stopOnceBeforeMove(app: App, phase: Phase): void {
  const journal = app.deps.journal;
  const moveAction = journal.moveAction.bind(journal);
  let stopped = false;
  journal.moveAction = async (hash, to, patch, ...rest) => {
    if (to === phase && !stopped) {
      stopped = true;
      throw new Error(`the process stopped before the move to ${phase} was recorded`);
    }
    return moveAction(hash, to, patch, ...rest);
  };
}

/** An emulator fault: every task read answers ERROR_CORE (HTTP 400) until the faults are cleared. */
export const TASK_READS_FAIL = {
  method: "tasks.task.get",
  kind: "error",
  status: 400,
  error: "ERROR_CORE",
  description: "Internal problem",
  times: 0,
} as const;

/** Makes the journal's next `method` call fail, as a process stopping just before `what` would; later calls go through. */
export function stopOnceBefore(
  app: App,
  method: "beginWrite" | "recordAnswer" | "closeThread",
  what: string,
): void {
  const journal = app.deps.journal;
  const original = journal[method];
  journal[method] = (() => {
    journal[method] = original as never;
    return Promise.reject(new Error(`the process stopped before ${what}`));
  }) as never;
}

export interface AppOptions {
  model?: BaseChatModel;
  clock?: () => Date;
  env?: Record<string, string>;
  compile?: Omit<CompileOptions, "checkpointer">;
}

export async function openTestApp(portal: Portal, dataDir: string, opts: AppOptions = {}): Promise<App> {
  const config = loadConfig(envFor(portal, dataDir, opts.env), ROOT);
  const deps = await createDeps(config, {
    ...(opts.model ? { model: opts.model, modelLabel: "scripted (test)" } : {}),
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
  return openApp(deps, opts.compile ?? {});
}

/** A test's emulator, data directory and app, fresh for each test (`eachTestApp`). */
export interface TestApp {
  readonly portal: Portal;
  readonly dataDir: string;
  /** The app `open` opened last in this test. */
  readonly app: App;
  /** Opens the app on this test's emulator and data directory, closing the one opened before. */
  open(opts?: AppOptions): Promise<App>;
  /** Closes the app opened last (as a process that stops), if one is open. */
  close(): Promise<void>;
}

/**
 * The fixture most graph and CLI files share: before each test a fresh emulator and data directory
 * (`prefix` names the folder); after it the app opened last, then the emulator, are closed.
 */
export function eachTestApp(prefix?: string): TestApp {
  let portal: Portal | undefined;
  let dataDir = "";
  let app: App | undefined;
  beforeEach(async () => {
    portal = await startPortal();
    dataDir = tempDir(prefix);
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await portal?.emulator.close();
    portal = undefined;
  });
  const opened = <T>(what: string, value: T | undefined): T => {
    if (value === undefined) throw new Error(`no ${what}: eachTestApp's fixture gives one inside a test`);
    return value;
  };
  return {
    get portal() {
      return opened("emulator", portal);
    },
    get dataDir() {
      return opened("data directory", dataDir || undefined);
    },
    get app() {
      return opened("app (call open first)", app);
    },
    async open(opts = {}) {
      await this.close();
      app = await openTestApp(opened("emulator", portal), dataDir, opts);
      return app;
    },
    async close() {
      const last = app;
      app = undefined;
      await last?.close();
    },
  };
}

/**
 * A waiting approval to rename task 4 to `title`, recorded by an app of its own that is closed again,
 * so only the stores remain (as after a process that stopped at the interrupt). Throws unless the run
 * stopped at its approval.
 */
export async function recordPendingRename(
  portal: Portal,
  dataDir: string,
  title: string,
  opts: AppOptions = {},
): Promise<ThreadView> {
  const app = await openTestApp(portal, dataDir, opts);
  try {
    const view = await startRun(app, { request: `rename task 4 to ${title}`, requestedBy: "demo-user" });
    if (view.status !== "awaiting_approval")
      throw new Error(
        `expected the rename to ${title} to wait for approval, got ${view.status} (${view.state?.reasonCode ?? "no outcome"})`,
      );
    return view;
  } finally {
    await app.close();
  }
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI in a separate process, exactly as `npm run cli -- …` would: compiled, on node. Another
 * script (`opts.script`) starts as `scriptCommand` says.
 */
export function runCli(
  args: string[],
  env: Record<string, string>,
  opts: { onSpawn?: (pid: number) => void; input?: string; script?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const script = opts.script ?? CLI;
    // Own process group, so a test can SIGKILL the whole tree (node, the MCP child) at once.
    const run = scriptCommand(script);
    const child = spawn(run.command, [...run.args, ...args], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
    if (opts.input !== undefined) child.stdin.end(opts.input);
    else child.stdin.end();
    if (child.pid) opts.onSpawn?.(child.pid);
  });
}

export const RESUME_PROCESS = path.join(ROOT, "test/support/resume-process.ts");

/**
 * How to start a script: the CLI (or any .js) on node; a test/support script on node from the bundle
 * the global setup wrote (test/support/build-dist.ts); any other TypeScript through tsx.
 */
export function scriptCommand(script: string): { command: string; args: string[] } {
  if (!script.endsWith(".ts")) return { command: process.execPath, args: [script] };
  const bundled = path.join(ROOT, "test-results/scripts", `${path.basename(script, ".ts")}.mjs`);
  if (path.dirname(script) === path.join(ROOT, "test/support") && fs.existsSync(bundled))
    return { command: process.execPath, args: [bundled] };
  return { command: TSX, args: [script] };
}

export function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * A crash at a chosen point: runs the CLI (or `opts.script`) in a process group of its own, waits until
 * `probe` holds (and `graceMs` more), then SIGKILLs the whole group. Resolves with the killed run's
 * result; the group is killed even when the wait gives up.
 */
export async function killedWhen(
  args: string[],
  env: Record<string, string>,
  what: string,
  probe: () => Promise<unknown>,
  opts: { script?: string; graceMs?: number } = {},
): Promise<CliResult> {
  let pid = 0;
  const running = runCli(args, env, {
    ...(opts.script ? { script: opts.script } : {}),
    onSpawn: (p) => (pid = p),
  });
  try {
    // A cold CLI start on a busy machine can take well over 10 s before it reaches the awaited point.
    await until(what, probe, 800);
    if (opts.graceMs) await new Promise((r) => setTimeout(r, opts.graceMs));
  } finally {
    killGroup(pid);
  }
  return running;
}

/**
 * One statement on the journal of `dataDir`, whichever backend the suite runs on (its SQLite file, or
 * its PostgreSQL schema); `T.` prefixes a table, `?` marks a value. A journal not created yet has no rows to read.
 */
export async function journalSql(
  dataDir: string,
  sql: string,
  values: unknown[] = [],
): Promise<Array<Record<string, unknown>>> {
  const reading = /^\s*SELECT\b/i.test(sql);
  if (usingPostgres) {
    let n = 0;
    const text = sql.replaceAll("T.", `"${schemaFor(dataDir)}".`).replaceAll("?", () => `$${++n}`);
    return adminQuery(text, values).catch((e: { code?: string }) => {
      // The schema or table is created by the first process that opens the journal.
      if ((e.code === "42P01" || e.code === "3F000") && reading) return [];
      throw e;
    });
  }
  const file = path.join(dataDir, "journal.sqlite");
  if (!fs.existsSync(file) && reading) return [];
  const db = new Database(file, { readonly: reading });
  try {
    db.pragma("busy_timeout = 5000");
    const st = db.prepare(sql.replaceAll("T.", ""));
    return st.reader ? (st.all(...values) as Array<Record<string, unknown>>) : (st.run(...values), []);
  } catch (e) {
    if (/no such table/.test((e as Error).message) && reading) return [];
    throw e;
  } finally {
    db.close();
  }
}

/** The lease on an object in the journal of `dataDir`, as its table holds it (expired ones included). */
export async function objectLeaseOf(dataDir: string, objectKey: string): Promise<ObjectLease | undefined> {
  const [row] = await journalSql(dataDir, "SELECT * FROM T.object_leases WHERE object_key = ?", [objectKey]);
  return row ? toLease(row as unknown as LeaseRow) : undefined;
}

/** Whether the journal of `dataDir` has any row in `table` yet. */
export async function journalHasRows(
  dataDir: string,
  table: "executions" | "decision_claims",
): Promise<boolean> {
  const rows = await journalSql(dataDir, `SELECT count(*) AS n FROM T.${table}`);
  return Number(rows[0]?.["n"] ?? 0) > 0;
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  tries = 200,
  everyMs = 50,
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe();
    if (v) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`gave up waiting for ${what}`);
}

export function parseJsonOutput(stdout: string): any {
  const start = stdout.indexOf("{");
  if (start < 0) throw new Error(`no JSON in output:\n${stdout}`);
  return JSON.parse(stdout.slice(start));
}

/** The resume value approving the waiting approval exactly as shown, as demo-approver (self-declared). */
export function approvalOf(view: ThreadView) {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

/**
 * The portal's task.update calls that set this title: how many were sent, and how many it carried out
 * (a replay is answered from the kept answer, and a key conflict refused, neither carried out again).
 */
export async function updatesTitled(
  portal: Portal,
  title: string,
): Promise<{ sent: number; applied: number }> {
  const calls = (await portal.calls("tasks.task.update")) as Array<{
    params: { fields?: { TITLE?: string } };
    fault?: string;
  }>;
  const sent = calls.filter((c) => c.params.fields?.TITLE === title);
  return {
    sent: sent.length,
    applied: sent.filter((c) => c.fault !== "idempotent_replay" && c.fault !== "idempotency_conflict").length,
  };
}
