/**
 * 10. The stdio MCP server's start: every process that reads or writes the portal (each `approve`,
 * `run`, `recover`, a worker, each in-process app of the test suite) spawns one. Two builds of the same
 * server, alternating sample by sample in one run:
 *
 *   modules  `node dist/tools/mcp-stdio.js`: the module tree tsc writes (SDK, zod and our files resolved one by one)
 *   bundle   `node dist/tools/mcp-stdio.bundle.js`: the same code as one file (scripts/build.mjs, esbuild)
 *
 * Each sample: spawn through the MCP SDK's stdio client (as src/tools/bitrix24-tools.ts does), connect,
 * list the tools; wall time to the listing, and the server process's user + sys CPU from /proc at
 * that point (its start-up cost).
 *
 *   npm run bench -- mcp-start [--samples 20]
 */
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { intArg, median, ROOT, round, summary, writeResult } from "./support/common.js";

const SAMPLES = intArg("samples", 20);
const VARIANTS = { modules: "dist/tools/mcp-stdio.js", bundle: "dist/tools/mcp-stdio.bundle.js" } as const;
type Variant = keyof typeof VARIANTS;
/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

async function sample(entry: string): Promise<{ wallMs: number; cpuMs: number; tools: number }> {
  const started = performance.now();
  // Nothing is called: the webhook only has to be a URL.
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(ROOT, entry)],
    env: { PATH: process.env["PATH"] ?? "", BITRIX24_WEBHOOK_URL: "http://127.0.0.1:9/rest/1/bench/" },
    stderr: "inherit",
  });
  const client = new Client({ name: "bench-mcp-start", version: "1" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const wallMs = performance.now() - started;
  const stat = fs.readFileSync(`/proc/${transport.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const cpuMs = ((Number(stat[11]) + Number(stat[12])) * 1000) / USER_HZ;
  await client.close();
  return { wallMs, cpuMs, tools: tools.length };
}

async function main(): Promise<void> {
  const startedAt = new Date();
  for (const entry of Object.values(VARIANTS)) {
    if (!fs.existsSync(path.join(ROOT, entry))) throw new Error(`expected ${entry}; run npm run build first`);
  }
  const samples: Record<Variant, Array<{ wallMs: number; cpuMs: number }>> = { modules: [], bundle: [] };
  const tools = new Set<number>();
  // One warm-up each (file cache), then alternate so both see the same machine.
  for (const entry of Object.values(VARIANTS)) await sample(entry);
  for (let i = 0; i < SAMPLES; i++) {
    for (const variant of Object.keys(VARIANTS) as Variant[]) {
      const s = await sample(VARIANTS[variant]);
      tools.add(s.tools);
      samples[variant].push(s);
    }
  }
  if (tools.size !== 1)
    throw new Error(`the two builds list different tool counts: ${[...tools].join(", ")}`);
  const of = (v: Variant) => ({
    readyMs: summary(samples[v].map((s) => s.wallMs)),
    cpuMs: summary(samples[v].map((s) => s.cpuMs)),
  });
  const ratio = (key: "wallMs" | "cpuMs") =>
    round(median(samples.bundle.map((s) => s[key])) / median(samples.modules.map((s) => s[key])));
  const result = {
    samples: SAMPLES,
    tools: [...tools][0],
    modules: of("modules"),
    bundle: of("bundle"),
    bundleOverModules: { readyMs: ratio("wallMs"), cpuMs: ratio("cpuMs") },
  };
  const file = writeResult("mcp-start", result, startedAt);
  console.log(
    `modules: ready ${round(result.modules.readyMs.median)} ms, CPU ${round(result.modules.cpuMs.median)} ms (median of ${SAMPLES})`,
  );
  console.log(
    `bundle:  ready ${round(result.bundle.readyMs.median)} ms, CPU ${round(result.bundle.cpuMs.median)} ms`,
  );
  console.log(
    `bundle / modules: ready ${result.bundleOverModules.readyMs}×, CPU ${result.bundleOverModules.cpuMs}×  → ${file}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
