/**
 * `policy check [FILE]`: validates a policy file (default: ACTION_ENVELOPE_POLICY, else the built-in
 * policy) against the policy format and prints each problem as file:line:column, or a summary of what
 * the policy allows and who may approve. Exit 0 only when the file is valid.
 * `policy schema`: prints the policy format as JSON Schema (policy/policy.schema.json is this output).
 */
import fs from "node:fs";
import path from "node:path";
import { Command } from "commander";
import {
  allowedApprovers,
  checkPolicyText,
  formatPolicyProblems,
  policyJsonSchema,
  type Policy,
} from "../envelope/policy.js";
import { defaultPolicy } from "../envelope/default-policy.js";
import { esc } from "../text/escape.js";

export function policySummary(policy: Policy): string[] {
  const lines = [`policy ${policy.id} version ${policy.version}`];
  for (const [name, op] of Object.entries(policy.operations)) {
    if (!op.allowed) {
      lines.push(`  ${name}: denied${op.reason ? ` (${op.reason})` : ""}`);
      continue;
    }
    const allowed = Object.entries(op.fields)
      .filter(([, f]) => f.allowed)
      .map(([f]) => f);
    const approvers = [...allowedApprovers(policy, name)].sort();
    lines.push(
      `  ${name}: allowed, ${op.level} risk, ${op.requiresApproval ? `approval valid ${op.ttlSeconds}s` : "no approval needed"}; fields ${allowed.join(", ") || "none"}; approvers ${approvers.join(", ") || "nobody"}`,
    );
  }
  const a = policy.approvers;
  lines.push(
    `  self-declared approvers ${a.allowUnauthenticated ? "accepted (recorded as unverified)" : "refused"}; signatures ${policy.requireSignature ? "required" : "optional"}`,
  );
  if (policy.separationOfDuties)
    lines.push(
      `  a requester may not approve their own change at or above ${policy.separationOfDuties.requesterMayNotApproveAtOrAbove} risk`,
    );
  if (policy.escalationGroup)
    lines.push(
      `  an unanswered approval escalates to ${policy.escalationGroup} (${(a.groups[policy.escalationGroup] ?? []).join(", ")})`,
    );
  return lines;
}

function writeSummary(head: string, policy: Policy): void {
  process.stdout.write(`${[head, ...policySummary(policy).map((l) => esc`${l}`)].join("\n")}\n`);
}

export function policyCommand(): Command {
  const policy = new Command("policy").description(
    "Check a policy file, or print the policy format as JSON Schema",
  );
  policy
    .command("check")
    .argument("[file]", "policy file (default: ACTION_ENVELOPE_POLICY, else the built-in policy)")
    .option("--json", "print the result as JSON")
    .description("Validate a policy file; problems are printed as file:line:column: path: message")
    .action((file: string | undefined, opts: { json?: boolean }) => {
      const given = file ?? process.env["ACTION_ENVELOPE_POLICY"] ?? undefined;
      if (!given) {
        const p = defaultPolicy();
        if (opts.json)
          process.stdout.write(
            `${JSON.stringify({ ok: true, source: "built-in", id: p.id, version: p.version })}\n`,
          );
        else
          writeSummary(esc`ok: the built-in policy (no file given and ACTION_ENVELOPE_POLICY is unset)`, p);
        return;
      }
      const source = path.resolve(given);
      let text: string;
      try {
        text = fs.readFileSync(source, "utf8");
      } catch (e) {
        process.stderr.write(
          `${esc`${source}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`}\n`,
        );
        process.exitCode = 1;
        return;
      }
      const checked = checkPolicyText(text);
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(checked.ok ? { ok: true, source, id: checked.policy.id, version: checked.policy.version } : { ok: false, source, problems: checked.problems })}\n`,
        );
      } else if (checked.ok) {
        writeSummary(esc`ok: ${source}`, checked.policy);
      } else {
        process.stderr.write(
          `${formatPolicyProblems(given, checked.problems)
            .split("\n")
            .map((l) => esc`${l}`)
            .join(
              "\n",
            )}\n${esc`${checked.problems.length} problem(s); the format is policy/policy.schema.json (docs/operations.md, "Policy file")`}\n`,
        );
      }
      if (!checked.ok) process.exitCode = 1;
    });
  policy
    .command("schema")
    .description("Print the policy format as JSON Schema (the content of policy/policy.schema.json)")
    .action(() => {
      process.stdout.write(`${JSON.stringify(policyJsonSchema(), null, 2)}\n`);
    });
  return policy;
}
