/**
 * Due work for `worker --api URL`: the journal's due actions (src/store/due.ts), claimed under a lease
 * exactly as the local worker claims them (src/app/due-work.ts), each thread then driven through the
 * LangGraph API server that keeps it. An expired approval is sent a system expiry (`command.resume`
 * with a decision of type "expire", the shape `approve --api` sends); the server's run checks it
 * against its journal by its own clock and ends the thread or escalates it with a fresh envelope.
 *
 * The worker shares the server's journal (same DATABASE_URL, or the same data directory) but not its
 * checkpoints: it reads nothing but the due rows it claims and the threads they name, over the API. It
 * claims only threads the journal records as the server's (keeper "api", src/store/keeper.ts).
 * Exactly once comes from the journal twice: a claimed action is skipped by other workers until its
 * lease ends, and the server's run claims the decision (the nonce) before it moves the action.
 *
 * A run the server stopped between steps (due for "resume": the process died mid-run) is sent a
 * recovery run, a run with neither input nor command, which the server continues from where its
 * journal says (src/api/guard.ts), as the local `recover` does; the journal's write-ahead entry keeps
 * it from writing twice.
 */
import type { Client } from "@langchain/langgraph-sdk";
import type { DueItem } from "../store/due.js";
import type { DueJournal } from "../store/journal.js";
import { SWEEP_ID, type SweepResult } from "../app/threads.js";
import { dueAgainAt, recovered, workDue, type DueRound, type RecoveryResult } from "../app/due-work.js";
import type { ResumeValue } from "../hitl/contract.js";
import { GRAPH_ID } from "../auth/rules.js";
import { UsageError } from "../errors.js";
import { apiRecover, apiView } from "./cli-api.js";
import type { ApiTarget } from "./target.js";

export interface ApiDueContext {
  journal: DueJournal;
  clock: () => Date;
  client: Client;
  target: ApiTarget;
}

/** One round over the API: the due work of the server's threads (keeper "api"), each thread worked once (src/app/due-work.ts). */
export function runApiDueWork(ctx: ApiDueContext): Promise<DueRound> {
  return workDue(ctx.journal, ctx.clock, "api", (threadId, round, owner, items) =>
    workThread(ctx, threadId, round, owner, items),
  );
}

async function workThread(
  ctx: ApiDueContext,
  threadId: string,
  round: DueRound,
  owner: string,
  items: DueItem[],
): Promise<void> {
  let view;
  try {
    view = await apiView(ctx.client, threadId, ctx.target);
  } catch (e) {
    // An unreachable server fails the round (the claims lapse with their lease); an approval the
    // server's audit log does not hold is neither shown nor decided from here.
    if (!(e instanceof UsageError)) throw e;
    round.swept.push({ threadId, envelopeHash: items[0]!.envelopeHash, result: "skipped", detail: msg(e) });
    return;
  }
  if (view.status === "awaiting_approval" && view.approval) {
    const expiresAt = Date.parse(view.approval.expiresAt);
    if (expiresAt <= ctx.clock().getTime()) {
      round.swept.push(await expireOverApi(ctx, threadId, view.approval.envelopeHash, view.approval.nonce));
      return;
    }
    await dueAgainAt(ctx.journal, owner, items, expiresAt);
    return;
  }
  // A checkpoint still paused at an approval the journal has moved past (the server lost the steps
  // after it) is an interrupted run too: the server's journal decides, the recovery run only asks.
  const behind =
    view.status === "awaiting_approval" &&
    items.some((i) => i.reason === "resume" && i.envelopeHash === view.approval?.envelopeHash);
  if (view.status === "interrupted_run" || behind) {
    round.recovered.push(await recoverOverApi(ctx, threadId));
    return;
  }
  // not_found (a thread the CLI keeps, not the server), finished, awaiting_input: nothing to do here.
}

/** Sends a recovery run and reports what became of the thread; a run in progress on it (409) is busy. */
export async function recoverOverApi(
  ctx: Pick<ApiDueContext, "client" | "target">,
  threadId: string,
): Promise<RecoveryResult> {
  try {
    const after = await apiRecover(ctx.client, threadId, ctx.target);
    if (after.status === "interrupted_run")
      return { threadId, result: "skipped", detail: `still stopped before ${after.next?.join(", ")}` };
    return recovered(threadId, after);
  } catch (e) {
    if ((e as { status?: number }).status === 409)
      return { threadId, result: "busy", detail: "a run is in progress on the thread" };
    return { threadId, result: "skipped", detail: msg(e) };
  }
}

/**
 * Sends the system expiry and reports what became of the thread. Refused by the server (not expired
 * by its clock, another decision first, a run in progress): skipped, with the server's reason.
 */
export async function expireOverApi(
  ctx: Pick<ApiDueContext, "client" | "target">,
  threadId: string,
  envelopeHash: string,
  nonce: string,
): Promise<SweepResult> {
  // With a token the server names the caller as who expired it (it must be the caller); without one, the sweep.
  const resume: ResumeValue = {
    decisions: [
      { type: "expire", envelopeHash, nonce, ...(ctx.target.token ? {} : { by: { id: SWEEP_ID } }) },
    ],
  };
  const swept = (result: SweepResult["result"], detail: string): SweepResult => ({
    threadId,
    envelopeHash,
    result,
    detail,
  });
  try {
    await ctx.client.runs.wait(threadId, GRAPH_ID, { command: { resume }, multitaskStrategy: "reject" });
    const after = await apiView(ctx.client, threadId, ctx.target);
    if (after.status === "awaiting_approval" && after.approval) {
      if (after.approval.envelopeHash === envelopeHash) {
        const refusal = after.state?.refusals?.at(-1);
        return swept("skipped", refusal ? `refused ${refusal.code}: ${refusal.reason}` : "still waiting");
      }
      return swept(
        "escalated",
        `fresh envelope ${after.approval.envelopeHash} for group ${after.approval.escalatedTo}`,
      );
    }
    if (after.status === "finished")
      return swept("expired", `${after.state?.outcome} / ${after.state?.reasonCode}`);
    return swept("skipped", `thread is ${after.status}`);
  } catch (e) {
    return swept("skipped", msg(e));
  }
}

const msg = (e: unknown) => String((e as Error)?.message ?? e).slice(0, 500);
