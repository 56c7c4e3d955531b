import { defineConfig } from "vitest/config";

// The JSON report is what `.ci/run` counts; vitest's own summary line is for humans.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default", ["json", { outputFile: "test-results/vitest.json" }]],
  },
});
