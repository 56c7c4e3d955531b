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
 * What a round works on comes from the journal's due index (src/app/due-work.ts): approvals past
 * their expiry, and actions left in a step past approval for longer than the resume grace
 * (ACTION_ENVELOPE_RESUME_GRACE_MS). Workers claim them under a lease, so several share the work.
 * Not found: a run that died before its first approval request (nothing was written; start it again)
 * or inside the final step after it closed the action (`recover <thread>` finishes it).
 *
 * `worker --api URL` works the same due index for the threads a LangGraph API server keeps, driving
 * them through its API (src/api/api-due-work.ts) instead of the CLI's checkpoints: expiries, and
 * recovery runs for runs the server stopped between steps.
 */
import { Command } from "commander";
import type { SweepResult } from "../app/threads.js";
import type { App } from "../app/open-app.js";
import type { RecoveryResult } from "../app/due-work.js";
import type { ApiDueContext } from "../api/api-due-work.js";
import { UsageError } from "../errors.js";
import { Printer } from "./render.js";
import { esc } from "../text/escape.js";

export interface WorkerRound {
  at: string;
  swept: SweepResult[];
  recovered: RecoveryResult[];
  /** A round that could not run (database or portal unreachable); the worker keeps going. */
  error?: string;
}

/** A round stamped with when it began; one that throws is a failed round, not the worker's end. */
async function stamped(work: () => Promise<Omit<WorkerRound, "at">>): Promise<WorkerRound> {
  const at = new Date().toISOString();
  try {
    return { at, ...(await work()) };
  } catch (e) {
    return { at, swept: [], recovered: [], error: (e as Error).message };
  }
}

/** One round: the due work only (src/app/due-work.ts); a round with nothing due loads no checkpoint. */
export const workerRound = (app: App): Promise<WorkerRound> =>
  stamped(async () => (await import("../app/due-work.js")).runDueWork(app));

function print(printer: Printer, round: WorkerRound): void {
  if (printer.json) return printer.emitJson(round);
  if (round.error) printer.line(esc`${round.at} round failed: ${round.error}`);
  for (const s of round.swept) printer.line(esc`${round.at} swept ${s.threadId} ${s.result}: ${s.detail}`);
  for (const r of round.recovered) printer.line(esc`${round.at} ${r.result} ${r.threadId}: ${r.detail}`);
}

/** What a worker process runs each round, what its first line says, and how it closes. */
interface WorkerSource {
  round(): Promise<WorkerRound>;
  banner: string;
  close(): Promise<void>;
}

/** The local worker: the CLI's own stores and checkpoints. */
async function localSource(interval: number): Promise<WorkerSource> {
  // The runtime is loaded only when the command runs (docs/operations.md: Performance).
  const [{ loadConfig }, { createDeps }, { openApp }, { storageLabel }] = await Promise.all([
    import("../config/env.js"),
    import("../runtime/deps.js"),
    import("../app/open-app.js"),
    import("../store/backends.js"),
  ]);
  const config = loadConfig();
  const app = openApp(await createDeps(config));
  return {
    round: () => workerRound(app),
    banner: esc`worker ${process.pid}: storage ${storageLabel(config)}; portal ${app.deps.portal}; every ${interval}s`,
    close: () => app.close(),
  };
}

/** The server's journal (same storage settings as the server) and its API with LANGGRAPH_API_TOKEN: what `worker --api` and `sweep --api` work with. */
export async function openApiDue(
  url: string,
): Promise<{ ctx: ApiDueContext; storage: string; close(): Promise<void> }> {
  const [{ loadConfig }, { createStoreDeps }, { storageLabel }, { apiTarget, apiClient }] = await Promise.all(
    [
      import("../config/env.js"),
      import("../runtime/deps.js"),
      import("../store/backends.js"),
      import("../api/cli-api.js"),
    ],
  );
  const config = loadConfig();
  const token = config.langgraphApi.token;
  const target = apiTarget(url, token ? { token } : {})!;
  const deps = await createStoreDeps(config);
  return {
    ctx: { journal: deps.journal, clock: deps.clock, client: apiClient(target), target },
    storage: storageLabel(config),
    close: () => deps.close(),
  };
}

/** The API worker: the due index of the server's journal, its threads driven through the API (src/api/api-due-work.ts). */
async function apiSource(url: string, interval: number): Promise<WorkerSource> {
  const due = await openApiDue(url);
  return {
    round: () => stamped(async () => (await import("../api/api-due-work.js")).runApiDueWork(due.ctx)),
    banner: esc`worker ${process.pid}: storage ${due.storage}; threads on ${due.ctx.target.url}; every ${interval}s`,
    close: () => due.close(),
  };
}

/** --interval of `worker` and `sweep`: seconds, a positive number. */
export function intervalOf(given: string): number {
  const interval = Number(given);
  if (!Number.isFinite(interval) || interval <= 0)
    throw new UsageError(`--interval must be a positive number of seconds, got "${given}"`);
  return interval;
}

export function workerCommand(): Command {
  return new Command("worker")
    .description(
      "Serve a shared database: sweep expired approvals and finish runs a dead process left; run as many as you like",
    )
    .option("--interval <seconds>", "seconds between rounds", "5")
    .option("--once", "one round, then exit")
    .option("--json", "one JSON object per round")
    .option(
      "--api <url>",
      "expire the approvals and finish the stopped runs of threads this LangGraph API server keeps, through its API (token: LANGGRAPH_API_TOKEN, role admin); shares the server's journal",
    )
    .action(async (opts: { interval: string; once?: boolean; json?: boolean; api?: string }) => {
      const interval = intervalOf(opts.interval);
      const printer = new Printer(process.stdout, Boolean(opts.json));
      const source = opts.api ? await apiSource(opts.api, interval) : await localSource(interval);
      let stop = false;
      let wake: (() => void) | undefined;
      const onSignal = () => {
        stop = true;
        wake?.();
      };
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        if (!opts.json) printer.line(source.banner);
        let failed = false;
        do {
          const round = await source.round();
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
        await source.close();
      }
    });
}
