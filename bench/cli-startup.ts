/**
 * 7. CLI start-up, compiled vs tsx. Every command is a new process, so its start is part of what a
 * person waits for. Measured in the same run, alternating sample by sample:
 *
 *   compiled  `node bin/action-envelope.mjs ARGS` — the installed command and what `npm run cli` runs
 *             (dist/ from `npm run build`; the bin's freshness check included)
 *   tsx       `tsx src/cli/main.ts ARGS` — what `npm run cli` ran before, now `npm run cli:dev`
 *
 * for `--help`, `pending --json`, `show THREAD` and `approve THREAD` with 10,000 approvals waiting
 * (approve = its three Bitrix24 calls against the embedded emulator at zero latency, ending
 * VERIFIED), plus `npm run cli -- --help` vs `npm run cli:dev -- --help` and `npm start` vs
 * `npm run start:dev` to the card (no terminal: the card is printed and the process exits, each
 * sample on a fresh data directory). Each process runs under /usr/bin/time: wall, user+sys CPU and
 * peak RSS of its largest process.
 *
 * The waiting approvals are created in process against the embedded emulator (its state file in the
 * data directory, pre-seeded with copies of task 4), with the scripted model, so the CLI processes
 * find them exactly as `npm start` would have left them.
 *
 *   npm run bench -- cli-startup [--count 10000] [--samples 5] [--help-samples 10] [--concurrency 20] [--data DIR] [--keep]
 *
 * --data DIR reuses (or creates, and keeps) a prepared data directory, so a re-run skips creation.
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { loadConfig } from "../src/config/env.js";
import { createDeps } from "../src/runtime/deps.js";
import { openApp } from "../src/app/open-app.js";
import { startEmulator } from "../src/offline-demo/emulator/index.js";
import { Store } from "../src/offline-demo/emulator/store.js";
import { ScriptedChatModel } from "../test/support/scripted-model.js";
import {
  intArg,
  pool,
  removeScratch,
  ROOT,
  round,
  summary,
  tempDir,
  TSX,
  writeResult,
} from "./support/common.js";
import { benchSeed, FIRST_BENCH_TASK } from "./support/portal.js";
import { proposeFromRequest, waitingRun } from "./support/app.js";

const COUNT = intArg("count", 10_000);
const SAMPLES = intArg("samples", 5);
const HELP_SAMPLES = intArg("help-samples", 10);
const CONCURRENCY = intArg("concurrency", 20);
const DATA_ARG = (() => {
  const i = process.argv.indexOf("--data");
  return i >= 0 ? path.resolve(process.argv[i + 1] ?? "") : undefined;
})();
const TIME = "/usr/bin/time";
const BIN = path.join(ROOT, "bin/action-envelope.mjs");
const SRC_CLI = path.join(ROOT, "src/cli/main.ts");

type Variant = "compiled" | "tsx";

interface Sample {
  variant: Variant;
  command: string;
  wallMs: number;
  /** user + sys CPU of the process tree that /usr/bin/time waited for. */
  cpuMs: number | null;
  maxRssKb: number | null;
  /** From spawn until stdout first contained the marker (npm start: the card's approve line). */
  markerMs?: number;
  exitCode: number | null;
  rebuilt?: boolean;
}

function timed(
  argv: string[],
  env: Record<string, string>,
  marker?: RegExp,
): Promise<Sample & { stdout: string; stderr: string }> {
  const timeFile = path.join(tempDir("ae-bench-time-"), "time.txt");
  const [cmd, ...rest] = fs.existsSync(TIME) ? [TIME, "-o", timeFile, "-f", "%e %U %S %M", ...argv] : argv;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let markerMs: number | undefined;
    const child = spawn(cmd!, rest, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (marker && markerMs === undefined && marker.test(stdout)) markerMs = performance.now() - t0;
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const wallMs = performance.now() - t0;
      let cpuMs: number | null = null;
      let maxRssKb: number | null = null;
      try {
        const [, user, sys, rss] = fs
          .readFileSync(timeFile, "utf8")
          .trim()
          .split("\n")
          .at(-1)!
          .split(" ")
          .map(Number);
        cpuMs = round((user! + sys!) * 1000);
        maxRssKb = rss!;
      } catch {
        // no /usr/bin/time: wall time only
      }
      fs.rmSync(path.dirname(timeFile), { recursive: true, force: true });
      resolve({
        variant: "compiled",
        command: argv.join(" "),
        wallMs: round(wallMs),
        cpuMs,
        maxRssKb,
        ...(markerMs !== undefined ? { markerMs: round(markerMs) } : {}),
        exitCode: code,
        stdout,
        stderr,
      });
    });
  });
}

/** One CLI process in the given variant; a compiled run refused as stale rebuilds dist/ and runs again. */
async function cli(variant: Variant, args: string[], env: Record<string, string>) {
  const argv = variant === "compiled" ? [process.execPath, BIN, ...args] : [TSX, SRC_CLI, ...args];
  let r = await timed(argv, env);
  let rebuilt = false;
  for (
    let tries = 0;
    variant === "compiled" && r.exitCode === 1 && /dist\/ (?:is older|has not been built)/.test(r.stderr);
    tries++
  ) {
    // Others edit src/ while this runs; the bin refuses stale code, so rebuild and measure again.
    if (tries === 5) throw new Error(`dist/ stayed stale through 5 rebuilds: ${r.stderr}`);
    build();
    rebuilt = true;
    r = await timed(argv, env);
  }
  return {
    ...r,
    variant,
    command: `${variant === "compiled" ? "node bin/action-envelope.mjs" : "tsx src/cli/main.ts"} ${args.join(" ")}`,
    ...(rebuilt ? { rebuilt } : {}),
  };
}

/** An npm script; a compiled sample that had to rebuild dist/ first (others edit src/) is run again. */
async function npmTimed(variant: Variant, argv: string[], env: Record<string, string>, marker?: RegExp) {
  let r = await timed(argv, env, marker);
  if (variant === "compiled" && /building dist\//.test(r.stderr))
    r = { ...(await timed(argv, env, marker)), rebuilt: true };
  return { ...r, variant };
}

function build(): void {
  const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/build.mjs"), "--if-stale", "--quiet"], {
    cwd: ROOT,
    stdio: "inherit",
  });
  if (r.status !== 0) throw new Error("npm run build failed");
}

function jsonOf(stdout: string): any {
  const start = stdout.indexOf("{");
  if (start < 0) throw new Error(`no JSON in output:\n${stdout.slice(0, 2000)}`);
  return JSON.parse(stdout.slice(start));
}

const strip = ({ stdout: _o, stderr: _e, ...s }: Sample & { stdout?: string; stderr?: string }): Sample => s;

/** Both variants, alternating which goes first, `n` times each. */
async function pairs(
  n: number,
  run: (variant: Variant, i: number) => Promise<Sample & { stdout: string; stderr: string }>,
  check: (s: Sample & { stdout: string; stderr: string }) => void,
) {
  const out: Record<Variant, Sample[]> = { compiled: [], tsx: [] };
  for (let i = 0; i < n; i++) {
    const order: Variant[] = i % 2 ? ["tsx", "compiled"] : ["compiled", "tsx"];
    for (const v of order) {
      const s = await run(v, i);
      check(s);
      out[v].push(strip(s));
    }
  }
  return out;
}

function ratio(samples: Record<Variant, Sample[]>, key: "wallMs" | "cpuMs" | "markerMs" = "wallMs") {
  const c = summary(samples.compiled.map((s) => s[key] ?? NaN));
  const t = summary(samples.tsx.map((s) => s[key] ?? NaN));
  return { compiled: c, tsx: t, ratioMedian: round(c.median / t.median, 3) };
}

async function prepare(dataDir: string, env: Record<string, string>): Promise<number> {
  const marker = path.join(dataDir, ".bench-cli-startup.json");
  if (fs.existsSync(marker)) {
    const m = JSON.parse(fs.readFileSync(marker, "utf8")) as { count: number };
    console.log(`reusing ${dataDir}: ${m.count} waiting approvals were created there`);
    return 0;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  // The embedded emulator keeps its seed from the first start: give it COUNT copies of task 4 first.
  const seeded = await startEmulator({
    port: 0,
    rate: 0,
    statePath: path.join(dataDir, "emulator.sqlite"),
    seed: benchSeed(COUNT + 10),
  });
  await seeded.close();
  // Creation only: the embedded emulator this process starts keeps the portal's 2 req/s bucket, which
  // would make 10,000 baseline reads take 80 minutes. Lifted here, in this process; the CLI processes
  // measured below keep the real bucket (an approve's three calls fit its burst of 50).
  const takeRateToken = Store.prototype.takeRateToken;
  Store.prototype.takeRateToken = () => true;
  const { BITRIX24_WEBHOOK_URL: _unset, ...processEnv } = process.env;
  const config = loadConfig({ ...processEnv, ...env } as NodeJS.ProcessEnv, ROOT);
  const app = openApp(
    await createDeps(config, {
      model: new ScriptedChatModel(proposeFromRequest),
      modelLabel: "scripted (bench)",
    }),
  );
  const t0 = performance.now();
  let done = 0;
  try {
    await pool(
      Array.from({ length: COUNT }, (_, i) => FIRST_BENCH_TASK + i),
      CONCURRENCY,
      async (t) => {
        await waitingRun(app, t);
        done += 1;
        if (done % 1000 === 0)
          console.log(`  ${done} waiting (${round(done / ((performance.now() - t0) / 1000))} runs/s)`);
      },
    );
  } finally {
    await app.close();
    Store.prototype.takeRateToken = takeRateToken;
  }
  const seconds = (performance.now() - t0) / 1000;
  fs.writeFileSync(marker, JSON.stringify({ count: COUNT, createSeconds: round(seconds) }));
  return seconds;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  build();
  const dir = tempDir("ae-bench-cli-");
  const dataDir = DATA_ARG ?? path.join(dir, "data");
  // The embedded emulator (no BITRIX24_WEBHOOK_URL), zero latency, no rate limit; the offline model.
  const env: Record<string, string> = {
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir}.journal.key`,
    MODEL: "offline",
    BITRIX24_RATE: "0",
    BITRIX24_WEBHOOK_URL: "",
  };
  try {
    const expectExit0 =
      (what: string) => (s: { exitCode: number | null; stderr: string; command: string }) => {
        if (s.exitCode !== 0)
          throw new Error(`${what}: ${s.command} exited ${s.exitCode}: ${s.stderr.slice(-1500)}`);
      };

    console.log(`creating ${COUNT} waiting approvals in ${dataDir}`);
    const createSeconds = await prepare(dataDir, env);

    console.log(`--help, ${HELP_SAMPLES} each`);
    const help = await pairs(HELP_SAMPLES, (v) => cli(v, ["--help"], env), expectExit0("--help"));
    const npmHelp = await pairs(
      Math.min(HELP_SAMPLES, 5),
      (v) =>
        npmTimed(v, ["npm", "run", "--silent", v === "compiled" ? "cli" : "cli:dev", "--", "--help"], env),
      expectExit0("npm run cli -- --help"),
    );

    console.log(`npm start to the card, ${SAMPLES} each, a fresh data directory per sample`);
    const cardLine = /Approve exactly this envelope/;
    const npmStart = await pairs(
      SAMPLES,
      async (v, i) => {
        const fresh = path.join(dir, `start-${v}-${i}`);
        // A fresh data directory per sample (a second sample would find task 4 leased by the first's approval).
        const startEnv = {
          ...env,
          ACTION_ENVELOPE_DATA_DIR: fresh,
          ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${fresh}.journal.key`,
        };
        return npmTimed(
          v,
          ["npm", "run", "--silent", v === "compiled" ? "start" : "start:dev"],
          startEnv,
          cardLine,
        );
      },
      (s) => {
        expectExit0("npm start")(s);
        if (s.markerMs === undefined) throw new Error(`npm start printed no card:\n${s.stdout.slice(-1500)}`);
      },
    );

    console.log(`pending --json, ${SAMPLES} each`);
    let listed: Array<{ threadId: string; envelopeHash: string }> = [];
    let total = 0;
    const pending = await pairs(
      SAMPLES,
      (v) => cli(v, ["pending", "--json"], env),
      (s) => {
        expectExit0("pending --json")(s);
        const page = jsonOf(s.stdout);
        listed = page.pending;
        total = page.total;
      },
    );
    // Each run approves 2 × SAMPLES of them, so a reused data directory holds a few fewer every time.
    if (total < COUNT * 0.99)
      throw new Error(`pending --json reports ${total} waiting, expected about ${COUNT}`);
    // Every page of 100 is the same size; `show` and `approve` take threads from all over the list.
    const all = await cli("compiled", ["pending", "--json", "--limit", String(total), "--offset", "0"], env);
    listed = jsonOf(all.stdout).pending;
    const picks = [...listed].sort(() => Math.random() - 0.5).slice(0, 2 * SAMPLES);

    console.log(`show THREAD, ${SAMPLES} each`);
    const show = await pairs(
      SAMPLES,
      (v, i) => cli(v, ["show", picks[i]!.threadId], env),
      (s) => {
        expectExit0("show")(s);
        if (!/Approve exactly this envelope/.test(s.stdout))
          throw new Error(`show printed no card:\n${s.stdout.slice(-1500)}`);
      },
    );

    console.log(`approve THREAD, ${SAMPLES} each (a different thread each time)`);
    let k = 0;
    const outcomes: string[] = [];
    const approve = await pairs(
      SAMPLES,
      (v) => {
        const p = picks[k++]!;
        return cli(
          v,
          ["approve", p.threadId, "--hash", p.envelopeHash, "--as", "demo-approver", "--json"],
          env,
        );
      },
      (s) => {
        expectExit0("approve")(s);
        const outcome = jsonOf(s.stdout).outcome;
        outcomes.push(outcome);
        if (outcome !== "VERIFIED") throw new Error(`approve ended ${outcome}`);
      },
    );

    const results = {
      help: ratio(help),
      helpCpu: ratio(help, "cpuMs"),
      npmRunCliHelp: ratio(npmHelp),
      npmStartToCard: ratio(npmStart, "markerMs"),
      npmStartExit: ratio(npmStart),
      pendingJson: ratio(pending),
      pendingJsonCpu: ratio(pending, "cpuMs"),
      show: ratio(show),
      showCpu: ratio(show, "cpuMs"),
      approve: ratio(approve),
      approveCpu: ratio(approve, "cpuMs"),
    };
    const table = Object.entries(results).map(([name, r]) => ({
      measure: name,
      compiledMedianMs: r.compiled.median,
      tsxMedianMs: r.tsx.median,
      ratio: r.ratioMedian,
    }));
    console.table(table);
    writeResult(
      "cli-startup",
      {
        setup: {
          compiled:
            "node bin/action-envelope.mjs ARGS (dist/ built by scripts/build.mjs before the run; the bin's freshness check included)",
          tsx: "node_modules/.bin/tsx src/cli/main.ts ARGS",
          npm: "npm run --silent cli -- --help vs npm run --silent cli:dev -- --help; npm start --silent vs npm run start:dev --silent",
          portal:
            "embedded emulator (no BITRIX24_WEBHOOK_URL), state file in the data directory, rate 0, no latency; MODEL=offline",
          waiting: `${COUNT} waiting approvals created in process (scripted model, ${CONCURRENCY} at a time) before pending/show/approve`,
          timing:
            "/usr/bin/time -f '%e %U %S %M' around each process; wall from spawn to exit in this process; npm start's markerMs = until stdout showed 'Approve exactly this envelope'",
          samples: SAMPLES,
          helpSamples: HELP_SAMPLES,
        },
        results: {
          ...results,
          waiting: total,
          createSeconds: round(createSeconds),
          approveOutcomes: outcomes,
        },
        raw: { help, npmHelp, npmStart, pending, show, approve },
      },
      startedAt,
    );
  } finally {
    if (!DATA_ARG) removeScratch(dir);
    else fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
