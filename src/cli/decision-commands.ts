/**
 * The decision commands: approve, reject, edit, and decide (a change set action by action). Each builds
 * its decision from the thread's view and resumes through the same path as every other interface
 * (src/app/threads.ts), locally or through the LangGraph API server.
 */
import { Command } from "commander";
import { loadConfig } from "../config/env.js";
import { withApp } from "./session.js";
import type { ThreadView } from "../app/view-thread.js";
import type { ResumeValue } from "../hitl/contract.js";
import { Printer } from "./render.js";
import { UsageError } from "../errors.js";
import { cap, capEach, LIMITS } from "./limits.js";
import { esc } from "../text/escape.js";
import { API_OPTION, apiOf, runApiCommand } from "./api-option.js";
import { report } from "./thread-report.js";

async function decide(
  threadId: string,
  build: (view: ThreadView) => unknown,
  json: boolean,
): Promise<number> {
  const printer = new Printer(process.stdout, json);
  const { submitDecision } = await import("../app/threads.js");
  const { viewThread } = await import("../app/view-thread.js");
  return withApp(async (app) => {
    const before = await viewThread(app, threadId);
    // When nothing is waiting, the shared path produces the precise refusal (ended, unknown, interrupted).
    const resume = before.status === "awaiting_approval" ? build(before) : { decisions: [] };
    const after = await submitDecision(app, threadId, resume, printer.onStep);
    const refusedNow = (after.state?.refusals.length ?? 0) > (before.state?.refusals.length ?? 0);
    return report(printer, after, refusedNow);
  });
}

/** The decision builders (envelope core, signatures), loaded by the decision commands only. */
const decisions = () => import("./decisions.js");
const built = async <O>(which: "approveDecision" | "rejectDecision" | "editDecision", opts: O) => {
  const builder = (await decisions())[which] as (view: ThreadView, opts: O) => ResumeValue;
  return (view: ThreadView) => builder(view, opts);
};
/**
 * No identity is invented: a default approver comes only from configuration (else a UsageError with
 * `missing`), and is said before anything is sent.
 */
export function defaultApprover(missing: string, acting: string): string {
  const configured = loadConfig().defaultApprover;
  if (!configured) throw new UsageError(missing);
  process.stderr.write(
    `${acting} ` +
      esc`as ${configured}, from ACTION_ENVELOPE_DEFAULT_APPROVER (self-declared unless signed)` +
      "\n",
  );
  return configured;
}

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
  if (!explicitApprover && !(api?.token && !opts.key))
    opts.as = defaultApprover(
      `${cmd.name()} needs the approver: name it with --as <approver-id>, or set ACTION_ENVELOPE_DEFAULT_APPROVER=<approver-id>${api ? " (or send an API token: LANGGRAPH_API_TOKEN, and the server records its identity)" : ""}`,
      "deciding",
    );
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

/** What every decision command takes besides its own options. */
type SendOptions = { as: string; key?: string; json?: boolean; api?: string };

/**
 * A decision command on a thread: its own options (`own`), then --as, --key and, where it has help
 * for it, --override, then --json and --api; it sends the decision `build` makes from its options.
 */
function decisionCommand<O>(
  name: string,
  description: string,
  own: (c: Command) => Command,
  help: { as?: string; key?: string; override?: string },
  build: (opts: O & SendOptions) => Promise<(view: ThreadView) => ResumeValue>,
): Command {
  const c = own(
    new Command(name).description(description).argument("<thread>", "thread id", cap("thread", LIMITS.id)),
  )
    .option(
      "--as <approver>",
      help.as ?? "approver id (or ACTION_ENVELOPE_DEFAULT_APPROVER)",
      cap("--as", LIMITS.id),
    )
    .option("--key <file>", help.key ?? "approver's Ed25519 private key (PEM)", cap("--key", LIMITS.path));
  if (help.override) c.option("--override <gate=reason>", help.override, cap("--override", LIMITS.reason));
  return c
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(async (thread: string, opts: O & SendOptions, cmd: Command) =>
      sendDecision(thread, opts, cmd, await build(opts)),
    );
}

/** The --hash option, with what it names on the card. */
const hashOption = (c: Command, help: string) =>
  c.requiredOption("--hash <sha>", help, cap("--hash", LIMITS.hash));

/** `approve`: approves exactly the envelope (or the change set) with the hash given. */
const approveCommand = () =>
  decisionCommand<{ hash: string; override?: string }>(
    "approve",
    "Approve exactly the envelope (or the whole change set) with this hash",
    (c) => hashOption(c, 'the envelope hash shown on the card (sha256:…); for a change set, its "Set hash:"'),
    {
      key: "approver's Ed25519 private key (PEM) to sign the decision",
      override: "pass an overridable policy gate, with a reason",
    },
    (opts) => built("approveDecision", opts),
  );

/** `reject`: rejects the waiting envelope (a change set: every action of it). */
const rejectCommand = () =>
  decisionCommand<{ reason: string }>(
    "reject",
    "Reject the waiting envelope (a change set: every action of it)",
    (c) =>
      c.requiredOption(
        "--reason <text>",
        "why; shown to the model when revision is allowed",
        cap("--reason", LIMITS.reason),
      ),
    {},
    (opts) => built("rejectDecision", opts),
  );

/** `edit`: edits the waiting proposal into a new revision that needs its own approval. */
const editCommand = () =>
  decisionCommand<{ set: string[] }>(
    "edit",
    "Edit the waiting proposal; creates a new revision that needs its own approval",
    (c) =>
      c.requiredOption("--set <FIELD=VALUE>", "field to set (repeatable)", capEach("--set", LIMITS.setValue)),
    {},
    (opts) => built("editDecision", opts),
  );

/** `decide`: decides a waiting change set action by action. */
const decideCommand = () =>
  decisionCommand<{
    hash: string;
    approve?: string[];
    reject?: string[];
    reason?: string;
    edit?: string[];
    set?: string[];
    override?: string;
  }>(
    "decide",
    "Decide a waiting change set action by action: every action named once with --approve, --reject or --edit",
    (c) =>
      hashOption(c, 'the change set\'s hash as the card shows it (its "Set hash:" line)')
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
        ),
    {
      as: "approver id, one for every action (or ACTION_ENVELOPE_DEFAULT_APPROVER)",
      key: "approver's Ed25519 private key (PEM); each action's decision is signed on its own",
      override: "pass an overridable policy gate for the approved actions, with a reason",
    },
    async (opts) => {
      const { planSetDecisions, setDecisions } = await decisions();
      // Flags that cannot make a valid decision are refused before anything is opened or sent.
      planSetDecisions(opts);
      return (view: ThreadView) => setDecisions(view, opts);
    },
  );

/** The decision commands, in the order the help lists them. */
export function decisionCommands(): Command[] {
  return [approveCommand(), rejectCommand(), editCommand(), decideCommand()];
}
