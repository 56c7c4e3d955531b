/**
 * Proposal gate: scope first (what the user's request is about), then policy (what may be done at
 * all), then values. Everything here runs before an approval card exists, so a refused proposal is
 * never shown to a human as something to approve.
 */
import { checkFieldValue, UPPER_SNAKE } from "./fields.js";
import {
  fieldsOf,
  operationSpec,
  REQUIRED_ON_CREATE,
  REQUIRED_ON_DELETE,
  type OperationName,
} from "./operations.js";
import { isRecord } from "./targets.js";
import { levelRank, reversibilityRank, type Policy, type Reversibility, type RiskLevel } from "./policy.js";

/** What the user's request is about; given with the request or derived by code, never by the model alone. An absent list does not restrict; an empty list allows nothing. */
export interface Scope {
  taskIds?: number[];
  /** Deals the request is about (update_deal); absent does not restrict, empty allows none. */
  dealIds?: number[];
  fields?: string[];
  /** Operations the request is about; absent means the policy alone decides. */
  operations?: string[];
}

export interface Proposal {
  operation: string;
  /** The id of the operation's object: a task, or a deal for update_deal. */
  taskId: number;
  fields: Record<string, unknown>;
}

export interface Risk {
  reversibility: Reversibility;
  level: RiskLevel;
}

export type ProposalRefusalCode = "OUT_OF_SCOPE" | "DENIED_OPERATION" | "DENIED_FIELD" | "INVALID_VALUE";

export type ProposalCheck =
  | { allowed: true; risk: Risk; requiresApproval: boolean; ttlSeconds: number }
  | { allowed: false; code: ProposalRefusalCode; reasons: string[] };

const ORDER: ProposalRefusalCode[] = ["OUT_OF_SCOPE", "DENIED_OPERATION", "DENIED_FIELD", "INVALID_VALUE"];

/**
 * Checks one proposal. Every problem found is listed in `reasons`; `code` names the most fundamental
 * one (scope before operation before field before value), because that is what the user must fix first.
 */
export function checkProposal(policy: Policy, scope: Scope, proposal: Proposal): ProposalCheck {
  const found = new Map<ProposalRefusalCode, string[]>();
  const add = (code: ProposalRefusalCode, reason: string) =>
    found.set(code, [...(found.get(code) ?? []), reason]);
  const fields = isRecord(proposal.fields) ? proposal.fields : {};
  const fieldNames = Object.keys(fields);

  const target = operationSpec(proposal.operation)?.target ?? "task";
  const creating = operationSpec(proposal.operation)?.effect === "create";
  if (creating) {
    if (proposal.taskId !== 0)
      add(
        "INVALID_VALUE",
        `${proposal.operation} creates a new ${target}; it names no existing one (got id ${JSON.stringify(proposal.taskId)})`,
      );
    const required = REQUIRED_ON_CREATE[proposal.operation as OperationName] ?? [];
    const missing = required.filter((f) => !(f in (isRecord(proposal.fields) ? proposal.fields : {})));
    if (missing.length)
      add(
        "INVALID_VALUE",
        `${proposal.operation} needs ${missing.join(" and ")} (Bitrix24 refuses a ${target} without ${missing.length > 1 ? "them" : "it"})`,
      );
  } else if (!Number.isSafeInteger(proposal.taskId) || proposal.taskId <= 0) {
    add(
      "INVALID_VALUE",
      `${target === "deal" ? "dealId" : "taskId"} must be a positive integer, got ${JSON.stringify(proposal.taskId)}`,
    );
  }
  const deleting = operationSpec(proposal.operation)?.effect === "delete";
  if (deleting) {
    // A delete names exactly what it removes (a comment's id) and nothing else.
    const required = REQUIRED_ON_DELETE[proposal.operation as OperationName] ?? [];
    const missing = required.filter((f) => !fieldNames.includes(f));
    const extra = fieldNames.filter((f) => !required.includes(f));
    if (missing.length)
      add("INVALID_VALUE", `${proposal.operation} needs ${missing.join(" and ")} (what it deletes)`);
    if (extra.length)
      add(
        "INVALID_VALUE",
        `${proposal.operation} takes ${required.length ? `only ${required.join(", ")}` : "no fields"}, got ${extra.join(", ")}`,
      );
  }
  if (!isRecord(proposal.fields)) add("INVALID_VALUE", "fields must be an object of UPPER_SNAKE keys");
  else if (fieldNames.length === 0 && !deleting)
    add(
      "INVALID_VALUE",
      `fields is empty; Bitrix24 refuses ${proposal.operation === "add_task_comment" ? "a comment without POST_MESSAGE" : "an update without fields"}`,
    );

  // Scope.
  if (scope.operations && !scope.operations.includes(proposal.operation)) {
    add(
      "OUT_OF_SCOPE",
      `operation ${proposal.operation} is outside the request's scope (${list(scope.operations)})`,
    );
  }
  // A create touches no existing object, so the request's object ids do not restrict it (its fields still do).
  const ids = creating ? undefined : target === "deal" ? scope.dealIds : scope.taskIds;
  if (ids && !ids.includes(proposal.taskId)) {
    add(
      "OUT_OF_SCOPE",
      `${target} ${proposal.taskId} is outside the request's scope (${target}s ${list(ids.map(String))})`,
    );
  } else if (!ids && !creating) {
    // A request about tasks does not reach deals, nor one about deals tasks (their comments included).
    const [other, otherIds] = target === "deal" ? ["task", scope.taskIds] : ["deal", scope.dealIds];
    if (otherIds)
      add(
        "OUT_OF_SCOPE",
        `${target} ${proposal.taskId} is outside the request's scope (it names ${other}s ${list(otherIds.map(String))} and no ${target})`,
      );
  }
  if (scope.fields) {
    const outside = fieldNames.filter((f) => !scope.fields!.includes(f));
    if (outside.length)
      add(
        "OUT_OF_SCOPE",
        `field${outside.length > 1 ? "s" : ""} ${outside.join(", ")} outside the request's scope (${list(scope.fields)})`,
      );
  }

  // Policy: operation.
  const op = policy.operations[proposal.operation];
  if (!op) {
    add(
      "DENIED_OPERATION",
      `operation ${proposal.operation} is not in policy ${policy.id}@${policy.version} (known: ${list(Object.keys(policy.operations))})`,
    );
  } else if (!op.allowed) {
    add(
      "DENIED_OPERATION",
      `operation ${proposal.operation} is denied by policy ${policy.id}@${policy.version}${op.reason ? `: ${op.reason}` : ""}`,
    );
  }

  // Policy: fields and values.
  let level = op?.level ?? "critical";
  let reversibility = op?.reversibility ?? "irreversible";
  let requiresApproval = op?.requiresApproval ?? true;
  let ttlSeconds = op?.ttlSeconds ?? 0;
  for (const field of fieldNames) {
    if (!UPPER_SNAKE.test(field)) {
      add("DENIED_FIELD", `field ${JSON.stringify(field)} is not an UPPER_SNAKE Bitrix24 field name`);
      continue;
    }
    const rule = op?.fields[field];
    if (!rule) {
      add(
        "DENIED_FIELD",
        `field ${field} has no rule in policy ${policy.id}@${policy.version} for ${proposal.operation}, so it is denied`,
      );
      continue;
    }
    if (!rule.allowed) {
      add(
        "DENIED_FIELD",
        `field ${field} is denied by policy ${policy.id}@${policy.version}${rule.reason ? `: ${rule.reason}` : ""}`,
      );
      continue;
    }
    const bad = checkFieldValue(field, fields[field], rule, fieldsOf(proposal.operation));
    if (bad) add("INVALID_VALUE", bad);
    if (rule.level && levelRank(rule.level) > levelRank(level)) level = rule.level;
    if (rule.reversibility && reversibilityRank(rule.reversibility) > reversibilityRank(reversibility))
      reversibility = rule.reversibility;
    if (rule.requiresApproval) requiresApproval = true;
    if (rule.ttlSeconds !== undefined && rule.ttlSeconds < ttlSeconds) ttlSeconds = rule.ttlSeconds;
  }

  for (const code of ORDER) {
    if (found.has(code)) return { allowed: false, code, reasons: ORDER.flatMap((c) => found.get(c) ?? []) };
  }
  return { allowed: true, risk: { reversibility, level }, requiresApproval, ttlSeconds };
}

/**
 * Chain rule: a plan of several actions is as risky as its riskiest action (highest reversibility class
 * and highest level, independently), needs approval if any action does, and expires with the shortest TTL.
 * One refused action refuses the plan.
 */
export function checkPlan(
  policy: Policy,
  scope: Scope,
  proposals: Proposal[],
): ProposalCheck & { index?: number } {
  if (proposals.length === 0)
    return { allowed: false, code: "INVALID_VALUE", reasons: ["a plan needs at least one action"] };
  const risks: Risk[] = [];
  let requiresApproval = false;
  let ttlSeconds = Number.POSITIVE_INFINITY;
  for (const [index, p] of proposals.entries()) {
    const c = checkProposal(policy, scope, p);
    if (!c.allowed) return { ...c, reasons: c.reasons.map((r) => `action ${index + 1}: ${r}`), index };
    risks.push(c.risk);
    requiresApproval ||= c.requiresApproval;
    ttlSeconds = Math.min(ttlSeconds, c.ttlSeconds);
  }
  return { allowed: true, risk: chainRisk(risks), requiresApproval, ttlSeconds };
}

/** A chain is as risky as its riskiest step: the highest class and the highest level, each on its own. */
export function chainRisk(risks: Risk[]): Risk {
  let reversibility: Reversibility = "read_only";
  let level: RiskLevel = "low";
  for (const r of risks) {
    if (reversibilityRank(r.reversibility) > reversibilityRank(reversibility))
      reversibility = r.reversibility;
    if (levelRank(r.level) > levelRank(level)) level = r.level;
  }
  return { reversibility, level };
}

function list(items: string[]): string {
  return items.length ? items.join(", ") : "none";
}
