/**
 * vitest globalSetup: the CLI processes tests start run the compiled dist/ (test/support/harness.ts
 * CLI), and so does the MCP server that in-process code spawns. Build it first whenever anything under
 * src/ is newer than the last build (incremental tsc; when it is current, only a stat walk of src/).
 * A failed build stops the run.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

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
}
