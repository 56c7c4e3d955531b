/**
 * A separate process that submits one raw resume value to a thread through the shared decision
 * path, for tests that need values the CLI would never build (wrong nonce, malformed shapes).
 * Usage: tsx test/support/resume-process.ts <threadId> '<resume JSON>'   (config from the environment)
 */
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { submitDecision } from "../../src/app/threads.js";
import { openApp } from "../../src/app/open-app.js";
import { threadJson } from "../../src/cli/render.js";

const [threadId, resumeJson] = process.argv.slice(2);
if (!threadId || !resumeJson) {
  process.stderr.write("usage: resume-process.ts <threadId> '<resume JSON>'\n");
  process.exit(1);
}
const app = openApp(await createDeps(loadConfig()));
try {
  const view = await submitDecision(app, threadId, JSON.parse(resumeJson));
  process.stdout.write(`${JSON.stringify(threadJson(view))}\n`);
} catch (e) {
  process.stdout.write(
    `${JSON.stringify({ error: (e as Error).message, code: (e as { code?: string }).code })}\n`,
  );
  process.exitCode = 2;
} finally {
  await app.close();
}
