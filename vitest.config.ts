import { defineConfig } from "vitest/config";

// The JSON report is what `.ci/run` counts; vitest's own summary line is for humans. VITEST_JSON
// moves it, so the SQLite and PostgreSQL passes of `.ci/run` each keep their own.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // CLI processes in tests run the compiled dist/; build-dist builds it when src/ is newer. run-scope
    // and file-scope keep every temporary file and process a test creates inside the run and the file.
    globalSetup: ["test/support/build-dist.ts", "test/support/run-scope.ts"],
    setupFiles: ["test/support/file-scope.ts"],
    pool: "forks",
    // Two files at a time even on two cores (vitest's default there is one): most files spend their time
    // waiting on child processes, servers and the emulator, not on the CPU. Measured on this machine:
    // the SQLite pass 688 s with one worker (busy machine) against 285 s with two; every file passed.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: [
      "default",
      ["json", { outputFile: process.env["VITEST_JSON"] || "test-results/vitest.json" }],
    ],
  },
});
