import type { ActionRow } from "../store/action-machine.js";
import { APPROVER_PLACEHOLDER, exampleApproval } from "./contract.js";
import { OPERATIONS, writeArgsOf, type OperationName } from "../envelope/operations.js";
import type { ReviewConfig, ActionArgs, ApprovalRequest, ResumeValue } from "./contract.js";

/** What agent-inbox offers for an action: an edit of a delete is refused (OUT_OF_SCOPE), so it is not offered. */
function reviewConfigOf(operation: OperationName): ReviewConfig {
  return {
    actionName: operation,
    action_name: operation,
    allowedDecisions:
      OPERATIONS[operation].effect === "delete" ? ["approve", "reject"] : ["approve", "edit", "reject"],
  };
}

/**
 * Pure: the interrupt payload for a registered action, built from the journal's row — the envelope,
 * hash and card registered for it — never from graph state, so what is shown is what was sealed.
 * A change set's pause (`members` given for a row of a set): one action request per action (in set
 * order, each named by its operation, with its own card section), bound to the set's hash and nonce;
 * `envelope` is the first action's, for clients that show one; `changeSet` holds the set and every
 * action's envelope.
 */
export function approvalRequestFrom(
  action: ActionRow,
  opts: { approverId?: string; members?: ActionRow[]; partialExecution?: readonly string[] } = {},
): ApprovalRequest {
  // `approverId` is the authenticated caller of the run that reached this pause (usually the
  // requester, not the approver). Its presence says the server authenticates callers, so the example
  // names no approver: whoever resumes is the approver, filled in from their token.
  const authenticated = opts.approverId !== undefined;
  const last = action.progress.lastRefusal;
  const set = action.set && opts.members ? action.set : undefined;
  const rows = set ? opts.members! : [action];
  const bound = approvalBinding(action, !!set);
  const sections = set ? action.card.split(/\n(?=──── ACTION \d+ of \d+: )/) : [];
  const exampleResume = authenticated
    ? exampleApproval(bound.envelopeHash, bound.nonce)
    : exampleApproval(bound.envelopeHash, bound.nonce, APPROVER_PLACEHOLDER);
  const line = authenticated ? decisionLine(bound.envelopeHash, bound.nonce) : undefined;
  const first = rows[0]!.envelope;
  return {
    kind: "approval",
    actionRequests: rows.map((x, i) => ({
      name: x.envelope.operation,
      args: writeArgsOf(x.envelope.operation, x.envelope.object.id, x.envelope.params) as ActionArgs,
      description: i === 0 ? action.card : (sections[i + 1] ?? ""),
    })) as ApprovalRequest["actionRequests"],
    reviewConfigs: rows.map((x) => reviewConfigOf(x.envelope.operation)) as ApprovalRequest["reviewConfigs"],
    envelope: first,
    ...bound,
    threadId: action.threadId,
    ...(set
      ? {
          changeSet: {
            set: set.set,
            setHash: set.setHash,
            actions: rows.map((x) => ({
              actionId: x.set!.actionId,
              envelopeHash: x.envelopeHash,
              envelope: x.envelope,
            })),
            ...(opts.partialExecution ? { partialExecution: [...opts.partialExecution] } : {}),
          },
        }
      : {}),
    ...(last ? { lastRefusal: { code: last.code, reason: last.reason } } : {}),
    ...(action.escalatedTo ? { escalatedTo: action.escalatedTo } : {}),
    exampleResume,
    exampleResumeFill: authenticated
      ? []
      : [
          {
            path: "decisions[0].approver.id",
            with: "your approver id (the policy's approvers list, or the escalation group when escalated)",
          },
        ],
    ...(line ? { exampleLine: line } : {}),
    action_request: {
      action: first.operation,
      args: writeArgsOf(first.operation, first.object.id, first.params) as ActionArgs,
    },
    config: { allow_ignore: false, allow_respond: true, allow_edit: false, allow_accept: false },
    description: approvalMarkdown(action.card, bound.envelopeHash, bound.nonce, exampleResume, line, !!set),
  };
}

/**
 * Pure: what a decision on a registered action is bound to: its change set's hash, nonce, revision
 * and expiry for a row of a set shown as one, else its envelope's.
 */
export function approvalBinding(
  action: Pick<ActionRow, "envelopeHash" | "envelope" | "set">,
  asSet = action.set !== undefined,
): { envelopeHash: string; nonce: string; revision: number; expiresAt: string } {
  const set = asSet ? action.set : undefined;
  return set
    ? {
        envelopeHash: set.setHash,
        nonce: set.set.nonce,
        revision: set.set.revision,
        expiresAt: set.set.expiresAt,
      }
    : {
        envelopeHash: action.envelopeHash,
        nonce: action.envelope.nonce,
        revision: action.envelope.revision,
        expiresAt: action.envelope.expiresAt,
      };
}

/** The short decision line an authenticated caller may send as a chat message or Agent Inbox response. */
export function decisionLine(hash: string, nonce: string): string {
  return `approve ${hash} nonce ${nonce}`;
}

/**
 * The card as Markdown for Agent Inbox and chat clients: the registered card in a code block (its
 * layout kept, nothing truncated), then the hash and nonce, then exactly what to send to decide.
 */
export function approvalMarkdown(
  card: string,
  hash: string,
  nonce: string,
  exampleResume: ResumeValue,
  line: string | undefined,
  isSet: boolean,
): string {
  const fence = "`".repeat(Math.max(3, ...[...card.matchAll(/`+/g)].map((m) => m[0].length + 1)));
  const json = JSON.stringify(exampleResume);
  return [
    `### Approval requested${isSet ? " (change set)" : ""}`,
    "",
    fence,
    card,
    fence,
    "",
    `- **Hash:** \`${hash}\``,
    `- **Nonce:** \`${nonce}\``,
    "",
    "**To decide, send one of these as a chat message (or as the response in Agent Inbox).** Approve, Accept, Edit and Ignore buttons carry no hash and are refused.",
    "",
    ...(line
      ? [
          `- Approve as yourself (this server authenticates you): \`${line}\``,
          `- Reject: \`reject ${hash} nonce ${nonce} <reason>\``,
        ]
      : []),
    line
      ? "- Or the full decision (JSON):"
      : `- The decision (JSON), with \`${APPROVER_PLACEHOLDER}\` replaced by your approver id (identities on this server are self-declared: it requires no API tokens):`,
    "",
    "```json",
    json,
    "```",
  ].join("\n");
}
