#!/usr/bin/env node
// The installed command, `npm start` and `npm run cli`: the compiled CLI in dist/ (built by `npm ci`
// through `prepare`, or `npm run build`). Stale or missing compiled code is refused, never run:
// the npm scripts rebuild it first; `npm run cli:dev` runs the TypeScript through tsx instead.
import { distProblem } from "../scripts/dist-check.mjs";

const problem = distProblem();
if (problem) {
  process.stderr.write(`action-envelope: ${problem}; run \`npm run build\` (or \`npm run cli:dev -- …\` to run src/ through tsx)\n`);
  process.exit(1);
}
await import("../dist/cli/main.js");
