import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), "ae-install-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a clean install", () => {
  // `npm ci` resolves the lockfile's tree the same way with --dry-run, and prints the same peer
  // warnings, without installing anything (run on a copy of the manifest and lockfile).
  it("resolves the lockfile with no warning", async () => {
    for (const f of ["package.json", "package-lock.json"]) copyFileSync(f, join(dir, f));
    const { stdout, stderr } = await run(
      "npm",
      ["ci", "--dry-run", "--ignore-scripts", "--no-audit", "--no-fund"],
      { cwd: dir },
    );
    expect(`${stdout}\n${stderr}`).not.toMatch(/npm warn|ERESOLVE/i);
  });
});
