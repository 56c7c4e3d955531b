/**
 * The records of an action's life, kept in the journal and mirrored in graph state: the proposal, the
 * decision, the pre-read, the write, the verification, and the codes an action ends with. Each is a
 * separate object with its own timestamp so that "what was shown", "what was approved", "what was
 * sent", "what the target said" and "what state resulted" can be answered independently afterwards.
 */
import type { FieldCheck, MovedField, ObjectIdentity } from "./compare.js";
import type { CreatedObject } from "./created.js";
import type { OperationName, OperationSpec } from "./operations.js";

export interface RequestScope {
  taskIds?: number[];
  dealIds?: number[];
  fields?: string[];
}

/** One action of a proposed change set. */
export interface ProposedAction {
  operation: OperationName;
  taskId: number;
  fields: Record<string, unknown>;
}

export interface ProposalRecord {
  /** What is done to the task (src/envelope/operations.ts); absent means update_task. */
  operation?: OperationName;
  /**
   * A change set: two or more actions approved together and run in order (the chain rule). When
   * present, `operation`, `taskId` and `fields` repeat its first action.
   */
  actions?: ProposedAction[];
  /** The id of the operation's object: a task's id, or a deal's for update_deal (the operation says which). */
  taskId: number;
  fields: Record<string, unknown>;
  rationale: string;
  /** "model" for a proposal from the agent, "human_edit" for an edited revision. */
  /** compensation: built by code from a verified action's recorded before-values (`undo`), never by the model. */
  source: "model" | "human_edit" | "compensation";
}

export type Outcome =
  | "VERIFIED"
  | "NOT_EXECUTED"
  | "REJECTED_BY_TARGET"
  | "VERIFICATION_FAILED"
  | "INVARIANT_VIOLATION"
  | "INCONCLUSIVE"
  /** A change set wrote some of its actions and stopped before the end (chain rule): see its outcome table. */
  | "PARTIALLY_EXECUTED";

export type ReasonCode =
  | "VERIFIED"
  | "NO_PROPOSAL"
  | "AGENT_STEP_LIMIT"
  | "INVALID_PROPOSAL"
  | "INVALID_INPUT"
  | "DENIED_BY_POLICY"
  /** A change at or above the policy's requireVerifiedRequesterAtOrAbove from a self-declared requester: ended before any approval. */
  | "REQUESTER_NOT_VERIFIED"
  /** An undo thread whose original action cannot be undone: not verified, irreversible, or its before-values not kept. */
  | "NOT_UNDOABLE"
  | "BASELINE_READ_FAILED"
  | "REJECTED_BY_HUMAN"
  | "TOO_MANY_REFUSED_DECISIONS"
  | "TOO_MANY_REVISIONS"
  | "APPROVAL_EXPIRED"
  | "APPROVAL_ALREADY_USED"
  | "CANCELLED"
  | "STALE_STATE"
  /** An action of a change set that was not run because an earlier action of the set did not end VERIFIED. */
  | "CHAIN_STOPPED"
  /** Another approved action held the object (pre-read to verification) for longer than this one may wait; nothing was sent. */
  | "TARGET_BUSY"
  /** The pre-read's answer was about another object than the envelope's. */
  | "IDENTITY_MISMATCH"
  /** The model called a tool it was not offered (a write tool, an unknown or remapped name); refused at the boundary. */
  | "WRITE_ATTEMPT_REFUSED"
  /** The proposal's requested values already equal the task's current values; nothing to approve. */
  | "NO_CHANGE"
  /** The model provider stopped the run (src/models/model-errors.ts modelReasonCode): key refused, rate limited, unreachable, … */
  | "MODEL_AUTH_FAILED"
  | "MODEL_RATE_LIMITED"
  | "MODEL_UNREACHABLE"
  | "MODEL_REQUEST_REJECTED"
  | "MODEL_SERVER_ERROR"
  | "MODEL_FAILED"
  | "PRECHECK_UNKNOWN"
  | "PRECHECK_ERROR"
  | "NOT_PERMITTED"
  /** The envelope-time read shows the object does not exist (or is not visible): ended before any approval. */
  | "TARGET_NOT_FOUND"
  | "ENVELOPE_TAMPERED"
  | "ROLLBACK_DETECTED"
  /** A closing record in the journal whose seal does not hold (or is missing): its outcome is not reported. */
  | "OUTCOME_TAMPERED"
  | "WRONG_TARGET"
  | "ALREADY_EXECUTED"
  | "REJECTED_BY_TARGET"
  | "VERIFICATION_FAILED"
  | "INVARIANT_VIOLATION"
  | "INCONCLUSIVE";

export interface DecisionRecord {
  type: "approve" | "reject" | "edit" | "cancel" | "expire";
  envelopeHash: string;
  nonce: string;
  revision: number;
  approverId: string;
  verifiedBy: "signature" | "authentication" | "self_declared";
  decidedAt: string;
  acceptedAt: string;
  message?: string;
  override?: { gate: string; by: string; reason: string };
  /** The decision exactly as received, for evidence. */
  raw: unknown;
}

export interface Refusal {
  code: string;
  reason: string;
  at: string;
  envelopeHash: string | null;
  raw: unknown;
}

export interface PreReadRecord {
  verdict: "MATCH" | "MISMATCH" | "UNKNOWN" | "ERROR";
  reason: string;
  fields: FieldCheck[];
  /** Every field that differs from the envelope's baseline, with before and now (absent in records made before it existed). */
  moved?: MovedField[];
  /** Whether the answer was about the envelope's object (MISMATCH: definitely another one). */
  identity?: ObjectIdentity;
  /** The target's answer as received (parsed JSON, raw text, or the error). */
  raw: unknown;
  canEdit: boolean | null;
  /** The object lease held for this read through to verification (absent in records made before leases existed). */
  lease?: LeaseRecord;
  /**
   * For a create: ids of what already carried the approved text at the pre-read (a comment's text, or
   * a new task's title), so verification can tell the object this write made from an earlier one.
   * Absent for updates.
   */
  sameTextBefore?: string[];
  /** For a comment: the comment list as read at the pre-read. */
  commentsRaw?: unknown;
  at: string;
}

/** Which object lease the action held, and whom it waited for to get it. */
export interface LeaseRecord {
  objectKey: string;
  waitedMs: number;
  /** The action that held the object while this one waited, if any. */
  waitedFor?: { envelopeHash: string; threadId: string };
  /** When the lease runs out unless renewed; null when it was not obtained. */
  expiresAt: string | null;
}

/**
 * How the write went out: "rest2" = plain call, the idempotency key only recorded here, never sent
 * (a lost answer is never re-sent); "rest3-idempotency-key" = sent with the key as REST 3.0's
 * Idempotency-Key header (a lost answer is re-sent with the same key on recovery).
 */
export type WriteProtocol = "rest2" | "rest3-idempotency-key";

export interface InvocationRecord {
  /** The write tool called (the operation's tool, src/envelope/operations.ts). */
  tool: OperationSpec["tool"];
  /**
   * The tool's arguments: {taskId, fields} for a task's operation, {dealId, fields} for update_deal,
   * {fields} for add_task, {taskId, commentId} or {taskId} for a delete (which sends no fields).
   */
  args: { taskId?: number; dealId?: number; commentId?: number; fields?: Record<string, unknown> };
  idempotencyKey: string;
  envelopeHash: string;
  sentAt: string;
  /** Absent in records made before it existed: those were all "rest2". */
  protocol?: WriteProtocol;
}

export interface AcknowledgementRecord {
  status: "OK" | "ERROR" | "MISSING";
  body?: unknown;
  error?: { kind: string; code?: string; description: string; httpStatus?: number; outcomeUnknown?: boolean };
  reason?: string;
  at: string;
  /** The protocol of the call this answer belongs to (absent in older records: "rest2"). */
  protocol?: WriteProtocol;
  /** The portal marked the answer `Idempotent-Replayed: true`: its kept first answer, not a second application. */
  replayed?: boolean;
  /** This answer came from recovery re-sending the same call with the same key, after the first answer was lost. */
  resent?: { at: string; firstSentAt: string };
}

export interface VerificationRecord {
  verdict: "VERIFIED" | "VERIFICATION_FAILED" | "INVARIANT_VIOLATION" | "INCONCLUSIVE";
  reason: string;
  fields: FieldCheck[];
  /** Every field that differs from the envelope's baseline, with before and now. */
  moved?: MovedField[];
  identity?: ObjectIdentity;
  raw: unknown;
  /** For a create: the object made, when it could be tied to this write, and the comment list read. */
  created?: CreatedObject & { raw: unknown };
  at: string;
}

/**
 * What graph state keeps of the evidence records: a summary (verdict, reason, time, each field's name,
 * role and status), never the values read, the rules, the lease or the target's raw answers. Those
 * stay in the journal (and, at the end of each action, in its hash-chained audit record), from which
 * `show`, the API and the evidence bundle are built. State is a mirror anyone with API access can
 * rewrite, so nothing reads evidence from it; every checkpoint serialises all of state, so it is kept
 * small. The marker says where the full record is. Each summary is idempotent: a summary of a summary
 * is itself.
 */
export const RAW_IN_JOURNAL = "(kept in the journal: `audit export` / `show` print it)";

/** A field check as state summarises it: which field, its role and its status. */
function fieldsSummary(fields: unknown): FieldCheck[] {
  if (!Array.isArray(fields)) return fields as FieldCheck[];
  return fields.map((f: FieldCheck) =>
    f && typeof f === "object" ? { field: f.field, taskKey: f.taskKey, role: f.role, status: f.status } : f,
  );
}

export function preReadMirror(r: PreReadRecord | null | undefined): PreReadRecord | null {
  if (!r || typeof r !== "object") return r ?? null;
  return {
    verdict: r.verdict,
    reason: r.reason,
    fields: fieldsSummary(r.fields),
    ...(r.identity !== undefined ? { identity: r.identity } : {}),
    canEdit: r.canEdit,
    at: r.at,
    raw: RAW_IN_JOURNAL,
    ...(r.commentsRaw !== undefined ? { commentsRaw: RAW_IN_JOURNAL } : {}),
  };
}

export function acknowledgementMirror(
  a: AcknowledgementRecord | null | undefined,
): AcknowledgementRecord | null {
  if (!a || typeof a !== "object") return a ?? null;
  const { body, ...rest } = a;
  return { ...rest, ...(body !== undefined ? { body: RAW_IN_JOURNAL } : {}) };
}

export function verificationMirror(v: VerificationRecord | null | undefined): VerificationRecord | null {
  if (!v || typeof v !== "object") return v ?? null;
  const created = v.created;
  return {
    verdict: v.verdict,
    reason: v.reason,
    fields: fieldsSummary(v.fields),
    ...(v.identity !== undefined ? { identity: v.identity } : {}),
    ...(created && typeof created === "object" ? { created: { ...created, raw: RAW_IN_JOURNAL } } : {}),
    at: v.at,
    raw: RAW_IN_JOURNAL,
  };
}
