/**
 * Runs the benchmarks, each in its own process so one cannot warm up, slow down or leak state into
 * the next. Not part of `npm test`.
 *
 *   npm run bench                          every benchmark, in the order below
 *   npm run bench -- NAME [NAME…] [flags]  the named ones; flags go to each (see each file's header)
 *   npm run bench -- --list
 *   npm run bench -- control-overhead post-approval-latency --quick   issue 25's figures in a few minutes
 *   npx tsx bench/table.ts [--quick]       prints bench/README.md's current table from the results
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { ROOT, TSX } from "./support/common.js";

const BENCHMARKS: Record<string, string> = {
  "envelope-core": "canonicalise + hash, compare, verify, card: per-operation cost of the pure core",
  "control-overhead":
    "ours from interrupt to VERIFIED vs a bare LangGraph graph making the same three calls: latency, CPU, throughput at 50, commits and fsyncs",
  "post-approval-latency": "resume to outcome with 50 ms emulator latency vs the same three calls alone",
  "rate-limit":
    "200 approved actions against the portal's leaky bucket (scaled to 20 req/s; --full for 2 req/s)",
  "pending-scale": "1,000 and 10,000 waiting approvals: bytes, pending --json time and memory, approve one",
  "pending-scale-pg":
    "100,000 waiting approvals in PostgreSQL (real runs + sealed index-only replicas), 4 workers: bytes, pending, show, approve",
  "scale-pg":
    "1,000 / 10,000 / 100,000 waiting in PostgreSQL: idle worker round, pending pages and --limit all, 1,000 expiring at once with 4 workers",
  "audit-view":
    "one thread's evidence view (audit show, the inbox's evidence page) at 1,000 / 10,000 / 50,000 records vs the whole chain's check",
  "get-schemas": "client.assistants.getSchemas on fresh npm run dev servers: first call and later calls",
  "object-lease":
    "the object lease: its share of one uncontended action, and N actions on one task vs on N tasks",
  "cli-startup":
    "CLI processes compiled vs tsx: --help, npm start to the card, pending/show/approve among 10,000 waiting",
  "mcp-start": "the stdio MCP server's start, module tree vs one bundled file: ready time and CPU",
  "cli-bundle":
    "CPU of one CLI process, module tree vs bundle: --help, pending --json, audit list, show, approve",
};

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  if (args.includes("--list") || args.includes("--help")) {
    for (const [name, what] of Object.entries(BENCHMARKS)) console.log(`${name.padEnd(24)} ${what}`);
    return 0;
  }
  const names = args.filter(
    (a, i) =>
      !a.startsWith("--") &&
      !(i > 0 && args[i - 1]!.startsWith("--") && !(args[i - 1]! in FLAGS_WITHOUT_VALUE)),
  );
  const flags = args.filter((a) => !names.includes(a));
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length) {
    console.error(
      `unknown benchmark ${unknown.join(", ")}; expected one of: ${Object.keys(BENCHMARKS).join(", ")}`,
    );
    return 1;
  }
  const selected = names.length ? names : Object.keys(BENCHMARKS);
  const invokedAs = `npm run bench${args.length ? ` -- ${args.join(" ")}` : ""}`;
  let failed = 0;
  for (const name of selected) {
    console.log(`\n=== ${name}: ${BENCHMARKS[name]} ===`);
    const code = await new Promise<number>((resolve) => {
      const child = spawn(TSX, [path.join("bench", `${name}.ts`), ...flags], {
        cwd: ROOT,
        stdio: "inherit",
        env: { ...process.env, BENCH_INVOKED_AS: invokedAs },
      });
      child.on("close", (c) => resolve(c ?? 1));
    });
    if (code !== 0) {
      console.error(`${name} failed with exit code ${code}`);
      failed += 1;
    }
  }
  return failed ? 1 : 0;
}

/** Flags that take no value, so the word after them is a benchmark name. */
const FLAGS_WITHOUT_VALUE: Record<string, true> = {
  "--full": true,
  "--keep": true,
  "--list": true,
  "--help": true,
  "--quick": true,
};

main().then((code) => (process.exitCode = code));
