/**
 * vitest globalSetup: the CLI processes tests start run the compiled dist/ (test/support/harness.ts
 * CLI), so build it first whenever anything under src/ is newer than the last build (incremental tsc;
 * nothing to do, a stat walk of src/, when it is current). A failed build stops the run.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const r = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs"), "--if-stale"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) throw new Error("building dist/ for the CLI tests failed (see tsc's errors above; `npm run build` reproduces it)");
}
