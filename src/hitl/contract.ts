/**
 * The one typed contract between the graph and whoever decides: the interrupt payload (a superset of
 * LangChain v1's HITLRequest) and the resume value (a superset of HITLResponse). Every interface —
 * CLI, LangGraph API, Studio, tests — goes through these shapes.
 */
import { z } from "zod";
import { MAX_SET_ACTIONS, type ChangeSet, type Envelope, type OperationName } from "../envelope/index.js";

export type ActionArgs = { taskId?: number; dealId?: number; fields: Record<string, unknown> };

/** One action as agent-inbox shows it: its name is the envelope's operation (update_task, add_task_comment). */
export interface ActionRequest {
  name: OperationName;
  /** The object's id under the operation's name for it (taskId, or dealId for update_deal) and the fields. */
  args: ActionArgs;
  description: string;
}
export interface ReviewConfig {
  actionName: OperationName;
  /** The same name as agent-chat-ui reads it (snake_case; the SDK's interrupt normaliser does not alias actionName). */
  action_name: OperationName;
  /** A delete cannot be edited (it removes exactly the object the undo named), so it offers approve and reject only. */
  allowedDecisions: ["approve", "edit", "reject"] | ["approve", "reject"];
}

export interface ApprovalRequest {
  kind: "approval";
  /** One action: its name is the envelope's operation (update_task, add_task_comment), as agent-inbox shows it. */
  actionRequests: [ActionRequest, ...ActionRequest[]];
  reviewConfigs: [ReviewConfig, ...ReviewConfig[]];
  /** The envelope approved; for a change set, its first action's (every action is in `changeSet`). */
  envelope: Envelope;
  /** What a decision names: the envelope's hash, or a change set's hash. */
  envelopeHash: string;
  nonce: string;
  /**
   * Set when the approval is for a change set: the sealed set and every action's envelope in order.
   * Decide it as a whole (one decision) or each action by its `actionId` (one decision per action).
   */
  changeSet?: {
    set: ChangeSet;
    setHash: string;
    actions: Array<{ actionId: string; envelopeHash: string; envelope: Envelope }>;
    /** The policy's classes that may run after a partial approval, so a form can say what a per-action decision will do before it is sent. */
    partialExecution?: string[];
  };
  revision: number;
  expiresAt: string;
  threadId: string;
  /** Why the previous decision for this envelope was refused, if one was. */
  lastRefusal?: { code: string; reason: string };
  /** Set when an expired approval was escalated: only this group's members may approve. */
  escalatedTo?: string;
  /**
   * A resume value that would approve, to paste into Studio or an HTTP client after checking the card.
   * On a server that authenticates callers it is complete as it is (no approver: the approver is the
   * authenticated caller); otherwise `exampleResumeFill` names the one field to fill in first.
   */
  exampleResume: ResumeValue;
  /** Fields of `exampleResume` to fill in before pasting it (JSON paths), with what goes there; empty when it is valid as it is. */
  exampleResumeFill: Array<{ path: string; with: string }>;
  /**
   * On a server that authenticates callers: the one-line decision a chat message or an Agent Inbox
   * response may carry instead of the JSON (`approve sha256:… nonce …`). Absent in open mode, where
   * an approver id must be named (paste `exampleResume` with it filled in).
   */
  exampleLine?: string;
  /**
   * Agent Inbox's HumanInterrupt fields (`@langchain/langgraph/prebuilt` interrupt.ts), for clients that
   * read that schema. Display only: what binds a decision is still `envelopeHash` and `nonce`; an
   * accept, edit or ignore carries neither and is refused, so only a response (text holding the
   * decision) is offered.
   */
  action_request: { action: OperationName; args: ActionArgs };
  config: { allow_ignore: false; allow_respond: true; allow_edit: false; allow_accept: false };
  /** Markdown: the card as registered (in a code block, layout kept), the hash and nonce, and exactly what to send. */
  description: string;
}

/** A question instead of an approval: answer with {"answers": {...}} matching `answerSchema`. */
export interface InputRequest {
  kind: "input";
  question: string;
  answerSchema: Record<string, unknown>;
  threadId: string;
  askedAt: string;
  lastRefusal?: { code: string; reason: string };
  exampleResume: { answers: Record<string, unknown> };
}

export type InterruptPayload = ApprovalRequest | InputRequest;

/**
 * Decisions made by the system or the requester rather than an approver. They are bound to the
 * envelope like any other decision; an expiry is honoured only when the envelope really has expired.
 */
export const SystemDecisionSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("cancel"),
    envelopeHash: z.string().max(128),
    nonce: z.string().max(128),
    by: z.strictObject({ id: z.string().min(1).max(128) }),
    reason: z
      .string()
      .trim()
      .min(1, "a cancel needs a reason")
      .max(4000, "a cancel reason is at most 4,000 characters"),
  }),
  z.strictObject({
    type: z.literal("expire"),
    envelopeHash: z.string().max(128),
    nonce: z.string().max(128),
    by: z.strictObject({ id: z.string().min(1).max(128) }),
  }),
]);
export type SystemDecision = z.infer<typeof SystemDecisionSchema>;

/** Outer shape only; each decision is validated by the envelope core, which knows hash, nonce and policy. */
export const ResumeSchema = z.object({
  // One decision; for a change set either one for the whole set or one per action (named by actionId).
  decisions: z
    .array(z.unknown())
    .min(1, "at least one decision")
    .max(MAX_SET_ACTIONS, `at most ${MAX_SET_ACTIONS} decisions (one per action of a change set)`),
});
export type ResumeValue = { decisions: unknown[] };

/** Placeholder for the approver id in an example resume value; a decision that still carries it is refused. */
export const APPROVER_PLACEHOLDER = "FILL-IN-your-approver-id";

/**
 * An approve decision for this envelope. Without `approverId` it names no approver: over an
 * authenticating LangGraph API server the approver is the caller (src/api/resume-identity.ts fills it in).
 */
export function exampleApproval(hash: string, nonce: string, approverId?: string): ResumeValue {
  return {
    decisions: [
      {
        type: "approve",
        envelopeHash: hash,
        nonce,
        ...(approverId !== undefined ? { approver: { id: approverId } } : {}),
      },
    ],
  };
}
