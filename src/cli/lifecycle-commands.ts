/**
 * Lifecycle commands: answer a structured question, cancel a waiting approval, sweep expired ones.
 * They resume through the same decision path as approve/reject/edit.
 */
import { Command } from "commander";
import type { ThreadView } from "../app/view-thread.js";
import { DecisionNotAcceptedError, UsageError } from "../errors.js";
import { Printer, threadJson } from "./render.js";
import { withApp } from "./session.js";
import { cap, capEach, LIMITS } from "./limits.js";
import { esc } from "../text/escape.js";
import { defaultApprover } from "./decision-commands.js";
import { intervalOf, openApiDue } from "./worker-command.js";
import type { ResumeValue } from "../hitl/contract.js";
import { exitCodeForView } from "./exit-codes.js";
import { API_OPTION, apiOf, runApiCommand } from "./api-option.js";

function show(printer: Printer, view: ThreadView): void {
  if (printer.json) return printer.emitJson(threadJson(view));
  if (view.status === "awaiting_input") printer.question(view);
  else if (view.status === "awaiting_approval") {
    printer.card(view);
    printer.howToDecide(view, " --as <approver-id>");
  } else printer.outcome(view);
}

export function parseAnswers(pairs: string[]): Record<string, string> {
  const answers: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set must be name=value, got "${pair}"`);
    answers[pair.slice(0, eq).trim()] = pair.slice(eq + 1);
  }
  return answers;
}

export function lifecycleCommands(): Command[] {
  const answer = new Command("answer")
    .description("Answer a structured question the agent asked (validated against its schema)")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption("--set <name=value>", "an answer field (repeatable)", capEach("--set", LIMITS.setValue))
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(async (thread: string, opts: { set: string[]; json?: boolean; api?: string }) => {
      const api = await apiOf(opts.api);
      const { submitDecision } = await import("../app/threads.js");
      const { viewThread } = await import("../app/view-thread.js");
      const build = (view: ThreadView) => {
        if (view.status !== "awaiting_input")
          throw new DecisionNotAcceptedError(
            thread,
            "NOT_AWAITING_APPROVAL",
            `the thread is not waiting for an answer (status ${view.status})`,
          );
        return { answers: parseAnswers(opts.set) } as unknown as ResumeValue;
      };
      if (api) {
        return void (process.exitCode = await runApiCommand(api, {
          kind: "decide",
          threadId: thread,
          json: Boolean(opts.json),
          explicitApprover: true,
          build,
        }));
      }
      const printer = new Printer(process.stdout, Boolean(opts.json));
      process.exitCode = await withApp(async (app) => {
        const before = await viewThread(app, thread);
        const after = await submitDecision(app, thread, build(before), printer.onStep);
        const refusedNow = (after.state?.refusals.length ?? 0) > (before.state?.refusals.length ?? 0);
        show(printer, after);
        return exitCodeForView(after, refusedNow);
      });
    });

  const cancel = new Command("cancel")
    .description("Cancel a waiting approval: the nonce is voided and later decisions are refused")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption("--reason <text>", "why it is cancelled", cap("--reason", LIMITS.reason))
    .option(
      "--as <id>",
      "who cancels: the requester or an approver (or ACTION_ENVELOPE_DEFAULT_APPROVER)",
      cap("--as", LIMITS.id),
    )
    .option("--json", "print one JSON object")
    .option(...API_OPTION)
    .action(async (thread: string, opts: { reason: string; as?: string; json?: boolean; api?: string }) => {
      // No identity is invented: without --as only a configured default names who cancels, and it is said first.
      opts.as ??= defaultApprover(
        "cancel needs who cancels: name it with --as <id> (the requester or an approver), or set ACTION_ENVELOPE_DEFAULT_APPROVER=<id>",
        "cancelling",
      );
      const by = { id: opts.as };
      const cancelOf = (approval: { envelopeHash: string; nonce: string }): ResumeValue => ({
        decisions: [
          {
            type: "cancel",
            envelopeHash: approval.envelopeHash,
            nonce: approval.nonce,
            by,
            reason: opts.reason,
          },
        ],
      });
      const api = await apiOf(opts.api);
      const { submitDecision } = await import("../app/threads.js");
      const { viewThread } = await import("../app/view-thread.js");
      if (api) {
        // On a server with tokens, --as must be the token's identity (the graph refuses anyone else).
        const build = (view: ThreadView): ResumeValue => {
          if (view.status !== "awaiting_approval")
            throw new DecisionNotAcceptedError(
              thread,
              "NOT_AWAITING_APPROVAL",
              `nothing to cancel: the thread is ${view.status}`,
            );
          return cancelOf(view.approval!);
        };
        const succeeded = (view: ThreadView) => view.state?.reasonCode === "CANCELLED";
        return void (process.exitCode = await runApiCommand(api, {
          kind: "decide",
          threadId: thread,
          json: Boolean(opts.json),
          explicitApprover: true,
          build,
          succeeded,
        }));
      }
      const printer = new Printer(process.stdout, Boolean(opts.json));
      process.exitCode = await withApp(async (app) => {
        const before = await viewThread(app, thread);
        const resume =
          before.status === "awaiting_approval"
            ? cancelOf(before.approval!)
            : { cancel: { by, reason: opts.reason } };
        const after = await submitDecision(app, thread, resume, printer.onStep);
        show(printer, after);
        return after.state?.reasonCode === "CANCELLED" ? 0 : 2;
      });
    });

  const sweep = new Command("sweep")
    .description("Close waiting approvals past their expiry (escalating where policy says so)")
    .option("--watch", "keep sweeping")
    .option("--interval <seconds>", "seconds between sweeps with --watch", "30")
    .option("--json", "print JSON")
    .option(
      "--api <url>",
      "the approvals of threads this LangGraph API server keeps, found in its journal and expired through its API (token: LANGGRAPH_API_TOKEN, role admin)",
    )
    .action(async (opts: { watch?: boolean; interval: string; json?: boolean; api?: string }) => {
      const interval = intervalOf(opts.interval);
      const { sweepExpired } = await import("../app/due-work.js");
      // With --api: the due expiries of the server's journal (as `worker --api`), expired through the server.
      const api = opts.api ? await openApiDue(opts.api) : undefined;
      const printer = new Printer(process.stdout, Boolean(opts.json));
      let stop = false;
      process.once("SIGINT", () => (stop = true));
      process.once("SIGTERM", () => (stop = true));
      try {
        do {
          const results = api
            ? (await (await import("../api/api-due-work.js")).runApiDueWork(api.ctx)).swept
            : await withApp((app) => sweepExpired(app));
          if (opts.json) printer.emitJson({ at: new Date().toISOString(), results });
          else if (results.length === 0) printer.line(`${new Date().toISOString()} nothing expired`);
          else for (const r of results) printer.line(esc`${r.threadId} ${r.result}: ${r.detail}`);
          if (!opts.watch) break;
          for (let waited = 0; waited < interval * 1000 && !stop; waited += 200)
            await new Promise((r) => setTimeout(r, 200));
        } while (!stop);
      } finally {
        await api?.close();
      }
    });

  return [answer, cancel, sweep];
}
