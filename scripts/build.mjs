#!/usr/bin/env node
/**
 * Builds dist/ from src/ (`tsc -p tsconfig.build.json`, incremental). Used by `npm run build`, by
 * `prepare` (so `npm ci` builds), by `npm start` / `npm run cli` and by the test suite's global setup
 * with --if-stale, which builds only when a file under src/ (or a tsconfig) is newer than the last
 * successful build.
 *
 * dist/.build-stamp marks a successful build; its mtime is when that build *started*, so a source
 * edited while tsc was running still counts as newer. One build at a time per checkout (a lock
 * directory); whoever waited re-checks before building again.
 *
 *   node scripts/build.mjs [--if-stale] [--quiet]
 *
 * Type errors fail a plain build; with --if-stale the files tsc wrote anyway are used (as tsx would
 * have run them) and one line says so.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { CLI_BUNDLE, distProblem, MCP_BUNDLE, ROOT, STAMP } from "./dist-check.mjs";

const args = process.argv.slice(2);
const ifStale = args.includes("--if-stale");
const quiet = args.includes("--quiet");
const LOCK = path.join(ROOT, "dist", ".build-lock");
const STARTED = path.join(ROOT, "dist", ".build-started");

function lock() {
  fs.mkdirSync(path.dirname(LOCK), { recursive: true });
  const deadline = Date.now() + 180_000;
  for (;;) {
    try {
      fs.mkdirSync(LOCK);
      fs.writeFileSync(path.join(LOCK, "pid"), String(process.pid));
      return;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
      // A lock whose build process is gone (Ctrl-C, a crash), or older than three minutes, is stale.
      try {
        const pid = Number(fs.readFileSync(path.join(LOCK, "pid"), "utf8"));
        if (!alive(pid) || Date.now() - fs.statSync(LOCK).mtimeMs > 180_000)
          fs.rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // The holder removed the lock meanwhile: try again.
      }
      if (Date.now() > deadline)
        throw new Error(`another build holds ${LOCK}; remove it if no build is running`); // eslint-disable-line preserve-caught-error -- no error is being wrapped here
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
}

function alive(pid) {
  if (!Number.isSafeInteger(pid) || pid <= 0) return true; // pid not written yet: the holder is starting
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

function build() {
  if (ifStale && !distProblem()) return 0;
  lock();
  try {
    // Someone else may have built while we waited for the lock.
    const problem = distProblem();
    if (ifStale && !problem) return 0;
    if (!quiet && problem && ifStale) process.stderr.write(`${problem}; building dist/ (npm run build)…\n`);
    fs.writeFileSync(STARTED, `${new Date().toISOString()}\n`);
    const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
    if (!fs.existsSync(tsc)) {
      process.stderr.write(
        "cannot build dist/: typescript is not installed (run npm ci, without --omit=dev)\n",
      );
      return 1;
    }
    const r = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], {
      cwd: ROOT,
      stdio: "inherit",
    });
    // tsc exits 2 when it reported type errors but wrote every file. `npm run build` (and `npm ci`)
    // fail on them; --if-stale (npm start, npm run cli, the test suite) goes on with what was written,
    // as tsx did, saying so, so a type error in work in progress does not stop every command.
    if (r.status === 2 && ifStale) {
      process.stderr.write("dist/ built with type errors (above); `npm run typecheck` lists them\n");
    } else if (r.status !== 0) {
      process.stderr.write("the build failed: tsc reported errors (above); dist/ stays marked out of date\n");
      return r.status ?? 1;
    }
    const bundled = bundleMcpServer();
    if (bundled !== 0) return bundled;
    const cli = bundleCli();
    if (cli !== 0) return cli;
    fs.renameSync(STARTED, STAMP);
    return 0;
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true });
  }
}

/**
 * The stdio MCP server starts once for every process that reads or writes the portal (each `approve`,
 * `run`, `recover`, the worker). As one bundled file, its SDK and zod included, it starts on about half
 * the CPU of the module tree tsc wrote (`npm run bench -- mcp-start`). dist/tools/mcp-stdio.js stays
 * the same server unbundled; src/tools/bitrix24-tools.ts spawns the bundle when it is there.
 */
function bundleMcpServer() {
  const esbuild = loadEsbuild("the MCP server");
  if (!esbuild) return 1;
  const r = esbuild.buildSync({
    entryPoints: [path.join(ROOT, "dist/tools/mcp-stdio.js")],
    outfile: path.join(ROOT, MCP_BUNDLE),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "error",
    banner: { js: REQUIRE_BANNER },
  });
  return r.errors.length === 0 ? 0 : 1;
}

/** CommonJS dependencies inside an ES module bundle call require(); give them node's. */
const REQUIRE_BANNER =
  "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);";

function loadEsbuild(what) {
  try {
    return createRequire(import.meta.url)("esbuild");
  } catch {
    process.stderr.write(`cannot bundle ${what}: esbuild is not installed (run npm ci)\n`);
    return undefined;
  }
}

/**
 * The test suite starts hundreds of CLI processes, and each spent most of its CPU resolving and
 * reading the module tree tsc wrote (LangGraph, @langchain/core, the MCP SDK: some 750 files for a
 * decision). Bundled from the same dist/cli/main.js, with splitting, each command's dynamic import()
 * stays a chunk of its own, so `pending` still loads no graph and `--help` no store: the same modules
 * load, from a few large files (`npm run bench -- cli-startup`). bin/action-envelope.mjs runs it when
 * it belongs to the current build (scripts/dist-check.mjs, freshCliBundle). Left outside: native
 * addons, packages resolved or spawned by path at run time, and development tools.
 */
function bundleCli() {
  const esbuild = loadEsbuild("the CLI");
  if (!esbuild) return 1;
  const outdir = path.join(ROOT, path.dirname(CLI_BUNDLE));
  const r = esbuild.buildSync({
    entryPoints: { [path.basename(CLI_BUNDLE, ".js")]: path.join(ROOT, "dist/cli/main.js") },
    outdir,
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "error",
    external: [
      "better-sqlite3",
      "pg-native",
      "playwright-core",
      "@langchain/langgraph-api",
      "@langchain/langgraph-cli",
      "esbuild",
      "tsx",
      "vite",
      "vitest",
    ],
    banner: { js: REQUIRE_BANNER },
    metafile: true,
    absWorkingDir: ROOT,
  });
  if (r.errors.length > 0) return 1;
  pruneChunks(outdir, new Set(Object.keys(r.metafile.outputs).map((f) => path.resolve(ROOT, f))));
  return 0;
}

/**
 * Chunk names change with their content. A process started from the previous build (a worker, a
 * waiting `start`) may still import its chunks lazily, so they stay for a day; older ones go.
 */
function pruneChunks(outdir, current) {
  const dayAgo = Date.now() - 86_400_000;
  for (const name of fs.readdirSync(outdir)) {
    const file = path.join(outdir, name);
    if (!current.has(file) && fs.statSync(file).mtimeMs < dayAgo) fs.rmSync(file, { force: true });
  }
}

process.exitCode = build();
