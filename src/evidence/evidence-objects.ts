/**
 * The evidence objects of one run: separate, timestamped records of what was shown, decided, read, sent,
 * answered and read again, and how it ended.
 */
import type { AuditEvent } from "../store/audit.js";
import { outcomeFlags } from "../envelope/outcome-flags.js";
import { NORMALISATION_RULES, type NormalisationRule } from "../envelope/index.js";
import type { ActionEvidence } from "../hitl/audit-records.js";
import { stateWithoutRecords, type CaseInput } from "./case-input.js";
import { explainedOutcome, isClosingRecord } from "./recorded.js";
import { writerWindow } from "./writer-window.js";

/** Records of a decision as received: approvals, rejections, edits, refusals, and the cancels and expiries that close an approval. */
const DECISION_EVENTS = new Set<AuditEvent>([
  "decision_accepted",
  "decision_refused",
  "approval_expired",
  "approval_cancelled",
]);

export type EvidenceKind =
  | "approval_request"
  | "decision"
  | "boundary_event"
  | "pre_read"
  | "invocation"
  | "acknowledgement"
  | "post_write_read"
  | "outcome";

/** The rule table every comparison in a bundle was judged by (each field record names its rule by id). */
export function normalisationRules(): NormalisationRule[] {
  return NORMALISATION_RULES.map((r) => ({ id: r.id, text: r.text }));
}

export interface EvidenceObject {
  /** File stem in an exported bundle, numbered in the order things happened: "01-approval-request-r1". */
  name: string;
  kind: EvidenceKind;
  threadId: string;
  at: string;
  /** One line for people; the data is the evidence. */
  summary: string;
  data: Record<string, unknown>;
}

export function buildEvidence({ threadId, state, records }: CaseInput): EvidenceObject[] {
  const s = stateWithoutRecords(state, records);
  const out: Array<Omit<EvidenceObject, "name"> & { stem: string }> = [];
  const add = (
    kind: EvidenceKind,
    stem: string,
    at: string,
    summary: string,
    data: Record<string, unknown>,
  ) => out.push({ kind, stem, threadId, at, summary, data });

  const requested = records.filter((r) => r.event === "approval_requested");
  const decided = records.filter((r) => DECISION_EVENTS.has(r.event));
  // Both kinds interleave in the order they happened, which is the chain's order.
  for (const r of records) {
    if (r.event === "approval_requested" && r.shown) {
      add(
        "approval_request",
        `approval-request-r${r.revision}`,
        r.at,
        `revision ${r.revision} shown for approval, ${r.what.envelopeHash}, expires ${r.shown.expiresAt}`,
        {
          revision: r.revision,
          envelopeHash: r.what.envelopeHash,
          card: r.shown.card,
          envelope: r.what.envelope,
          expiresAt: r.shown.expiresAt,
          auditSeq: r.seq,
        },
      );
    }
    if (r.event === "boundary_refused") {
      const b = (r.received ?? {}) as { tool?: unknown; argumentsSha256?: unknown };
      add(
        "boundary_event",
        `boundary-refused-${String(b.tool ?? "tool")}`,
        r.at,
        `REFUSED at the tool boundary: ${r.refusal?.reason ?? "a tool the model was not offered"}`,
        {
          event: r.event,
          tool: b.tool ?? null,
          argumentsSha256: b.argumentsSha256 ?? null,
          refusal: r.refusal,
          received: r.received ?? null,
          auditSeq: r.seq,
        },
      );
    }
    if (DECISION_EVENTS.has(r.event)) {
      const accepted = r.event !== "decision_refused";
      const who = `${r.approver?.id ?? "(no approver id)"} (${r.approver?.verifiedBy ?? "unverified"})`;
      add(
        "decision",
        `decision-r${r.revision}-${accepted ? `accepted-${r.approver?.decision}` : `refused-${r.refusal?.code}`}`,
        r.at,
        accepted
          ? `${decisionLabel(r.approver?.decision ?? undefined, r.message)} accepted from ${who}${r.override ? `, OVERRIDING ${r.override.gate}: ${r.override.reason}` : ""}${namesResolved(r.resolvedNames)}`
          : `${r.approver?.decision ?? "decision"} from ${who} refused ${r.refusal?.code}: ${r.refusal?.reason}`,
        {
          verdict: accepted ? "accepted" : "refused",
          revision: r.revision,
          envelopeHash: r.what.envelopeHash,
          decision: r.approver?.decision ?? null,
          approverId: r.approver?.id ?? null,
          verifiedBy: r.approver?.verifiedBy ?? "unverified",
          decidedAt: r.approver?.decidedAt ?? null,
          override: r.override,
          refusal: r.refusal,
          received: r.received ?? null,
          // An edit that named people: what was typed for each user field and the id it resolved to (user.get).
          ...(r.resolvedNames?.length ? { resolvedNames: r.resolvedNames } : {}),
          auditSeq: r.seq,
        },
      );
    }
  }
  // A run whose audit records are missing still shows what its state holds.
  if (requested.length === 0 && s?.envelope && s.envelopeHash && s.card) {
    add(
      "approval_request",
      `approval-request-r${s.envelope.revision}`,
      s.envelope.createdAt,
      `revision ${s.envelope.revision} shown for approval (from thread state)`,
      {
        revision: s.envelope.revision,
        envelopeHash: s.envelopeHash,
        card: s.card,
        envelope: s.envelope,
        expiresAt: s.envelope.expiresAt,
      },
    );
  }
  if (decided.length === 0 && s) {
    for (const r of s.refusals) {
      add(
        "decision",
        `decision-refused-${r.code}`,
        r.at,
        `refused ${r.code}: ${r.reason} (from thread state)`,
        {
          verdict: "refused",
          envelopeHash: r.envelopeHash,
          refusal: { code: r.code, reason: r.reason },
          received: r.raw,
        },
      );
    }
    if (s.decision) {
      const d = s.decision;
      add(
        "decision",
        `decision-accepted-${d.type}`,
        d.acceptedAt,
        `${d.type} accepted from ${d.approverId} (${d.verifiedBy}) (from thread state)`,
        {
          verdict: "accepted",
          revision: d.revision,
          envelopeHash: d.envelopeHash,
          decision: d.type,
          approverId: d.approverId,
          verifiedBy: d.verifiedBy,
          decidedAt: d.decidedAt,
          override: d.override ?? null,
          received: d.raw,
        },
      );
    }
  }

  // A change set: each action's pre-read, write, answer and fresh read, from its action_ended record
  // (hash-chained); the thread's state mirrors only the action the set ended at.
  const actions = records.filter((r) => r.event === "action_ended");
  for (const r of actions) {
    const e = (r.received ?? {}) as Partial<ActionEvidence> & { actionId?: string; setHash?: string };
    const id = e.actionId ?? "action";
    const head = `${id} ${r.what.operation} on task ${r.what.taskId}`;
    if (e.preRead)
      add("pre_read", `${id}-pre-read`, e.preRead.at, `${head}: ${e.preRead.verdict}: ${e.preRead.reason}`, {
        actionId: id,
        envelopeHash: r.what.envelopeHash,
        ...e.preRead,
        normalisationRules: normalisationRules(),
      });
    if (e.invocation)
      add(
        "invocation",
        `${id}-invocation`,
        e.invocation.sentAt,
        `${head}: ${e.invocation.tool} ${JSON.stringify(e.invocation.args)}, idempotency key ${e.invocation.idempotencyKey}`,
        { actionId: id, ...e.invocation },
      );
    if (e.acknowledgement)
      add(
        "acknowledgement",
        `${id}-acknowledgement`,
        e.acknowledgement.at,
        `${head}: ${e.acknowledgement.status}${e.acknowledgement.reason ? `: ${e.acknowledgement.reason}` : ""}`,
        { actionId: id, ...e.acknowledgement },
      );
    if (e.verification)
      add(
        "post_write_read",
        `${id}-post-write-read`,
        e.verification.at,
        `${head}: ${e.verification.verdict}: ${e.verification.reason}`,
        {
          actionId: id,
          envelopeHash: r.what.envelopeHash,
          ...e.verification,
          normalisationRules: normalisationRules(),
        },
      );
    if (r.outcome)
      add(
        "outcome",
        `${id}-outcome`,
        r.at,
        `${head}: ${r.outcome.outcome} (${r.outcome.reasonCode}): ${r.outcome.reason}`,
        {
          actionId: id,
          envelopeHash: r.what.envelopeHash,
          ...r.outcome,
          ...r.outcome.flags,
          auditSeq: r.seq,
        },
      );
  }
  // A single action: its evidence from the hash-chained record that ended it (the journal's copy, with
  // the target's raw answers); a run recorded before that record carried it, from thread state.
  const ending = records.find((r) => isClosingRecord(r) && r.received);
  const ev: Partial<ActionEvidence> | undefined =
    (ending?.received as Partial<ActionEvidence> | undefined) ?? s;
  const window = writerWindow(ev?.preRead ?? null, ev?.invocation ?? null, ev?.acknowledgement ?? null);
  if (ev?.preRead && actions.length === 0) {
    const p = ev.preRead;
    add("pre_read", "pre-read", p.at, `${p.verdict}: ${p.reason}`, {
      verdict: p.verdict,
      reason: p.reason,
      identity: p.identity ?? null,
      canEdit: p.canEdit,
      fields: p.fields,
      moved: p.moved ?? null,
      lease: p.lease ?? null,
      normalisationRules: normalisationRules(),
      raw: p.raw,
    });
  }
  if (ev?.invocation && actions.length === 0) {
    const i = ev.invocation;
    add(
      "invocation",
      "invocation",
      i.sentAt,
      `${i.tool} ${JSON.stringify(i.args)}, idempotency key ${i.idempotencyKey}`,
      { ...i },
    );
  }
  if (ev?.acknowledgement && actions.length === 0) {
    const a = ev.acknowledgement;
    add(
      "acknowledgement",
      "acknowledgement",
      a.at,
      `${a.status}${a.error ? `: ${a.error.code ?? a.error.kind} ${a.error.description}` : ""}${a.reason ? `: ${a.reason}` : ""}`,
      { ...a },
    );
  }
  if (ev?.verification && actions.length === 0) {
    const v = ev.verification;
    add(
      "post_write_read",
      "post-write-read",
      v.at,
      `${v.verdict}: ${v.reason}${window ? `; not covered: ${window.statement}` : ""}`,
      {
        verdict: v.verdict,
        reason: v.reason,
        identity: v.identity ?? null,
        fields: v.fields,
        moved: v.moved ?? null,
        concurrentWriterWindow: window,
        normalisationRules: normalisationRules(),
        raw: v.raw,
      },
    );
  }
  const closing = records.find(isClosingRecord);
  // The closing record's outcome when there is one (state's could have been rewritten after the run).
  if (closing?.outcome) {
    const o = closing.outcome;
    const explained = explainedOutcome(closing, records, s);
    add("outcome", "outcome", o.finishedAt ?? closing.at, `${o.outcome} (${o.reasonCode}): ${o.reason}`, {
      ...o,
      ...o.flags,
      ...(explained ? { because: explained.because } : {}),
      concurrentWriterWindow: window,
    });
  } else if (s?.outcome) {
    const explained = outcomeFlags(s);
    add(
      "outcome",
      "outcome",
      s.finishedAt ?? closing?.at ?? "",
      `${s.outcome} (${s.reasonCode}): ${s.reason}`,
      {
        outcome: s.outcome,
        reasonCode: s.reasonCode,
        reason: s.reason,
        finishedAt: s.finishedAt,
        ...explained.flags,
        because: explained.because,
        concurrentWriterWindow: window,
      },
    );
  }

  const width = Math.max(2, String(out.length).length);
  const seen = new Map<string, number>();
  return out.map(({ stem, ...rest }, i) => {
    // The same stem twice (two envelopes for one revision after a crash) gets a suffix.
    const n = (seen.get(stem) ?? 0) + 1;
    seen.set(stem, n);
    const safe = `${stem}${n > 1 ? `-${n}` : ""}`.replace(/[^A-Za-z0-9._-]/g, "_");
    return { name: `${String(i + 1).padStart(width, "0")}-${safe}`, ...rest };
  });
}

/** "; RESPONSIBLE_ID \"Bob Smith\" → user 7" for an edit that named people, else "". */
function namesResolved(resolved: unknown[] | undefined): string {
  const done = (resolved ?? []).filter(
    (n): n is { field: string; typed: string; id: string } =>
      (n as { status?: unknown } | null)?.status === "resolved",
  );
  return done.length
    ? `; ${done.map((n) => `${n.field} ${JSON.stringify(n.typed)} → user ${n.id}`).join(", ")}`
    : "";
}

/**
 * How an accepted decision is named in the evidence: a change set decided action by action without an
 * edit (approve a1, reject a2) is a per-action decision, not an edit, though the journal routes it like one.
 */
function decisionLabel(type: string | undefined, message: unknown): string {
  const m = typeof message === "string" ? /^decided action by action: ([^;]*)/.exec(message) : null;
  if (type === "edit" && m && !/\bedit\b/.test(m[1]!)) return `per-action decision (${m[1]})`;
  return type ?? "decision";
}
