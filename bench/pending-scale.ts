/**
 * 4. Pending approvals at scale. Real runs (scripted model, our MCP server, emulator in its own
 * process) are started in process, ~20 at a time, until N approvals are waiting in SQLite. At each
 * stage: bytes on disk per waiting approval (checkpoints + journal + audit), the time and peak
 * resident memory of `npm run cli -- pending --json` listing them (spawned under /usr/bin/time -v),
 * and the time of `npm run cli -- approve` for one picked at random. A stage whose creation would not
 * fit in the time budget (projected from the previous stage's rate) is skipped and says so.
 *
 *   npm run bench -- pending-scale [--stages 1000,10000] [--concurrency 20] [--budget 300] [--repeat 2]
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import Database from "better-sqlite3";
import { intArg, pool, ROOT, round, tempDir, writeResult, removeScratch } from "./support/common.js";
import { FIRST_BENCH_TASK, startBenchPortal, type BenchPortal } from "./support/portal.js";
import { openBenchApp, waitingRun } from "./support/app.js";

const STAGES = (() => {
  const i = process.argv.indexOf("--stages");
  const text = i >= 0 ? (process.argv[i + 1] ?? "") : "1000,10000";
  const xs = text.split(",").map(Number);
  if (xs.some((x) => !Number.isSafeInteger(x) || x <= 0) || xs.some((x, k) => k > 0 && x <= xs[k - 1]!)) {
    throw new Error(`--stages expects increasing positive integers like 1000,10000; got "${text}"`);
  }
  return xs;
})();
const CONCURRENCY = intArg("concurrency", 20);
const BUDGET_SECONDS = intArg("budget", 300);
const REPEAT = intArg("repeat", 2);
const TIME = "/usr/bin/time";

interface Spawned {
  command: string;
  wallMs: number;
  exitCode: number | null;
  maxRssKb: number | null;
  stdout: string;
  stderr: string;
}

/** `npm run cli -- ARGS`, exactly as a person would type it, under /usr/bin/time -v when present. */
function npmCli(args: string[], env: Record<string, string>): Promise<Spawned> {
  const withTime = fs.existsSync(TIME);
  const argv = ["npm", "run", "cli", "--", ...args];
  const [cmd, ...rest] = withTime ? [TIME, "-v", ...argv] : argv;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd!, rest, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const wallMs = performance.now() - t0;
      const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
      resolve({
        command: argv.join(" "),
        wallMs,
        exitCode: code,
        maxRssKb: rss ? Number(rss[1]) : null,
        stdout,
        stderr,
      });
    });
  });
}

function jsonOf(stdout: string): any {
  const start = stdout.indexOf("{");
  if (start < 0) throw new Error(`no JSON in output:\n${stdout.slice(0, 2000)}`);
  return JSON.parse(stdout.slice(start));
}

function filesOf(dataDir: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const f of fs.readdirSync(dataDir).sort()) {
    const st = fs.statSync(path.join(dataDir, f));
    if (st.isFile()) out[f] = st.size;
  }
  return out;
}

function checkpointStats(dataDir: string) {
  const db = new Database(path.join(dataDir, "checkpoints.sqlite"), { readonly: true });
  try {
    const c = db
      .prepare(
        "select count(*) n, count(distinct thread_id) threads, avg(length(checkpoint)) avgCheckpoint, avg(length(metadata)) avgMetadata from checkpoints",
      )
      .get() as Record<string, number>;
    const w = db.prepare("select count(*) n, avg(length(value)) avgValue from writes").get() as Record<
      string,
      number
    >;
    return {
      checkpointRows: c.n,
      threads: c.threads,
      avgCheckpointBytes: round(c.avgCheckpoint ?? 0),
      avgMetadataBytes: round(c.avgMetadata ?? 0),
      writeRows: w.n,
      avgWriteBytes: round(w.avgValue ?? 0),
    };
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const dir = tempDir("ae-bench-pending-");
  const dataDir = path.join(dir, "data");
  const maxN = STAGES.at(-1)!;
  const portal: BenchPortal = await startBenchPortal({ dir, tasks: maxN + 10, rate: 0 });
  const env = {
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    BITRIX24_WEBHOOK_URL: portal.webhookUrl,
    MODEL: "offline",
    BITRIX24_RATE: "0",
  };
  const stages: Record<string, unknown>[] = [];
  const skipped: Array<{ stage: number; reason: string }> = [];
  const raw: Record<string, unknown> = {};
  let nextTask = FIRST_BENCH_TASK;
  let created = 0;
  let pendingNow = 0;
  let lastRate = NaN;
  let prevBytes: { total: number; pending: number } | undefined;

  try {
    // The fixed cost of the command: the same listing on an empty data directory.
    const emptyDir = path.join(dir, "empty");
    const emptyRuns: Spawned[] = [];
    for (let r = 0; r < REPEAT; r++)
      emptyRuns.push(await npmCli(["pending", "--json"], { ...env, ACTION_ENVELOPE_DATA_DIR: emptyDir }));
    const empty = {
      wallMs: emptyRuns.map((x) => round(x.wallMs)),
      maxRssKb: emptyRuns.map((x) => x.maxRssKb),
      listed: jsonOf(emptyRuns[0]!.stdout).pending.length,
    };
    console.log(
      `empty data directory: pending --json ${empty.wallMs.join(", ")} ms, max RSS ${empty.maxRssKb.join(", ")} KB`,
    );

    for (const target of STAGES) {
      const toCreate = target - pendingNow;
      if (Number.isFinite(lastRate) && toCreate / lastRate > BUDGET_SECONDS) {
        const reason = `creating ${toCreate} more waiting runs at the measured ${round(lastRate)} runs/s would take ~${Math.round(toCreate / lastRate)} s, over the ${BUDGET_SECONDS} s budget (--budget)`;
        console.log(`stage ${target} skipped: ${reason}`);
        skipped.push({ stage: target, reason });
        continue;
      }
      const bench = await openBenchApp({ webhookUrl: portal.webhookUrl, dataDir, rate: 0 });
      bench.probe.enabled = false;
      const t0 = performance.now();
      const tasks = Array.from({ length: toCreate }, () => nextTask++);
      let done = 0;
      await pool(tasks, CONCURRENCY, async (t) => {
        await waitingRun(bench.app, t);
        done += 1;
        if (done % 1000 === 0)
          console.log(
            `  ${pendingNow + done} waiting (${round(done / ((performance.now() - t0) / 1000))} runs/s)`,
          );
      });
      const createSeconds = (performance.now() - t0) / 1000;
      lastRate = toCreate / createSeconds;
      created += toCreate;
      pendingNow += toCreate;
      await bench.close();

      const files = filesOf(dataDir);
      const totalBytes = Object.values(files).reduce((a, b) => a + b, 0);
      const cp = checkpointStats(dataDir);

      const listRuns: Spawned[] = [];
      for (let r = 0; r < REPEAT; r++) {
        const run = await npmCli(["pending", "--json"], env);
        if (run.exitCode !== 0)
          throw new Error(`pending --json exited ${run.exitCode}: ${run.stderr.slice(-2000)}`);
        listRuns.push(run);
      }
      const listed = jsonOf(listRuns[0]!.stdout).pending as Array<{ threadId: string; envelopeHash: string }>;
      if (listed.length !== pendingNow)
        throw new Error(`pending --json listed ${listed.length}, expected ${pendingNow}`);

      // Approve REPEAT different waiting threads picked at random, each by a fresh CLI process.
      const approves: Spawned[] = [];
      const outcomes: string[] = [];
      const picks = new Set<number>();
      while (picks.size < Math.min(REPEAT, listed.length))
        picks.add(Math.floor(Math.random() * listed.length));
      for (const k of picks) {
        const pick = listed[k]!;
        const approve = await npmCli(
          ["approve", pick.threadId, "--hash", pick.envelopeHash, "--as", "demo-approver", "--json"],
          env,
        );
        const approved = jsonOf(approve.stdout);
        const outcome = `${approved.outcome}`;
        if (approve.exitCode !== 0)
          throw new Error(
            `approve exited ${approve.exitCode} (${outcome}): ${approve.stdout.slice(-1500)} ${approve.stderr.slice(-1500)}`,
          );
        approves.push(approve);
        outcomes.push(outcome);
        pendingNow -= 1;
      }

      const marginal = prevBytes
        ? round((totalBytes - prevBytes.total) / (listed.length - prevBytes.pending))
        : null;
      prevBytes = { total: totalBytes, pending: listed.length };
      const row = {
        waiting: listed.length,
        createSeconds: round(createSeconds),
        createdPerSecond: round(lastRate),
        totalBytes,
        bytesPerWaiting: round(totalBytes / listed.length),
        marginalBytesPerWaiting: marginal,
        pendingJsonMs: listRuns.map((x) => round(x.wallMs)),
        pendingJsonMaxRssKb: listRuns.map((x) => x.maxRssKb),
        pendingJsonBytes: listRuns[0]!.stdout.length,
        approveOneMs: approves.map((x) => round(x.wallMs)),
        approveOneMaxRssKb: approves.map((x) => x.maxRssKb),
        approveOutcome: outcomes,
      };
      stages.push({ ...row, files, checkpoints: cp });
      raw[`stage${target}`] = {
        pendingStderrTail: listRuns[0]!.stderr.slice(-1500),
        approveStdoutTail: approves.map((x) => x.stdout.slice(-600)),
      };
      console.table([row]);
      console.log("files (bytes)", files, "checkpoint rows", cp);
    }

    console.log("pending approvals at scale");
    console.table(stages.map(({ files: _f, checkpoints: _c, ...r }) => r));
    if (skipped.length) console.log("skipped", skipped);
    writeResult(
      "pending-scale",
      {
        setup: {
          emulator: { process: portal.command, rate: 0 },
          creation: `in process: startRun with a scripted model proposing at once (1 baseline read each), ${CONCURRENCY} at a time`,
          listing:
            "npm run cli -- pending --json (a new process: the compiled dist/ since issue 16, tsx before; createDeps with the MCP server, listPending confirming each row against its checkpoint)",
          approving:
            "npm run cli -- approve <thread> --hash <hash> --as demo-approver --json, for --repeat threads picked at random, one process each",
          memory: fs.existsSync(TIME)
            ? "/usr/bin/time -v, Maximum resident set size: the largest single process in the npm → tsx → node tree"
            : "not measured: /usr/bin/time not found",
          stages: STAGES,
          budgetSeconds: BUDGET_SECONDS,
          repeat: REPEAT,
        },
        results: { emptyDataDir: empty, stages, skipped, created },
        raw,
      },
      startedAt,
    );
  } finally {
    await portal.close();
    removeScratch(dir);
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
