/**
 * vitest setupFiles: every test file gets a temporary folder of its own (TMPDIR, under the run's root
 * from test/support/run-scope.ts) and a process marker (ACTION_ENVELOPE_TEST_FILE). After the file's
 * own afterAll hooks (they stop their servers as a user would), whatever the file started and left
 * running is killed, failed or timed-out tests included, and the folder is removed. What had to be
 * killed is printed: a test that stops its processes itself prints nothing.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { afterAll, expect } from "vitest";
import { reap, strays } from "./processes.js";

const FILE_MARKER = "ACTION_ENVELOPE_TEST_FILE";
const token = `${process.pid}-${randomBytes(6).toString("hex")}`;
process.env[FILE_MARKER] = token;
// The run's root, not os.tmpdir(): files that share a worker (vitest.config.ts, project "shared-worker")
// find TMPDIR still pointing at the previous file's folder.
const root = process.env["ACTION_ENVELOPE_TEST_RUN_ROOT"] ?? os.tmpdir();
const dir = fs.mkdtempSync(path.join(root, "f-"));
// The run's link to tsx's compile cache (test/support/run-scope.ts), so tsx children find it here too.
const tsxCache = `tsx-${os.userInfo().uid}`;
if (fs.existsSync(path.join(root, tsxCache)))
  fs.symlinkSync(path.join(root, tsxCache), path.join(dir, tsxCache), "dir");
process.env["TMPDIR"] = dir;

// Registered before the file's own hooks, so (vitest runs afterAll hooks in reverse) it runs after them.
afterAll(() => {
  const left = reap(strays(`${FILE_MARKER}=${token}`, { below: process.pid }));
  if (left.length > 0)
    process.stderr.write(
      `${expect.getState().testPath ?? "a test file"} left processes running; killed:\n  ${left.join("\n  ")}\n`,
    );
  fs.rmSync(dir, { recursive: true, force: true });
  process.env["TMPDIR"] = root;
});
