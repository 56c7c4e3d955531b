/** `pending`: the waiting approvals, oldest first, filtered and paged, from the journal's index. */
import { once } from "node:events";
import { Command } from "commander";
import { withStores } from "./session.js";
import { pendingLine, Printer } from "./render.js";
import { UsageError } from "../errors.js";
import { cap, LIMITS } from "./limits.js";
import { esc, stringifyJsonSafe } from "../text/escape.js";
import { duration, objectId, positive, taskId } from "./option-parsers.js";
import { API_OPTION, apiOf, runApiCommand } from "./api-option.js";

export function pendingCommand(): Command {
  return new Command("pending")
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
          // Each approval is written as it is read, and the next read only once stdout has taken it
          // (a pipe's reader can be slower than the journal), so a long page is never held whole.
          const drained = () =>
            process.stdout.writableNeedDrain ? once(process.stdout, "drain") : Promise.resolve();
          let shown = 0;
          if (opts.json) {
            printer.write(`{"total":${listing.total},"offset":${listing.offset},"pending":[`);
            for await (const r of listing.approvals) {
              printer.write(`${shown++ === 0 ? "" : ","}${stringifyJsonSafe(r)}`);
              await drained();
            }
            const { damaged, next } = listing.end();
            return printer.write(
              `],"damaged":${stringifyJsonSafe(damaged)},"next":${stringifyJsonSafe(next)}}\n`,
            );
          }
          for await (const r of listing.approvals) {
            shown += 1;
            printer.line(pendingLine(r));
            await drained();
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
}
