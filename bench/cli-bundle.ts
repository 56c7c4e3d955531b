/**
 * 11. The CPU of one CLI process, module tree vs bundle. The test suite starts hundreds of CLI
 * processes and is CPU-bound on its 2 cores, so each command's start is paid many times over. Two
 * builds of the same CLI, alternating sample by sample in one run:
 *
 *   modules  `node dist/cli/main.js ARGS`: the module tree tsc writes (every file resolved and read one by one)
 *   bundle   `node dist/cli-bundle/main.js ARGS`: the same code bundled with splitting (scripts/build.mjs),
 *            what bin/action-envelope.mjs and the test suite run
 *
 * for `--help`, `pending --json`, `audit list`, `show THREAD` (one waiting approval) and `approve
 * THREAD` (each sample on a fresh data directory where `start --no-prompt` left one approval; ends
 * VERIFIED). Each process runs under /usr/bin/time: user + sys CPU of it and its children (approve:
 * the MCP server child and the embedded emulator it starts), and wall time.
 *
 *   npm run bench -- cli-bundle [--samples 3]
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { intArg, removeScratch, ROOT, round, summary, tempDir, writeResult } from "./support/common.js";

const SAMPLES = intArg("samples", 3);
const VARIANTS = { modules: "dist/cli/main.js", bundle: "dist/cli-bundle/main.js" } as const;
type Variant = keyof typeof VARIANTS;
const TIME = "/usr/bin/time";

interface Sample {
  wallMs: number;
  cpuMs: number;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

function timed(variant: Variant, args: string[], env: Record<string, string>): Promise<Sample> {
  const timeFile = path.join(tempDir("ae-bench-time-"), "time.txt");
  const argv = [
    TIME,
    "-o",
    timeFile,
    "-f",
    "%U %S",
    process.execPath,
    path.join(ROOT, VARIANTS[variant]),
    ...args,
  ];
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), {
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
      const [user, sys] = fs.readFileSync(timeFile, "utf8").trim().split("\n").at(-1)!.split(" ").map(Number);
      fs.rmSync(path.dirname(timeFile), { recursive: true, force: true });
      resolve({
        wallMs: round(performance.now() - t0),
        cpuMs: round((user! + sys!) * 1000),
        exitCode: code,
        stdout,
        stderr,
      });
    });
  });
}

/** A data directory where `start --no-prompt` left one approval waiting: its approve arguments. */
async function waiting(
  dir: string,
  env: Record<string, string>,
): Promise<{ env: Record<string, string>; thread: string; hash: string }> {
  const dataDir = fs.mkdtempSync(path.join(dir, "data-"));
  const own = {
    ...env,
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir}.journal.key`,
  };
  const r = await timed("bundle", ["start", "--no-prompt"], own);
  const m = /approve (\S+) --hash (\S+)/.exec(r.stdout);
  if (r.exitCode !== 0 || !m)
    throw new Error(
      `start left no approval (exit ${r.exitCode}):\n${r.stdout.slice(-1000)}${r.stderr.slice(-1000)}`,
    );
  return { env: own, thread: m[1]!, hash: m[2]! };
}

async function main(): Promise<void> {
  const startedAt = new Date();
  if (!fs.existsSync(TIME)) throw new Error(`${TIME} is needed to measure a process's CPU`);
  const built = spawnSync(process.execPath, [path.join(ROOT, "scripts/build.mjs"), "--if-stale", "--quiet"], {
    cwd: ROOT,
    stdio: "inherit",
  });
  if (built.status !== 0) throw new Error("npm run build failed");
  const dir = tempDir("ae-bench-cli-bundle-");
  // The embedded emulator (no BITRIX24_WEBHOOK_URL), no rate limit; the offline model.
  const base: Record<string, string> = { MODEL: "offline", BITRIX24_RATE: "0", BITRIX24_WEBHOOK_URL: "" };
  try {
    const shared = await waiting(dir, base);
    const commands: Record<string, (variant: Variant) => Promise<Sample>> = {
      help: (v) => timed(v, ["--help"], shared.env),
      pendingJson: (v) => timed(v, ["pending", "--json"], shared.env),
      auditList: (v) => timed(v, ["audit", "list"], shared.env),
      show: (v) => timed(v, ["show", shared.thread], shared.env),
      approve: async (v) => {
        const w = await waiting(dir, base);
        const r = await timed(v, ["approve", w.thread, "--hash", w.hash, "--as", "demo-approver"], w.env);
        if (!/OUTCOME VERIFIED/.test(r.stdout))
          throw new Error(`approve did not end VERIFIED:\n${r.stdout.slice(-1500)}${r.stderr.slice(-1500)}`);
        return r;
      },
    };
    const results: Record<string, unknown> = {};
    const table: Array<Record<string, unknown>> = [];
    for (const [name, run] of Object.entries(commands)) {
      const raw: Record<Variant, Array<{ wallMs: number; cpuMs: number }>> = { modules: [], bundle: [] };
      for (let i = 0; i < SAMPLES; i++) {
        for (const v of (i % 2 ? ["bundle", "modules"] : ["modules", "bundle"]) as Variant[]) {
          const s = await run(v);
          if (s.exitCode !== 0)
            throw new Error(`${name} (${v}) exited ${s.exitCode}: ${s.stderr.slice(-1500)}`);
          raw[v].push({ wallMs: s.wallMs, cpuMs: s.cpuMs });
        }
      }
      const cpu = {
        modules: summary(raw.modules.map((s) => s.cpuMs)),
        bundle: summary(raw.bundle.map((s) => s.cpuMs)),
      };
      const wall = {
        modules: summary(raw.modules.map((s) => s.wallMs)),
        bundle: summary(raw.bundle.map((s) => s.wallMs)),
      };
      const ratio = round(cpu.bundle.median / cpu.modules.median, 3);
      results[name] = { cpuMs: cpu, wallMs: wall, bundleOverModulesCpu: ratio, raw };
      table.push({ command: name, modulesCpuMs: cpu.modules.median, bundleCpuMs: cpu.bundle.median, ratio });
    }
    console.table(table);
    const file = writeResult(
      "cli-bundle",
      {
        setup: {
          modules: "node dist/cli/main.js ARGS",
          bundle: "node dist/cli-bundle/main.js ARGS (what bin/action-envelope.mjs runs)",
          portal:
            "embedded emulator (no BITRIX24_WEBHOOK_URL), rate 0; MODEL=offline; one approval waiting (approve: a fresh data directory per sample)",
          timing: "/usr/bin/time -f '%U %S' around each process (children included); median of the samples",
          samples: SAMPLES,
        },
        results,
      },
      startedAt,
    );
    console.log(`→ ${file}`);
  } finally {
    removeScratch(dir);
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
