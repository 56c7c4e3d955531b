/**
 * vitest globalSetup: one temporary root and one process marker per run, so nothing a test creates
 * outlives the run. The root (`<system temp>/ae-test-run-<pid>`) becomes TMPDIR for every worker, so
 * each os.tmpdir() under it (test/support/file-scope.ts gives each test file a folder of its own there);
 * the marker (ACTION_ENVELOPE_TEST_RUN, kept when the caller sets it, as `.ci/run` does) is inherited by
 * every process a test starts. At the end, whatever still carries the marker is killed and named, and
 * the root is removed.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { reap, strays } from "./processes.js";

export const RUN_MARKER = "ACTION_ENVELOPE_TEST_RUN";
/** The run's temporary root, for files that share a worker (test/support/file-scope.ts). */
export const RUN_ROOT = "ACTION_ENVELOPE_TEST_RUN_ROOT";

export default function setup(): () => void {
  // Each vitest project runs the global setup (vitest.config.ts has two): the first one makes the root.
  const existing = process.env[RUN_ROOT];
  if (existing && fs.existsSync(existing)) return () => {};
  const run = (process.env[RUN_MARKER] ||= `${process.pid}-${randomBytes(4).toString("hex")}`);
  const systemTemp = os.tmpdir();
  const root = path.join(systemTemp, `ae-test-run-${process.pid}`);
  fs.rmSync(root, { recursive: true, force: true });
  fs.mkdirSync(root);
  // tsx keeps its compile cache in <temp>/tsx-<uid>: the link keeps it shared across files and runs.
  const tsxCache = path.join(systemTemp, `tsx-${os.userInfo().uid}`);
  fs.mkdirSync(tsxCache, { recursive: true });
  fs.symlinkSync(tsxCache, path.join(root, path.basename(tsxCache)), "dir");
  process.env["TMPDIR"] = root;
  process.env[RUN_ROOT] = root;
  return () => {
    // This process's own children (the esbuild service build-dist's buildSync starts) carry the marker
    // too and end with it.
    const left = reap(strays(`${RUN_MARKER}=${run}`).filter((p) => p.ppid !== process.pid));
    if (left.length > 0)
      process.stderr.write(
        `Processes started by this test run were still running at its end and are killed now:\n  ${left.join("\n  ")}\n`,
      );
    fs.rmSync(root, { recursive: true, force: true });
    process.env["TMPDIR"] = systemTemp;
  };
}
