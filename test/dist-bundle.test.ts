/**
 * The bundled CLI (dist/cli-bundle/, scripts/build.mjs) is what bin/action-envelope.mjs and every CLI
 * process of this suite run: it must be the same program as the module tree tsc wrote, and a bundle
 * that the last build did not write must never run (scripts/dist-check.mjs).
 */
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import {
  CLI,
  eachTestPortal,
  envFor,
  recordPendingRename,
  ROOT,
  runCli,
  tempDir,
  type Portal,
} from "./support/harness.js";

const MODULES = path.join(ROOT, "dist/cli/main.js");

describe("the bundled CLI", () => {
  let portal: Portal;
  let dataDir: string;
  eachTestPortal((f) => ({ portal, dataDir } = f));

  it("prints what the module tree prints: --help, pending, show, audit list, and a refusal", async () => {
    const view = await recordPendingRename(portal, dataDir, "Bundled");
    const env = envFor(portal, dataDir);
    expect(CLI).not.toBe(MODULES);
    for (const args of [
      ["--help"],
      ["pending", "--json"],
      ["show", view.threadId],
      ["show", view.threadId, "--json"],
      ["audit", "list"],
      ["show", "no-such-thread"],
    ]) {
      const [tree, bundle] = await Promise.all([runCli(args, env, { script: MODULES }), runCli(args, env)]);
      expect({ args, code: bundle.code, stdout: bundle.stdout, stderr: bundle.stderr }).toEqual({
        args,
        code: tree.code,
        stdout: tree.stdout,
        stderr: tree.stderr,
      });
    }
    // Not empty answers compared with each other: the card and the listing are there.
    const show = await runCli(["show", view.threadId], env);
    expect(show.stdout).toContain("Approve exactly this envelope");
    expect((await runCli(["audit", "list"], env)).stdout).toContain(view.threadId);
  });
});

describe("dist-check and the bundled CLI", () => {
  /** A checkout of its own: dist-check.mjs takes its root from where it lies. */
  async function checkout() {
    const root = tempDir("ae-dist-check-");
    fs.mkdirSync(path.join(root, "scripts"));
    fs.copyFileSync(path.join(ROOT, "scripts/dist-check.mjs"), path.join(root, "scripts/dist-check.mjs"));
    fs.mkdirSync(path.join(root, "src"));
    fs.writeFileSync(path.join(root, "src/a.ts"), "export {};\n");
    fs.mkdirSync(path.join(root, "dist/cli-bundle"), { recursive: true });
    fs.writeFileSync(path.join(root, "dist/.build-stamp"), "built\n");
    const at = (file: string, seconds: number) => fs.utimesSync(path.join(root, file), seconds, seconds);
    at("src/a.ts", 1_000);
    at("dist/.build-stamp", 2_000);
    const check = (await import(pathToFileURL(path.join(root, "scripts/dist-check.mjs")).href)) as {
      distProblem(): string | null;
      freshCliBundle(): string | null;
    };
    return { root, at, check };
  }

  it("calls dist/ stale while its bundle is missing or older than the build, and runs only a fresh one", async () => {
    const { root, at, check } = await checkout();
    expect(check.distProblem()).toBe("dist/ has no bundled CLI from its last build");
    expect(check.freshCliBundle()).toBeNull();

    fs.writeFileSync(path.join(root, "dist/cli-bundle/main.js"), "");
    at("dist/cli-bundle/main.js", 1_500);
    // Left by an earlier build: the stamp is newer.
    expect(check.distProblem()).toBe("dist/ has no bundled CLI from its last build");
    expect(check.freshCliBundle()).toBeNull();

    at("dist/cli-bundle/main.js", 2_100);
    expect(check.distProblem()).toBeNull();
    expect(check.freshCliBundle()).toBe(path.join(root, "dist/cli-bundle/main.js"));

    // A source edited after the build still says so first.
    at("src/a.ts", 3_000);
    expect(check.distProblem()).toBe(`dist/ is older than ${path.join("src", "a.ts")}`);
  });
});
