/**
 * The CLI's `--api URL` mode (or LANGGRAPH_API_URL): `pending`, `show`, `approve` and `reject` against
 * a LangGraph API server (`npm run dev`, or a deployed server) through @langchain/langgraph-sdk, so a
 * thread started in Studio or over the API is decided from the terminal. The server's graph does
 * every check (its check_decision node, src/hitl/{single-decision,set-decision,system-decision}.ts,
 * against its journal); this module only reads the thread and sends `command.resume`. The token, when
 * the server needs one, comes from LANGGRAPH_API_TOKEN, never from an argument (it would land in shell
 * history and `ps`).
 *
 * The approval's hash still comes from the person (`--hash`, what they saw on the card); only the
 * nonce is taken from the thread, as the local CLI does. On a server with tokens the approver is the
 * token's identity: without `--as` the decision names no approver and the server fills it in.
 *
 * src/cli/api-command.ts prints what this module reads, as the local CLI prints it.
 */
import { Client } from "@langchain/langgraph-sdk";
import type { ApprovalRequest, InputRequest, InterruptPayload, ResumeValue } from "../hitl/contract.js";
import type { State } from "../graph/state.js";
import type { ThreadView } from "../app/view-thread.js";
import { listedApproval, type PendingApproval } from "../app/pending.js";
import type { AuditRecord } from "../store/audit.js";
import type { ActionEvidence } from "../hitl/audit-records.js";
import type { DecisionRecord } from "../envelope/records.js";
import {
  evidenceRecordOf,
  isClosingRecord,
  refusalsRecorded,
  settlingDecisionOf,
} from "../evidence/recorded.js";
import type { QuestionEntry } from "../store/journal.js";
import { inputRequestOfRow } from "../hitl/input-request.js";
import { isDeepStrictEqual } from "node:util";
import { GRAPH_ID } from "../auth/rules.js";
import { UsageError } from "../errors.js";
import type { ApiTarget } from "./target.js";

export { apiTarget, type ApiTarget } from "./target.js";

export function apiClient(target: ApiTarget): Client {
  return new Client({
    apiUrl: target.url,
    apiKey: null,
    defaultHeaders: target.token ? { Authorization: `Bearer ${target.token}` } : {},
    callerOptions: { maxRetries: 1 },
  });
}

/**
 * A thread as the local CLI sees one. Where the server's hash-chained audit log (GET /audit/threads/:id)
 * knows the thread, what is reported comes from its records, not from the server's graph state, which
 * anyone with write access to the server's checkpoints (or API access to a server without the auth
 * module) can rewrite: the ending (outcome, reason, evidence) from the closing record, the decider from
 * the last decision record, refusals from decision_refused records, a finished change set's per-action
 * outcomes from its action_ended records, and a waiting approval only when it is the one the log
 * recorded last (approval_requested: envelope hash and card). A pause at a structured question shows
 * the journal's open question (GET /audit/threads/:id `question`: text, fields, last refusal), never the
 * checkpoint's payload; a pause the journal holds no open question for is an interrupted run, as the
 * local view has it, and is not answered from here. Graph state is used only when the server
 * does not serve the audit routes (or refuses them to this caller) or has no record of the thread (a
 * run before its first record); `target` absent means the same.
 */
export async function apiView(client: Client, threadId: string, target?: ApiTarget): Promise<ThreadView> {
  return (await apiViewOf(client, threadId, target)).view;
}

/** The view, and why a question pause it reports as an interrupted run is not the journal's (then nothing may be sent to it). */
export async function apiViewOf(
  client: Client,
  threadId: string,
  target?: ApiTarget,
): Promise<{ view: ThreadView; unheldQuestion?: string }> {
  let snapshot;
  try {
    snapshot = await client.threads.getState(threadId);
  } catch (e) {
    if ((e as { status?: number }).status === 404) return { view: { threadId, status: "not_found" } };
    throw e;
  }
  const state = snapshot.values as unknown as State;
  const audit = target ? await auditOf(target, threadId) : undefined;
  const payload = snapshot.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as InterruptPayload | undefined;
  if (payload?.kind === "input" && audit && audit.question !== undefined) {
    // The server read its journal: the question is its row, whatever the checkpoint's payload says.
    const records = audit.records;
    const base = records.length ? auditedState(state, records, undefined) : state;
    if (records.some(isClosingRecord)) return { view: auditedView(threadId, snapshot, state, records) };
    const question = audit.question;
    if (question?.status !== "open") {
      const why = question
        ? `the journal's question ${question.toolCallId} is ${question.status}`
        : "the journal holds no question for this thread";
      return {
        view: {
          threadId,
          status: "interrupted_run",
          next: snapshot.next.length > 0 ? snapshot.next : ["agent"],
          state: base,
        },
        unheldQuestion: why,
      };
    }
    return {
      view: { threadId, status: "awaiting_input", input: inputRequestOfRow(question, threadId), state: base },
    };
  }
  if (audit?.records.length) return { view: auditedView(threadId, snapshot, state, audit.records) };
  // No audit record to go by (see above): the server's graph state, as it reports it. A question pause
  // is shown from the checkpoint only here, when the server serves no audit routes (or an older version
  // of them without the journal's question): there is nothing else to show it from.
  const view = stateView(threadId, snapshot, state, payload);
  if (view) return { view };
  // A server without the audit routes: the table its run reported in the thread's messages.
  const changeSetOutcome =
    audit === undefined
      ? setOutcomeFromMessages(threadId, state.messages as unknown)
      : setOutcomeOf(audit.records);
  return { view: { threadId, status: "finished", state, ...(changeSetOutcome ? { changeSetOutcome } : {}) } };
}

/** The view from graph state alone, except a finished thread (the caller adds its change set's outcome). */
function stateView(
  threadId: string,
  snapshot: { next: string[] },
  state: State,
  payload: InterruptPayload | undefined,
): ThreadView | undefined {
  if (payload?.kind === "approval")
    return { threadId, status: "awaiting_approval", approval: payload as ApprovalRequest, state };
  if (payload?.kind === "input")
    return { threadId, status: "awaiting_input", input: payload as InputRequest, state };
  if (snapshot.next.length > 0) return { threadId, status: "interrupted_run", next: snapshot.next, state };
  if (!state || Object.keys(state).length === 0) return { threadId, status: "not_found" };
  return undefined;
}

/**
 * The thread's audit records (chain order) and its journal question row (null: none; undefined: the
 * server's route does not report it) from GET /audit/threads/:id; undefined when the server does not
 * serve the audit routes, refuses them to this caller, or knows nothing of the thread.
 */
async function auditOf(
  target: ApiTarget,
  threadId: string,
): Promise<{ records: AuditRecord[]; question: QuestionEntry | null | undefined } | undefined> {
  const { apiAudit, AuditApiError } = await import("./audit-client.js");
  try {
    const found = await apiAudit.caseOf(target, threadId);
    return { records: found.caseRecord.auditRecords, question: found.question };
  } catch (e) {
    if (e instanceof UsageError || e instanceof AuditApiError) return undefined;
    throw e;
  }
}

/** Where the thread's audit records disagree with a waiting approval's payload, why; undefined when they agree. */
export function approvalDisagreement(
  payload: ApprovalRequest,
  records: readonly AuditRecord[],
): string | undefined {
  const requested = records.filter((r) => r.event === "approval_requested");
  if (requested.length === 0) return "the audit log records no approval request for this thread";
  const latest = requested.at(-1)!;
  const revision = requested.filter((r) => r.revision === latest.revision);
  // A change set records one approval_requested per action (its own hash), each with the whole set's card.
  const hashes = payload.changeSet
    ? payload.changeSet.actions.map((x) => x.envelopeHash)
    : [payload.envelopeHash];
  const recorded = hashes.map((h) => revision.find((r) => r.what.envelopeHash === h));
  if (recorded.some((r) => r === undefined))
    return `the approval's envelope hash ${hashes.join(", ")} is not the one the audit log recorded last (${revision.map((r) => r.what.envelopeHash).join(", ")}, revision ${latest.revision})`;
  const first = recorded[0]!;
  if (first.shown?.card !== payload.actionRequests[0]?.description)
    return `the approval's card is not the card the audit log recorded for ${first.what.envelopeHash}`;
  if (
    first.what.envelope !== undefined &&
    first.what.envelope !== null &&
    !isDeepStrictEqual(first.what.envelope, payload.envelope)
  )
    return `the approval's envelope is not the envelope the audit log recorded for ${first.what.envelopeHash}`;
  if (first.shown && first.shown.expiresAt !== payload.expiresAt && !payload.changeSet)
    return `the approval's expiry ${payload.expiresAt} is not the recorded ${first.shown.expiresAt}`;
  return undefined;
}

/** The server's checkpoint shows an approval its audit log did not record: it is not shown. */
export class UnrecordedApprovalError extends UsageError {
  constructor(threadId: string, why: string) {
    super(
      `thread ${threadId}: the server's graph state shows an approval that its audit log does not hold (${why}); it is not shown or decided from here. See "audit show ${threadId} --api URL"`,
    );
  }
}

/** The server's checkpoint is paused at a question its journal does not hold open: nothing is sent to it. */
export class UnheldQuestionError extends UsageError {
  constructor(threadId: string, why: string) {
    super(
      `thread ${threadId}: the server's graph state is paused at a question that its journal does not hold open (${why}); it is an interrupted run, not a question to answer, and nothing was sent. See "show ${threadId} --api URL"`,
    );
  }
}

/**
 * The view from the audit records, with the checkpoint saying only whether a run is paused and where.
 * A closing record ends the thread whatever the checkpoint says; a checkpoint at the graph's end
 * without one is a run the server's journal has not closed.
 */
export function auditedView(
  threadId: string,
  snapshot: { tasks: Array<{ interrupts?: Array<{ value?: unknown }> }>; next: string[] },
  state: State,
  records: AuditRecord[],
): ThreadView {
  const closing = records.find(isClosingRecord);
  if (closing) {
    const changeSetOutcome = setOutcomeOf(records);
    // The parts the journal's view withheld when the record was made, and why (src/hitl/thread-view.ts).
    const withheld = (evidenceRecordOf(closing, records)?.received as Partial<ActionEvidence> | undefined)
      ?.withheld;
    return {
      threadId,
      status: "finished",
      state: auditedState(state, records, closing),
      ...(changeSetOutcome ? { changeSetOutcome } : {}),
      ...(withheld ? { withheld } : {}),
    };
  }
  const audited = auditedState(state, records, undefined);
  const payload = snapshot.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as InterruptPayload | undefined;
  if (payload?.kind === "approval") {
    const why = approvalDisagreement(payload as ApprovalRequest, records);
    if (why) throw new UnrecordedApprovalError(threadId, why);
    return { threadId, status: "awaiting_approval", approval: payload as ApprovalRequest, state: audited };
  }
  // Reached only from a server whose audit route does not report the journal's question (apiViewOf
  // shows a question pause from that row otherwise): the checkpoint's payload is all there is.
  if (payload?.kind === "input")
    return { threadId, status: "awaiting_input", input: payload as InputRequest, state: audited };
  // Paused before a node, or at the graph's end with no closing record: not finished by the journal's account.
  return {
    threadId,
    status: "interrupted_run",
    next: snapshot.next.length > 0 ? snapshot.next : ["finish"],
    state: audited,
  };
}

/**
 * Graph state with everything the CLI reports replaced from the audit records: the ending and its
 * evidence from the closing record (a change set's from its last action_ended record), the decision
 * from the last decision record, the refusals from decision_refused records. What the records do not
 * hold is left empty, never taken from state.
 */
function auditedState(
  state: State,
  records: readonly AuditRecord[],
  closing: AuditRecord | undefined,
): State {
  const lastDecision = settlingDecisionOf(records);
  const ev = (evidenceRecordOf(closing, records)?.received ?? {}) as Partial<ActionEvidence>;
  const lastWhat = [...records].reverse().find((r) => r.what.envelopeHash !== null);
  const decision: DecisionRecord | null = lastDecision?.approver
    ? {
        type: lastDecision.approver.decision as DecisionRecord["type"],
        envelopeHash: lastDecision.what.envelopeHash ?? "",
        nonce: (lastDecision.what.envelope as { nonce?: string } | null)?.nonce ?? "",
        revision: lastDecision.revision,
        approverId: lastDecision.approver.id ?? "",
        verifiedBy: lastDecision.approver.verifiedBy as DecisionRecord["verifiedBy"],
        decidedAt: lastDecision.approver.decidedAt ?? lastDecision.at,
        acceptedAt: lastDecision.at,
        ...(lastDecision.override ? { override: { ...lastDecision.override } } : {}),
        ...(lastDecision.message ? { message: lastDecision.message } : {}),
        raw: lastDecision.received ?? null,
      }
    : null;
  const refusals = refusalsRecorded(records);
  const o = closing?.outcome;
  return {
    ...state,
    outcome: (o?.outcome ?? null) as State["outcome"],
    reasonCode: (o?.reasonCode ?? null) as State["reasonCode"],
    reason: o?.reason ?? null,
    finishedAt: o?.finishedAt ?? null,
    envelopeHash: (closing ?? lastWhat)?.what.envelopeHash ?? null,
    envelope: ((closing ?? lastWhat)?.what.envelope ?? null) as State["envelope"],
    decision,
    refusals,
    preRead: ev.preRead ?? null,
    invocation: ev.invocation ?? null,
    acknowledgement: ev.acknowledgement ?? null,
    verification: ev.verification ?? null,
  } as State;
}

/** A change set's per-action outcomes from its action_ended records; undefined when it has none. */
function setOutcomeOf(records: readonly AuditRecord[]): ThreadView["changeSetOutcome"] {
  const ended = records.filter((r) => r.event === "action_ended");
  if (ended.length === 0) return undefined;
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
  return {
    actions: actions.sort((a, b) => a.actionId.localeCompare(b.actionId, undefined, { numeric: true })),
  };
}

const TABLE_HEAD = "Change set, action by action:\n";

/**
 * A finished change set's per-action outcomes as the server's run reported them: the last
 * "Change set, action by action:" message (src/hitl/finish-run.ts), one row per action. The server's
 * state carries no other per-action record; the local CLI reads the journal instead.
 */
export function setOutcomeFromMessages(threadId: string, messages: unknown): ThreadView["changeSetOutcome"] {
  if (!Array.isArray(messages)) return undefined;
  const own = `action-envelope:${threadId}:set-outcomes`;
  const text = messages
    .map((m) => m as { id?: unknown; content?: unknown; kwargs?: { id?: unknown; content?: unknown } })
    .filter(
      (m) =>
        (m.id ?? m.kwargs?.id) === own || String(m.content ?? m.kwargs?.content ?? "").startsWith(TABLE_HEAD),
    )
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
      const taskId = /^(?:a new task|new task \d+)$/.test(object ?? "")
        ? 0
        : Number(/^task (\d+)$/.exec(object ?? "")?.[1]);
      if (!actionId || !operation || !outcome || !reasonCode || !Number.isInteger(taskId)) return [];
      return [{ actionId, operation, taskId, outcome, reasonCode, sent: write === "sent" }];
    });
  return actions.length ? { actions } : undefined;
}

/** A waiting approval `pending --api` does not list: its payload is not what the server's audit log recorded. */
export interface WithheldApproval {
  threadId: string;
  reason: string;
}

/**
 * Interrupted threads of this graph that wait for an approval, oldest first. With `target`, each
 * payload (taken from the server's checkpoint) is checked against the thread's audit records: one that
 * is not the approval the log recorded last (envelope hash, card, envelope) is left out and named in
 * `withheld`; without audit routes, or for a thread without records, the payload is listed as it is.
 */
export async function apiPending(
  client: Client,
  now = Date.now(),
  target?: ApiTarget,
  withheld: WithheldApproval[] = [],
): Promise<PendingApproval[]> {
  const out: PendingApproval[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await client.threads.search({
      status: "interrupted",
      metadata: { graph_id: GRAPH_ID },
      limit: 100,
      offset,
      sortBy: "created_at",
      sortOrder: "asc",
    });
    for (const t of page) {
      const payload = Object.values(t.interrupts ?? {}).flat()[0]?.value as InterruptPayload | undefined;
      if (payload?.kind !== "approval") continue;
      const records = target ? (await auditOf(target, t.thread_id))?.records : undefined;
      if (records?.some(isClosingRecord)) {
        withheld.push({ threadId: t.thread_id, reason: "the audit log records this thread as ended" });
        continue;
      }
      const why = records?.length ? approvalDisagreement(payload, records) : undefined;
      if (why) {
        withheld.push({ threadId: t.thread_id, reason: why });
        continue;
      }
      out.push(listedApproval(t.thread_id, payload, now));
    }
    if (page.length < 100) return out;
  }
}

/**
 * Sends a recovery run (neither input nor command; an admin's with tokens) and returns the thread as
 * it is afterwards: the server continues a run stopped between steps from where its journal says
 * (src/api/guard.ts). Refused (409) while a run is in progress on the thread.
 */
export async function apiRecover(client: Client, threadId: string, target?: ApiTarget): Promise<ThreadView> {
  await client.runs.wait(threadId, GRAPH_ID, { multitaskStrategy: "reject" });
  return apiView(client, threadId, target);
}

/** Drops `approver` from decisions when the server will fill in the authenticated caller (a token, and no explicit --as). */
export function forTokenServer(
  resume: ResumeValue,
  target: ApiTarget,
  explicitApprover: boolean,
): ResumeValue {
  if (!target.token || explicitApprover || !Array.isArray((resume as { decisions?: unknown }).decisions))
    return resume;
  return {
    decisions: resume.decisions.map((d) => {
      if (typeof d !== "object" || d === null || "signature" in d) return d;
      const { approver: _a, ...rest } = d as Record<string, unknown>;
      return rest;
    }),
  };
}
