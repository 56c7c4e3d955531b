/**
 * On a LangGraph API server that authenticates callers, the approver of a decision is the caller. A
 * decision sent without `approver` (as the interrupt's `exampleResume` is on such a server, so that it
 * can be pasted as it is) gets `approver: {id: <authenticated identity>}` before the graph sees it, and
 * a system expiry sent without `by` (as `worker --api` sends it with a token) gets `by: {id: <caller>}`.
 * A decision that names an approver (or an expiry that names `by`) is left alone: check_decision
 * refuses one that names anyone but the authenticated caller. Without an authenticated caller (open
 * mode, CLI) nothing is filled in.
 */
import { authenticatedIdentity } from "../auth/identity.js";
import { isRecord } from "../auth/rules.js";

/** The decision with the caller filled in where it names nobody; undefined when nothing is filled in. */
function filled(d: unknown, caller: string): Record<string, unknown> | undefined {
  if (!isRecord(d) || d["approver"] !== undefined || d["by"] !== undefined || d["type"] === "cancel")
    return undefined;
  return d["type"] === "expire" ? { ...d, by: { id: caller } } : { ...d, approver: { id: caller } };
}

/** Pure: the resume value with the authenticated caller as approver of decisions (and author of expiries) that name none. */
export function withAuthenticatedApprover(
  resume: unknown,
  configurable: Record<string, unknown> | undefined,
): unknown {
  const caller = authenticatedIdentity(configurable);
  if (!caller || !isRecord(resume) || !Array.isArray(resume["decisions"])) return resume;
  const decisions = resume["decisions"] as unknown[];
  if (!decisions.some((d) => filled(d, caller) !== undefined)) return resume;
  return { ...resume, decisions: decisions.map((d) => filled(d, caller) ?? d) };
}
