import { defineConfig } from "vitest/config";

/**
 * Files that share their worker process (no isolation), so the modules they import are evaluated once per
 * worker instead of once per file: measured with 46 of these files on this machine, 232 s with isolation
 * against 41 s without; `.ci/run`'s SQLite pass took 746 s with 78 files here and 634–663 s with 123. A
 * file belongs here when it changes neither process.env (vi.stubEnv, which vitest restores, excepted)
 * nor the working directory, keeps its state in its own temporary folder (test/support/file-scope.ts)
 * or objects it creates, and stops the processes it starts (file-scope kills and names what a file
 * leaves). Those not listed set process.env, drive Chromium, or are the PostgreSQL-only process and
 * pool tests, and have not been tried in a shared worker.
 */
const IN_PROCESS = [
  "test/action-machine.test.ts",
  "test/api-cli.test.ts",
  "test/api-routes.test.ts",
  "test/api-views-audited.test.ts",
  "test/approver-identity.test.ts",
  "test/audit-adopt.test.ts",
  "test/audit-cli.test.ts",
  "test/audit-graph.test.ts",
  "test/audit-list-pages.test.ts",
  "test/audit-log.test.ts",
  "test/audit-records.test.ts",
  "test/audit-routes.test.ts",
  "test/audit-verify-pages.test.ts",
  "test/audit-verify.test.ts",
  "test/baseline-read.test.ts",
  "test/bench-smoke.test.ts",
  "test/bitrix24-client-write-delay.test.ts",
  "test/bitrix24-client.test.ts",
  "test/card-values.test.ts",
  "test/change-set-cli.test.ts",
  "test/change-set-create.test.ts",
  "test/change-set.test.ts",
  "test/chat-question.test.ts",
  "test/checkpoint-rollback.test.ts",
  "test/checkpointer-group-commit.test.ts",
  "test/cli-first-hour.test.ts",
  "test/cli-terminal-safety.test.ts",
  "test/client-decisions.test.ts",
  "test/clients.test.ts",
  "test/close-seal.test.ts",
  "test/crash-boundaries.test.ts",
  "test/create-delete-wording.test.ts",
  "test/create-lease-edit.test.ts",
  "test/deal-graph.test.ts",
  "test/deal-wording.test.ts",
  "test/decision-judgement.test.ts",
  "test/dist-bundle.test.ts",
  "test/docs-commands.test.ts",
  "test/doomed-write.test.ts",
  "test/due-work.test.ts",
  "test/embedded-default.test.ts",
  "test/emulator-batch.test.ts",
  "test/emulator-comments.test.ts",
  "test/emulator-deals.test.ts",
  "test/emulator-faults.test.ts",
  "test/emulator-fixtures.test.ts",
  "test/emulator-list.test.ts",
  "test/emulator-routing.test.ts",
  "test/emulator-state.test.ts",
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
  "test/errors-doctor.test.ts",
  "test/errors-idempotency.test.ts",
  "test/errors-operation-limit.test.ts",
  "test/errors-reporting.test.ts",
  "test/evidence-appended-records.test.ts",
  "test/evidence-compare.test.ts",
  "test/evidence-graph.test.ts",
  "test/graph-process.test.ts",
  "test/graph.test.ts",
  "test/groq-graph.test.ts",
  "test/idempotent-recovery.test.ts",
  "test/import-graph.test.ts",
  "test/inbox-api.test.ts",
  "test/inbox-change-set.test.ts",
  "test/inbox-http.test.ts",
  "test/inbox-paging.test.ts",
  "test/inbox-questions.test.ts",
  "test/inbox-start.test.ts",
  "test/install.test.ts",
  "test/journal-counters-stores.test.ts",
  "test/journal-integrity.test.ts",
  "test/journal.test.ts",
  "test/langgraph-api.test.ts",
  "test/lifecycle.test.ts",
  "test/main-job.test.ts",
  "test/mcp-http.test.ts",
  "test/mcp-operations.test.ts",
  "test/mcp-renamed-tools.test.ts",
  "test/mcp.test.ts",
  "test/models-groq.test.ts",
  "test/models-offline.test.ts",
  "test/object-lease.test.ts",
  "test/operations-graph.test.ts",
  "test/partial-approval.test.ts",
  "test/pending-deal.test.ts",
  "test/pending-keyset.test.ts",
  "test/pending-value.test.ts",
  "test/pending.test.ts",
  "test/people.test.ts",
  "test/policy-format.test.ts",
  "test/progress-column.test.ts",
  "test/read-tools.test.ts",
  "test/readable-values.test.ts",
  "test/request-scope-words.test.ts",
  "test/requester-verification.test.ts",
  "test/rollback-anchor.test.ts",
  "test/security-cross-origin.test.ts",
  "test/security-refusal-budget.test.ts",
  "test/security-signin-limiter.test.ts",
  "test/start-prompt-set.test.ts",
  "test/studio.test.ts",
  "test/text-escape.test.ts",
  "test/thread-scope-stores.test.ts",
  "test/thread-view.test.ts",
  "test/transition-records.test.ts",
  "test/trust-boundary-api.test.ts",
  "test/trust-boundary-cli.test.ts",
  "test/trust-boundary-graph.test.ts",
  "test/undo-delete.test.ts",
  "test/undo.test.ts",
  "test/withheld-evidence.test.ts",
  "test/worker-api.test.ts",
  "test/worker.test.ts",
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
    // Three files at a time on two cores (vitest's default there is one): most files spend their time
    // waiting on child processes, servers and the emulator, not on the CPU. Measured on this machine:
    // the SQLite pass 688 s with one worker (busy machine) against 285 s with two; with today's suite,
    // 590 s with two (the processes the pass waited for used 1.37 cores on average) against 552 s
    // with three (1.55 cores); every file passed. ACTION_ENVELOPE_TEST_WORKERS sets another number:
    // `.ci/run`'s PostgreSQL pass keeps two, as its files and the server already fill both cores: with
    // three it took 283 and 374 s in two runs against 323–367 s with two, its files up to twice as slow.
    maxWorkers: Number(process.env["ACTION_ENVELOPE_TEST_WORKERS"]) || 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Vitest queues the files project by project, in the order of the projects' names (its default
    // sequencer), and the workers take them from that one queue. "isolated" holds the slowest files
    // (Chromium, API servers with their own environment) and comes first, so the short files of
    // "shared-worker" fill the end of the pass: in the other order those few long files were taken
    // last and ran side by side, and the pass ended on them (~2 minutes with one or two files running).
    projects: [
      { extends: true, test: { name: "isolated", include: ["test/**/*.test.ts"], exclude: IN_PROCESS } },
      { extends: true, test: { name: "shared-worker", include: IN_PROCESS, isolate: false } },
    ],
    reporters: [
      "default",
      ["json", { outputFile: process.env["VITEST_JSON"] || "test-results/vitest.json" }],
    ],
  },
});
