/** What a decision is bound to, built from one envelope or from a change set and its actions' envelopes. */
import { hashChangeSet, type ChangeSet } from "./change-set.js";
import {
  hashEnvelope,
  requesterVerificationOf,
  type Envelope,
  type RequesterVerification,
} from "./envelope.js";
import type { RiskLevel } from "./policy.js";

/**
 * What a decision is bound to: one envelope, or a change set (every action of it). The hash is
 * recomputed by the caller from the object itself; `edits` are the envelopes an edit may change.
 */
export interface DecisionSubject {
  hash: string;
  kind: "envelope" | "change set";
  nonce: string;
  revision: number;
  /** When the approval was created: a signed decision cannot have been made before it. */
  createdAt: string;
  expiresAt: string;
  threadId: string;
  /** Every operation the approval covers: an approver must be allowed each. */
  operations: string[];
  requestedBy: string;
  /** How requestedBy was established: separation of duties compares against it and says so when it is only self-declared. */
  requesterVerifiedBy: RequesterVerification;
  editedBy?: string | undefined;
  level: RiskLevel;
  /** For a single envelope: the envelope an edit changes. For a change set: the actions by id. */
  edits: { single: Envelope } | { byActionId: ReadonlyMap<string, Envelope> };
}

/** A single envelope as a decision's subject. */
export function subjectOfEnvelope(e: Envelope): DecisionSubject {
  return {
    hash: hashEnvelope(e),
    kind: "envelope",
    nonce: e.nonce,
    revision: e.revision,
    createdAt: e.createdAt,
    expiresAt: e.expiresAt,
    threadId: e.runContext.threadId,
    operations: [e.operation],
    requestedBy: e.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(e),
    editedBy: e.editedBy,
    level: e.risk.level,
    edits: { single: e },
  };
}

/** A change set with its actions' envelopes (in the set's order). */
export function subjectOfSet(set: ChangeSet, envelopes: Envelope[]): DecisionSubject {
  const byActionId = new Map(set.actions.map((a, i) => [a.actionId, envelopes[i]!] as const));
  return {
    hash: hashChangeSet(set),
    kind: "change set",
    nonce: set.nonce,
    revision: set.revision,
    createdAt: set.createdAt,
    expiresAt: set.expiresAt,
    threadId: set.threadId,
    operations: [...new Set(set.actions.map((a) => a.operation))],
    requestedBy: set.requestedBy,
    requesterVerifiedBy: requesterVerificationOf(set),
    editedBy: set.editedBy,
    level: set.risk.level,
    edits: { byActionId },
  };
}
