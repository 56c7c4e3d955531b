/**
 * Is dist/ there and at least as new as src/ (its .ts and .json files, and the tsconfigs)? Shared by bin/action-envelope.mjs (which refuses to run
 * stale code), scripts/build.mjs --if-stale and the test suite's global setup. A stat walk of src/:
 * a few milliseconds. In a copy without src/ (a packed install) dist/ is all there is, so it counts.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const STAMP = path.join(ROOT, "dist", ".build-stamp");
/** The stdio MCP server as one file (scripts/build.mjs), relative to ROOT. */
export const MCP_BUNDLE = "dist/tools/mcp-stdio.bundle.js";
const INPUTS = ["tsconfig.json", "tsconfig.build.json"];

function newest(dir, best) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) best = newest(full, best);
    else if (entry.isFile() && /\.(?:[cm]?ts|json)$/.test(entry.name)) {
      const mtime = fs.statSync(full).mtimeMs;
      if (mtime > best.mtime) best = { mtime, file: full };
    }
  }
  return best;
}

/** null when dist/ is usable; otherwise one line saying what is wrong (without the fix). */
export function distProblem() {
  const src = path.join(ROOT, "src");
  if (!fs.existsSync(src)) return fs.existsSync(path.join(ROOT, "dist", "cli", "main.js")) ? null : "dist/ is missing";
  let stamp;
  try {
    stamp = fs.statSync(STAMP).mtimeMs;
  } catch {
    return "dist/ has not been built";
  }
  let best = newest(src, { mtime: 0, file: "" });
  for (const name of INPUTS) {
    const file = path.join(ROOT, name);
    if (fs.existsSync(file)) {
      const mtime = fs.statSync(file).mtimeMs;
      if (mtime > best.mtime) best = { mtime, file };
    }
  }
  return best.mtime > stamp ? `dist/ is older than ${path.relative(ROOT, best.file)}` : null;
}
