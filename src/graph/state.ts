/**
 * The graph's state, input and output schemas, in zod through LangGraph's `StateSchema`. The LangGraph
 * API server reads them at run time (`getSchemas`, Studio's input form and state view) instead of
 * running its TypeScript type extractor over this project, which took 10–16 s per server start
 * (bench/get-schemas.ts). Every field carries a description.
 *
 * Evidence is kept as separate, timestamped objects (pre-read, invocation, acknowledgement,
 * verification) and never folded into a single status word.
 *
 * Trust: anyone who can reach the LangGraph API can write these channels. Everything from `envelope`
 * down is a MIRROR of the execution journal (src/store/action-machine.ts), kept for display and
 * routing; no node reads it back to decide what is written, whether, or what is reported. So a
 * channel's zod shape documents it (JSON Schema for Studio) but does not gate writes to it: a state
 * value of the wrong shape must reach the nodes, which ignore it and record `tamper_detected`, rather
 * than stop the run with a validation error. The run input is validated by the agent node against
 * `RequestInputSchema` (src/graph/request-input.ts; code INVALID_INPUT naming the field), before
 * anything is recorded or a model is called.
 */
import { z } from "zod";
import { ReducedValue, StateSchema } from "@langchain/langgraph";
import { EnvelopeSchema, OPERATION_NAMES, type Envelope } from "../envelope/index.js";
import type {
  AcknowledgementRecord,
  DecisionRecord,
  InvocationRecord,
  Outcome,
  PreReadRecord,
  ProposalRecord,
  ReasonCode,
  Refusal,
  RequestScope,
  VerificationRecord,
} from "../envelope/records.js";
import { acknowledgementMirror, preReadMirror, verificationMirror } from "../envelope/records.js";
import type { InputRequestRecord } from "../hitl/structured-input.js";
import type { MirrorUpdate, ThreadMirror } from "../hitl/thread-mirror.js";
import type { JournalNext } from "../store/action-machine.js";
import { afterPendingWrite } from "../hitl/pending-value.js";
import { messages } from "./messages-channel.js";
import {
  MAX_REQUEST_CHARS,
  MAX_REQUESTER_CHARS,
  RequestInputSchema,
  RequestScopeSchema,
} from "./request-input.js";

/**
 * A channel whose JSON Schema is `shape` with `description`, and which accepts any value: graph
 * state is a mirror, and a value of the wrong shape must reach the nodes (which ignore it and record
 * it) rather than fail the run. `fallback` is the channel's default.
 */
function mirror<T>(description: string, shape: z.ZodType | undefined, fallback?: () => T): z.ZodType<T> {
  let json: Record<string, unknown> = {};
  if (shape) {
    json = z.toJSONSchema(shape, { target: "draft-7", io: "input", unrepresentable: "any" }) as Record<
      string,
      unknown
    >;
    delete json["$schema"];
  }
  const base = fallback ? z.any().default(fallback) : z.any();
  return base.meta({ ...json, description }) as unknown as z.ZodType<T>;
}

/**
 * Last value wins, with a default. A reducer rather than LangGraph's LastValue, which fails a step that
 * writes it twice: two tasks of one step can both write a channel (a goto sent while another task waits
 * at an interrupt), and with LastValue that step, and every later read of the thread's state, would
 * fail. What the channel then holds is a mirror either way; the journal says what happened.
 */
const last = <T>(description: string, shape: z.ZodType | undefined, fallback: () => T) =>
  new ReducedValue(mirror<T>(description, shape, fallback), {
    inputSchema: mirror<T>(description, shape),
    reducer: (_current: T, next: T) => next,
  });

/** A `last` channel that holds null until it is set. */
const lastOrNull = <T>(description: string, shape: z.ZodType) =>
  last<T | null>(description, shape.nullable(), () => null);

const OUTCOMES = [
  "VERIFIED",
  "NOT_EXECUTED",
  "REJECTED_BY_TARGET",
  "VERIFICATION_FAILED",
  "INVARIANT_VIOLATION",
  "INCONCLUSIVE",
  "PARTIALLY_EXECUTED",
] as const satisfies readonly Outcome[];
const FieldCheckShape = z
  .object({
    field: z.string(),
    taskKey: z.string(),
    role: z.enum(["compared", "requested", "invariant", "automatic", "other"]),
    status: z.string(),
  })
  .partial();
const RefusalShape = z.object({
  code: z
    .string()
    .describe("Refusal code, e.g. MALFORMED, HASH_MISMATCH, APPROVER_NOT_ALLOWED, THREAD_ENDED."),
  reason: z.string(),
  at: z.string(),
  envelopeHash: z.string().nullable(),
  raw: z.unknown().describe("The decision as received (bounded)."),
});
const DecisionShape = z.object({
  type: z.enum(["approve", "reject", "edit", "cancel", "expire"]),
  envelopeHash: z.string(),
  nonce: z.string(),
  revision: z.int(),
  approverId: z.string(),
  verifiedBy: z.enum(["signature", "authentication", "self_declared"]),
  decidedAt: z.string(),
  acceptedAt: z.string(),
  message: z.string().optional(),
});
const ProposalShape = z.object({
  operation: z
    .enum(OPERATION_NAMES)
    .optional()
    .describe("What is done to the task: update_task (default) or add_task_comment."),
  actions: z
    .array(
      z.object({
        operation: z.enum(OPERATION_NAMES),
        taskId: z.int(),
        fields: z.record(z.string(), z.unknown()),
      }),
    )
    .optional()
    .describe("A change set: the actions in order (the first is repeated in operation/taskId/fields)."),
  taskId: z.int(),
  fields: z.record(z.string(), z.unknown()),
  rationale: z.string(),
  source: z.enum(["model", "human_edit", "compensation"]),
});
const VerdictShape = (verdicts: readonly [string, ...string[]]) =>
  z.object({
    verdict: z.enum(verdicts),
    reason: z.string(),
    fields: z.array(FieldCheckShape),
    raw: z.unknown(),
    at: z.string(),
  });

const request = mirror<string>(
  RequestInputSchema.shape.request.description!,
  z.string().min(1).max(MAX_REQUEST_CHARS),
);
const requestedBy = mirror<string>(
  RequestInputSchema.shape.requestedBy.description!,
  z.string().min(1).max(MAX_REQUESTER_CHARS),
);
const scope = mirror<RequestScope | undefined>(RequestScopeSchema.description!, RequestScopeSchema);
const requesterSignature = mirror<string | undefined>(
  RequestInputSchema.shape.requesterSignature.description!,
  z.string(),
);

const outcome = lastOrNull<Outcome>(
  "Final outcome; null while the run is going or waiting. Derived from the journal by `finish`.",
  z.enum(OUTCOMES),
);
const reasonCode = lastOrNull<ReasonCode>(
  "Machine-readable code for why the run ended (e.g. VERIFIED, STALE_STATE, REJECTED_BY_HUMAN, INVALID_INPUT).",
  z.string(),
);
const reason = lastOrNull<string>(
  "Why the run ended the way it did, precise enough to act on (for INVALID_INPUT: the field and what it must be).",
  z.string(),
);
const finishedAt = lastOrNull<string>("When the thread was closed (ISO 8601), from the journal.", z.string());
const envelopeHash = lastOrNull<string>(
  "sha256 of the canonical envelope (RFC 8785) awaiting or holding approval; an approval must repeat it.",
  z.string(),
);
const card = lastOrNull<string>(
  "The approval card exactly as registered in the journal and shown to the approver.",
  z.string(),
);
const decision = lastOrNull<DecisionRecord>(
  "The accepted decision, as the journal recorded it.",
  DecisionShape,
);
const refusals = new ReducedValue(
  mirror<Refusal[]>("Every refused decision, in order, with its code.", z.array(RefusalShape), () => []),
  {
    inputSchema: mirror<Refusal[]>("Refusals to append.", z.array(RefusalShape)),
    reducer: (a: Refusal[], b: Refusal[]) => a.concat(b),
  },
);
/**
 * An evidence channel: null until set, then last value wins, kept as a summary (`slim`:
 * src/envelope/records.ts), whoever writes it (a node, or a client through the API). The full record
 * stays in the journal and audit log.
 */
const evidence = <T>(description: string, shape: z.ZodType, slim: (v: T | null) => T | null) =>
  new ReducedValue(
    mirror<T | null>(
      `${description} State keeps a summary (verdict or status, reason, time, each field's role and status); the full record (values read, rules, the target's raw answer) stays in the journal (\`show\`, \`audit export\`).`,
      shape.nullable(),
      () => null,
    ),
    {
      inputSchema: z.any() as unknown as z.ZodType<T | null>,
      reducer: (_current: T | null, next: T | null) => slim(next),
    },
  );

const verification = evidence<VerificationRecord>(
  "The post-write read and its verdict: only a fresh read showing the approved values makes VERIFIED.",
  VerdictShape(["VERIFIED", "VERIFICATION_FAILED", "INVARIANT_VIOLATION", "INCONCLUSIVE"]).extend({
    created: z
      .unknown()
      .optional()
      .describe(
        "For a comment: the comment this write made (its id, how it was found) and the comment list read.",
      ),
  }),
  verificationMirror,
);

export const AgentState = new StateSchema({
  request,
  requestedBy,
  scope,
  requesterSignature,
  messages,
  agentSteps: last<number>(
    "Model turns taken, as the journal counts them (the bound that ends a looping model's run is checked there).",
    z.int().min(0),
    () => 0,
  ),
  invalidProposals: last<number>(
    "Proposals refused by validation so far, as the journal counts them; past the bound the run ends INVALID_PROPOSAL.",
    z.int().min(0),
    () => 0,
  ),
  proposal: lastOrNull<ProposalRecord>(
    "The last well-formed proposal (from the model, a human edit, or an undo built by code from the journal).",
    ProposalShape,
  ),
  inputRequest: lastOrNull<InputRequestRecord>(
    "A structured question waiting for a human answer (from the model's request_input call).",
    z.object({
      toolCallId: z.string(),
      question: z.string(),
      fields: z.record(z.string(), z.unknown()),
      askedAt: z.string(),
    }),
  ),
  rejections: last<number>(
    "Human rejections sent back to the model as feedback; bounded by the revision limit.",
    z.int().min(0),
    () => 0,
  ),
  escalatedTo: lastOrNull<string>(
    "Group an expired approval was escalated to; only its members may approve the fresh envelope.",
    z.string(),
  ),
  envelope: lastOrNull<Envelope>(
    "The frozen Action Envelope awaiting or holding approval (mirror of the journal's registered row).",
    EnvelopeSchema,
  ),
  envelopeHash,
  card,
  supersededHashes: last<string[]>(
    "Hashes of earlier revisions; an approval naming one is STALE_REVISION.",
    z.array(z.string()),
    () => [],
  ),
  pendingDecision: new ReducedValue(
    mirror<unknown>("The raw resume value most recently received, before validation.", undefined, () => null),
    {
      inputSchema: mirror<unknown>("A resume value, or the mark of one a node has taken.", undefined),
      reducer: afterPendingWrite,
    },
  ),
  pendingFrom: lastOrNull<string>(
    "The run the pending decision or answer was sent with (a nonce of that run); check_decision and check_input judge it only in that same run, so a value found in a checkpoint is never taken as a new one.",
    z.string(),
  ),
  decision,
  refusals,
  preRead: evidence<PreReadRecord>(
    "The fresh read of the target just before the write: MATCH lets the write go; MISMATCH / UNKNOWN / ERROR end the run.",
    VerdictShape(["MATCH", "MISMATCH", "UNKNOWN", "ERROR"]).extend({ canEdit: z.boolean().nullable() }),
    preReadMirror,
  ),
  invocation: lastOrNull<InvocationRecord>(
    "The write as sent (arguments from the journal's envelope, idempotency key), recorded before sending.",
    z.object({
      // Each operation's write tool carries the operation's name (src/envelope/operations.ts).
      tool: z.enum(OPERATION_NAMES),
      args: z.object({
        taskId: z.int().optional(),
        dealId: z.int().optional(),
        commentId: z.int().optional(),
        fields: z.record(z.string(), z.unknown()).optional(),
      }),
      idempotencyKey: z.string(),
      envelopeHash: z.string(),
      sentAt: z.string(),
    }),
  ),
  acknowledgement: evidence<AcknowledgementRecord>(
    "The target's answer to the write: OK, ERROR, or MISSING (timeout: outcome unknown, settled by verification).",
    z.object({
      status: z.enum(["OK", "ERROR", "MISSING"]),
      body: z.unknown().optional(),
      reason: z.string().optional(),
      at: z.string(),
    }),
    acknowledgementMirror,
  ),
  verification,
  outcome,
  reasonCode,
  reason,
  finishedAt,
  needsResync: last<boolean>(
    "Set by a node the journal did not allow to act; routes to `resync`.",
    z.boolean(),
    () => false,
  ),
  journalNext: last<JournalNext>(
    "Where the journal says the thread is, as last read by `resync`.",
    z.enum(["agent", "build_envelope", "await_approval", "carry_out", "finish"]).nullable(),
    () => null,
  ),
});

/**
 * A StateSchema whose input JSON Schema lists `request` as required. (StateSchema's own input schema
 * marks every field optional, as fits a state update; a run's input is not one.) Chat mode's
 * `{"messages": [...]}` is accepted too and described on the `messages` field.
 */
class RunInputSchema<F extends ConstructorParameters<typeof StateSchema>[0]> extends StateSchema<F> {
  override getInputJsonSchema() {
    return {
      ...super.getInputJsonSchema(),
      required: ["request"],
      description:
        'A new request. Leave out requestedBy when the server authenticates you; in chat mode send {"messages": [...]} instead.',
    };
  }
}

/**
 * What a run may be started with: the request, or Studio's chat messages. Outcome, envelope, decision
 * and evidence channels cannot be set from input.
 */
export const AgentInput = new RunInputSchema({ request, requestedBy, scope, requesterSignature, messages });

/** What a finished run returns: the outcome view (the whole state stays readable through getState). */
export const AgentOutput = new StateSchema({
  request,
  requestedBy,
  outcome,
  reasonCode,
  reason,
  finishedAt,
  envelopeHash,
  card,
  decision,
  refusals,
  verification,
  messages,
});

export type State = typeof AgentState.State;
export type Update = typeof AgentState.Update;

/** `T`, which must be assignable to `U`: a compile-time check, and nothing at run time. */
type Checked<T extends U, U> = T;
/**
 * Fails to compile when the state stops having a field hitl/ and evidence/ read with the type they read
 * it as (src/hitl/thread-mirror.ts), or when a channel they write no longer holds what they write.
 * (`Update` types each channel's input as unknown, so the writes are checked against the state's values.)
 */
export type MirrorChecks = [Checked<State, ThreadMirror>, Checked<MirrorUpdate, Partial<State>>];
