/**
 * The CLI's commands against a LangGraph API server (`--api <url>`): the thread is read and decided
 * through the API (src/api/cli-api.ts) and printed as the local CLI prints it.
 */
import type { ThreadView } from "../app/view-thread.js";
import type { ResumeValue } from "../hitl/contract.js";
import { UsageError } from "../errors.js";
import { esc } from "../text/escape.js";
import {
  UnheldQuestionError,
  apiClient,
  apiPending,
  apiRecover,
  apiView,
  apiViewOf,
  forTokenServer,
  type ApiTarget,
  type WithheldApproval,
} from "../api/cli-api.js";
import { Printer, pendingLine, threadJson } from "./render.js";
import { exitCodeForView } from "./exit-codes.js";
import { GRAPH_ID } from "../auth/rules.js";

export type ApiCommand =
  | {
      kind: "run";
      request: string;
      requestedBy?: string;
      scope: { taskIds?: number[]; dealIds?: number[]; fields?: string[] };
      json: boolean;
      /** Signs the request once the thread exists (run --key): the signature binds the thread id. */
      sign?: (threadId: string) => string;
    }
  | { kind: "pending"; json: boolean }
  | { kind: "show"; threadId: string; json: boolean }
  | { kind: "recover"; threadId: string; json: boolean }
  | {
      kind: "decide";
      threadId: string;
      json: boolean;
      build: (view: ThreadView) => ResumeValue;
      explicitApprover: boolean;
      /** When the command counts as done (exit 0) besides waiting or VERIFIED, e.g. a cancel that cancelled. */
      succeeded?: (view: ThreadView) => boolean;
    };

/**
 * One CLI command over the API, printed as the local CLI prints it. Exit codes as the CLI's
 * (src/cli/exit-codes.ts): 0 waiting or VERIFIED, 1 usage, 2 any other outcome or a refused decision,
 * 3 PARTIALLY_EXECUTED.
 */
export async function runApiCommand(target: ApiTarget, cmd: ApiCommand): Promise<number> {
  const printer = new Printer(process.stdout, cmd.json);
  const client = apiClient(target);
  const print = (view: ThreadView, refusedNow: boolean): number => {
    if (printer.json) printer.emitJson(threadJson(view));
    else if (view.status === "awaiting_approval") {
      printer.card(view);
      // Without a token the server cannot know who decides: the line names --as (no identity is invented).
      printer.howToDecide(view, esc` --api ${target.url}` + (target.token ? "" : " --as <approver-id>"));
    } else if (view.status === "awaiting_input") printer.question(view);
    else if (view.status === "interrupted_run")
      printer.line(
        esc`The run stopped before ${view.next?.join(", ")}; "worker --api" or "recover ${view.threadId} --api ${target.url}" (admin token) finishes it.`,
      );
    else printer.outcome(view);
    return exitCodeForView(view, refusedNow);
  };
  switch (cmd.kind) {
    case "run": {
      // With a token the server fills in requestedBy from it (and refuses another name); without one it is required.
      const thread = await client.threads.create();
      const input = {
        request: cmd.request,
        ...(cmd.requestedBy !== undefined ? { requestedBy: cmd.requestedBy } : {}),
        ...(Object.keys(cmd.scope).length ? { scope: cmd.scope } : {}),
        ...(cmd.sign ? { requesterSignature: cmd.sign(thread.thread_id) } : {}),
      };
      await client.runs.wait(thread.thread_id, GRAPH_ID, { input });
      return print(await apiView(client, thread.thread_id, target), false);
    }
    case "pending": {
      const withheld: WithheldApproval[] = [];
      const rows = await apiPending(client, Date.now(), target, withheld);
      if (cmd.json) {
        printer.emitJson({ pending: rows, ...(withheld.length ? { withheld } : {}) });
        return 0;
      }
      if (rows.length === 0) printer.line(esc`No approvals are waiting on ${target.url}.`);
      for (const r of rows) printer.line(pendingLine(r));
      for (const w of withheld)
        printer.line(
          esc`Not listed: thread ${w.threadId}, whose graph state shows an approval its audit log does not hold: ${w.reason}`,
        );
      return 0;
    }
    case "show": {
      const view = await apiView(client, cmd.threadId, target);
      if (view.status === "not_found")
        throw new UsageError(
          `no thread ${cmd.threadId} on ${target.url}; list waiting ones with "pending --api ${target.url}"`,
        );
      return print(view, false);
    }
    case "recover": {
      const before = await apiView(client, cmd.threadId, target);
      if (before.status === "not_found") throw new UsageError(`no thread ${cmd.threadId} on ${target.url}`);
      // A pause at an approval may be one the server's journal has moved past (steps a crash lost): the
      // server decides from its journal; a thread that really waits stays waiting.
      if (before.status !== "interrupted_run" && before.status !== "awaiting_approval")
        throw new UsageError(`thread ${cmd.threadId} has nothing to recover (status ${before.status})`);
      return print(await apiRecover(client, cmd.threadId, target), false);
    }
    case "decide": {
      // The approval decided is the one the audit log recorded (apiView refuses one it does not hold),
      // and refusals before and after are counted from its decision_refused records.
      const { view: before, unheldQuestion } = await apiViewOf(client, cmd.threadId, target);
      if (before.status === "not_found") throw new UsageError(`no thread ${cmd.threadId} on ${target.url}`);
      // A pause at a question the server's journal does not hold open was not asked by this graph's
      // run (or is over): nothing is sent to it, neither an answer nor a decision.
      if (unheldQuestion) throw new UnheldQuestionError(cmd.threadId, unheldQuestion);
      // Nothing waiting: the server refuses the decision itself (THREAD_ENDED / NOT_WAITING), visibly.
      const waiting = before.status === "awaiting_approval" || before.status === "awaiting_input";
      const resume = waiting
        ? forTokenServer(cmd.build(before), target, cmd.explicitApprover)
        : { decisions: [{ type: "approve" }] };
      let after: ThreadView;
      try {
        // A late resume the server refuses fails the run: its error is read below.
        await client.runs.wait(cmd.threadId, GRAPH_ID, { command: { resume }, multitaskStrategy: "reject" });
        after = await apiView(client, cmd.threadId, target);
      } catch (e) {
        const message = String((e as Error).message ?? e);
        const refused = /"error":"LateResumeRefused","message":"([A-Z_]+): ((?:[^"\\]|\\.)*)"/.exec(message);
        if (!refused) throw e;
        if (printer.json)
          printer.emitJson({
            threadId: cmd.threadId,
            status: "refused",
            code: refused[1],
            reason: JSON.parse(`"${refused[2]}"`),
          });
        else printer.line(esc`Refused ${refused[1]}: ${JSON.parse(`"${refused[2]}"`) as string}`);
        return 2;
      }
      const refusedNow = (after.state?.refusals?.length ?? 0) > (before.state?.refusals?.length ?? 0);
      if (refusedNow && !printer.json) {
        const r = after.state!.refusals.at(-1)!;
        printer.line(esc`Decision refused ${r.code}: ${r.reason}`);
      }
      const code = print(after, refusedNow);
      return cmd.succeeded?.(after) ? 0 : code;
    }
  }
}
