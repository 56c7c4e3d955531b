/**
 * A separate process that approves a waiting action through the shared decision path and SIGKILLs
 * itself at one post-approval boundary, right after the journal commits it (or, for `sent`, after the
 * write's answer arrived and before it is recorded). Nothing is mocked: real stores, real MCP server,
 * real emulator; only the moment of death is chosen.
 * Usage: tsx test/support/crash-process.ts <threadId> '<resume JSON>' <boundary>   (config from the environment)
 */
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { submitDecision } from "../../src/app/threads.js";
import { openApp } from "../../src/app/open-app.js";
import type { Journal } from "../../src/store/journal.js";

export const BOUNDARIES = ["decided", "pre_read", "intent", "sent", "acknowledged", "verified"] as const;
export type Boundary = (typeof BOUNDARIES)[number];

const die = (): never => {
  process.kill(process.pid, "SIGKILL");
  throw new Error("unreachable");
};

/** Wraps the journal so the process dies at `boundary`. */
function dieAt(journal: Journal, boundary: Boundary): void {
  const j = journal as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  const after = (method: string, dies: (result: any, args: unknown[]) => boolean) => {
    const original = j[method]!.bind(journal);
    j[method] = async (...args: unknown[]) => {
      const result = await original(...args);
      if (dies(result, args)) die();
      return result;
    };
  };
  switch (boundary) {
    case "decided":
      after("decideAction", (r) => r.claimed);
      after("decideActions", (r) => r.claimed);
      return;
    case "pre_read":
    case "verified":
      after("moveAction", (r, args) => r.ok && args[1] === boundary);
      return;
    case "intent":
      after("beginWrite", (r) => r.begun);
      return;
    case "sent": {
      j["recordAnswer"] = async () => die();
      return;
    }
    case "acknowledged":
      after("recordAnswer", (r) => r.ok);
      return;
  }
}

// Run as a script (through tsx, or bundled by the test setup), not when a test imports BOUNDARIES.
if (/crash-process\.(ts|mjs)$/.test(process.argv[1] ?? "")) {
  const [threadId, resumeJson, boundary] = process.argv.slice(2) as [string, string, Boundary];
  if (!threadId || !resumeJson || !BOUNDARIES.includes(boundary)) {
    process.stderr.write(`usage: crash-process.ts <threadId> '<resume JSON>' <${BOUNDARIES.join("|")}>\n`);
    process.exit(1);
  }
  const deps = await createDeps(loadConfig());
  dieAt(deps.journal, boundary);
  const app = openApp(deps);
  await submitDecision(app, threadId, JSON.parse(resumeJson));
  // Reaching here means the boundary was never crossed.
  process.stdout.write(`survived: ${boundary} was not crossed\n`);
  await app.close();
  process.exitCode = 3;
}
