/**
 * The Action Envelope: the frozen object a human approves. Everything in it is material: its canonical
 * JSON (RFC 8785) is hashed, and an approval names that hash. The hash is deliberately not a field, so
 * no envelope can claim a hash of its own.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { z } from "zod";
import { formatIssues } from "./zod-issues.js";
import { fingerprint, HASH_PATTERN, sha256Json } from "./canonical.js";
import { describeReceived, EnvelopeError } from "./errors.js";
import { normaliseId, UPPER_SNAKE } from "./fields.js";
import { LEVELS, REVERSIBILITY, requesterNotVerified, type Policy } from "./policy.js";
import { checkProposal } from "./scope.js";
import { OPERATION_NAMES, OPERATIONS, REQUIRED_ON_DELETE, type OperationName } from "./operations.js";
import { COMMENT_COMPARED_FIELDS, deletedIdOf, deleteSubjectOf } from "./delete-subjects.js";
import { TARGETS, TARGET_TYPES } from "./targets.js";

export const ENVELOPE_SCHEMA_ID = "action-envelope/1";

/**
 * How the requester's identity was established, by the process that started the run, never by the
 * run's input: `authentication` (an API token), `inbox_session` (a signed-in inbox user), `signature`
 * (a signed request), or `self_declared` (a name typed in: CLI `--as` or its default, run input on an
 * open server, ACTION_ENVELOPE_DEFAULT_REQUESTER). An envelope without the field (built before it
 * existed) counts as self-declared.
 */
export const REQUESTER_VERIFICATIONS = [
  "authentication",
  "inbox_session",
  "signature",
  "self_declared",
] as const;
export type RequesterVerification = (typeof REQUESTER_VERIFICATIONS)[number];

/** The requester's verification as recorded, absent read as self-declared. */
export function requesterVerificationOf(x: {
  requesterVerifiedBy?: RequesterVerification | undefined;
}): RequesterVerification {
  return x.requesterVerifiedBy ?? "self_declared";
}

/** How a card and a refusal name a requester's verification. */
export function requesterVerificationText(v: RequesterVerification): string {
  switch (v) {
    case "authentication":
      return "verified: API token";
    case "inbox_session":
      return "verified: inbox session";
    case "signature":
      return "verified: signature";
    case "self_declared":
      return "self-declared";
    default: {
      const never: never = v;
      throw new Error(`unknown requester verification ${String(never)}`);
    }
  }
}

const FieldName = z.string().regex(UPPER_SNAKE);
const IsoWithOffset = z.iso.datetime({ offset: true });
/** host or host:port; a URL (with its path and so the webhook's secret code) does not fit. */
const PortalHost = z
  .string()
  .regex(
    /^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::\d{1,5})?$/,
    "portal is the webhook host[:port] only, never a URL or the secret code",
  );

export const EnvelopeSchema = z
  .strictObject({
    schema: z.literal(ENVELOPE_SCHEMA_ID),
    envelopeId: z.string().min(1),
    /** 1 for the first proposal; each human edit makes a new envelope with revision + 1. */
    revision: z.int().min(1),
    /** Hash of the revision this one replaces; present exactly when revision > 1. */
    previousEnvelopeHash: z.string().regex(HASH_PATTERN).optional(),
    targetSystem: z.literal("bitrix24"),
    portal: PortalHost,
    /** The object acted on; for a create (add_task) the id is 0: the object does not exist yet. */
    object: z.strictObject({ type: z.enum(TARGET_TYPES), id: z.int().min(0) }),
    /** What is done to the object (src/envelope/operations.ts): update_task writes params onto the task; add_task_comment posts params as a new comment on it. */
    operation: z.enum(OPERATION_NAMES),
    /** The exact fields to write: UPPER_SNAKE keys, full values, sent as they are. */
    /** A delete's params name only what it removes (delete_task_comment: COMMENT_ID; delete_task: nothing). */
    params: z.record(FieldName, z.json()),
    baseline: z.strictObject({
      /** Values read by code at envelope time for every compared and invariant field (UPPER_SNAKE keys, values as read). */
      values: z.record(FieldName, z.json()),
      /** 64-bit digests of every other key of the task as read (task keys as read, e.g. "responsible"), to classify unrequested changes after the write. */
      fingerprints: z.record(z.string(), z.string().regex(/^[0-9a-f]{16}$/)),
    }),
    /** Checked against a fresh read just before the write: the written fields (for an update) and the object's change marker (CHANGED_DATE for a task, DATE_MODIFY for a deal). */
    comparedFields: z.array(FieldName),
    /** Must be unchanged after the write. */
    invariantFields: z.array(FieldName),
    /** May change by themselves (target bookkeeping, or consequences of the written fields). */
    automaticFields: z.array(FieldName),
    requestedBy: z.string().min(1),
    /** How requestedBy was established (REQUESTER_VERIFICATIONS); hashed like the rest, so an approval binds it. */
    requesterVerifiedBy: z.enum(REQUESTER_VERIFICATIONS).optional(),
    /** Who wrote this revision's content when it came from a human edit; they may not approve it either. */
    editedBy: z.string().min(1).optional(),
    runContext: z.strictObject({ threadId: z.string().min(1), runId: z.string().min(1).optional() }),
    risk: z.strictObject({ reversibility: z.enum(REVERSIBILITY), level: z.enum(LEVELS) }),
    policy: z.strictObject({ id: z.string().min(1), version: z.string().min(1) }),
    createdAt: IsoWithOffset,
    expiresAt: IsoWithOffset,
    /** 128 random bits, hex; an approval must repeat it. */
    nonce: z.string().regex(/^[0-9a-f]{32}$/, "nonce is 32 lowercase hex digits (128 bits)"),
  })
  .superRefine((e, ctx) => {
    const issue = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: "custom", path, message });
    if (e.revision > 1 !== (e.previousEnvelopeHash !== undefined)) {
      issue(
        ["previousEnvelopeHash"],
        "previousEnvelopeHash is required for revision > 1 and absent for revision 1",
      );
    }
    const required = REQUIRED_ON_DELETE[e.operation];
    if (OPERATIONS[e.operation].effect === "delete") {
      const keys = Object.keys(e.params).sort();
      if (keys.join() !== [...(required ?? [])].sort().join())
        issue(
          ["params"],
          `${e.operation} names exactly ${required?.length ? required.join(", ") : "no params"} (what it deletes), got ${keys.join(", ") || "none"}`,
        );
    } else if (Object.keys(e.params).length === 0) issue(["params"], "params must name at least one field");
    if (e.object.type !== OPERATIONS[e.operation].target)
      issue(
        ["object", "type"],
        `${e.operation} acts on a ${OPERATIONS[e.operation].target}, not a ${e.object.type}`,
      );
    if ((OPERATIONS[e.operation].effect === "create") !== (e.object.id === 0)) {
      issue(
        ["object", "id"],
        OPERATIONS[e.operation].effect === "create"
          ? `${e.operation} creates its object, so its id is 0`
          : "the object id is a positive integer",
      );
    }
    const marker = TARGETS[OPERATIONS[e.operation].target].changeMarker;
    const expected = comparedFieldsFor(e.operation, Object.keys(e.params));
    if (e.comparedFields.length !== expected.length || expected.some((f) => !e.comparedFields.includes(f))) {
      const what =
        OPERATIONS[e.operation].effect === "update"
          ? `the params fields plus ${marker}`
          : OPERATIONS[e.operation].deletes === "task_comment"
            ? "the comment's AUTHOR_ID and POST_MESSAGE"
            : `${marker} alone (${e.operation} writes no field of the task)`;
      issue(["comparedFields"], `comparedFields must be ${what}: ${expected.join(", ")}`);
    }
    for (const f of [...e.comparedFields, ...e.invariantFields]) {
      if (!Object.prototype.hasOwnProperty.call(e.baseline.values, f))
        issue(["baseline", "values", f], `baseline has no value for ${f}`);
    }
    for (const f of e.invariantFields) {
      if (OPERATIONS[e.operation].effect === "update" && f in e.params)
        issue(["invariantFields"], `${f} is written, so it cannot be invariant`);
    }
    if (Date.parse(e.expiresAt) <= Date.parse(e.createdAt))
      issue(["expiresAt"], "expiresAt must be after createdAt");
  });

export type Envelope = z.output<typeof EnvelopeSchema>;

/**
 * The task fields the pre-read compares: for an update, the written fields and the change marker; for
 * a create under the task, the change marker alone (the task was approved as seen; its params are not
 * task fields).
 */
export function comparedFieldsFor(operation: OperationName, paramFields: string[]): string[] {
  const marker = TARGETS[OPERATIONS[operation].target].changeMarker;
  const effect = OPERATIONS[operation].effect;
  switch (effect) {
    case "update":
      return [...paramFields, marker];
    case "create_child":
      return [marker];
    case "create":
      // A create has nothing to compare: the object does not exist yet.
      return [];
    case "delete":
      // What is deleted is compared: a comment by its author and text, a task by its change marker (its
      // watched fields are kept as invariants, and every other key by fingerprint; src/envelope/deleted.ts).
      return OPERATIONS[operation].deletes === "task_comment" ? [...COMMENT_COMPARED_FIELDS] : [marker];
    default: {
      const never: never = effect;
      throw new Error(`unknown effect ${String(never)}`);
    }
  }
}

/** "sha256:<64 hex>" over the envelope's RFC 8785 canonical JSON. */
export function hashEnvelope(e: Envelope): string {
  return sha256Json(e);
}

export interface CreateEnvelopeInput {
  /** Webhook host[:port]; never the URL with its secret code. */
  portal: string;
  /** Defaults to update_task. */
  operation?: OperationName;
  /** The id of the operation's object: a task, or a deal for update_deal. */
  taskId: number;
  params: Record<string, unknown>;
  /**
   * The object read by code: a task as tasks.task.get answers it (body.result.task, camelCase), or a deal
   * (body.result, UPPER_SNAKE); for a delete, what it deletes (a comment as the comment list shows it).
   */
  task: Record<string, unknown>;
  requestedBy: string;
  /** How requestedBy was established; the thread's record in the journal says, never graph state. Default: self_declared. */
  requesterVerifiedBy?: RequesterVerification;
  /** The approver whose edit produced this revision, if any. */
  editedBy?: string;
  runContext: { threadId: string; runId?: string };
  policy: Policy;
  now: Date;
  revision?: number;
  envelopeId?: string;
  nonce?: string;
  previousEnvelopeHash?: string;
}

/**
 * Builds and validates an envelope. The proposal is checked against the policy again (without scope,
 * which the caller checked), so no envelope exists for a denied operation, field or value. Throws
 * EnvelopeError when a needed field is missing from the task read, the task read is for another task,
 * or the result does not validate.
 */
export function createEnvelope(input: CreateEnvelopeInput): Envelope {
  const { policy, task, params, taskId } = input;
  const operation = input.operation ?? "update_task";
  const check = checkProposal(policy, {}, { operation, taskId, fields: params });
  if (!check.allowed)
    throw new EnvelopeError(
      "PROPOSAL_DENIED",
      "a proposal the policy allows",
      `${check.code}: ${check.reasons.join("; ")}`,
    );
  const requesterVerifiedBy = input.requesterVerifiedBy ?? "self_declared";
  const unverified = requesterNotVerified(policy, check.risk.level, input.requestedBy, requesterVerifiedBy);
  if (unverified)
    throw new EnvelopeError(
      "PROPOSAL_DENIED",
      "a requester the policy accepts for this risk",
      `REQUESTER_NOT_VERIFIED: ${unverified}`,
    );

  const target = TARGETS[OPERATIONS[operation].target];
  const creating = OPERATIONS[operation].effect === "create";
  // A delete's baseline is what it deletes (src/envelope/deleted.ts): keyed and identified as that object.
  const deleted = deleteSubjectOf(operation);
  const keyed = deleted
    ? { type: deleted.kind === "task" ? "task" : "comment", idKey: deleted.idKey, keyOf: deleted.keyOf }
    : { type: target.type, idKey: target.idKey, keyOf: target.keyOf };
  const expectedId = deleted ? deletedIdOf({ operation, object: { id: taskId }, params }) : taskId;
  const readId = creating ? "0" : normaliseId(task[keyed.idKey]);
  if (creating && taskId !== 0)
    throw new EnvelopeError("WRONG_TASK", `no object id for ${operation} (it creates one)`, `id ${taskId}`);
  if (readId !== String(expectedId)) {
    throw new EnvelopeError(
      "WRONG_TASK",
      `the ${keyed.type} read for ${keyed.type} ${expectedId}`,
      `a ${keyed.type} with id ${describeReceived(task[keyed.idKey])}`,
    );
  }

  const update = OPERATIONS[operation].effect === "update";
  // Only an update writes task fields; a comment's params are not task fields at all.
  const paramFields = update ? Object.keys(params) : [];
  const rule = policy.operations[operation]!;
  // A comment delete keeps the comment (compared in full), not the task's watched fields.
  const invariantFields =
    creating || deleted?.kind === "task_comment"
      ? []
      : (rule.watchedFields ?? policy.watchedFields).filter((f) => !paramFields.includes(f));
  const comparedFields = comparedFieldsFor(operation, paramFields);
  const consequentialOf = Object.keys(params);
  const consequential = consequentialOf.flatMap((f) => rule.fields[f]?.consequentialFields ?? []);
  // Nothing may change by itself on what a delete removes: everything on it is deleted with it.
  const automaticFields = (
    creating || deleted ? [] : unique([...(rule.automaticFields ?? policy.automaticFields), ...consequential])
  ).filter((f) => !paramFields.includes(f) && !invariantFields.includes(f));

  const values: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const field of unique([...comparedFields, ...invariantFields])) {
    const key = keyed.keyOf(field);
    if (!Object.prototype.hasOwnProperty.call(task, key))
      missing.push(`${field} (${keyed.type} key "${key}")`);
    else values[field] = task[key];
  }
  if (missing.length) {
    throw new EnvelopeError(
      "MISSING_FIELD",
      `the ${keyed.type} read to contain every compared and invariant field`,
      `no ${missing.join(", ")}`,
    );
  }
  const keptKeys = new Set(Object.keys(values).map(keyed.keyOf));
  const fingerprints: Record<string, string> = {};
  for (const [key, value] of Object.entries(task)) {
    if (key === keyed.idKey || keptKeys.has(key) || value === undefined) continue;
    fingerprints[key] = fingerprint(value);
  }

  const revision = input.revision ?? 1;
  const candidate = {
    schema: ENVELOPE_SCHEMA_ID,
    envelopeId: input.envelopeId ?? randomUUID(),
    revision,
    ...(input.previousEnvelopeHash !== undefined ? { previousEnvelopeHash: input.previousEnvelopeHash } : {}),
    targetSystem: "bitrix24",
    portal: input.portal,
    object: { type: target.type, id: taskId },
    operation,
    params,
    baseline: { values, fingerprints },
    comparedFields,
    invariantFields,
    automaticFields,
    requestedBy: input.requestedBy,
    requesterVerifiedBy,
    ...(input.editedBy !== undefined ? { editedBy: input.editedBy } : {}),
    runContext: {
      threadId: input.runContext.threadId,
      ...(input.runContext.runId !== undefined ? { runId: input.runContext.runId } : {}),
    },
    risk: check.risk,
    policy: { id: policy.id, version: policy.version },
    createdAt: input.now.toISOString(),
    expiresAt: new Date(input.now.getTime() + check.ttlSeconds * 1000).toISOString(),
    nonce: input.nonce ?? randomBytes(16).toString("hex"),
  };
  return parseEnvelope(candidate);
}

/** Validates something claimed to be an envelope (e.g. read back from a checkpoint). */
export function parseEnvelope(value: unknown): Envelope {
  const parsed = EnvelopeSchema.safeParse(value);
  if (!parsed.success) {
    const detail = formatIssues(parsed.error);
    throw new EnvelopeError("INVALID_ENVELOPE", "an envelope matching EnvelopeSchema", detail);
  }
  // Zod copies objects; hashing the copy is fine because it holds the same JSON.
  return parsed.data;
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}
