/**
 * The CLI's `--api URL` mode (or LANGGRAPH_API_URL): `pending`, `show`, `approve` and `reject` against
 * a LangGraph API server (`npm run dev`, or a deployed server) through @langchain/langgraph-sdk, so a
 * thread started in Studio or over the API is decided from the terminal. The server's graph does
 * every check (src/nodes/check-decision.ts against its journal); this module only reads the thread and
 * sends `command.resume`. The token, when the server needs one, comes from LANGGRAPH_API_TOKEN, never
 * from an argument (it would land in shell history and `ps`).
 *
 * The approval's hash still comes from the person (`--hash`, what they saw on the card); only the
 * nonce is taken from the thread, as the local CLI does. On a server with tokens the approver is the
 * token's identity: without `--as` the decision names no approver and the server fills it in.
 */
import { Client } from "@langchain/langgraph-sdk";
import type { ApprovalRequest, InputRequest, InterruptPayload, ResumeValue } from "../hitl/contract.js";
import type { State } from "../graph/state.js";
import type { ThreadView } from "../app/threads.js";
import type { PendingApproval } from "../app/threads.js";
import { GRAPH_ID } from "../auth/rules.js";
import { UsageError } from "../errors.js";

export interface ApiTarget {
  url: string;
  token?: string;
}

/** `--api URL` wins over LANGGRAPH_API_URL; undefined means the local stores (the default). */
export function apiTarget(flag: string | undefined, env: { url?: string; token?: string }): ApiTarget | undefined {
  const url = flag ?? env.url;
  if (!url) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--api / LANGGRAPH_API_URL must be the http(s) URL of a LangGraph API server, e.g. http://127.0.0.1:2024; got "${url.slice(0, 200)}"`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new UsageError(`--api / LANGGRAPH_API_URL must be an http(s) URL; got "${parsed.protocol}"`);
  return { url: parsed.toString().replace(/\/+$/, ""), ...(env.token ? { token: env.token } : {}) };
}

export function apiClient(target: ApiTarget): Client {
  return new Client({
    apiUrl: target.url,
    apiKey: null,
    defaultHeaders: target.token ? { Authorization: `Bearer ${target.token}` } : {},
    callerOptions: { maxRetries: 1 },
  });
}

/**
 * A thread as the local CLI sees one, built from the server's state; with `target`, a finished change
 * set's per-action outcomes come from the server's hash-chained audit records (GET /audit/threads/:id,
 * each action's action_ended record), not from the run's messages, which any run input can add to.
 */
export async function apiView(client: Client, threadId: string, target?: ApiTarget): Promise<ThreadView> {
  let snapshot;
  try {
    snapshot = await client.threads.getState(threadId);
  } catch (e) {
    if ((e as { status?: number }).status === 404) return { threadId, status: "not_found" };
    throw e;
  }
  const state = snapshot.values as unknown as State;
  const payload = snapshot.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as InterruptPayload | undefined;
  if (payload?.kind === "approval") return { threadId, status: "awaiting_approval", approval: payload as ApprovalRequest, state };
  if (payload?.kind === "input") return { threadId, status: "awaiting_input", input: payload as InputRequest, state };
  if (snapshot.next.length > 0) return { threadId, status: "interrupted_run", next: snapshot.next, state };
  if (!state || Object.keys(state).length === 0) return { threadId, status: "not_found" };
  const audited = target ? await auditedSetOutcome(target, threadId) : undefined;
  // A server without the audit routes: the table its run reported in the thread's messages.
  const changeSetOutcome = audited === undefined ? setOutcomeFromMessages(threadId, state.messages as unknown) : (audited ?? undefined);
  return { threadId, status: "finished", state, ...(changeSetOutcome ? { changeSetOutcome } : {}) };
}

/**
 * Each action of a finished change set as its action_ended audit record has it, in set order; null for
 * a thread that is not a change set; undefined when the server does not serve its audit records.
 */
async function auditedSetOutcome(target: ApiTarget, threadId: string): Promise<ThreadView["changeSetOutcome"] | null | undefined> {
  const { apiAudit, AuditApiError } = await import("./audit-client.js");
  let records;
  try {
    records = (await apiAudit.caseOf(target, threadId)).caseRecord.auditRecords;
  } catch (e) {
    if (e instanceof UsageError || e instanceof AuditApiError) return undefined;
    throw e;
  }
  const ended = records.filter((r) => r.event === "action_ended");
  if (ended.length === 0) return null;
  const actions = ended.map((r) => {
    const ev = (r.received ?? {}) as { actionId?: string; invocation?: unknown };
    return {
      actionId: ev.actionId ?? "a?",
      ...(r.what.envelopeHash ? { envelopeHash: r.what.envelopeHash } : {}),
      operation: r.what.operation,
      taskId: r.what.taskId ?? 0,
      outcome: r.outcome?.outcome ?? "",
      reasonCode: r.outcome?.reasonCode ?? "",
      ...(r.outcome ? { reason: r.outcome.reason } : {}),
      sent: ev.invocation !== undefined && ev.invocation !== null,
    };
  });
  return { actions: actions.sort((a, b) => a.actionId.localeCompare(b.actionId, undefined, { numeric: true })) };
}

const TABLE_HEAD = "Change set, action by action:\n";

/**
 * A finished change set's per-action outcomes as the server's run reported them: the last
 * "Change set, action by action:" message (src/nodes/finish.ts), one row per action. The server's
 * state carries no other per-action record; the local CLI reads the journal instead.
 */
export function setOutcomeFromMessages(threadId: string, messages: unknown): ThreadView["changeSetOutcome"] {
  if (!Array.isArray(messages)) return undefined;
  const own = `action-envelope:${threadId}:set-outcomes`;
  const text = messages
    .map((m) => m as { id?: unknown; content?: unknown; kwargs?: { id?: unknown; content?: unknown } })
    .filter((m) => (m.id ?? m.kwargs?.id) === own || String(m.content ?? m.kwargs?.content ?? "").startsWith(TABLE_HEAD))
    .map((m) => String(m.content ?? m.kwargs?.content ?? ""))
    .at(-1);
  if (!text?.startsWith(TABLE_HEAD)) return undefined;
  const actions = text
    .slice(TABLE_HEAD.length)
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s{2,}/))
    .flatMap(([actionId, operation, object, outcome, reasonCode, write]) => {
      // "task 4"; a create's row names no existing task ("a new task", or "new task 17" with the id it
      // made): its envelope's object id, 0 (src/envelope/change-set.ts outcomeTable).
      const taskId = /^(?:a new task|new task \d+)$/.test(object ?? "") ? 0 : Number(/^task (\d+)$/.exec(object ?? "")?.[1]);
      if (!actionId || !operation || !outcome || !reasonCode || !Number.isInteger(taskId)) return [];
      return [{ actionId, operation, taskId, outcome, reasonCode, sent: write === "sent" }];
    });
  return actions.length ? { actions } : undefined;
}

/** Interrupted threads of this graph that wait for an approval, oldest first. */
export async function apiPending(client: Client, now = Date.now()): Promise<PendingApproval[]> {
  const out: PendingApproval[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await client.threads.search({ status: "interrupted", metadata: { graph_id: GRAPH_ID }, limit: 100, offset, sortBy: "created_at", sortOrder: "asc" });
    for (const t of page) {
      const payload = Object.values(t.interrupts ?? {}).flat()[0]?.value as InterruptPayload | undefined;
      if (payload?.kind !== "approval") continue;
      const cs = payload.changeSet;
      out.push({
        threadId: t.thread_id,
        envelopeHash: payload.envelopeHash,
        revision: payload.revision,
        requestedBy: payload.envelope.requestedBy,
        taskId: payload.envelope.object.id,
        object: { ...payload.envelope.object },
        operation: payload.envelope.operation,
        fields: cs ? [...new Set(cs.actions.flatMap((x) => Object.keys(x.envelope.params)))] : Object.keys(payload.envelope.params),
        risk: cs ? cs.set.risk.level : payload.envelope.risk.level,
        createdAt: cs ? cs.set.createdAt : payload.envelope.createdAt,
        expiresAt: payload.expiresAt,
        expired: Date.parse(payload.expiresAt) <= now,
        ...(cs
          ? {
              changeSet: {
                setHash: cs.setHash,
                actions: cs.actions.map((x) => ({ actionId: x.actionId, envelopeHash: x.envelopeHash, operation: x.envelope.operation, taskId: x.envelope.object.id, object: { ...x.envelope.object }, fields: Object.keys(x.envelope.params) })),
              },
            }
          : {}),
      });
    }
    if (page.length < 100) return out;
  }
}

/** Sends a decision and returns the thread as it is afterwards. A refused late resume comes back as the server's error. */
export async function apiDecide(client: Client, threadId: string, resume: ResumeValue, target?: ApiTarget): Promise<ThreadView> {
  await client.runs.wait(threadId, GRAPH_ID, { command: { resume }, multitaskStrategy: "reject" });
  return apiView(client, threadId, target);
}

/** Drops `approver` from decisions when the server will fill in the authenticated caller (a token, and no explicit --as). */
export function forTokenServer(resume: ResumeValue, target: ApiTarget, explicitApprover: boolean): ResumeValue {
  if (!target.token || explicitApprover || !Array.isArray((resume as { decisions?: unknown }).decisions)) return resume;
  return {
    decisions: resume.decisions.map((d) => {
      if (typeof d !== "object" || d === null || "signature" in d) return d;
      const { approver: _a, ...rest } = d as Record<string, unknown>;
      return rest;
    }),
  };
}

export type ApiCommand =
  | { kind: "run"; request: string; requestedBy?: string; scope: { taskIds?: number[]; dealIds?: number[]; fields?: string[] }; json: boolean }
  | { kind: "pending"; json: boolean }
  | { kind: "show"; threadId: string; json: boolean }
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
export async function runApiCommand(target: ApiTarget, cmd: ApiCommand, out: NodeJS.WriteStream = process.stdout): Promise<number> {
  const { Printer, pendingLine, threadJson } = await import("../cli/render.js");
  const { esc } = await import("../text/escape.js");
  const printer = new Printer(out, cmd.json);
  const client = apiClient(target);
  const { exitCodeForView } = await import("../cli/exit-codes.js");
  const print = (view: ThreadView, refusedNow: boolean): number => {
    if (printer.json) printer.emitJson(threadJson(view));
    else if (view.status === "awaiting_approval") {
      printer.card(view);
      printer.howToDecide(view, esc` --api ${target.url}`);
    } else if (view.status === "awaiting_input") printer.question(view);
    else if (view.status === "interrupted_run") printer.line(esc`The run stopped before ${view.next?.join(", ")}; the server's worker or a new run finishes it.`);
    else printer.outcome(view);
    return exitCodeForView(view, refusedNow);
  };
  switch (cmd.kind) {
    case "run": {
      // With a token the server fills in requestedBy from it (and refuses another name); without one it is required.
      const thread = await client.threads.create();
      const input = { request: cmd.request, ...(cmd.requestedBy !== undefined ? { requestedBy: cmd.requestedBy } : {}), ...(Object.keys(cmd.scope).length ? { scope: cmd.scope } : {}) };
      await client.runs.wait(thread.thread_id, GRAPH_ID, { input });
      return print(await apiView(client, thread.thread_id, target), false);
    }
    case "pending": {
      const rows = await apiPending(client);
      if (cmd.json) {
        printer.emitJson({ pending: rows });
        return 0;
      }
      if (rows.length === 0) printer.line(esc`No approvals are waiting on ${target.url}.`);
      for (const r of rows) printer.line(pendingLine(r));
      return 0;
    }
    case "show": {
      const view = await apiView(client, cmd.threadId, target);
      if (view.status === "not_found") throw new UsageError(`no thread ${cmd.threadId} on ${target.url}; list waiting ones with "pending --api ${target.url}"`);
      return print(view, false);
    }
    case "decide": {
      const before = await apiView(client, cmd.threadId);
      if (before.status === "not_found") throw new UsageError(`no thread ${cmd.threadId} on ${target.url}`);
      // Nothing waiting: the server refuses the decision itself (THREAD_ENDED / NOT_WAITING), visibly.
      const waiting = before.status === "awaiting_approval" || before.status === "awaiting_input";
      const resume = waiting ? forTokenServer(cmd.build(before), target, cmd.explicitApprover) : { decisions: [{ type: "approve" }] };
      let after: ThreadView;
      try {
        after = await apiDecide(client, cmd.threadId, resume, target);
      } catch (e) {
        const message = String((e as Error).message ?? e);
        const refused = /"error":"LateResumeRefused","message":"([A-Z_]+): ((?:[^"\\]|\\.)*)"/.exec(message);
        if (!refused) throw e;
        if (printer.json) printer.emitJson({ threadId: cmd.threadId, status: "refused", code: refused[1], reason: JSON.parse(`"${refused[2]}"`) });
        else printer.line(esc`Refused ${refused[1]}: ${JSON.parse(`"${refused[2]}"`) as string}`);
        return 2;
      }
      const refusedNow = (after.state?.refusals?.length ?? 0) > (before.state?.refusals?.length ?? 0);
      if (refusedNow && !printer.json) {
        const r = after.state!.refusals.at(-1)!;
        printer.line(esc`Decision refused ${r.code}: ${r.reason}`);
      }
      if (cmd.succeeded?.(after)) {
        print(after, refusedNow);
        return 0;
      }
      return print(after, refusedNow);
    }
  }
}
