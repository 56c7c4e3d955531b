/**
 * The graph's one state schema. Evidence is kept as separate, timestamped objects (pre-read,
 * invocation, acknowledgement, verification) and never folded into a single status word.
 *
 * Trust: anyone who can reach the LangGraph API can write these channels. Everything from `envelope`
 * down is a MIRROR of the execution journal (src/store/action-machine.ts), kept for display and
 * routing; no node reads it back to decide what is written, whether, or what is reported. The input
 * schema admits only the request fields.
 */
import { Annotation, messagesStateReducer } from "@langchain/langgraph";
import type { BaseMessage, BaseMessageLike } from "@langchain/core/messages";
import type { Envelope } from "../envelope/index.js";
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
} from "../hitl/records.js";
import type { InputRequestRecord } from "../hitl/structured-input.js";
import type { JournalNext } from "../store/action-machine.js";

export const AgentState = Annotation.Root({
  /** The user's request in their words. */
  request: Annotation<string>,
  /** Who asked; an approver may never be the same person at or above the policy's risk threshold. */
  requestedBy: Annotation<string>,
  /** Task ids and fields the request is about, given with the request; never widened by the model. */
  scope: Annotation<RequestScope | undefined>,
  /** Conversation with the model: read tool calls, the proposal, error feedback. */
  messages: Annotation<BaseMessage[], BaseMessageLike[]>({ reducer: messagesStateReducer, default: () => [] }),
  /** Model turns taken, bounded by config so a looping model ends the run. */
  agentSteps: Annotation<number>({ reducer: (_, b) => b, default: () => 0 }),
  /** Proposals refused by validation so far; past the bound the run ends INVALID_PROPOSAL. */
  invalidProposals: Annotation<number>({ reducer: (_, b) => b, default: () => 0 }),
  /** The last well-formed proposal (from the model or from a human edit). */
  proposal: Annotation<ProposalRecord | null>({ reducer: (_, b) => b, default: () => null }),
  /** A structured question waiting for a human answer (from the model's request_input call). */
  inputRequest: Annotation<InputRequestRecord | null>({ reducer: (_, b) => b, default: () => null }),
  /** Human rejections sent back to the model as feedback; bounded by the revision limit. */
  rejections: Annotation<number>({ reducer: (_, b) => b, default: () => 0 }),
  /** Group an expired approval was escalated to; only its members may approve the fresh envelope. */
  escalatedTo: Annotation<string | null>({ reducer: (_, b) => b, default: () => null }),
  /** The frozen envelope awaiting or holding approval, and its hash. */
  envelope: Annotation<Envelope | null>({ reducer: (_, b) => b, default: () => null }),
  envelopeHash: Annotation<string | null>({ reducer: (_, b) => b, default: () => null }),
  /** The card exactly as shown to the approver for the current envelope. */
  card: Annotation<string | null>({ reducer: (_, b) => b, default: () => null }),
  /** Hashes of earlier revisions; an approval naming one is STALE_REVISION. */
  supersededHashes: Annotation<string[]>({ reducer: (_, b) => b, default: () => [] }),
  /** The raw resume value most recently received, before validation. */
  pendingDecision: Annotation<unknown>({ reducer: (_, b) => b, default: () => null }),
  /** The accepted decision. */
  decision: Annotation<DecisionRecord | null>({ reducer: (_, b) => b, default: () => null }),
  /** Every refused decision, in order, with its code. */
  refusals: Annotation<Refusal[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  preRead: Annotation<PreReadRecord | null>({ reducer: (_, b) => b, default: () => null }),
  invocation: Annotation<InvocationRecord | null>({ reducer: (_, b) => b, default: () => null }),
  acknowledgement: Annotation<AcknowledgementRecord | null>({ reducer: (_, b) => b, default: () => null }),
  verification: Annotation<VerificationRecord | null>({ reducer: (_, b) => b, default: () => null }),
  /** Final outcome; null while the run is going or waiting. */
  outcome: Annotation<Outcome | null>({ reducer: (_, b) => b, default: () => null }),
  /** Machine-readable code for why the run ended (e.g. STALE_STATE, REJECTED_BY_HUMAN). */
  reasonCode: Annotation<ReasonCode | null>({ reducer: (_, b) => b, default: () => null }),
  /** Why the run ended the way it did, precise enough to act on. */
  reason: Annotation<string | null>({ reducer: (_, b) => b, default: () => null }),
  finishedAt: Annotation<string | null>({ reducer: (_, b) => b, default: () => null }),
  /** Set by a node the journal did not allow to act; routes to `resync`. */
  needsResync: Annotation<boolean>({ reducer: (_, b) => b, default: () => false }),
  /** Where the journal says the thread is, as last read by `resync`. */
  journalNext: Annotation<JournalNext>({ reducer: (_, b) => b, default: () => null }),
});

/** What a run may be started with: the request alone. Outcome, envelope, decision and evidence channels cannot be set from input. */
export const AgentInput = Annotation.Root({
  /** The user's request in their words. */
  request: Annotation<string>,
  /** Who asked (the authenticated caller when the API requires authentication). */
  requestedBy: Annotation<string>,
  /** Task ids and fields the request is about; optional, derived from the request text when absent. */
  scope: Annotation<RequestScope | undefined>,
});

export type State = typeof AgentState.State;
export type Update = typeof AgentState.Update;
