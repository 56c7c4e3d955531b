/**
 * The policy document: which operations and fields may be proposed, how risky each is, whether and for
 * how long an approval is valid, who may approve, separation of duties, and which gates an authorised
 * approver may override. It is data (JSON, versioned, validated here); the gates themselves are code.
 */
import { z } from "zod";
import { formatIssues } from "./zod-issues.js";
import { PolicyError } from "./errors.js";
import { fieldSpec, UPPER_SNAKE } from "./fields.js";
import { fieldsOf, operationSpec } from "./operations.js";
import { jsonPositions, locate, syntaxErrorAt, type TextPosition } from "./json-position.js";

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

/**
 * Why a change of this risk level may not be proposed for this requester, or undefined when it may:
 * the policy's requireVerifiedRequesterAtOrAbove refuses a self-declared requester at or above its level.
 */
export function requesterNotVerified(
  policy: Pick<Policy, "id" | "version" | "requireVerifiedRequesterAtOrAbove">,
  level: RiskLevel,
  requestedBy: string,
  verifiedBy: string,
): string | undefined {
  const threshold = policy.requireVerifiedRequesterAtOrAbove;
  if (
    threshold === null ||
    threshold === undefined ||
    verifiedBy !== "self_declared" ||
    levelRank(level) < levelRank(threshold)
  )
    return undefined;
  return `the requester ${requestedBy} is self-declared (a name given, not checked), and policy ${policy.id}@${policy.version} requires a verified requester (an API token, an inbox session or a signature) for a change at or above ${threshold} risk; this change is ${level}`;
}

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

const FieldRuleSchema = z
  .strictObject({
    allowed: z.boolean().describe("Whether the agent may propose a value for this field."),
    reason: z.string().optional().describe("Shown in the refusal when the field is denied."),
    level: Level.optional().describe(
      "Risk level of changing this field; the envelope's level is the highest of the operation's and its fields'.",
    ),
    reversibility: ReversibilitySchema.optional().describe(
      "How undoable a change of this field is; the least reversible one counts.",
    ),
    requiresApproval: z
      .boolean()
      .optional()
      .describe("Whether a change of this field needs a human approval (defaults to the operation's)."),
    ttlSeconds: z
      .int()
      .positive()
      .max(MAX_TTL_SECONDS)
      .optional()
      .describe("Approval lifetime when this field is changed; the shortest of operation and fields wins."),
    maxLength: z
      .int()
      .nonnegative()
      .optional()
      .describe("Characters for strings, ids for lists; narrows the field's own limit."),
    minLength: z.int().nonnegative().optional().describe("Characters for strings, ids for lists."),
    allowedValues: z
      .array(z.string())
      .optional()
      .describe('Narrows an enum field (STATUS, PRIORITY) to these codes, e.g. ["2","3"].'),
    consequentialFields: z
      .array(FieldName)
      .optional()
      .describe(
        "Other task fields Bitrix24 changes as a consequence of writing this one (RESPONSIBLE_ID → RESPONSIBLE); not counted as unexpected changes.",
      ),
  })
  .describe("Rule for one task field. A field without a rule is denied.");

const OperationRuleSchema = z
  .strictObject({
    allowed: z.boolean().describe("Whether the agent may propose this operation at all."),
    reason: z.string().optional().describe("Shown in the refusal when the operation is denied."),
    reversibility: ReversibilitySchema.describe("How undoable the operation is."),
    level: Level.describe("Base risk level of the operation."),
    requiresApproval: z.boolean().describe("Whether a human must approve each envelope of this operation."),
    ttlSeconds: z
      .int()
      .positive()
      .max(MAX_TTL_SECONDS)
      .describe("How long an approval stays valid, in seconds (at most 7 days)."),
    approverIds: z
      .array(PrincipalId)
      .optional()
      .describe("Approver ids for this operation, instead of approvers.approverIds."),
    approverGroups: z
      .array(z.string().min(1))
      .optional()
      .describe(
        "Groups (keys of approvers.groups) whose members may approve this operation, instead of approvers.approverGroups.",
      ),
    watchedFields: z
      .array(FieldName)
      .optional()
      .describe(
        "Fields of this operation's object that must stay unchanged unless written, instead of the policy-wide watchedFields (which are a task's); needed for an operation on another kind of object (update_deal).",
      ),
    automaticFields: z
      .array(FieldName)
      .optional()
      .describe(
        "Fields of this operation's object that change by themselves on any write, instead of the policy-wide automaticFields (which are a task's).",
      ),
    fields: z
      .record(FieldName, FieldRuleSchema)
      .default({})
      .describe(
        "Per-field rules, by Bitrix24 field name (TITLE, DEADLINE, PRIORITY, STATUS, RESPONSIBLE_ID, ...).",
      ),
  })
  .describe("Rule for one operation (update_task, add_task, delete_task).");

const OverrideRuleSchema = z.strictObject({
  /** Role (a key of approvers.roles) the overriding approver must hold. */
  role: z.string().min(1),
  /** A self-declared identity cannot override unless this is false. */
  requireVerifiedIdentity: z.boolean().default(true),
});

export const PolicySchema = z
  .strictObject({
    $schema: z.string().optional(),
    id: z.string().min(1).describe("Name of the policy; recorded in every envelope and audit record."),
    version: z
      .string()
      .min(1)
      .describe("Version of the policy; recorded with the id. Change it whenever the file changes."),
    description: z.string().optional(),
    operations: z
      .record(z.string().regex(/^[a-z][a-z0-9_]*$/), OperationRuleSchema)
      .describe("Rules per operation; an operation not listed is denied."),
    watchedFields: z
      .array(FieldName)
      .describe(
        "Fields whose values must be unchanged after the write unless they are the ones written; checked by the pre-read and the verification.",
      ),
    automaticFields: z
      .array(FieldName)
      .describe(
        "Fields Bitrix24 changes by itself on any write (CHANGED_DATE, ...); never counted as unexpected changes.",
      ),
    approvers: z
      .strictObject({
        allowUnauthenticated: z
          .boolean()
          .describe(
            "Accept a self-declared approver id (recorded as unverified) when there is neither a signature nor an authenticated caller. Set false in production.",
          ),
        approverIds: z
          .array(PrincipalId)
          .default([])
          .describe("Ids who may approve any operation that names no approvers of its own."),
        approverGroups: z
          .array(z.string().min(1))
          .default([])
          .describe(
            "Groups (keys of groups) whose members may approve any operation that names no approvers of its own.",
          ),
        groups: z
          .record(z.string().min(1), z.array(PrincipalId))
          .default({})
          .describe("Named groups of approver ids, used by approverGroups and escalationGroup."),
        roles: z
          .record(z.string().min(1), z.array(PrincipalId))
          .default({})
          .describe("Named roles of approver ids, used by overrides."),
        /** Requester recorded when the caller names none (the offline demo's user). */
        defaultRequester: PrincipalId.optional().describe("Requester recorded when the caller names none."),
      })
      .describe("Who may approve. An id is the approver's --as / signing identity / API token identity."),
    separationOfDuties: z
      .strictObject({ requesterMayNotApproveAtOrAbove: Level })
      .nullable()
      .default(null)
      .describe(
        "The requester may not approve their own change at or above this risk level; null turns the rule off.",
      ),
    requireVerifiedRequesterAtOrAbove: Level.nullable()
      .default(null)
      .describe(
        "A change at or above this risk level needs a verified requester (API token, inbox session or signature): one from a self-declared requester (CLI --as, run input on an open server, ACTION_ENVELOPE_DEFAULT_REQUESTER) ends REQUESTER_NOT_VERIFIED before any approver is asked; null turns the rule off.",
      ),
    overrides: z
      .record(z.string(), OverrideRuleSchema)
      .default({})
      .describe(
        "Gates an approver holding a role may override, by gate name; only separation_of_duties can be overridden.",
      ),
    partialExecution: z
      .array(z.enum(REVERSIBILITY))
      .default([])
      .describe(
        "Reversibility classes whose actions may run without a second approval when a change set is approved only in part (some actions rejected): the approved ones are re-sealed as a new revision and run at once if every one of them is of a class listed here; otherwise the new revision is shown again. Edits are always shown again.",
      ),
    requireSignature: z
      .boolean()
      .default(false)
      .describe(
        "Every decision must be signed with the approver's Ed25519 key (ACTION_ENVELOPE_APPROVER_KEYS).",
      ),
    /** Group to escalate an unanswered approval to (used by the approval lifecycle, not by this core). */
    escalationGroup: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Group (a key of approvers.groups) an approval that expired unanswered is re-issued to; unset: it ends APPROVAL_EXPIRED.",
      ),
  })
  .superRefine((p, ctx) => {
    const issue = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: "custom", path, message });
    for (const [op, rule] of Object.entries(p.operations)) {
      for (const [field, fr] of Object.entries(rule.fields)) {
        const spec = fieldSpec(field, fieldsOf(op));
        if (!spec) issue(["operations", op, "fields", field], `${field} is not a known field of ${op}`);
        else if (!spec.writable && fr.allowed)
          issue(
            ["operations", op, "fields", field],
            `${field} is read-only in Bitrix24 and cannot be allowed`,
          );
        if (fr.allowedValues && spec?.kind !== "enum" && spec?.kind !== "code")
          issue(
            ["operations", op, "fields", field, "allowedValues"],
            "allowedValues is only for enum and code fields",
          );
        if (fr.allowedValues && spec?.values) {
          const bad = fr.allowedValues.filter((v) => !spec.values!.includes(v));
          if (bad.length)
            issue(
              ["operations", op, "fields", field, "allowedValues"],
              `not values of ${field}: ${bad.join(", ")}`,
            );
        }
      }
      for (const list of ["watchedFields", "automaticFields"] as const) {
        for (const field of rule[list] ?? []) {
          if (!fieldSpec(field, fieldsOf(op)))
            issue(["operations", op, list], `${field} is not a known field of ${op}`);
        }
        // The policy-wide lists name task fields: an operation on another kind of object that fell back
        // to them would compare a deal against DESCRIPTION, DEADLINE… and refuse every proposal.
        const target = operationSpec(op)?.target;
        if (rule.allowed && target !== undefined && target !== "task" && rule[list] === undefined) {
          issue(
            ["operations", op, list],
            `${op} acts on a ${target}, so it needs its own ${list} (the policy-wide ${list} name task fields)`,
          );
        }
      }
      for (const g of rule.approverGroups ?? []) {
        if (!(g in p.approvers.groups))
          issue(["operations", op, "approverGroups"], `group ${g} is not defined in approvers.groups`);
      }
    }
    for (const field of p.watchedFields) {
      if (!fieldSpec(field)) issue(["watchedFields"], `${field} is not a known task field`);
      if (p.automaticFields.includes(field))
        issue(["watchedFields"], `${field} is both watched and automatic`);
    }
    for (const g of p.approvers.approverGroups) {
      if (!(g in p.approvers.groups))
        issue(["approvers", "approverGroups"], `group ${g} is not defined in approvers.groups`);
    }
    for (const [gate, rule] of Object.entries(p.overrides)) {
      if (!(GATES as readonly string[]).includes(gate))
        issue(["overrides", gate], `unknown gate ${gate}; gates are ${GATES.join(", ")}`);
      else if (!OVERRIDABLE_GATES.includes(gate as Gate)) {
        issue(
          ["overrides", gate],
          `gate ${gate} can never be overridden; overridable gates: ${OVERRIDABLE_GATES.join(", ")}`,
        );
      }
      if (!(rule.role in p.approvers.roles))
        issue(["overrides", gate, "role"], `role ${rule.role} is not defined in approvers.roles`);
    }
    if (p.escalationGroup !== undefined && !(p.escalationGroup in p.approvers.groups)) {
      issue(["escalationGroup"], `group ${p.escalationGroup} is not defined in approvers.groups`);
    }
  });

export type Policy = z.output<typeof PolicySchema>;

/** Validates a parsed JSON policy document; throws PolicyError listing every problem with its path. */
export function parsePolicy(json: unknown): Policy {
  const parsed = PolicySchema.safeParse(json);
  if (!parsed.success) {
    const detail = formatIssues(parsed.error);
    throw new PolicyError("a policy document as in policy/default.json", detail);
  }
  return parsed.data;
}

/** One problem of a policy file, with where it is. */
export interface PolicyProblem {
  /** Dotted path of the offending value ("(root)" for the document). */
  path: string;
  message: string;
  line: number;
  column: number;
}

export type PolicyCheck = { ok: true; policy: Policy } | { ok: false; problems: PolicyProblem[] };

/**
 * Checks a policy file's text: JSON syntax first, then the schema (policy/policy.schema.json is this
 * same schema). Every problem carries the line and column of the offending value, or of the unknown
 * key, so the message points at what to edit.
 */
export function checkPolicyText(text: string): PolicyCheck {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    const { position, message } = syntaxErrorAt(text, e as Error);
    const at: TextPosition = position ?? { line: 1, column: 1 };
    return { ok: false, problems: [{ path: "(root)", message: `not valid JSON: ${message}`, ...at }] };
  }
  const parsed = PolicySchema.safeParse(json);
  if (parsed.success) return { ok: true, policy: parsed.data };
  const positions = jsonPositions(text);
  const problems = parsed.error.issues.map((issue): PolicyProblem => {
    const path = issue.path.map((p) => (typeof p === "symbol" ? String(p) : p));
    // An unknown key points at the key itself.
    const target =
      issue.code === "unrecognized_keys" && issue.keys.length > 0 ? [...path, issue.keys[0]!] : path;
    return {
      path: path.map(String).join(".") || "(root)",
      message: formatIssues(new z.ZodError([issue])).replace(/^[^:]*: /, ""),
      ...locate(text, target, positions),
    };
  });
  return { ok: false, problems };
}

/** "file:line:column: path: message", one per line. */
export function formatPolicyProblems(source: string, problems: readonly PolicyProblem[]): string {
  return problems.map((p) => `${source}:${p.line}:${p.column}: ${p.path}: ${p.message}`).join("\n");
}

/** Parses a policy file's text; throws PolicyError whose message points at each problem's line and column. */
export function parsePolicyText(text: string, source = "policy"): Policy {
  const checked = checkPolicyText(text);
  if (checked.ok) return checked.policy;
  throw new PolicyError(
    "a policy document as in policy/default.json (schema: policy/policy.schema.json)",
    `\n${formatPolicyProblems(source, checked.problems)}`,
  );
}

/**
 * The policy format as JSON Schema, generated from PolicySchema (the one source of truth);
 * policy/policy.schema.json is this, and a test keeps the two equal. Cross-field rules (a group named
 * must be defined, a field must be a known task field) are checked by `policy check`, not the schema.
 */
export function policyJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(PolicySchema, { io: "input", unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return {
    $schema: schema["$schema"],
    $id: "https://github.com/action-envelope/action-envelope/policy/policy.schema.json",
    title: "action-envelope policy",
    description:
      "What the agent may propose and who may approve it. Generated from PolicySchema in src/envelope/policy.ts by `npm run cli -- policy schema`; check a file with `npm run cli -- policy check FILE`.",
    ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$schema")),
  };
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

/** Why `approverId` may not decide an approval that covers `operations` (the first one not allowed), or undefined. */
export function approverNotAllowed(
  policy: Policy,
  approverId: string,
  operations: readonly string[],
): string | undefined {
  for (const operation of operations) {
    const allowed = allowedApprovers(policy, operation);
    if (!allowed.has(approverId))
      return `${approverId} may not decide ${operation} under policy ${policy.id}@${policy.version}; allowed: ${[...allowed].join(", ") || "nobody"}`;
  }
  return undefined;
}

/**
 * Members of `group` who may decide every one of `operations`. An approval escalated to a group none
 * of whose members may decide it could never be approved again, so it is not escalated (it expires).
 */
export function escalationApprovers(policy: Policy, group: string, operations: readonly string[]): string[] {
  return (policy.approvers.groups[group] ?? []).filter(
    (id) => approverNotAllowed(policy, id, operations) === undefined,
  );
}

export function hasRole(policy: Policy, approverId: string, role: string): boolean {
  return (policy.approvers.roles[role] ?? []).includes(approverId);
}
