/**
 * Is dist/ there, with its bundled CLI, and at least as new as src/ (its .ts and .json files), the
 * tsconfigs and the build script? Shared by bin/action-envelope.mjs (which refuses to run
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
/** The CLI bundled from dist/cli/main.js (scripts/build.mjs): its entry, relative to ROOT; chunks beside it. */
export const CLI_BUNDLE = "dist/cli-bundle/main.js";
/** Besides src/: what else decides what a build writes. */
const INPUTS = ["tsconfig.json", "tsconfig.build.json", "scripts/build.mjs"];

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
  if (!fs.existsSync(src))
    return fs.existsSync(path.join(ROOT, "dist", "cli", "main.js")) ? null : "dist/ is missing";
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
  if (best.mtime > stamp) return `dist/ is older than ${path.relative(ROOT, best.file)}`;
  // The bundled CLI is part of the build: one missing, or left by an earlier build, makes dist/ stale.
  return freshCliBundle() ? null : "dist/ has no bundled CLI from its last build";
}

/**
 * The bundled CLI's entry when it belongs to the current build, else null (then dist/cli/main.js
 * runs). A build writes the bundle after tsc and before it marks dist/ built, so a bundle older than
 * the stamp was left by an earlier build that a later one (one without bundling, or whose bundling
 * failed before the stamp was moved) did not replace: it is never run (distProblem calls dist/
 * stale then, and the npm scripts and the test suite rebuild).
 */
export function freshCliBundle() {
  const entry = path.join(ROOT, CLI_BUNDLE);
  try {
    const stamp = fs.existsSync(STAMP) ? fs.statSync(STAMP).mtimeMs : 0;
    return fs.statSync(entry).mtimeMs >= stamp ? entry : null;
  } catch {
    return null;
  }
}
