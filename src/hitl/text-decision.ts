/**
 * Decisions that arrive as text, from clients that have no field for our hash and nonce: a chat
 * message sent while an approval waits (agent-chat-ui's input box, Studio's chat) and Agent Inbox's
 * `response` (`[{type: "response", args: "<text>"}]`, its HumanResponse). The text must itself be a
 * complete decision: the `exampleResume` JSON the card shows (pasted), or, for an authenticated
 * caller, the card's one line `approve sha256:… nonce …` (or `reject sha256:… nonce … <reason>`).
 * The result goes through check_decision like any resume; nothing here approves anything.
 *
 * Agent Inbox's accept, edit and ignore carry no hash or nonce: they are refused as such, naming
 * what to send instead. Any other value passes through unchanged.
 */
import { HASH_PATTERN } from "../envelope/canonical.js";
import { APPROVER_PLACEHOLDER, exampleApproval } from "./contract.js";
import { decisionLine } from "./approval-request.js";

/** The pending value the agent node hands to check_decision for a chat message sent while an approval waits. */
export interface ChatDecision {
  chatDecision: string;
}

export function isChatDecision(v: unknown): v is ChatDecision {
  return (
    typeof v === "object" &&
    v !== null &&
    !Array.isArray(v) &&
    typeof (v as ChatDecision).chatDecision === "string" &&
    Object.keys(v).length === 1
  );
}

export type FromClient = { value: unknown } | { refused: { code: "MALFORMED"; reason: string } };

const LINE = /^(approve|reject)\s+(sha256:[0-9a-f]{64})\s+nonce\s+([0-9a-f]{32})(?:\s+([\s\S]*\S))?\s*$/i;
const FENCED = /^```(?:json)?\s*\n?([\s\S]*?)\n?```$/;
/** Agent Inbox's HumanResponse types (`@langchain/langgraph/prebuilt` interrupt.ts). */
const INBOX_TYPES = new Set(["accept", "ignore", "response", "edit"]);

const malformed = (reason: string): FromClient => ({ refused: { code: "MALFORMED", reason } });

const quote = (text: string) => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);

/** The decision a text holds, or why it holds none. */
export function decisionOfText(text: string, authUser: string | undefined): FromClient {
  const trimmed = text.trim();
  const body = FENCED.exec(trimmed)?.[1]?.trim() ?? trimmed;
  if (body.startsWith("{")) {
    try {
      return { value: JSON.parse(body) as unknown };
    } catch (e) {
      return malformed(
        `the message looks like JSON but is not (${(e as Error).message}); paste the card's decision JSON whole`,
      );
    }
  }
  const m = LINE.exec(body);
  if (m) {
    if (!authUser)
      return malformed(
        "the one-line decision names no approver, and this server does not authenticate callers (no API tokens); paste the card's decision JSON with your approver id",
      );
    const [, type, hash, nonce, reason] = m;
    if (!HASH_PATTERN.test(hash!.toLowerCase())) return malformed(`${quote(hash!)} is not an envelope hash`);
    const decision = {
      type: type!.toLowerCase(),
      envelopeHash: hash!.toLowerCase(),
      nonce: nonce!.toLowerCase(),
      approver: { id: authUser },
      ...(reason ? { message: reason } : {}),
    };
    return { value: { decisions: [decision] } };
  }
  return malformed(
    `the message ${quote(trimmed)} is not a decision: a decision names the envelope's hash and nonce`,
  );
}

/**
 * A resume value or chat message as check_decision reads it: text (a chat message, an Agent Inbox
 * response) becomes the decision it holds; Agent Inbox's accept, edit and ignore are refused.
 */
export function decisionFromClient(incoming: unknown, authUser: string | undefined): FromClient {
  if (isChatDecision(incoming)) return decisionOfText(incoming.chatDecision, authUser);
  if (Array.isArray(incoming) && incoming.length === 1) {
    const r = incoming[0] as { type?: unknown; args?: unknown } | null;
    if (r && typeof r === "object" && typeof r.type === "string" && INBOX_TYPES.has(r.type) && "args" in r) {
      if (r.type === "response" && typeof r.args === "string") return decisionOfText(r.args, authUser);
      return malformed(
        `Agent Inbox's ${r.type === "response" ? "response without text" : `"${r.type}"`} carries no envelope hash or nonce, so it cannot approve or reject this action`,
      );
    }
  }
  return { value: incoming };
}

/**
 * The pending value as the run that received it leaves it for check_decision: a one-line decision (the
 * card's `approve sha256:… nonce …`, as a chat message or an Agent Inbox response) names no approver,
 * so it is bound here to the authenticated caller who sent it, as the decision it holds. Judged later
 * by another run (a recovery after the process stopped between steps), it still names its sender, and
 * a run authenticated as anyone else is refused it. A chat message stays a chat message, its text the
 * decision's JSON. Anything else is returned unchanged.
 */
export function boundToSender(incoming: unknown, authUser: string | undefined): unknown {
  if (!authUser) return incoming;
  const text = isChatDecision(incoming)
    ? incoming.chatDecision
    : Array.isArray(incoming) &&
        incoming.length === 1 &&
        (incoming[0] as { type?: unknown } | null)?.type === "response" &&
        typeof (incoming[0] as { args?: unknown }).args === "string"
      ? (incoming[0] as { args: string }).args
      : undefined;
  if (text === undefined || !LINE.test((FENCED.exec(text.trim())?.[1] ?? text).trim())) return incoming;
  const read = decisionOfText(text, authUser);
  if (!("value" in read)) return incoming;
  // A chat message stays one (the agent's router sends it to check_decision), as the decision's JSON.
  return isChatDecision(incoming) ? { chatDecision: JSON.stringify(read.value) } : read.value;
}

/** What to send to decide this approval, for a refusal's chat answer. */
export function howToDecide(hash: string, nonce: string, authUser: string | undefined): string {
  if (authUser) {
    return [
      `To decide, send exactly this as a chat message (or as the response in Agent Inbox): \`${decisionLine(hash, nonce)}\``,
      `(or \`reject ${hash} nonce ${nonce} <reason>\`, or the decision JSON ${JSON.stringify(exampleApproval(hash, nonce))}).`,
    ].join(" ");
  }
  return `To decide, send this as a chat message (or as the response in Agent Inbox), with ${APPROVER_PLACEHOLDER} replaced by your approver id: ${JSON.stringify(exampleApproval(hash, nonce, APPROVER_PLACEHOLDER))}`;
}
