/**
 * The policy document: which operations and fields may be proposed, how risky each is, whether and for
 * how long an approval is valid, who may approve, separation of duties, and which gates an authorised
 * approver may override. It is data (JSON, versioned, validated here); the gates themselves are code.
 */
import { z } from "zod";
import { formatIssues } from "./zod-issues.js";
import { PolicyError } from "./errors.js";
import { fieldSpec, UPPER_SNAKE } from "./fields.js";

export const LEVELS = ["low", "medium", "high", "critical"] as const;
export type RiskLevel = (typeof LEVELS)[number];
export const REVERSIBILITY = ["read_only", "reversible", "reversible_external", "irreversible"] as const;
export type Reversibility = (typeof REVERSIBILITY)[number];

/**
 * Named gates of the decision and proposal checks. Only those in OVERRIDABLE_GATES can ever be named in
 * a policy's `overrides`; the rest hold whatever the policy says, so a policy file cannot switch off
 * scope, hash binding, single use or expiry.
 */
export const GATES = [
  "scope",
  "denied_operation",
  "denied_field",
  "invalid_value",
  "hash_binding",
  "nonce",
  "revision",
  "expiry",
  "single_use",
  "approver",
  "signature",
  "separation_of_duties",
] as const;
export type Gate = (typeof GATES)[number];
export const OVERRIDABLE_GATES: readonly Gate[] = ["separation_of_duties"];

export function levelRank(level: RiskLevel): number {
  return LEVELS.indexOf(level);
}
export function reversibilityRank(r: Reversibility): number {
  return REVERSIBILITY.indexOf(r);
}

const Level = z.enum(LEVELS);
const ReversibilitySchema = z.enum(REVERSIBILITY);
const FieldName = z.string().regex(UPPER_SNAKE, "field names are UPPER_SNAKE like RESPONSIBLE_ID");
const PrincipalId = z.string().min(1).regex(/^\S+$/, "ids have no whitespace");
const MAX_TTL_SECONDS = 7 * 24 * 3600;

const FieldRuleSchema = z.strictObject({
  allowed: z.boolean(),
  /** Shown in the refusal when the field is denied. */
  reason: z.string().optional(),
  level: Level.optional(),
  reversibility: ReversibilitySchema.optional(),
  requiresApproval: z.boolean().optional(),
  ttlSeconds: z.int().positive().max(MAX_TTL_SECONDS).optional(),
  /** Characters for strings, ids for lists; narrows the field's own limit. */
  maxLength: z.int().nonnegative().optional(),
  minLength: z.int().nonnegative().optional(),
  /** Narrows an enum field (e.g. STATUS) to these digit strings. */
  allowedValues: z.array(z.string()).optional(),
  /** Other task fields that Bitrix24 changes as a consequence of writing this one (RESPONSIBLE_ID -> RESPONSIBLE). */
  consequentialFields: z.array(FieldName).optional(),
});

const OperationRuleSchema = z.strictObject({
  allowed: z.boolean(),
  reason: z.string().optional(),
  reversibility: ReversibilitySchema,
  level: Level,
  requiresApproval: z.boolean(),
  ttlSeconds: z.int().positive().max(MAX_TTL_SECONDS),
  /** Narrow the policy-wide approvers for this operation. */
  approverIds: z.array(PrincipalId).optional(),
  approverGroups: z.array(z.string().min(1)).optional(),
  /** Per-field rules; a field without a rule is denied. */
  fields: z.record(FieldName, FieldRuleSchema).default({}),
});

const OverrideRuleSchema = z.strictObject({
  /** Role (a key of approvers.roles) the overriding approver must hold. */
  role: z.string().min(1),
  /** A self-declared identity cannot override unless this is false. */
  requireVerifiedIdentity: z.boolean().default(true),
});

export const PolicySchema = z
  .strictObject({
    $schema: z.string().optional(),
    id: z.string().min(1),
    version: z.string().min(1),
    description: z.string().optional(),
    operations: z.record(z.string().regex(/^[a-z][a-z0-9_]*$/), OperationRuleSchema),
    /** Fields whose values must be unchanged after the write unless they are the ones written. */
    watchedFields: z.array(FieldName),
    /** Fields the target changes by itself on any write (CHANGED_DATE, CHANGED_BY, ...). */
    automaticFields: z.array(FieldName),
    approvers: z.strictObject({
      /** Accept a self-declared approver id (recorded as unverified) when there is neither signature nor authentication. */
      allowUnauthenticated: z.boolean(),
      approverIds: z.array(PrincipalId).default([]),
      approverGroups: z.array(z.string().min(1)).default([]),
      groups: z.record(z.string().min(1), z.array(PrincipalId)).default({}),
      roles: z.record(z.string().min(1), z.array(PrincipalId)).default({}),
      /** Requester recorded when the caller names none (the offline demo's user). */
      defaultRequester: PrincipalId.optional(),
    }),
    separationOfDuties: z
      .strictObject({ requesterMayNotApproveAtOrAbove: Level })
      .nullable()
      .default(null),
    overrides: z.record(z.string(), OverrideRuleSchema).default({}),
    requireSignature: z.boolean().default(false),
    /** Group to escalate an unanswered approval to (used by the approval lifecycle, not by this core). */
    escalationGroup: z.string().min(1).optional(),
  })
  .superRefine((p, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
    for (const [op, rule] of Object.entries(p.operations)) {
      for (const [field, fr] of Object.entries(rule.fields)) {
        const spec = fieldSpec(field);
        if (!spec) issue(["operations", op, "fields", field], `${field} is not a known task field`);
        else if (!spec.writable && fr.allowed) issue(["operations", op, "fields", field], `${field} is read-only in Bitrix24 and cannot be allowed`);
        if (fr.allowedValues && spec?.kind !== "enum") issue(["operations", op, "fields", field, "allowedValues"], "allowedValues is only for enum fields");
        if (fr.allowedValues && spec?.values) {
          const bad = fr.allowedValues.filter((v) => !spec.values!.includes(v));
          if (bad.length) issue(["operations", op, "fields", field, "allowedValues"], `not values of ${field}: ${bad.join(", ")}`);
        }
      }
      for (const g of rule.approverGroups ?? []) {
        if (!(g in p.approvers.groups)) issue(["operations", op, "approverGroups"], `group ${g} is not defined in approvers.groups`);
      }
    }
    for (const field of p.watchedFields) {
      if (!fieldSpec(field)) issue(["watchedFields"], `${field} is not a known task field`);
      if (p.automaticFields.includes(field)) issue(["watchedFields"], `${field} is both watched and automatic`);
    }
    for (const g of p.approvers.approverGroups) {
      if (!(g in p.approvers.groups)) issue(["approvers", "approverGroups"], `group ${g} is not defined in approvers.groups`);
    }
    for (const [gate, rule] of Object.entries(p.overrides)) {
      if (!(GATES as readonly string[]).includes(gate)) issue(["overrides", gate], `unknown gate ${gate}; gates are ${GATES.join(", ")}`);
      else if (!OVERRIDABLE_GATES.includes(gate as Gate)) {
        issue(["overrides", gate], `gate ${gate} can never be overridden; overridable gates: ${OVERRIDABLE_GATES.join(", ")}`);
      }
      if (!(rule.role in p.approvers.roles)) issue(["overrides", gate, "role"], `role ${rule.role} is not defined in approvers.roles`);
    }
    if (p.escalationGroup !== undefined && !(p.escalationGroup in p.approvers.groups)) {
      issue(["escalationGroup"], `group ${p.escalationGroup} is not defined in approvers.groups`);
    }
  });

export type Policy = z.output<typeof PolicySchema>;
export type PolicyInput = z.input<typeof PolicySchema>;
export type OperationRule = Policy["operations"][string];
export type FieldRule = OperationRule["fields"][string];

/** Validates a parsed JSON policy document; throws PolicyError listing every problem with its path. */
export function parsePolicy(json: unknown): Policy {
  const parsed = PolicySchema.safeParse(json);
  if (!parsed.success) {
    const detail = formatIssues(parsed.error);
    throw new PolicyError("a policy document as in policy/default.json", detail);
  }
  return parsed.data;
}

/** Approver ids allowed for an operation: explicit ids plus members of the allowed groups. */
export function allowedApprovers(policy: Policy, operation: string): Set<string> {
  const rule = policy.operations[operation];
  const ids = rule?.approverIds ?? policy.approvers.approverIds;
  const groups = rule?.approverGroups ?? policy.approvers.approverGroups;
  const out = new Set(ids);
  for (const g of groups) for (const id of policy.approvers.groups[g] ?? []) out.add(id);
  return out;
}

export function hasRole(policy: Policy, approverId: string, role: string): boolean {
  return (policy.approvers.roles[role] ?? []).includes(approverId);
}
