#!/usr/bin/env node
// The installed command, `npm start` and `npm run cli`: the compiled CLI in dist/ (built by `npm ci`
// through `prepare`, or `npm run build`). Stale or missing compiled code is refused, never run:
// the npm scripts rebuild it first; `npm run cli:dev` runs the TypeScript through tsx instead.
// The bundled CLI (dist/cli-bundle/, scripts/build.mjs) runs when the current build wrote it: the
// same program, started on less CPU; otherwise the module tree tsc wrote.
import { pathToFileURL } from "node:url";
import { distProblem, freshCliBundle } from "../scripts/dist-check.mjs";

const problem = distProblem();
if (problem) {
  process.stderr.write(
    `action-envelope: ${problem}; run \`npm run build\` (or \`npm run cli:dev -- …\` to run src/ through tsx)\n`,
  );
  process.exit(1);
}
const bundle = freshCliBundle();
if (bundle) await import(pathToFileURL(bundle).href);
else await import("../dist/cli/main.js");
