/**
 * `action-envelope` command line. Every decision command resumes through the same path as every
 * other interface (src/app/threads.ts). Exit codes (src/cli/exit-codes.ts): 0 verified or waiting,
 * 1 usage/config error, 2 any other outcome (including a refused decision), 3 PARTIALLY_EXECUTED.
 *
 * Start-up is kept small: this file and the command factories import only commander and light
 * helpers; each command imports what it needs (the graph, MCP, stores, the API client, the emulator)
 * inside its action, so `--help` loads none of it (docs/operations.md: Performance; bench/cli-startup.ts).
 */
import { randomUUID } from "node:crypto";
import { Command, InvalidArgumentError } from "commander";
import { loadConfig, loadDotEnv } from "../config/env.js";
import { withApp, withReadOnlyApp, withStores } from "./session.js";
import type { ThreadView } from "../app/threads.js";
import type { ResumeValue } from "../hitl/contract.js";
import { pendingLine, Printer, threadJson } from "./render.js";
import { ConfigError, DecisionNotAcceptedError, UsageError } from "../errors.js";
import { auditCommand } from "./audit-command.js";
import { doctorCommand } from "./doctor-command.js";
import { policyCommand } from "./policy-command.js";
import { workerCommand } from "./worker-command.js";
import { apiTokenCommand } from "./api-token-command.js";
import { lifecycleCommands } from "./lifecycle-commands.js";
import { keygenCommand } from "./keygen-command.js";
import { emulatorCommand, mcpCommand } from "./portal-commands.js";
import { inboxCommands } from "../inbox/command.js";
import { cap, capEach, capped, LIMITS } from "./limits.js";
import { EXIT_OK, EXIT_OUTCOME, EXIT_USAGE, exitCodeForView } from "./exit-codes.js";
import { esc, escapeForTerminal, escapeLines, escapeRendered, stringifyJsonSafe } from "../text/escape.js";
import {
  describeModelError,
  isModelProviderError,
  modelFailureLine,
  modelReasonCode,
} from "../models/model-errors.js";
import { isBitrix24Error } from "../bitrix24/errors.js";

function report(printer: Printer, view: ThreadView, refusedNow = false): number {
  if (printer.json) printer.emitJson(threadJson(view));
  else if (view.status === "awaiting_approval" && refusedNow && view.approval?.lastRefusal) {
    // A refused decision: the refusal first, not the whole card again (it has not changed).
    printer.refusal(view);
    printer.howToDecide(view, " --as <approver-id>");
  } else if (view.status === "awaiting_approval") {
    printer.card(view);
    printer.howToDecide(view, " --as <approver-id>");
  } else if (view.status === "awaiting_input") {
    printer.question(view);
  } else if (view.status === "interrupted_run") {
    printer.line(
      esc`The run stopped before ${view.next?.join(", ")}. Finish it with: npm run cli -- recover ${view.threadId}`,
    );
  } else printer.outcome(view);
  return exitCodeForView(view, refusedNow);
}

async function decide(
  threadId: string,
  build: (view: ThreadView) => unknown,
  json: boolean,
): Promise<number> {
  const printer = new Printer(process.stdout, json);
  const { submitDecision, viewThread } = await import("../app/threads.js");
  return withApp(async (app) => {
    const before = await viewThread(app, threadId);
    // When nothing is waiting, the shared path produces the precise refusal (ended, unknown, interrupted).
    const resume = before.status === "awaiting_approval" ? build(before) : { decisions: [] };
    const after = await submitDecision(app, threadId, resume, printer.onStep);
    const refusedNow = (after.state?.refusals.length ?? 0) > (before.state?.refusals.length ?? 0);
    return report(printer, after, refusedNow);
  });
}

/** "90s", "30m", "2h", "1d" → milliseconds. */
const duration = (value: string) => {
  capped("--older-than", value, 20);
  const m = /^(\d+)(s|m|h|d)$/.exec(value);
  if (!m) throw new InvalidArgumentError(esc`expected a duration like 30m, 2h or 1d, got "${value}"`);
  return Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "s" | "m" | "h" | "d"];
};

const positive =
  (name: string, zeroOk = false) =>
  (value: string) => {
    capped(name, value, 12);
    if (!/^\d+$/.test(value) || (!zeroOk && Number(value) === 0))
      throw new InvalidArgumentError(
        esc`expected a ${zeroOk ? "whole number" : "positive whole number"}, got "${value}"`,
      );
    return Number(value);
  };

const objectId = (flag: string, kind: "task" | "deal") => (value: string) => {
  capped(flag, value, 20);
  if (!/^\d+$/.test(value) || Number(value) <= 0)
    throw new InvalidArgumentError(esc`expected a positive ${kind} id, got "${value}"`);
  return Number(value);
};
const taskId = objectId("--task", "task");

/** `--api URL` or LANGGRAPH_API_URL: the command talks to that LangGraph API server (src/api/cli-api.ts). */
const apiOf = async (flag: string | undefined) => {
  const configured = loadConfig().langgraphApi;
  // The API client (the LangGraph SDK) is loaded only when an API server is named.
  return flag || configured.url ? (await import("../api/cli-api.js")).apiTarget(flag, configured) : undefined;
};
const runApiCommand = async (...args: Parameters<typeof import("./api-command.js").runApiCommand>) =>
  (await import("./api-command.js")).runApiCommand(...args);
/** The decision builders (envelope core, signatures), loaded by the decision commands only. */
const decisions = () => import("./decisions.js");
type DecisionBuilder = "approveDecision" | "rejectDecision" | "editDecision";
const built = async <O>(which: DecisionBuilder, opts: O) => {
  const builder = (await decisions())[which] as (view: ThreadView, opts: O) => ResumeValue;
  return (view: ThreadView) => builder(view, opts);
};
/**
 * Sends a decision built from the thread's view: through the LangGraph API when --api (or
 * LANGGRAPH_API_URL) names a server, else to the local stores; sets the exit code either way.
 */
async function sendDecision(
  thread: string,
  opts: { as?: string; key?: string; json?: boolean; api?: string },
  cmd: Command,
  build: (view: ThreadView) => ResumeValue,
): Promise<void> {
  const api = await apiOf(opts.api);
  // A server that authenticates callers fills in the approver, unless --as was given explicitly.
  const explicitApprover = opts.as !== undefined;
  if (!explicitApprover && !(api?.token && !opts.key)) {
    // No identity is invented: a default approver comes only from configuration, and is said before anything is sent.
    const configured = loadConfig().defaultApprover;
    if (!configured) {
      throw new UsageError(
        `${cmd.name()} needs the approver: name it with --as <approver-id>, or set ACTION_ENVELOPE_DEFAULT_APPROVER=<approver-id>${api ? " (or send an API token: LANGGRAPH_API_TOKEN, and the server records its identity)" : ""}`,
      );
    }
    opts.as = configured;
    process.stderr.write(
      esc`deciding as ${configured}, from ACTION_ENVELOPE_DEFAULT_APPROVER (self-declared unless signed)` +
        "\n",
    );
  }
  if (api) {
    process.exitCode = await runApiCommand(api, {
      kind: "decide",
      threadId: thread,
      json: Boolean(opts.json),
      explicitApprover,
      build,
    });
    return;
  }
  process.exitCode = await decide(thread, build, Boolean(opts.json));
}

const API_OPTION = [
  "--api <url>",
  "use this LangGraph API server instead of the local stores (or LANGGRAPH_API_URL; token: LANGGRAPH_API_TOKEN)",
] as const;

export function buildProgram(): Command {
  const program = new Command("action-envelope")
    .description("Propose Bitrix24 task changes with an AI agent; execute exactly what a human approved.")
    .showHelpAfterError()
    .exitOverride();

  program
    .command("start", { isDefault: false })
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

  program
    .command("run")
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
        const { readKey, signRequest } = await decisions();
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
        if (sign) {
          const printer = new Printer(process.stdout, Boolean(opts.json));
          const { startRun } = await import("../app/threads.js");
          const threadId = randomUUID();
          process.exitCode = await withApp(async (app) => {
            printer.line(esc`model: ${app.deps.modelLabel}; portal: ${app.deps.portal}`);
            const view = await startRun(
              app,
              { request, requestedBy: opts.as, scope, requesterSignature: sign(threadId) },
              { threadId, onStep: printer.onStep },
            );
            return report(printer, view);
          });
          return;
        }
        if (!opts.json && opts.prompt && process.stdin.isTTY && process.stdout.isTTY) {
          const { runMainJob } = await import("./start.js");
          process.exitCode = await runMainJob({ request, requestedBy: opts.as, prompt: true, scope });
          return;
        }
        const printer = new Printer(process.stdout, Boolean(opts.json));
        const { startRun } = await import("../app/threads.js");
        process.exitCode = await withApp(async (app) => {
          printer.line(esc`model: ${app.deps.modelLabel}; portal: ${app.deps.portal}`);
          const view = await startRun(
            app,
            { request, requestedBy: opts.as, scope },
            { onStep: printer.onStep },
          );
          return report(printer, view);
        });
      },
    );

  program
    .command("undo")
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

  program
    .command("pending")
    .description(
      "Waiting approvals, oldest first, with expiry (from the journal's index; no checkpoint is loaded)",
    )
    .option("--json", "print JSON")
    .option("--mine", "only approvals the --as approver may decide")
    .option("--as <approver>", "who --mine means", cap("--as", LIMITS.id))
    .option("--requested-by <user>", "only approvals this user requested", cap("--requested-by", LIMITS.id))
    .option(
      "--task <id>",
      "only approvals with an action on this task (a change set: any of its actions)",
      taskId,
    )
    .option("--object <task>", "the same as --task (a task id)", objectId("--object", "task"))
    .option(
      "--deal <id>",
      "only approvals with an action on this deal (a change set: any of its actions)",
      objectId("--deal", "deal"),
    )
    .option("--older-than <duration>", "only approvals waiting longer than this (e.g. 30m, 2h, 1d)", duration)
    .option("--limit <n>", "at most this many (default 100)", positive("--limit"), 100)
    .option(
      "--cursor <next>",
      'start after the page that printed this cursor (its "next")',
      cap("--cursor", LIMITS.hash * 2),
    )
    .option(
      "--offset <n>",
      "pass over this many first (read through; --cursor is the way to page)",
      positive("--offset", true),
      0,
    )
    .option(...API_OPTION)
    .action(
      async (opts: {
        json?: boolean;
        api?: string;
        mine?: boolean;
        as?: string;
        requestedBy?: string;
        task?: number;
        object?: number;
        deal?: number;
        olderThan?: number;
        limit: number;
        offset: number;
        cursor?: string;
      }) => {
        const named = (["task", "object", "deal"] as const)
          .filter((k) => opts[k] !== undefined)
          .map((k) => `--${k}`);
        if (named.length > 1) {
          throw new UsageError(
            `${named.join(" and ")} each name the one object to list approvals about; give one: --task N (or --object N) for a task, --deal N for a deal`,
          );
        }
        const object =
          opts.deal !== undefined
            ? { dealId: opts.deal }
            : (opts.task ?? opts.object) !== undefined
              ? { taskId: (opts.task ?? opts.object)! }
              : {};
        const api = await apiOf(opts.api);
        if (api && named.length > 0)
          throw new UsageError(
            `${named[0]} filters the local listing; pending --api lists every waiting approval of the server, unfiltered`,
          );
        if (api)
          return void (process.exitCode = await runApiCommand(api, {
            kind: "pending",
            json: Boolean(opts.json),
          }));
        if (opts.mine && !opts.as)
          throw new UsageError("--mine needs --as <approver>: whose approvals to list");
        const printer = new Printer(process.stdout, Boolean(opts.json));
        const { pendingListing } = await import("../app/pending.js");
        await withStores(async (app) => {
          const listing = await pendingListing(app, {
            ...(opts.mine ? { decidableBy: opts.as! } : {}),
            ...(opts.requestedBy ? { requestedBy: opts.requestedBy } : {}),
            ...object,
            ...(opts.olderThan !== undefined ? { olderThanMs: opts.olderThan } : {}),
            limit: opts.limit,
            offset: opts.offset,
            ...(opts.cursor !== undefined ? { cursor: opts.cursor } : {}),
          });
          // Each approval is written as it is read, so a long page is never held whole.
          let shown = 0;
          if (opts.json) {
            printer.write(`{"total":${listing.total},"offset":${listing.offset},"pending":[`);
            for await (const r of listing.approvals)
              printer.write(`${shown++ === 0 ? "" : ","}${stringifyJsonSafe(r)}`);
            const { damaged, next } = listing.end();
            return printer.write(
              `],"damaged":${stringifyJsonSafe(damaged)},"next":${stringifyJsonSafe(next)}}\n`,
            );
          }
          for await (const r of listing.approvals) {
            shown += 1;
            printer.line(pendingLine(r));
          }
          const { damaged, next } = listing.end();
          for (const d of damaged)
            printer.line(
              esc`DAMAGED ${d.threadId} ${d.envelopeHash}: its journal row fails its integrity check; not listed as an approval`,
            );
          if (shown === 0 && next === null) {
            return printer.line(
              listing.total === 0
                ? "No approvals are waiting."
                : `No approvals on this page (${listing.total} in all).`,
            );
          }
          if (next !== null || listing.offset > 0 || opts.cursor !== undefined) {
            printer.line(
              `(${shown} shown of ${listing.total}${next !== null ? `; --cursor ${next} for more` : "; no more"})`,
            );
          }
        });
      },
    );

  program
    .command("show")
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
      const { viewThread } = await import("../app/threads.js");
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

  program
    .command("approve")
    .description("Approve exactly the envelope (or the whole change set) with this hash")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption(
      "--hash <sha>",
      'the envelope hash shown on the card (sha256:…); for a change set, its "Set hash:"',
      cap("--hash", LIMITS.hash),
    )
    .option("--as <approver>", "approver id (or ACTION_ENVELOPE_DEFAULT_APPROVER)", cap("--as", LIMITS.id))
    .option(
      "--key <file>",
      "approver's Ed25519 private key (PEM) to sign the decision",
      cap("--key", LIMITS.path),
    )
    .option(
      "--override <gate=reason>",
      "pass an overridable policy gate, with a reason",
      cap("--override", LIMITS.reason),
    )
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(
      async (
        thread: string,
        opts: { hash: string; as: string; key?: string; override?: string; json?: boolean; api?: string },
        cmd: Command,
      ) => {
        await sendDecision(thread, opts, cmd, await built("approveDecision", opts));
      },
    );

  program
    .command("reject")
    .description("Reject the waiting envelope (a change set: every action of it)")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption(
      "--reason <text>",
      "why; shown to the model when revision is allowed",
      cap("--reason", LIMITS.reason),
    )
    .option("--as <approver>", "approver id (or ACTION_ENVELOPE_DEFAULT_APPROVER)", cap("--as", LIMITS.id))
    .option("--key <file>", "approver's Ed25519 private key (PEM)", cap("--key", LIMITS.path))
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(
      async (
        thread: string,
        opts: { reason: string; as: string; key?: string; json?: boolean; api?: string },
        cmd: Command,
      ) => {
        await sendDecision(thread, opts, cmd, await built("rejectDecision", opts));
      },
    );

  program
    .command("edit")
    .description("Edit the waiting proposal; creates a new revision that needs its own approval")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption("--set <FIELD=VALUE>", "field to set (repeatable)", capEach("--set", LIMITS.setValue))
    .option("--as <approver>", "approver id (or ACTION_ENVELOPE_DEFAULT_APPROVER)", cap("--as", LIMITS.id))
    .option("--key <file>", "approver's Ed25519 private key (PEM)", cap("--key", LIMITS.path))
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(
      async (
        thread: string,
        opts: { set: string[]; as: string; key?: string; json?: boolean; api?: string },
        cmd: Command,
      ) => {
        await sendDecision(thread, opts, cmd, await built("editDecision", opts));
      },
    );

  program
    .command("decide")
    .description(
      "Decide a waiting change set action by action: every action named once with --approve, --reject or --edit",
    )
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption(
      "--hash <sha>",
      'the change set\'s hash as the card shows it (its "Set hash:" line)',
      cap("--hash", LIMITS.hash),
    )
    .option(
      "--approve <ids>",
      "approve these actions (a1, or a1,a3; repeatable)",
      capEach("--approve", LIMITS.id),
    )
    .option(
      "--reject <ids|id=reason>",
      "reject these actions (a2, or a2,a3; a2=REASON gives that action its own reason; repeatable)",
      capEach("--reject", LIMITS.reason),
    )
    .option(
      "--reason <text>",
      "the reason for the rejected actions that have none of their own",
      cap("--reason", LIMITS.reason),
    )
    .option(
      "--edit <ids>",
      "edit these actions (each needs --set; creates a new revision of the set to approve; repeatable)",
      capEach("--edit", LIMITS.id),
    )
    .option(
      "--set <ACTION.FIELD=VALUE>",
      'a field of an edited action, e.g. a2.POST_MESSAGE="Shorter." or a1.PRIORITY=high (repeatable)',
      capEach("--set", LIMITS.setValue),
    )
    .option(
      "--as <approver>",
      "approver id, one for every action (or ACTION_ENVELOPE_DEFAULT_APPROVER)",
      cap("--as", LIMITS.id),
    )
    .option(
      "--key <file>",
      "approver's Ed25519 private key (PEM); each action's decision is signed on its own",
      cap("--key", LIMITS.path),
    )
    .option(
      "--override <gate=reason>",
      "pass an overridable policy gate for the approved actions, with a reason",
      cap("--override", LIMITS.reason),
    )
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(
      async (
        thread: string,
        opts: {
          hash: string;
          approve?: string[];
          reject?: string[];
          reason?: string;
          edit?: string[];
          set?: string[];
          as: string;
          key?: string;
          override?: string;
          json?: boolean;
          api?: string;
        },
        cmd: Command,
      ) => {
        const { planSetDecisions, setDecisions } = await decisions();
        // Flags that cannot make a valid decision are refused before anything is opened or sent.
        planSetDecisions(opts);
        await sendDecision(thread, opts, cmd, (view: ThreadView) => setDecisions(view, opts));
      },
    );

  program
    .command("recover")
    .description("Finish a run that a crash stopped between steps (never re-sends a write)")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .option("--json", "print one JSON object")
    .action(async (thread: string, opts: { json?: boolean }) => {
      const printer = new Printer(process.stdout, Boolean(opts.json));
      const { recoverThread } = await import("../app/threads.js");
      process.exitCode = await withApp(async (app) => {
        return report(printer, await recoverThread(app, thread, printer.onStep));
      });
    });

  // As `program.command()` would: the parent's help-after-error and exit override carry over.
  program.addCommand(emulatorCommand().copyInheritedSettings(program));
  program.addCommand(mcpCommand().copyInheritedSettings(program));

  program.addCommand(keygenCommand());

  for (const command of lifecycleCommands()) program.addCommand(command);

  program.addCommand(auditCommand());
  program.addCommand(doctorCommand());
  program.addCommand(policyCommand());
  program.addCommand(workerCommand());
  program.addCommand(apiTokenCommand());
  for (const command of inboxCommands()) program.addCommand(command);

  escapeCommanderOutput(program);
  return program;
}

/**
 * Commander's own messages (unknown option, invalid argument, missing argument) quote what was typed;
 * controls and bidi characters in them are marked before they reach the terminal (line breaks and
 * markers our parsers already wrote are kept). Applied to the whole tree, added commands too.
 */
function escapeCommanderOutput(command: Command): void {
  command.configureOutput({ writeErr: (text) => process.stderr.write(escapeRendered(text)) });
  for (const sub of command.commands) escapeCommanderOutput(sub);
}

/**
 * An error no handler above knew: one line (the message escaped), the likely fix where we can tell
 * (a model provider's answer, a Bitrix24 answer), and the stack frames only with --debug.
 */
export function describeUnexpected(err: Error, debug: boolean): string {
  const head = `${err.name}: ${err.message}`;
  if (debug) {
    const stack = err.stack ?? "";
    if (stack.startsWith(head)) return escapeForTerminal(head) + escapeLines(stack.slice(head.length));
    return escapeForTerminal(err.message) + (stack ? `\n${escapeLines(stack)}` : "");
  }
  if (isModelProviderError(err)) {
    const failure = describeModelError(err);
    return `model provider (${modelReasonCode(failure)}): ${escapeForTerminal(modelFailureLine(failure, { endpoint: process.env["GROQ_BASE_URL"] || undefined }))}`;
  }
  if (isBitrix24Error(err)) {
    const fix =
      err.kind === "auth"
        ? "; check the webhook code in BITRIX24_WEBHOOK_URL and its scopes (task, user; crm for deals)"
        : "";
    return `Bitrix24 ${err.kind}: ${escapeForTerminal(err.description)}${fix}`;
  }
  return `${escapeForTerminal(err.name && err.name !== "Error" ? head : err.message)}  (run again with --debug for the stack trace)`;
}

export async function main(argv: string[]): Promise<number> {
  // --debug (anywhere before a "--") is ours, not a command's: it only adds stack traces to errors.
  const end = argv.indexOf("--");
  const debug =
    argv.some((a, i) => a === "--debug" && (end < 0 || i < end)) ||
    process.env["ACTION_ENVELOPE_DEBUG"] === "1";
  argv = argv.filter((a, i) => !(a === "--debug" && (end < 0 || i < end)));
  // Child processes (our MCP server) print their stacks too.
  if (debug) process.env["ACTION_ENVELOPE_DEBUG"] = "1";
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: "user" });
    return Number(process.exitCode ?? 0);
  } catch (e) {
    const err = e as Error & { code?: string; exitCode?: number };
    if (err.code?.startsWith("commander.")) {
      return err.code === "commander.helpDisplayed" || err.code === "commander.version"
        ? EXIT_OK
        : EXIT_USAGE;
    }
    if (e instanceof ConfigError) {
      process.stderr.write(
        `configuration error: ${escapeForTerminal(e.message)}\n  (see .env.example for every setting)\n`,
      );
      return EXIT_USAGE;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`error: ${escapeForTerminal(e.message)}\n`);
      return EXIT_USAGE;
    }
    if (e instanceof DecisionNotAcceptedError) {
      if (argv.includes("--json"))
        process.stdout.write(
          `${stringifyJsonSafe({ threadId: e.threadId, refused: { code: e.code, reason: e.detail } })}\n`,
        );
      process.stderr.write(`refused (${e.code}): ${escapeForTerminal(e.message)}\n`);
      // Naming a thread that does not exist is a usage error, like any other wrong argument.
      if (e.code === "NO_SUCH_THREAD") {
        process.stderr.write(`  list the waiting approvals with: npm run cli -- pending\n`);
        return EXIT_USAGE;
      }
      return EXIT_OUTCOME;
    }
    process.stderr.write(`error: ${describeUnexpected(err, debug)}\n`);
    return EXIT_OUTCOME;
  }
}

const isEntry =
  process.argv[1] && /(?:cli(?:-bundle)?[\\/]main\.[jt]s|action-envelope(?:\.mjs)?)$/.test(process.argv[1]);
if (isEntry) {
  // A reader that went away (`| head`) is not an error of ours: the rest of the output is dropped and
  // the command finishes normally (closing the MCP child and the stores) instead of dying on EPIPE.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  loadDotEnv();
  const code = await main(process.argv.slice(2));
  process.exitCode = code;
  // MCP child processes and sqlite handles are closed by then; exit explicitly so a stray timer cannot hold the CLI,
  // but only once what was printed has left: to a pipe, a large --json (pending of 10,000 is 3 MB) is
  // still being written when main returns, and exiting then cuts it off.
  let open = 2;
  const flushed = () => void (--open === 0 && process.exit(code));
  process.stdout.write("", flushed);
  process.stderr.write("", flushed);
}
