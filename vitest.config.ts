import { defineConfig } from "vitest/config";

/**
 * Files that share their worker process (no isolation), so the modules they import are evaluated once per
 * worker instead of once per file: measured with 46 of these files on this machine, 232 s with isolation
 * against 41 s without. A file belongs here when it starts no CLI process, changes neither process.env
 * (vi.stubEnv, which vitest restores, excepted) nor the working directory, and keeps its state in its
 * own temporary folder (test/support/file-scope.ts) or objects it creates.
 */
const IN_PROCESS = [
  "test/action-machine.test.ts",
  "test/api-routes.test.ts",
  "test/audit-adopt.test.ts",
  "test/audit-graph.test.ts",
  "test/audit-records.test.ts",
  "test/audit-routes.test.ts",
  "test/audit-verify-pages.test.ts",
  "test/audit-verify.test.ts",
  "test/baseline-read.test.ts",
  "test/bench-smoke.test.ts",
  "test/bitrix24-client-write-delay.test.ts",
  "test/bitrix24-client.test.ts",
  "test/change-set-create.test.ts",
  "test/change-set.test.ts",
  "test/chat-question.test.ts",
  "test/checkpointer-group-commit.test.ts",
  "test/client-decisions.test.ts",
  "test/create-delete-wording.test.ts",
  "test/deal-graph.test.ts",
  "test/deal-wording.test.ts",
  "test/decision-judgement.test.ts",
  "test/emulator-batch.test.ts",
  "test/emulator-comments.test.ts",
  "test/emulator-deals.test.ts",
  "test/emulator-faults.test.ts",
  "test/emulator-fixtures.test.ts",
  "test/emulator-list.test.ts",
  "test/emulator-routing.test.ts",
  "test/emulator-tasks.test.ts",
  "test/envelope-canonical.test.ts",
  "test/envelope-card.test.ts",
  "test/envelope-compare.test.ts",
  "test/envelope-compensation.test.ts",
  "test/envelope-create.test.ts",
  "test/envelope-decision.test.ts",
  "test/envelope-delete.test.ts",
  "test/envelope-emulator.test.ts",
  "test/envelope-operations.test.ts",
  "test/envelope-policy.test.ts",
  "test/envelope-scope.test.ts",
  "test/envelope-verify.test.ts",
  "test/errors-idempotency.test.ts",
  "test/errors-operation-limit.test.ts",
  "test/evidence-appended-records.test.ts",
  "test/evidence-compare.test.ts",
  "test/evidence-graph.test.ts",
  "test/graph.test.ts",
  "test/groq-graph.test.ts",
  "test/import-graph.test.ts",
  "test/inbox-change-set.test.ts",
  "test/inbox-questions.test.ts",
  "test/install.test.ts",
  "test/journal-counters-stores.test.ts",
  "test/journal.test.ts",
  "test/mcp-http.test.ts",
  "test/mcp-operations.test.ts",
  "test/mcp-renamed-tools.test.ts",
  "test/mcp.test.ts",
  "test/models-groq.test.ts",
  "test/models-offline.test.ts",
  "test/operations-graph.test.ts",
  "test/partial-approval.test.ts",
  "test/pending-value.test.ts",
  "test/policy-format.test.ts",
  "test/progress-column.test.ts",
  "test/read-tools.test.ts",
  "test/readable-values.test.ts",
  "test/security-refusal-budget.test.ts",
  "test/security-signin-limiter.test.ts",
  "test/text-escape.test.ts",
  "test/thread-scope-stores.test.ts",
  "test/thread-view.test.ts",
  "test/transition-records.test.ts",
  "test/trust-boundary-graph.test.ts",
  "test/write-anchor.test.ts",
  "test/write-outcome-unknown.test.ts",
];

// The JSON report is what `.ci/run` counts; vitest's own summary line is for humans. VITEST_JSON
// moves it, so the SQLite and PostgreSQL passes of `.ci/run` each keep their own.
export default defineConfig({
  test: {
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
    projects: [
      { extends: true, test: { name: "in-process", include: IN_PROCESS, isolate: false } },
      { extends: true, test: { name: "isolated", include: ["test/**/*.test.ts"], exclude: IN_PROCESS } },
    ],
    reporters: [
      "default",
      ["json", { outputFile: process.env["VITEST_JSON"] || "test-results/vitest.json" }],
    ],
  },
});
