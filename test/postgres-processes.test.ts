/**
 * Several processes sharing one PostgreSQL database: the emulator over HTTP, our MCP server over
 * stdio in every process, the offline model. Writes are counted in the emulator's own call log.
 *
 * - eight long-lived processes resume the same thread at one barrier, 50 times over;
 * - a process killed mid-execution is finished by a worker, honestly and without a second write;
 * - an approval requested by one process is approved by another with its own data directory;
 * - the database going away mid-run leaves no write sent, and the run finishes once it is back.
 */
import fs from "node:fs";
import readline from "node:readline";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { startRun } from "../src/app/threads.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import {
  approvalOf as approve,
  CLI,
  ROOT,
  scriptCommand,
  envFor,
  killGroup,
  openTestApp,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  startPortal,
  tempDir,
  until,
  type Portal,
} from "./support/harness.js";
import {
  NO_POSTGRES,
  createTestDatabase,
  executionRecorded,
  schemaFor,
  usingPostgres,
} from "./support/postgres.js";

if (!usingPostgres) console.info(`test/postgres-processes.test.ts: ${NO_POSTGRES}`);

const RESUME_WORKER = `${ROOT}/test/support/resume-worker.ts`;
const ROUNDS = 50;
const PROCESSES = 8;

interface Reply {
  ready?: boolean;
  armed?: number;
  id?: number;
  view?: Record<string, any>;
  error?: string;
  code?: string;
}

/** A spawned program in its own process group, with its stdout split into lines as they come. */
class Spawned {
  readonly child: ChildProcessWithoutNullStreams;
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<number | null>;
  private waiters: Array<() => void> = [];

  constructor(script: string, args: string[], env: Record<string, string>) {
    const run = scriptCommand(script);
    this.child = spawn(run.command, [...run.args, ...args], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    readline.createInterface({ input: this.child.stdout }).on("line", (l) => {
      this.lines.push(l);
      for (const w of this.waiters.splice(0)) w();
    });
    this.child.stderr.on("data", (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.on("close", (code) => resolve(code)));
  }

  /** Resolves with the first line (from `from` on) that satisfies `match`. */
  async line<T>(what: string, match: (line: string) => T | undefined, from = 0, ms = 120_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (let i = from; ;) {
      for (; i < this.lines.length; i++) {
        const hit = match(this.lines[i]!);
        if (hit !== undefined) return hit;
      }
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(
          `${what}: process ended (${this.child.exitCode ?? this.child.signalCode}); stderr:\n${this.stderr}`,
        );
      if (Date.now() > deadline)
        throw new Error(
          `${what}: gave up; output so far:\n${this.lines.join("\n")}\nstderr:\n${this.stderr}`,
        );
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 500);
      });
    }
  }

  kill(): void {
    if (this.child.pid) killGroup(this.child.pid);
  }
}

/** A long-lived process that submits decisions on command (test/support/resume-worker.ts). */
class ResumeWorker extends Spawned {
  private constructor(env: Record<string, string>) {
    super(RESUME_WORKER, [], env);
  }

  static async start(env: Record<string, string>): Promise<ResumeWorker> {
    const w = new ResumeWorker(env);
    await w.reply("ready", (r) => r.ready === true);
    return w;
  }

  private send(msg: unknown): void {
    this.child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  private reply(what: string, match: (r: Reply) => boolean): Promise<Reply> {
    return this.line(what, (l) => {
      if (!l.startsWith("{")) return undefined;
      const r = JSON.parse(l) as Reply;
      return match(r) ? r : undefined;
    });
  }

  async arm(id: number, threadId: string, resume: unknown): Promise<void> {
    this.send({ op: "arm", id, threadId, resume });
    await this.reply(`armed ${id}`, (r) => r.armed === id);
  }

  go(id: number): void {
    this.send({ op: "go", id });
  }

  result(id: number): Promise<Reply> {
    return this.reply(`result ${id}`, (r) => r.id === id);
  }

  async exit(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.send({ op: "exit" });
    await this.exited;
  }
}

const titleOf = (w: { params: Record<string, unknown> }) =>
  (w.params["fields"] as Record<string, unknown> | undefined)?.["TITLE"];

describe.skipIf(!usingPostgres)("PostgreSQL: several processes sharing one database", () => {
  let portal: Portal;
  let dataDir: string;
  let env: Record<string, string>;
  const started: Spawned[] = [];

  beforeEach(async () => {
    portal = await startPortal();
    dataDir = tempDir();
    env = envFor(portal, dataDir);
  });

  afterEach(async () => {
    for (const s of started.splice(0)) {
      s.kill();
      await s.exited;
    }
    await portal.emulator.close();
  });

  const pendingRun = (title: string, extraEnv: Record<string, string> = {}): Promise<ThreadView> =>
    recordPendingRename(portal, dataDir, title, { env: extraEnv });

  async function auditOf(e: Record<string, string>) {
    return PostgresAuditLog.open(loadConfig(e).database!);
  }

  it(`${PROCESSES} processes resuming the same thread at the same instant, ${ROUNDS} times: one write per thread, every loser refused clearly, the audit chain verifies`, async () => {
    const workers = await Promise.all(Array.from({ length: PROCESSES }, () => ResumeWorker.start(env)));
    started.push(...workers);
    const app = await openTestApp(portal, dataDir);
    const threads: string[] = [];
    const refusalCodes = new Map<string, number>();
    try {
      for (let round = 1; round <= ROUNDS; round++) {
        const title = `RACE ${round}`;
        const view = await startRun(app, { request: `rename task 4 to ${title}`, requestedBy: "demo-user" });
        expect(view.status, `round ${round}`).toBe("awaiting_approval");
        threads.push(view.threadId);
        // Barrier: every process holds the decision, parsed and ready; then all are released together.
        await Promise.all(workers.map((w) => w.arm(round, view.threadId, approve(view))));
        for (const w of workers) w.go(round);
        const results = await Promise.all(workers.map((w) => w.result(round)));

        const winners = results.filter((r) => r.view);
        expect(
          winners,
          `round ${round}: ${results.map((r) => (r.view ? `finished ${r.view.outcome}` : `refused ${r.code}`)).join(", ")}`,
        ).toHaveLength(1);
        expect(winners[0]!.view!.outcome).toBe("VERIFIED");
        const losers = results.filter((r) => r.error !== undefined);
        expect(losers).toHaveLength(PROCESSES - 1);
        for (const l of losers) {
          expect(["IN_PROGRESS", "THREAD_ENDED"], l.error).toContain(l.code);
          expect(l.error).toContain(view.threadId);
          refusalCodes.set(l.code!, (refusalCodes.get(l.code!) ?? 0) + 1);
        }
        const writes = await portal.writes();
        expect(
          writes.filter((w) => titleOf(w) === title),
          `round ${round}`,
        ).toHaveLength(1);
        expect(writes).toHaveLength(round);
      }
    } finally {
      await app.close();
      await Promise.all(workers.map((w) => w.exit()));
    }
    expect([...refusalCodes.values()].reduce((a, b) => a + b, 0)).toBe(ROUNDS * (PROCESSES - 1));

    const audit = await auditOf(env);
    try {
      const verified = await audit.verify();
      expect(verified.intact, JSON.stringify(verified)).toBe(true);
      for (const threadId of threads) {
        const events = (await audit.records({ threadId })).map((r) => r.event);
        expect(
          events.filter((e) => e === "decision_accepted"),
          threadId,
        ).toHaveLength(1);
        expect(
          events.filter((e) => e === "execution_outcome"),
          threadId,
        ).toHaveLength(1);
      }
    } finally {
      await audit.close();
    }
  }, 900_000);

  it("a process killed with SIGKILL mid-execution: another worker finishes the thread with an honest outcome and no second write", async () => {
    const view = await pendingRun("KILLED MID-EXECUTION");
    const hash = view.approval!.envelopeHash;
    const victim = await ResumeWorker.start(env);
    started.push(victim);
    // The emulator holds the write, so the kill lands after the request left and before any answer.
    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: 3000, times: 1 });
    await victim.arm(1, view.threadId, approve(view));
    victim.go(1);
    await until("the write-ahead entry", () => executionRecorded(env, hash));
    await new Promise((r) => setTimeout(r, 300));
    victim.kill();
    await victim.exited;
    await until("the held write to land", async () => (await portal.writes()).length === 1);

    // Two workers, each with a data directory of its own (as on other hosts), sharing only the database.
    const schema = { ACTION_ENVELOPE_DB_SCHEMA: schemaFor(dataDir) };
    // Other hosts: their own data directories, the shared database, and the same journal key (as every process sharing a journal must).
    const workers = [tempDir(), tempDir()].map(
      (dir) =>
        new Spawned(
          CLI,
          ["worker", "--interval", "0.3"],
          envFor(portal, dir, {
            ...schema,
            ACTION_ENVELOPE_JOURNAL_KEY_FILE: env["ACTION_ENVELOPE_JOURNAL_KEY_FILE"]!,
          }),
        ),
    );
    started.push(...workers);
    const recovered = await Promise.race(
      workers.map((w) =>
        w.line("the recovery", (l) => (l.includes(`recovered ${view.threadId}`) ? l : undefined)),
      ),
    );
    expect(recovered).toMatch(/INCONCLUSIVE/);
    // Let both run a few more rounds: neither may touch the finished thread again.
    await new Promise((r) => setTimeout(r, 1500));
    for (const w of workers) w.child.kill("SIGTERM");
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0]);
    const allLines = workers.flatMap((w) => w.lines);
    expect(allLines.filter((l) => l.includes(`recovered ${view.threadId}`))).toHaveLength(1);

    expect(await portal.writes()).toHaveLength(1);
    const app = await openTestApp(portal, dataDir);
    try {
      const after = await viewThread(app, view.threadId);
      expect(after.status).toBe("finished");
      expect(after.state?.outcome).toBe("INCONCLUSIVE");
      expect(after.state?.acknowledgement?.status).toBe("MISSING");
      expect(after.state?.verification?.verdict).toBe("INCONCLUSIVE");
    } finally {
      await app.close();
    }
    const audit = await auditOf(env);
    try {
      expect((await audit.verify()).intact).toBe(true);
      expect(
        (await audit.records({ threadId: view.threadId })).filter((r) => r.event === "execution_outcome"),
      ).toHaveLength(1);
    } finally {
      await audit.close();
    }
  }, 180_000);

  it("a pending approval created by one process is approved through another process on another connection", async () => {
    const title = "APPROVED ELSEWHERE";
    const otherDir = tempDir();
    const elsewhere = envFor(portal, otherDir, {
      ACTION_ENVELOPE_DB_SCHEMA: schemaFor(dataDir),
      ACTION_ENVELOPE_JOURNAL_KEY_FILE: env["ACTION_ENVELOPE_JOURNAL_KEY_FILE"]!,
    });

    const run = await runCli(["run", `rename task 4 to ${title}`, "--json", "--no-prompt"], env);
    expect(run.code, run.stderr).toBe(0);
    const waiting = parseJsonOutput(run.stdout);
    expect(waiting.status).toBe("awaiting_approval");

    const listed = await runCli(["pending", "--json"], elsewhere);
    expect(parseJsonOutput(listed.stdout).pending.map((p: { threadId: string }) => p.threadId)).toEqual([
      waiting.threadId,
    ]);

    const approved = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"],
      elsewhere,
    );
    expect(approved.code, approved.stderr).toBe(0);
    const out = parseJsonOutput(approved.stdout);
    expect(out.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: waiting.envelope.params });

    // Nothing but the database connects the two processes: neither data directory holds any state file.
    for (const dir of [dataDir, otherDir]) {
      expect(
        fs.readdirSync(dir).filter((f) => /^(journal|checkpoints|audit)\.sqlite/.test(f)),
        dir,
      ).toEqual([]);
    }
    const again = await runCli(["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"], env);
    expect(again.code).toBe(2);
    expect(parseJsonOutput(again.stdout).refused.code).toBe("THREAD_ENDED");
    expect(await portal.writes()).toHaveLength(1);

    const audit = await auditOf(env);
    let records: number;
    try {
      const events = (await audit.records({ threadId: waiting.threadId })).map((r) => r.event);
      expect(events).toEqual(
        expect.arrayContaining(["approval_requested", "decision_accepted", "execution_outcome"]),
      );
      const verified = await audit.verify();
      expect(verified.intact).toBe(true);
      records = verified.records;
    } finally {
      await audit.close();
    }
    // The audit commands read the same database, from a third data directory.
    const checked = await runCli(
      ["audit", "verify", "--json"],
      envFor(portal, tempDir(), { ACTION_ENVELOPE_DB_SCHEMA: schemaFor(dataDir) }),
    );
    expect(checked.code, checked.stderr).toBe(0);
    expect(parseJsonOutput(checked.stdout)).toMatchObject({ intact: true, records });
  }, 180_000);

  it("the database going away mid-run: no write is sent, the error names the server without the password; once back, recover finishes with one write", async () => {
    const db = await createTestDatabase("outage");
    try {
      const u = new URL(db.url);
      u.username ||= "postgres";
      u.password = "hunter2-secret";
      const dbEnv = { DATABASE_URL: u.toString(), ACTION_ENVELOPE_DB_SCHEMA: "public" };
      const e = envFor(portal, dataDir, dbEnv);
      const view = await pendingRun("AFTER THE OUTAGE", dbEnv);
      // Stall the pre-read, which runs after the decision was recorded and before the write-ahead entry.
      await portal.fault({ method: "tasks.task.get", kind: "latency", ms: 8000, times: 1 });
      const approving = runCli(["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"], {
        ...e,
        BITRIX24_TIMEOUT_MS: "30000",
      });
      // Wait until the decision is recorded (claim and audit record, in the step that goes on into the
      // executor) and the pre-read is under way.
      const watcher = await openTestApp(portal, dataDir, { env: dbEnv });
      try {
        await until("the pre-read to start", async () => {
          const v = await viewThread(watcher, view.threadId);
          const phase = (await watcher.deps.journal.currentAction(view.threadId))?.phase;
          return v.status === "interrupted_run" && phase === "decided";
        });
      } finally {
        await watcher.close();
      }
      await db.takeAway();
      const failed = await approving;
      await db.bringBack();

      expect(failed.code).toBe(2);
      expect(failed.stderr).toMatch(
        /StoreUnavailableError: the database postgres:\/\/postgres@127\.0\.0\.1:\d+\/ae_outage_\w+ is unavailable while/,
      );
      expect(failed.stderr + failed.stdout).not.toContain("hunter2");
      expect(await portal.writes()).toHaveLength(0);

      const recovered = await runCli(["recover", view.threadId, "--json"], e);
      expect(recovered.code, recovered.stderr + recovered.stdout).toBe(0);
      expect(parseJsonOutput(recovered.stdout).outcome).toBe("VERIFIED");
      const writes = await portal.writes();
      expect(writes).toHaveLength(1);
      expect(titleOf(writes[0]!)).toBe("AFTER THE OUTAGE");
    } finally {
      await db.drop();
    }
  }, 180_000);
});
