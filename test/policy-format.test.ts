/**
 * The policy as a documented format (issue 17, B4): policy/policy.schema.json is generated from the
 * zod schema (one source of truth), problems on load point at line and column, and `policy check`
 * prints them and exits 1 (0 for a valid file).
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { checkPolicyText, parsePolicyText, policyJsonSchema } from "../src/envelope/policy.js";
import { loadConfig } from "../src/config/env.js";
import { loadPolicyFile } from "../src/runtime/deps.js";
import { ROOT, runCli, tempDir } from "./support/harness.js";

const BAD = `{
  "id": "x",
  "version": "1",
  "operations": {
    "update_task": {
      "allowed": true, "reversibility": "reversible", "level": "medium", "requiresApproval": true,
      "ttlSeconds": -5,
      "fields": { "TITLE": { "allowed": true, "colour": "red" } }
    }
  },
  "watchedFields": ["TITLE"],
  "automaticFields": [],
  "approvers": { "allowUnauthenticated": false, "approverGroups": ["nobody"] }
}
`;

describe("policy format", () => {
  it("policy/policy.schema.json is exactly the schema generated from PolicySchema (regenerate: npm run cli -- policy schema > policy/policy.schema.json)", () => {
    const committed = JSON.parse(fs.readFileSync(path.join(ROOT, "policy/policy.schema.json"), "utf8"));
    expect(committed).toEqual(policyJsonSchema());
  });

  it("the shipped policy/default.json is valid", () => {
    const checked = checkPolicyText(fs.readFileSync(path.join(ROOT, "policy/default.json"), "utf8"));
    expect(checked.ok).toBe(true);
  });

  it("every problem points at the line and column of the offending value or unknown key", () => {
    const checked = checkPolicyText(BAD);
    expect(checked.ok).toBe(false);
    if (checked.ok) return;
    const at = Object.fromEntries(checked.problems.map((p) => [p.path, [p.line, p.column]]));
    expect(at["operations.update_task.ttlSeconds"]).toEqual([7, 21]);
    expect(at["operations.update_task.fields.TITLE"]).toEqual([8, 57]); // the key "colour"
    expect(at["approvers.approverGroups"]).toEqual([13, 67]);
  });

  it("a JSON syntax error names its line and column", () => {
    const checked = checkPolicyText('{\n  "id": "x",\n  "version": 1,\n}\n');
    expect(checked.ok).toBe(false);
    if (checked.ok) return;
    expect(checked.problems[0]).toMatchObject({ line: 4, column: 1 });
    expect(() => parsePolicyText("{", "p.json")).toThrow(/p\.json:1:2: \(root\): not valid JSON/);
  });

  it("loading ACTION_ENVELOPE_POLICY reports file:line:column", () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, "bad.json"), BAD);
    const config = loadConfig({ ACTION_ENVELOPE_POLICY: "bad.json" }, dir);
    expect(() => loadPolicyFile(config)).toThrow(/bad\.json:7:21: operations\.update_task\.ttlSeconds/);
  });

  it("policy check: exit 1 with file:line:column lines for a bad file, 0 and a summary for a good one", async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, "bad.json"), BAD);
    const bad = await runCli(["policy", "check", path.join(dir, "bad.json")], {});
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /bad\.json:8:57: operations\.update_task\.fields\.TITLE: Unrecognized key: "colour"/,
    );
    const good = await runCli(["policy", "check", path.join(ROOT, "policy/default.json")], {});
    expect(good.code, good.stderr).toBe(0);
    expect(good.stdout).toMatch(/update_task: allowed, medium risk/);
    expect(good.stdout).toMatch(/approvers alice, bob, carol, demo-approver/);
  });
});
