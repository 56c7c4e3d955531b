/**
 * vitest globalSetup: the CLI processes tests start run the compiled dist/ (test/support/harness.ts
 * CLI), and so does the MCP server that in-process code spawns. Build it first whenever anything under
 * src/ is newer than the last build (incremental tsc; when it is current, only a stat walk of src/).
 * A failed build stops the run. It then bundles the TypeScript scripts tests start as processes
 * (SUPPORT_SCRIPTS) into test-results/scripts/, so they start on node like the CLI: through tsx each
 * start transpiles and loads src/ file by file, about 4 s of CPU against about 1 s bundled.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The scripts under test/support/ that tests start as processes (harness.ts `scriptCommand`). */
export const SUPPORT_SCRIPTS = ["crash-process", "resume-process", "resume-worker"] as const;

export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const r = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs"), "--if-stale"], {
    cwd: root,
    stdio: "inherit",
  });
  if (r.status !== 0)
    throw new Error(
      "building dist/ for the CLI tests failed (see tsc's errors above; `npm run build` reproduces it)",
    );
  // Code the tests run in process (src/) starts the MCP server just built and bundled, on node, not through tsx.
  process.env["ACTION_ENVELOPE_MCP_SERVER_JS"] = path.join(root, "dist/tools/mcp-stdio.bundle.js");
  bundleSupportScripts(root);
}

/** One ESM file per script, packages left to node_modules (found from test-results/ upwards), each written by rename. */
function bundleSupportScripts(root: string): void {
  const esbuild = createRequire(import.meta.url)("esbuild") as typeof import("esbuild");
  const outdir = path.join(root, "test-results/scripts");
  fs.mkdirSync(outdir, { recursive: true });
  const r = esbuild.buildSync({
    entryPoints: SUPPORT_SCRIPTS.map((name) => path.join(root, `test/support/${name}.ts`)),
    bundle: true,
    platform: "node",
    format: "esm",
    packages: "external",
    outdir,
    outExtension: { ".js": ".mjs" },
    write: false,
    logLevel: "error",
  });
  for (const out of r.outputFiles) {
    const tmp = `${out.path}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, out.contents);
    fs.renameSync(tmp, out.path);
  }
}
