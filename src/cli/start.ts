/**
 * The main job (`npm start`): run a request end to end on whatever is configured — by default the
 * embedded emulator, the offline model and SQLite under .data/ — showing each step, and at a terminal
 * ask approve / reject / edit (a change set: approve or reject it whole, or approve / reject each
 * action, sent as `decide` sends it). Without a terminal it leaves the thread waiting and prints the command.
 */
import { randomUUID } from "node:crypto";
import { select, input } from "@inquirer/prompts";
import { loadConfig } from "../config/env.js";
import { createDeps } from "../runtime/deps.js";
import { openApp, type App } from "../app/open-app.js";
import { startRun, submitDecision } from "../app/threads.js";
import { viewThread, type ThreadView } from "../app/view-thread.js";
import type { RequestScope } from "../envelope/records.js";
import type { ResumeValue } from "../hitl/contract.js";
import { answerFields, Printer } from "./render.js";
import { exitCodeForOutcome } from "./exit-codes.js";
import { approveDecision, editDecision, rejectDecision, setDecisions } from "./decisions.js";
import { esc } from "../text/escape.js";
import { LIMITS, withinCap } from "./limits.js";
import { startInbox, type RunningInbox, type SignInEvent } from "../inbox/server.js";
import { loadInboxUsers, parseInboxUsers } from "../inbox/users.js";
import { runDoctor } from "./doctor-command.js";
import { renderDoctor } from "./doctor-check.js";

export const DEMO_REQUEST = "rename task 4 to LAB-AGENT-EXEC-002 - CLEAN TRUE PATH";
/** The approver the default policy names for the offline demo (policy/default.json, task-approvers). */
const DEMO_APPROVER = "demo-approver";

export interface MainJobOptions {
  request: string | undefined;
  requestedBy: string;
  prompt: boolean;
  scope?: RequestScope;
  /**
   * `--inbox`: also serve the web approval inbox on a free 127.0.0.1 port (only when
   * ACTION_ENVELOPE_INBOX_USERS names the approver credentials), and decide the waiting approval there.
   */
  inbox?: boolean;
}

/** Is a decision running on this thread right now (its lock held)? Probes the lock for a moment. */
async function beingDriven(app: App, threadId: string): Promise<boolean> {
  const owner = `${process.pid}:probe:${randomUUID()}`;
  if (!(await app.deps.journal.acquireThreadLock(threadId, owner, 1_000))) return true;
  await app.deps.journal.releaseThreadLock(threadId, owner);
  return false;
}

/** Resolves on Ctrl-C / SIGTERM (true) or when `done` resolves (false). */
function untilSignal(done: Promise<unknown>): Promise<boolean> {
  return new Promise((resolve) => {
    const stop = () => resolve(true);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    void done.then(() => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve(false);
    });
  });
}

export async function runMainJob(opts: MainJobOptions): Promise<number> {
  const printer = new Printer(process.stdout);
  const config = loadConfig();
  // A real portal (not the embedded emulator): check it, the model, the policy and the stores first,
  // so a wrong URL, key or scope is one line with its fix rather than a failed run.
  if (config.webhookUrl || config.mcp.mode === "url") {
    const checks = await runDoctor();
    const failed = checks.filter((c) => c.status === "fail");
    if (failed.length > 0) {
      process.stderr.write(renderDoctor(failed));
      process.stderr.write("Fix these and start again (`npm run cli -- doctor` shows every check).\n");
      return 1;
    }
    printer.line(
      `checks:  ${checks.filter((c) => c.status === "pass").length} passed, ${checks.filter((c) => c.status === "warn").length} warning(s) (npm run cli -- doctor)`,
    );
  }
  const deps = await createDeps(config);
  const app = openApp(deps);
  let inbox: RunningInbox | undefined;
  try {
    const request = opts.request ?? DEMO_REQUEST;
    printer.line(
      printer.paint(
        "bold",
        "action-envelope — the agent proposes, a human approves the exact change, code executes and verifies",
      ),
    );
    printer.line(esc`model:   ${deps.modelLabel} (${config.model.chosenBecause})`);
    printer.line(
      deps.emulator
        ? esc`portal:  embedded Bitrix24 emulator at ${deps.portal} (state in ${config.dataDir}/emulator.sqlite)`
        : esc`portal:  ${deps.portal}`,
    );
    printer.line(esc`data:    ${config.dataDir}`);
    printer.line(esc`request: "${request}" (requested by ${opts.requestedBy})`);
    if (opts.inbox) {
      // The offline demo (the embedded emulator) needs no users file: its approver signs in by a one-time link.
      const demo = deps.emulator !== undefined;
      if (config.inboxUsersPath || demo) {
        const users = config.inboxUsersPath
          ? loadInboxUsers(config.inboxUsersPath)
          : parseInboxUsers('{"users":[]}', "no users file");
        const onSignIn = (e: SignInEvent) =>
          printer.line(esc`web inbox: ${e.user} signed in (${e.how}) from ${e.address} at ${e.at}`);
        inbox = await startInbox({ app, users, port: 0, onSignIn });
        const accounts = users.ids().length;
        printer.line(
          esc`web inbox: ${inbox.url}/ (${accounts > 0 ? `${accounts} approver account(s)` : "no password accounts"}; Ctrl-C stops it)`,
        );
        if (demo) {
          const link = inbox.signInLink(DEMO_APPROVER);
          printer.line(
            esc`web inbox: sign in as ${DEMO_APPROVER}, the offline demo's approver, with this one-time link (this computer only, once, until ${link.expiresAt}):`,
          );
          printer.line(esc`  ${link.url}`);
        }
      } else {
        printer.line(
          "web inbox: not started. --inbox needs ACTION_ENVELOPE_INBOX_USERS, a JSON file of approver credentials:" +
            " run `npm run cli -- inbox-user --id <approver> --file inbox-users.json` (it creates the file or adds to it), and set ACTION_ENVELOPE_INBOX_USERS to that file.",
        );
      }
    }
    printer.line();

    let view = await startRun(
      app,
      { request, requestedBy: opts.requestedBy, ...(opts.scope ? { scope: opts.scope } : {}) },
      { onStep: printer.onStep },
    );
    // A prompt needs a person at both ends: keys from a terminal and the card on one (not a file or pipe).
    const interactive = opts.prompt && Boolean(process.stdin.isTTY && process.stdout.isTTY);
    while (view.status === "awaiting_approval" || view.status === "awaiting_input") {
      if (inbox) {
        // The web inbox decides; the terminal only waits (no second place to decide at the same time).
        if (view.status === "awaiting_input") printer.question(view);
        else printer.card(view);
        printer.line(
          esc`Decide it in the web inbox: ${inbox.url}/t/${view.threadId} (sign in as an approver; Ctrl-C stops the inbox, and the thread keeps waiting)`,
        );
        const threadId = view.threadId;
        const waitingAt = (v: ThreadView) =>
          JSON.stringify([v.status, v.approval?.envelopeHash ?? null, v.input?.askedAt ?? null]);
        const was = waitingAt(view);
        let stopped = false;
        const changed = (async () => {
          for (;;) {
            await new Promise((r) => setTimeout(r, 300));
            if (stopped) return view;
            const now = await viewThread(app, threadId);
            // Between steps while the inbox's decision runs (it holds the thread's lock): not an
            // outcome yet. Only a run nobody drives any more (the lock is free) counts as stopped.
            if (now.status === "interrupted_run" && (await beingDriven(app, threadId))) continue;
            if (waitingAt(now) !== was) return now;
          }
        })();
        if (await untilSignal(changed)) {
          stopped = true;
          await changed;
          printer.line(
            esc`Stopped. The thread ${threadId} keeps waiting; \`npm run cli -- inbox\` or \`show ${threadId}\` picks it up.`,
          );
          return 0;
        }
        view = await changed;
        continue;
      }
      if (view.status === "awaiting_input") {
        printer.question(view);
        if (!interactive) return 0;
        const answers = await untilCtrlC(askAnswers(view));
        if (answers === STOPPED) return stoppedAt(printer, view);
        view = await submitDecision(app, view.threadId, { answers }, printer.onStep);
        continue;
      }
      printer.card(view);
      if (!interactive) {
        printer.line("No terminal to ask at, so the approval stays waiting (durably, in SQLite).");
        printer.howToDecide(view, " --as demo-approver");
        printer.line(
          esc`or reject it with: npm run cli -- reject ${view.threadId} --as demo-approver --reason "..."`,
        );
        return 0;
      }
      const resume = await untilCtrlC(ask(view));
      if (resume === STOPPED) return stoppedAt(printer, view);
      view = await submitDecision(app, view.threadId, resume, printer.onStep);
    }
    printer.outcome(view);
    printer.line(esc`thread: ${view.threadId}`);
    return exitCodeForOutcome(view.state?.outcome);
  } finally {
    await inbox?.close();
    await app.close();
  }
}

const STOPPED = Symbol("stopped at the prompt");

/** A prompt's answer, or STOPPED when the person pressed Ctrl-C at it (nothing was sent). */
async function untilCtrlC<T>(asked: Promise<T>): Promise<T | typeof STOPPED> {
  try {
    return await asked;
  } catch (e) {
    if (e instanceof Error && e.name === "ExitPromptError") return STOPPED;
    throw e;
  }
}

function stoppedAt(printer: Printer, view: ThreadView): number {
  printer.line(
    esc`Stopped at the prompt; nothing was sent. The thread ${view.threadId} keeps waiting: \`npm run cli -- show ${view.threadId}\` picks it up.`,
  );
  return 0;
}

/** An answer typed at the prompt, required and at most `limit` characters (`name` says of what). */
const askRequired = (message: string, name: string, limit: number): Promise<string> =>
  input({ message, required: true, validate: withinCap(name, limit) });

async function askAnswers(view: ThreadView): Promise<Record<string, string>> {
  const answers: Record<string, string> = {};
  for (const [name, p] of answerFields(view.input!)) {
    answers[name] = p.enum
      ? await select({
          message: esc`${p.description ?? name}`,
          choices: p.enum.map((v) => ({ name: esc`${v}`, value: v })),
        })
      : await askRequired(esc`${p.description ?? name} (${p.type})`, name, LIMITS.setValue);
  }
  return answers;
}

/**
 * Who decides: typed at the prompt. No id is invented: the answer is filled in only from
 * ACTION_ENVELOPE_DEFAULT_APPROVER, and the prompt says so.
 */
function askApprover(): Promise<string> {
  const configured = loadConfig().defaultApprover;
  return input({
    message: configured
      ? "Your approver id (default from ACTION_ENVELOPE_DEFAULT_APPROVER)"
      : "Your approver id",
    ...(configured ? { default: configured } : {}),
    required: true,
    validate: withinCap("approver id", LIMITS.id),
  });
}

/**
 * The decision at the prompt, bound to the hash of the card printed above (a change set's: its set
 * hash), so a newer revision refuses it (HASH_MISMATCH). A change set is approved or rejected whole, or
 * action by action (`askEach`); editing one of its actions is left to `decide --edit`, and the prompt
 * says so.
 */
async function ask(view: ThreadView): Promise<ResumeValue> {
  const a = view.approval!;
  const cs = a.changeSet;
  const ids = cs?.actions.map((x) => x.actionId) ?? [];
  const choice = await select<"approve" | "reject" | "edit" | "each">(
    cs
      ? {
          message: esc`Decision for change set ${cs.setHash} (revision ${a.revision}, ${ids.length} actions: ${ids.join(", ")})`,
          choices: [
            { name: "approve the whole set (every action)", value: "approve" },
            { name: "reject the whole set", value: "reject" },
            {
              name: esc`decide each action: approve or reject it (to edit an action: npm run cli -- decide ${view.threadId} --edit …)`,
              value: "each",
            },
          ],
        }
      : {
          message: esc`Decision for envelope ${a.envelopeHash} (revision ${a.revision})`,
          choices: [
            { name: "approve exactly this envelope", value: "approve" },
            { name: "reject", value: "reject" },
            { name: "edit a field (creates a new revision to approve)", value: "edit" },
          ],
        },
  );
  const as = await askApprover();
  switch (choice) {
    case "approve":
      return approveDecision(view, { as, hash: cs?.setHash ?? a.envelopeHash });
    case "reject":
      return rejectDecision(view, { as, reason: await askRequired("Reason", "reason", LIMITS.reason) });
    case "edit": {
      const field = await askRequired("Field (UPPER_SNAKE, e.g. TITLE)", "field", LIMITS.id);
      const value = await askRequired(esc`New value for ${field}`, "value", LIMITS.setValue);
      return editDecision(view, { as, set: [`${field}=${value}`] });
    }
    case "each":
      return askEach(view, as);
    default: {
      const never: never = choice;
      throw new Error(`unknown choice ${String(never)}`);
    }
  }
}

/**
 * A change set's actions approved or rejected one by one: the answers become the flags `decide` takes
 * and are built by the same `setDecisions` (one decision per action, bound to the set hash of the card
 * shown).
 */
async function askEach(view: ThreadView, as: string): Promise<ResumeValue> {
  const cs = view.approval!.changeSet!;
  const approve: string[] = [];
  const reject: string[] = [];
  for (const [i, x] of cs.actions.entries()) {
    const o = x.envelope.object;
    const object = o.id === 0 ? `a new ${o.type}` : `${o.type} ${o.id}`;
    const d = await select({
      message: esc`Action ${i + 1} of ${cs.actions.length}, ${x.actionId}: ${x.envelope.operation} ${object} (${Object.keys(x.envelope.params).join(", ")})`,
      choices: [
        { name: esc`approve ${x.actionId}`, value: "approve" as const },
        { name: esc`reject ${x.actionId}`, value: "reject" as const },
      ],
    });
    if (d === "approve") {
      approve.push(x.actionId);
      continue;
    }
    const reason = await input({
      message: esc`Reason for rejecting ${x.actionId} (optional)`,
      validate: withinCap("reason", LIMITS.reason),
    });
    reject.push(reason.trim() === "" ? x.actionId : `${x.actionId}=${reason}`);
  }
  return setDecisions(view, {
    as,
    hash: cs.setHash,
    ...(approve.length ? { approve: [approve.join(",")] } : {}),
    ...(reject.length ? { reject } : {}),
  });
}
