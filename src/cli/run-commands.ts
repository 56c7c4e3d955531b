/**
 * The commands that start or finish a run: start (the main job), run, undo and recover; each loads the
 * graph and the stores inside its action.
 */
import { randomUUID } from "node:crypto";
import { Command } from "commander";
import { withApp } from "./session.js";
import { Printer } from "./render.js";
import { cap, capEach, LIMITS } from "./limits.js";
import { esc } from "../text/escape.js";
import { objectId, taskId } from "./option-parsers.js";
import { API_OPTION, apiOf, runApiCommand } from "./api-option.js";
import { report } from "./thread-report.js";

/** `start`: the main job, a request run to its approval, decided at the terminal or in the inbox. */
export function startCommand(): Command {
  return new Command("start")
    .description("The main job: run a request (default: the demo rename of task 4) and ask for approval")
    .argument("[request]", "what to change", cap("request", LIMITS.request))
    .option("--as <user>", "requester id", cap("--as", LIMITS.id), "demo-user")
    .option("--no-prompt", "never ask at the terminal; print the approve command instead")
    .option(
      "--inbox",
      "also serve the web approval inbox on a free localhost port and decide there (needs ACTION_ENVELOPE_INBOX_USERS; the offline demo prints a one-time sign-in link instead)",
    )
    .action(async (request: string | undefined, opts: { as: string; prompt: boolean; inbox?: boolean }) => {
      const { runMainJob } = await import("./start.js");
      process.exitCode = await runMainJob({
        request,
        requestedBy: opts.as,
        prompt: opts.prompt,
        inbox: Boolean(opts.inbox),
      });
    });
}

/** `run`: starts a run for a request and stops at the approval. */
export function runCommand(): Command {
  return new Command("run")
    .description("Start a run for a request; stops at the approval")
    .argument("<request>", 'what to change, e.g. "rename task 4 to X"', cap("request", LIMITS.request))
    .option("--as <user>", "requester id", cap("--as", LIMITS.id), "demo-user")
    .option("--task <id>", "task id in scope (repeatable)", (v, p: number[] = []) => [...p, taskId(v)])
    .option(
      "--deal <id>",
      "deal id in scope (repeatable); a run given only deals reaches no task, and one given only tasks no deal",
      (v, p: number[] = []) => [...p, objectId("--deal", "deal")(v)],
    )
    .option("--field <name>", "field in scope (repeatable)", capEach("--field", LIMITS.id))
    .option(
      "--key <file>",
      "requester's Ed25519 private key (PEM): signs the request, which is then recorded as verified by signature",
      cap("--key", LIMITS.path),
    )
    .option("--no-prompt", "never ask at the terminal")
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(
      async (
        request: string,
        opts: {
          as: string;
          task?: number[];
          deal?: number[];
          field?: string[];
          key?: string;
          prompt: boolean;
          json?: boolean;
          api?: string;
        },
        cmd: Command,
      ) => {
        const scope = {
          ...(opts.task?.length ? { taskIds: opts.task } : {}),
          ...(opts.deal?.length ? { dealIds: opts.deal } : {}),
          ...(opts.field?.length ? { fields: opts.field } : {}),
        };
        const api = await apiOf(opts.api);
        const { readKey, signRequest } = await import("./decisions.js");
        const pem = readKey(opts);
        // A signed request names its signer: --key keeps --as even when a token would fill in the requester.
        const requestedBy =
          api?.token && cmd.getOptionValueSource("as") === "default" && pem === undefined
            ? undefined
            : opts.as;
        const sign =
          pem === undefined
            ? undefined
            : (threadId: string) =>
                signRequest({ kind: "request", threadId, request, requestedBy: opts.as, scope }, pem);
        if (api)
          return void (process.exitCode = await runApiCommand(api, {
            kind: "run",
            request,
            ...(requestedBy !== undefined ? { requestedBy } : {}),
            scope,
            json: Boolean(opts.json),
            ...(sign ? { sign } : {}),
          }));
        if (!sign && !opts.json && opts.prompt && process.stdin.isTTY && process.stdout.isTTY) {
          const { runMainJob } = await import("./start.js");
          process.exitCode = await runMainJob({ request, requestedBy: opts.as, prompt: true, scope });
          return;
        }
        const printer = new Printer(process.stdout, Boolean(opts.json));
        const { startRun } = await import("../app/threads.js");
        // A signed request binds the thread id, so it is chosen here.
        const threadId = randomUUID();
        process.exitCode = await withApp(async (app) => {
          printer.line(esc`model: ${app.deps.modelLabel}; portal: ${app.deps.portal}`);
          const view = await startRun(
            app,
            { request, requestedBy: opts.as, scope, ...(sign ? { requesterSignature: sign(threadId) } : {}) },
            { threadId, onStep: printer.onStep },
          );
          return report(printer, view);
        });
      },
    );
}

/** `undo`: proposes restoring what a verified change overwrote, as a new run with its own approval. */
export function undoCommand(): Command {
  return new Command("undo")
    .description(
      "Propose undoing a VERIFIED change: a new run restoring the values recorded before its write, waiting for its own approval",
    )
    .argument("<thread>", "the thread whose verified change to undo", cap("thread", LIMITS.id))
    .option("--as <user>", "requester id", cap("--as", LIMITS.id), "demo-user")
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(async (threadId: string, opts: { as: string; json?: boolean; api?: string }, cmd: Command) => {
      const api = await apiOf(opts.api);
      if (api) {
        // The same request any API client or Studio's chat can send; the server's agent builds the undo from its journal.
        const { undoRequest } = await import("../hitl/compensation.js");
        const requestedBy = api.token && cmd.getOptionValueSource("as") === "default" ? undefined : opts.as;
        process.exitCode = await runApiCommand(api, {
          kind: "run",
          request: undoRequest(threadId),
          ...(requestedBy !== undefined ? { requestedBy } : {}),
          scope: {},
          json: Boolean(opts.json),
        });
        return;
      }
      const printer = new Printer(process.stdout, Boolean(opts.json));
      const { startUndo } = await import("../app/undo.js");
      process.exitCode = await withApp(async (app) =>
        report(printer, await startUndo(app, threadId, opts.as, { onStep: printer.onStep })),
      );
    });
}

/** `recover`: finishes a run that a crash stopped between steps (with --api: one the API server stopped). */
export function recoverCommand(): Command {
  return new Command("recover")
    .description("Finish a run that a crash stopped between steps (never re-sends a write)")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .option("--json", "print one JSON object")
    .option(
      "--api <url>",
      "a thread this LangGraph API server keeps: it continues the run from its journal (or LANGGRAPH_API_URL; token: LANGGRAPH_API_TOKEN, role admin)",
    )
    .action(async (thread: string, opts: { json?: boolean; api?: string }) => {
      const api = await apiOf(opts.api);
      if (api) {
        process.exitCode = await runApiCommand(api, {
          kind: "recover",
          threadId: thread,
          json: Boolean(opts.json),
        });
        return;
      }
      const printer = new Printer(process.stdout, Boolean(opts.json));
      const { recoverThread } = await import("../app/threads.js");
      process.exitCode = await withApp(async (app) => {
        return report(printer, await recoverThread(app, thread, printer.onStep));
      });
    });
}
