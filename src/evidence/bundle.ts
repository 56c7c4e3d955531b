/**
 * The case record of one run, whose first page answers the incident questions at a glance, overrides
 * first. Derived from the thread's graph state and its audit records; the audit records supply what
 * state no longer holds (earlier revisions' cards, decisions made on them).
 */
import type { AuditRecord, ChainProblem, IdentityCheck, OutcomeFlags } from "../store/audit.js";
import type { NormalisationRule, RequesterVerification } from "../envelope/index.js";
import { stateWithoutRecords, type CaseInput, type RunStatus } from "./case-input.js";
import {
  buildEvidence,
  normalisationRules,
  type EvidenceKind,
  type EvidenceObject,
} from "./evidence-objects.js";
import { explainedOutcome, isClosingRecord, isRunRecord, settlingDecisionOf } from "./recorded.js";

export const CASE_RECORD_SCHEMA = "action-envelope/case-record/2";

export interface OverrideNotice {
  gate: string;
  by: string;
  reason: string;
  verifiedBy: IdentityCheck;
  revision: number;
  envelopeHash: string | null;
  at: string;
}

/** The top section of the case record. Overrides come first because they answer the hardest question. */
export interface FirstPage {
  overrides: OverrideNotice[];
  threadId: string;
  status: RunStatus;
  request: string | null;
  requestedBy: string | null;
  /** How the requester was established, from the closing or approval record; null when no record says it. */
  requesterVerifiedBy: RequesterVerification | null;
  risk: { level: string; reversibility: string } | null;
  policy: { id: string; version: string } | null;
  what: {
    operation: string;
    taskId: number | null;
    params: Record<string, unknown> | null;
    envelopeHash: string | null;
    revision: number;
  } | null;
  /** The decision that settled the run (the last one accepted), with how the identity was established. */
  decidedBy: {
    id: string | null;
    decision: string | null;
    verifiedBy: IdentityCheck;
    decidedAt: string | null;
    acceptedAt: string;
  } | null;
  refusedDecisions: number;
  outcome: { outcome: string; reasonCode: string; reason: string; finishedAt: string | null } | null;
  flags: OutcomeFlags | null;
  flagReasons: Record<keyof OutcomeFlags, string> | null;
}

export interface CaseRecord {
  schema: typeof CASE_RECORD_SCHEMA;
  firstPage: FirstPage;
  /**
   * The audit chain's state when this record was made, checked from this thread's first record to the
   * head (src/evidence/case-source.ts verifyForView), and this thread's share of it.
   */
  auditChain: {
    intact: boolean;
    problem: string | null;
    /** The first seq checked: the record before it is taken as it stands (`audit verify` checks those). */
    checkedFrom: number;
    recordsChecked: number;
    head: { seq: number; hash: string } | null;
    threadRecords: Array<{ seq: number; event: string; revision: number; at: string; hash: string }>;
  };
  evidence: Array<{ name: string; kind: EvidenceKind; at: string; summary: string }>;
  /** The normalisation rules the pre-read and the verification were judged by; field records name them by id. */
  normalisationRules: NormalisationRule[];
  auditRecords: AuditRecord[];
}

export function buildCase(input: CaseInput): { caseRecord: CaseRecord; evidence: EvidenceObject[] } {
  const evidence = buildEvidence(input);
  const chain = input.chain;
  const caseRecord: CaseRecord = {
    schema: CASE_RECORD_SCHEMA,
    firstPage: firstPage(input),
    auditChain: {
      intact: chain.intact,
      problem: chain.intact ? null : problemOf(chain.problem, input.threadId),
      checkedFrom: chain.from ?? 1,
      recordsChecked: chain.records,
      head: chain.intact ? chain.head : null,
      threadRecords: input.records.map((r) => ({
        seq: r.seq,
        event: r.event,
        revision: r.revision,
        at: r.at,
        hash: r.hash,
      })),
    },
    evidence: evidence.map(({ name, kind, at, summary }) => ({ name, kind, at, summary })),
    normalisationRules: normalisationRules(),
    auditRecords: input.records,
  };
  return { caseRecord, evidence };
}

/**
 * The chain's problem as a thread's case record states it. A record of another thread is named by its
 * seq alone: the case record goes to this thread's requester (API, inbox) and into a bundle handed to
 * strangers, who may not learn another thread's id or events; `audit verify` names it.
 */
function problemOf(problem: ChainProblem, threadId: string): string {
  const detail =
    problem.threadId !== undefined && problem.threadId !== threadId
      ? `a record of another thread, not named here (audit verify names it)`
      : problem.detail;
  return `${problem.kind} at seq ${problem.seq}: ${detail}`;
}

/**
 * The first page prefers the hash-chained audit records to graph state wherever a record says the
 * same thing: state is writable by any API client and by anyone who can edit the checkpoints, so a
 * checkpoint rewritten after the run (an outcome of VERIFIED on a rejected thread, another approver)
 * must not be what the case record reports. State fills in only for a thread without any record
 * (a run still going before its first record); the request's text comes from the records that carry
 * the journal's (approval_requested, the closing record), and a thread recorded before they carried
 * it shows none rather than state's.
 */
function firstPage({ threadId, status, state, records }: CaseInput): FirstPage {
  const s = stateWithoutRecords(state, records);
  const accepted = records.filter((r) => r.event === "decision_accepted");
  const closing = records.find(isClosingRecord);
  // The requester, the action, its risk and policy come from the run's records: a refused request
  // naming the thread says none of them.
  const ofRun = records.filter(isRunRecord);
  const lastRecord = ofRun.at(-1);
  const lastDecision = settlingDecisionOf(records);
  const lastWhat = [...ofRun].reverse().find((r) => r.what.envelopeHash !== null) ?? lastRecord;
  const overrides: OverrideNotice[] = accepted
    .filter((r) => r.override)
    .map((r) => ({
      ...r.override!,
      verifiedBy: r.approver?.verifiedBy ?? "unverified",
      revision: r.revision,
      envelopeHash: r.what.envelopeHash,
      at: r.at,
    }));
  // State holds the last accepted decision even if its audit record is missing; it must still show.
  if (s?.decision?.override && !overrides.some((o) => o.envelopeHash === s.decision!.envelopeHash)) {
    const d = s.decision;
    overrides.push({
      ...d.override!,
      verifiedBy: d.verifiedBy,
      revision: d.revision,
      envelopeHash: d.envelopeHash,
      at: d.acceptedAt,
    });
  }

  const decidedBy: FirstPage["decidedBy"] = lastDecision?.approver
    ? {
        id: lastDecision.approver.id,
        decision: lastDecision.approver.decision,
        verifiedBy: lastDecision.approver.verifiedBy,
        decidedAt: lastDecision.approver.decidedAt,
        acceptedAt: lastDecision.at,
      }
    : s?.decision
      ? {
          id: s.decision.approverId,
          decision: s.decision.type,
          verifiedBy: s.decision.verifiedBy,
          decidedAt: s.decision.decidedAt,
          acceptedAt: s.decision.acceptedAt,
        }
      : null;

  const e = s?.envelope;
  const what: FirstPage["what"] = lastWhat
    ? {
        operation: lastWhat.what.operation,
        taskId: lastWhat.what.taskId,
        params: lastWhat.what.params,
        envelopeHash: lastWhat.what.envelopeHash,
        revision: lastWhat.revision,
      }
    : e
      ? {
          operation: e.operation,
          taskId: e.object.id,
          params: e.params,
          envelopeHash: s?.envelopeHash ?? null,
          revision: e.revision,
        }
      : s?.proposal
        ? {
            operation: s.proposal.operation ?? "update_task",
            taskId: s.proposal.taskId,
            params: s.proposal.fields,
            envelopeHash: null,
            revision: 0,
          }
        : null;

  // The outcome is the closing record's; state's only while no run has closed the thread.
  const outcome = closing?.outcome
    ? {
        outcome: closing.outcome.outcome,
        reasonCode: closing.outcome.reasonCode,
        reason: closing.outcome.reason,
        finishedAt: closing.outcome.finishedAt,
      }
    : s?.outcome
      ? {
          outcome: s.outcome,
          reasonCode: s.reasonCode ?? "",
          reason: s.reason ?? "",
          finishedAt: s.finishedAt,
        }
      : null;
  const explained = explainedOutcome(closing, records, s);
  // The journal's text of the request, as the closing or an approval record carries it.
  const recordedRequest = closing?.request ?? records.find((r) => r.request !== undefined)?.request ?? null;

  return {
    overrides,
    threadId,
    status,
    request: recordedRequest ?? (records.length === 0 ? (s?.request ?? null) : null),
    requestedBy: lastRecord?.requestedBy ?? s?.requestedBy ?? null,
    requesterVerifiedBy:
      closing?.requesterVerifiedBy ??
      [...records].reverse().find((r) => r.requesterVerifiedBy !== undefined)?.requesterVerifiedBy ??
      null,
    risk: lastWhat?.risk ?? (e ? { ...e.risk } : null),
    policy: lastWhat ? lastWhat.policy : e ? { ...e.policy } : null,
    what,
    decidedBy,
    // Every refused decision has its record (check_decision appends it before state hears of it).
    refusedDecisions:
      records.length > 0
        ? records.filter((r) => r.event === "decision_refused").length
        : (s?.refusals.length ?? 0),
    outcome,
    flags: outcome ? (closing?.outcome?.flags ?? explained?.flags ?? null) : null,
    flagReasons: outcome ? (explained?.because ?? null) : null,
  };
}
