/**
 * `client.assistants.getSchemas` against `npm run dev` (src/cli/dev-server.ts → `langgraphjs dev`):
 * what Studio asks for before it can draw the input form and the state view. The first call on a
 * fresh server is the one that matters (the server caches a schema once extracted), so each sample
 * starts its own server; the later calls on the same server are reported separately.
 *
 *   npx tsx bench/get-schemas.ts [--servers 3] [--warm 10] [--root DIR] [--out NAME]
 *
 * --root measures another checkout of this project (for a before/after comparison, e.g. an
 * exported older commit with node_modules linked); its langgraph.json is used. The SDK's own retries
 * are off (maxRetries 0), so a failure is reported as one, not hidden in a retry.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { Client } from "@langchain/langgraph-sdk";
import { ROOT, TSX, intArg, round, summary, tempDir, writeResult } from "./support/common.js";

const GRAPH_ID = "bitrix24_task_agent";

function argValue(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}

/** langgraph.json of `root` with absolute graph and auth paths, in a scratch directory (the server keeps state beside it). */
function isolatedConfig(root: string): { dir: string; file: string } {
  const repo = JSON.parse(fs.readFileSync(path.join(root, "langgraph.json"), "utf8")) as {
    graphs: Record<string, string>;
    auth?: { path: string };
  };
  const abs = (spec: string) => {
    const [file, symbol] = spec.split(":");
    return `${path.resolve(root, file!)}:${symbol}`;
  };
  const dir = tempDir("ae-bench-schemas-");
  fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"), "dir");
  const graphs = Object.fromEntries(Object.entries(repo.graphs).map(([id, spec]) => [id, abs(spec)]));
  const file = path.join(dir, "langgraph.json");
  fs.writeFileSync(
    file,
    JSON.stringify(
      { ...repo, graphs, ...(repo.auth ? { auth: { ...repo.auth, path: abs(repo.auth.path) } } : {}) },
      null,
      2,
    ),
  );
  return { dir, file };
}

async function startServer(
  root: string,
  dataDir: string,
): Promise<{ apiUrl: string; child: ChildProcess; startupMs: number }> {
  const { file } = isolatedConfig(root);
  const started = performance.now();
  const child = spawn(
    path.join(root, "node_modules/.bin/tsx"),
    [path.join(root, "src/cli/dev-server.ts"), "--config", file, "--no-reload"],
    {
      cwd: root,
      env: {
        ...process.env,
        MODEL: "offline",
        ACTION_ENVELOPE_DATA_DIR: dataDir,
        ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${dataDir}.journal.key`,
        NO_COLOR: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const apiUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dev server not ready in 180 s\n${out}`)), 180_000);
    child.stdout!.on("data", () => {
      const m = /API:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`dev server exited ${code}\n${out}`));
    });
  });
  return { apiUrl, child, startupMs: performance.now() - started };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGINT");
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
}

async function timed(
  client: Client,
): Promise<{ ms: number; ok: boolean; error?: string; inputRequired?: unknown; inputFields?: string[] }> {
  const t0 = performance.now();
  try {
    const s = await client.assistants.getSchemas(GRAPH_ID);
    const input = s.input_schema as { required?: unknown; properties?: Record<string, unknown> } | undefined;
    return {
      ms: performance.now() - t0,
      ok: true,
      inputRequired: input?.required ?? null,
      inputFields: Object.keys(input?.properties ?? {}),
    };
  } catch (e) {
    return { ms: performance.now() - t0, ok: false, error: String((e as Error).message ?? e).slice(0, 300) };
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const root = path.resolve(argValue("root") ?? ROOT);
  const servers = intArg("servers", 3);
  const warm = intArg("warm", 10);
  const cold: Array<Awaited<ReturnType<typeof timed>> & { startupMs: number }> = [];
  const warmSamples: number[] = [];
  for (let i = 0; i < servers; i++) {
    const dataDir = tempDir("ae-bench-schemas-data-");
    const { apiUrl, child, startupMs } = await startServer(root, dataDir);
    try {
      const client = new Client({ apiUrl, defaultHeaders: {}, callerOptions: { maxRetries: 0 } });
      const first = await timed(client);
      cold.push({ ...first, startupMs: round(startupMs) });
      console.log(
        `server ${i + 1}/${servers}: first getSchemas ${round(first.ms)} ms ${first.ok ? "ok" : `FAILED ${first.error}`} (server start ${round(startupMs / 1000, 1)} s)`,
      );
      for (let j = 0; j < warm; j++) {
        const r = await timed(client);
        if (r.ok) warmSamples.push(r.ms);
      }
    } finally {
      await stop(child);
    }
  }
  const coldMs = cold.filter((c) => c.ok).map((c) => c.ms);
  console.log(
    `first call per server: ${JSON.stringify(summary(coldMs))} ms; failures ${cold.filter((c) => !c.ok).length}`,
  );
  console.log(`later calls: ${JSON.stringify(summary(warmSamples))} ms`);
  writeResult(
    "get-schemas",
    {
      measured: root === ROOT ? "this working tree" : root,
      flags: { servers, warm },
      firstCallMs: summary(coldMs),
      laterCallsMs: summary(warmSamples),
      failures: cold.filter((c) => !c.ok).length,
      samples: { cold: cold.map((c) => ({ ...c, ms: round(c.ms) })), warm: warmSamples.map((x) => round(x)) },
    },
    startedAt,
    argValue("out") ?? "get-schemas",
  );
}

void TSX;
main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
