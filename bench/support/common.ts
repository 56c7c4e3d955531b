/**
 * What every benchmark records next to its numbers: the machine, the versions, the exact command and
 * the raw samples. Absolute times on a shared 2-core machine are noisy, so each benchmark reports
 * ratios between things measured in the same run; the raw samples are kept so anyone can recompute.
 */
import { execSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const RESULTS_DIR = path.join(ROOT, "bench/results");
export const TSX = path.join(ROOT, "node_modules/.bin/tsx");

const KEY_PACKAGES = [
  "@langchain/langgraph",
  "@langchain/langgraph-checkpoint",
  "@langchain/langgraph-checkpoint-sqlite",
  "@langchain/core",
  "@langchain/mcp-adapters",
  "@modelcontextprotocol/sdk",
  "better-sqlite3",
  "canonicalize",
  "zod",
  "hono",
  "tsx",
];

/** Load when this benchmark process started; the machine is shared, so this says how busy it was. */
const LOAD_AT_START = os.loadavg().map((x) => Math.round(x * 100) / 100);

export function machine() {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    totalMemBytes: os.totalmem(),
    freeMemBytes: os.freemem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAverageAtStart: LOAD_AT_START,
    loadAverageAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

export function versions(): Record<string, string> {
  const out: Record<string, string> = {
    node: process.version,
    v8: process.versions.v8,
    sqlite: sqliteVersion(),
  };
  for (const name of KEY_PACKAGES) {
    try {
      const pkg = JSON.parse(
        fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8"),
      ) as { version: string };
      out[name] = pkg.version;
    } catch {
      out[name] = "not installed";
    }
  }
  return out;
}

function sqliteVersion(): string {
  const db = new Database(":memory:");
  try {
    return (db.prepare("select sqlite_version() as v").get() as { v: string }).v;
  } finally {
    db.close();
  }
}

/** The commit measured, and which source files differed from it (others edit the tree while we run). */
export function codeState(): { commit: string | null; dirty: string[] } {
  try {
    const commit = execSync("git rev-parse HEAD", { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim();
    const dirty = execSync("git status --porcelain -- src policy", {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "ignore"],
    })
      .toString()
      .split("\n")
      .filter(Boolean);
    return { commit, dirty };
  } catch {
    return { commit: null, dirty: [] };
  }
}

const CODE_AT_START = codeState();

/** How this benchmark was started: `npm run bench -- NAME` sets BENCH_INVOKED_AS; otherwise the direct tsx line. */
export function command(name: string): { command: string; direct: string } {
  const args = process.argv.slice(2);
  const direct = `npx tsx bench/${name}.ts${args.length ? ` ${args.join(" ")}` : ""}`;
  return { command: process.env.BENCH_INVOKED_AS ?? direct, direct };
}

export function flag(name: string): boolean {
  return process.argv.includes(`--${name}`);
}

export function intArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isSafeInteger(v) || v <= 0)
    throw new Error(`--${name} expects a positive integer, got ${process.argv[i + 1]}`);
  return v;
}

export function strArg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = process.argv[i + 1];
  if (!v || v.startsWith("--")) throw new Error(`--${name} expects a value`);
  return v;
}

export function numArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0)
    throw new Error(`--${name} expects a positive number, got ${process.argv[i + 1]}`);
  return v;
}

export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  // Nearest rank: p95 of 40 samples is the 38th, a real sample rather than an interpolation.
  const rank = Math.max(1, Math.ceil(q * s.length));
  return s[rank - 1]!;
}

export const median = (xs: number[]) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
export const p95 = (xs: number[]) => quantile(xs, 0.95);
export const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function summary(xs: number[]) {
  return {
    n: xs.length,
    median: round(median(xs)),
    p95: round(p95(xs)),
    mean: round(mean(xs)),
    min: round(Math.min(...xs)),
    max: round(Math.max(...xs)),
  };
}

/** Writes bench/results/FILE.json (FILE defaults to the benchmark's name). */
export function writeResult(
  name: string,
  body: Record<string, unknown>,
  startedAt: Date,
  file = name,
): string {
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const out = path.join(RESULTS_DIR, `${file}.json`);
  const record = {
    benchmark: name,
    date: startedAt.toISOString(),
    durationSeconds: round((Date.now() - startedAt.getTime()) / 1000, 1),
    ...command(name),
    // Others commit while a long benchmark runs: the code it started with, and what HEAD was at the end.
    code: { ...CODE_AT_START, atEnd: codeState() },
    machine: machine(),
    versions: versions(),
    ...body,
  };
  fs.writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
  console.log(`written ${path.relative(process.cwd(), out)}`);
  return out;
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Deletes a benchmark's scratch directory (10,000 waiting runs are ~430 MB) unless --keep is given. */
export function removeScratch(dir: string): void {
  if (flag("keep")) {
    console.log(`kept ${dir}`);
    return;
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function pool<T, R>(
  items: T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
