/**
 * `action-envelope` command line. Every decision command resumes through the same path as every
 * other interface (src/app/threads.ts). Exit codes (src/cli/exit-codes.ts): 0 verified or waiting,
 * 1 usage/config error, 2 any other outcome (including a refused decision), 3 PARTIALLY_EXECUTED.
 *
 * Start-up is kept small: this file and the command factories import only commander and light
 * helpers; each command imports what it needs (the graph, MCP, stores, the API client, the emulator)
 * inside its action, so `--help` loads none of it (docs/operations.md: Performance; bench/cli-startup.ts).
 */
import { Command } from "commander";
import { DecisionNotAcceptedError } from "../errors.js";
import { loadDotEnv } from "../config/env.js";
import { auditCommand } from "./audit-command.js";
import { doctorCommand } from "./doctor-command.js";
import { policyCommand } from "./policy-command.js";
import { workerCommand } from "./worker-command.js";
import { apiTokenCommand } from "./api-token-command.js";
import { lifecycleCommands } from "./lifecycle-commands.js";
import { keygenCommand } from "./keygen-command.js";
import { emulatorCommand, mcpCommand } from "./portal-commands.js";
import { recoverCommand, runCommand, startCommand, undoCommand } from "./run-commands.js";
import { pendingCommand } from "./pending-command.js";
import { showCommand } from "./show-command.js";
import { decisionCommands } from "./decision-commands.js";
import { inboxCommands } from "../inbox/command.js";
import { EXIT_OK, EXIT_OUTCOME, EXIT_USAGE } from "./exit-codes.js";
import { reportUsageError } from "./usage-error.js";
import { escapeForTerminal, escapeLines, escapeRendered, stringifyJsonSafe } from "../text/escape.js";
import {
  describeModelError,
  isModelProviderError,
  modelFailureLine,
  modelReasonCode,
} from "../models/model-errors.js";
import { isBitrix24Error } from "../bitrix24/errors.js";

export function buildProgram(): Command {
  const program = new Command("action-envelope")
    .description("Propose Bitrix24 task changes with an AI agent; execute exactly what a human approved.")
    .showHelpAfterError()
    .exitOverride();
  // As `program.command()` would: the parent's help-after-error and exit override carry over.
  const add = (command: Command) => program.addCommand(command.copyInheritedSettings(program));
  add(startCommand());
  add(runCommand());
  add(undoCommand());
  add(pendingCommand());
  add(showCommand());
  for (const command of decisionCommands()) add(command);
  add(recoverCommand());
  add(emulatorCommand());
  add(mcpCommand());

  for (const command of [
    keygenCommand(),
    ...lifecycleCommands(),
    auditCommand(),
    doctorCommand(),
    policyCommand(),
    workerCommand(),
    apiTokenCommand(),
    ...inboxCommands(),
  ])
    program.addCommand(command);

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
  const isDebugFlag = (a: string, i: number) => a === "--debug" && (end < 0 || i < end);
  const debug = argv.some(isDebugFlag) || process.env["ACTION_ENVELOPE_DEBUG"] === "1";
  argv = argv.filter((a, i) => !isDebugFlag(a, i));
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
    const usage = reportUsageError(e);
    if (usage !== undefined) return usage;
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
