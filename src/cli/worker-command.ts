/**
 * `worker`: a long-running process for a shared database. Decisions can be submitted by any CLI
 * process on any host (they all go through the same journal, locks and checkpoints); what needs a
 * process that stays up is the housekeeping nobody asks for: closing approvals past their expiry,
 * and finishing runs whose process died between steps (killed mid-execution, host lost).
 *
 * Several workers can run at once. Each thread is driven under the journal's thread lock, so two
 * workers never drive one thread together; a thread whose lock is still held (by a live process
 * mid-run) is left alone and looked at again next round. A run that already sent its write is
 * finished from the journal's write-ahead entry, never by sending the write again.
 *
 * Candidates for recovery come from the journal: every thread whose action is not yet closed
 * (waiting, decided, or stopped mid-execution).
 * Not found: a run that died before its first approval request (nothing was written; start it again)
 * or inside the final step after it closed the action (`recover <thread>` finishes it).
 */
import { Command } from "commander";
import type { App, SweepResult } from "../app/threads.js";
import { DecisionNotAcceptedError, UsageError } from "../errors.js";
import { Printer } from "./render.js";
import { esc } from "../text/escape.js";

export interface RecoveryResult {
  threadId: string;
  result: "recovered" | "busy" | "skipped";
  detail: string;
}

export interface WorkerRound {
  at: string;
  swept: SweepResult[];
  recovered: RecoveryResult[];
  /** A round that could not run (database or portal unreachable); the worker keeps going. */
  error?: string;
}

/** Finishes every indexed run that stopped between steps and that no live process is driving. */
export async function recoverInterrupted(app: App): Promise<RecoveryResult[]> {
  const threadIds = await app.deps.journal.listOpenThreads();
  const { recoverThread, viewThread } = await import("../app/threads.js");
  const results: RecoveryResult[] = [];
  for (const threadId of threadIds) {
    const view = await viewThread(app, threadId);
    if (view.status !== "interrupted_run") continue;
    try {
      const after = await recoverThread(app, threadId);
      results.push({
        threadId,
        result: "recovered",
        detail:
          after.status === "finished"
            ? `${after.state?.outcome} / ${after.state?.reasonCode}`
            : `now ${after.status}`,
      });
    } catch (e) {
      if (e instanceof DecisionNotAcceptedError && e.code === "IN_PROGRESS") {
        results.push({ threadId, result: "busy", detail: "another live process is driving it" });
      } else if (e instanceof UsageError) {
        // Finished or resumed by someone else between the look and the lock.
        results.push({ threadId, result: "skipped", detail: e.message });
      } else throw e;
    }
  }
  return results;
}

export async function workerRound(app: App): Promise<WorkerRound> {
  const at = new Date().toISOString();
  try {
    const { sweepExpired } = await import("../app/threads.js");
    const swept = await sweepExpired(app);
    const recovered = await recoverInterrupted(app);
    return { at, swept, recovered };
  } catch (e) {
    return { at, swept: [], recovered: [], error: (e as Error).message };
  }
}

function print(printer: Printer, round: WorkerRound): void {
  if (printer.json) return printer.emitJson(round);
  if (round.error) printer.line(esc`${round.at} round failed: ${round.error}`);
  for (const s of round.swept) printer.line(esc`${round.at} swept ${s.threadId} ${s.result}: ${s.detail}`);
  for (const r of round.recovered) printer.line(esc`${round.at} ${r.result} ${r.threadId}: ${r.detail}`);
}

export function workerCommand(): Command {
  return new Command("worker")
    .description(
      "Serve a shared database: sweep expired approvals and finish runs a dead process left; run as many as you like",
    )
    .option("--interval <seconds>", "seconds between rounds", "5")
    .option("--once", "one round, then exit")
    .option("--json", "one JSON object per round")
    .action(async (opts: { interval: string; once?: boolean; json?: boolean }) => {
      const interval = Number(opts.interval);
      if (!Number.isFinite(interval) || interval <= 0)
        throw new UsageError(`--interval must be a positive number of seconds, got "${opts.interval}"`);
      const printer = new Printer(process.stdout, Boolean(opts.json));
      // The runtime is loaded only when the command runs (docs/operations.md: Performance).
      const [{ loadConfig }, { createDeps }, { openApp }, { storageLabel }] = await Promise.all([
        import("../config/env.js"),
        import("../runtime/deps.js"),
        import("../app/threads.js"),
        import("../store/backends.js"),
      ]);
      const config = loadConfig();
      const app = openApp(await createDeps(config));
      let stop = false;
      let wake: (() => void) | undefined;
      const onSignal = () => {
        stop = true;
        wake?.();
      };
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        if (!opts.json)
          printer.line(
            esc`worker ${process.pid}: storage ${storageLabel(config)}; portal ${app.deps.portal}; every ${interval}s`,
          );
        let failed = false;
        do {
          const round = await workerRound(app);
          failed = round.error !== undefined;
          print(printer, round);
          if (opts.once || stop) break;
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, interval * 1000);
          });
        } while (!stop);
        process.exitCode = opts.once && failed ? 2 : 0;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
        await app.close();
      }
    });
}
