/** `show`: the full approval card or outcome of one thread. */
import { Command } from "commander";
import { withReadOnlyApp } from "./session.js";
import { Printer } from "./render.js";
import { UsageError } from "../errors.js";
import { cap, LIMITS } from "./limits.js";
import { API_OPTION, apiOf, runApiCommand } from "./api-option.js";
import { report } from "./thread-report.js";

export function showCommand(): Command {
  return new Command("show")
    .description("The full approval card or outcome of a thread")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .option("--json", "print JSON")
    .option(...API_OPTION)
    .action(async (thread: string, opts: { json?: boolean; api?: string }) => {
      const api = await apiOf(opts.api);
      if (api)
        return void (process.exitCode = await runApiCommand(api, {
          kind: "show",
          threadId: thread,
          json: Boolean(opts.json),
        }));
      const printer = new Printer(process.stdout, Boolean(opts.json));
      const { viewThread } = await import("../app/view-thread.js");
      process.exitCode = await withReadOnlyApp(async (app) => {
        const view = await viewThread(app, thread);
        if (view.status === "not_found") {
          // Registered in the journal but with no checkpoints here: the run is kept by the LangGraph API server.
          const action = await app.deps.journal.currentAction(thread);
          if (action?.macValid && action.phase === "registered" && !action.progress.closed) {
            throw new UsageError(
              `thread ${thread} waits for approval on the LangGraph API server (its run's checkpoints are not in this data directory); show and decide it there: npm run cli -- show ${thread} --api <URL>`,
            );
          }
          throw new UsageError(`no thread ${thread}; list waiting ones with "pending"`);
        }
        return report(printer, view);
      });
    });
}
