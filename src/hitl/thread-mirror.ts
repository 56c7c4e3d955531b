/**
 * The plain shape of the graph state's channels that the gate, the audit-record builders and the case
 * record read and write, so those modules need not import the graph (src/graph/state.ts checks at
 * compile time that its state still has these fields with these types, and that an update of them is
 * a graph update). Every field is a mirror of the journal: read for display and for noting drift,
 * never to decide what is written, whether, or what is reported.
 */
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
} from "../envelope/records.js";
import type { InputRequestRecord } from "./structured-input.js";

/** The graph state's channels that hitl/ and evidence/ read, as the graph types them. */
export interface ThreadMirror {
  request: string;
  requestedBy: string;
  scope: RequestScope | undefined;
  proposal: ProposalRecord | null;
  inputRequest: InputRequestRecord | null;
  escalatedTo: string | null;
  envelope: Envelope | null;
  envelopeHash: string | null;
  card: string | null;
  decision: DecisionRecord | null;
  refusals: Refusal[];
  preRead: PreReadRecord | null;
  invocation: InvocationRecord | null;
  acknowledgement: AcknowledgementRecord | null;
  verification: VerificationRecord | null;
  outcome: Outcome | null;
  reasonCode: ReasonCode | null;
  reason: string | null;
  finishedAt: string | null;
}

/**
 * The channels hitl/ writes: the outcome the journal holds, or a hand-over to `resync`. (A type alias,
 * not an interface, so that it is assignable to LangGraph's `Command({ update })` record.)
 */
export type MirrorUpdate = {
  outcome?: Outcome | null;
  reasonCode?: ReasonCode | null;
  reason?: string | null;
  needsResync?: boolean;
};
