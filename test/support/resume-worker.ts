/**
 * A long-lived process that submits decisions through the shared decision path on command, so a
 * test can line up many processes at one barrier without paying a process start per attempt.
 * Config from the environment (DATABASE_URL etc.), like the CLI.
 *
 * Protocol, one JSON object per line:
 *   in  {"op":"arm","id":N,"threadId":T,"resume":{...}}   out {"armed":N}
 *   in  {"op":"go","id":N}                                 out {"id":N,"view":{...}} | {"id":N,"error":msg,"code":C}
 *   in  {"op":"exit"}                                      (closes everything and exits)
 * On start it prints {"ready":true,"pid":P}.
 */
import readline from "node:readline";
import { loadConfig } from "../../src/config/env.js";
import { createDeps } from "../../src/runtime/deps.js";
import { submitDecision } from "../../src/app/threads.js";
import { openApp } from "../../src/app/open-app.js";
import { threadJson } from "../../src/cli/render.js";

const app = openApp(await createDeps(loadConfig()));
const armed = new Map<number, { threadId: string; resume: unknown }>();
const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);

const lines = readline.createInterface({ input: process.stdin });
say({ ready: true, pid: process.pid });
for await (const line of lines) {
  const msg = JSON.parse(line) as { op: string; id?: number; threadId?: string; resume?: unknown };
  if (msg.op === "exit") break;
  if (msg.op === "arm") {
    armed.set(msg.id!, { threadId: msg.threadId!, resume: msg.resume });
    say({ armed: msg.id });
  } else if (msg.op === "go") {
    const job = armed.get(msg.id!)!;
    armed.delete(msg.id!);
    // Not awaited: the next command (or the exit) is read while this one runs.
    submitDecision(app, job.threadId, job.resume).then(
      (view) => say({ id: msg.id, view: threadJson(view) }),
      (e: Error & { code?: string }) => say({ id: msg.id, error: e.message, code: e.code ?? e.name }),
    );
  }
}
await app.close();
process.exit(0);
