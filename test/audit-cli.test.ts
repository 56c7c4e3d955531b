/**
 * The audit commands end to end, each CLI call its own process as a person would run them: a signed
 * separation-of-duties override by carol (keygen + ACTION_ENVELOPE_APPROVER_KEYS), then list, show
 * and export; the exported bundle is checked with the system's `sha256sum -c`, and no secret appears
 * in the audit log or the bundle.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CaseRecord } from "../src/evidence/bundle.js";
import { checkBundle, readBundleCase } from "../src/evidence/check-bundle.js";
import type { EvidenceObject } from "../src/evidence/evidence-objects.js";
import { exportBundle } from "../src/evidence/export.js";
import { recordHash } from "../src/store/audit.js";
import { envFor, parseJsonOutput, runCli, startPortal, tempDir, type Portal } from "./support/harness.js";

const GROQ_KEY = "gsk_audit_test_never_written_0123456789abcdef";
const WEBHOOK_CODE = "emulator-secret-code";
const REQUEST = "rename task 4 to LAB-AGENT-EXEC-002 - OVERRIDE AUDITED";
const REASON = "incident 4711: the only other approver is on leave";

let portal: Portal;
let dataDir: string;
let env: Record<string, string>;
let threadId: string;

function sha256sumCheck(dir: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("sha256sum", ["-c", "SHA256SUMS"], { cwd: dir });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

beforeAll(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-audit-cli-");
  const keysDir = tempDir("ae-audit-keys-");
  env = envFor(portal, dataDir, { ACTION_ENVELOPE_APPROVER_KEYS: keysDir, GROQ_API_KEY: GROQ_KEY });
  const keygen = await runCli(["keygen", "--approver", "carol", "--out", keysDir], env);
  expect(keygen.code).toBe(0);

  const run = await runCli(["run", REQUEST, "--as", "carol", "--json"], env);
  expect(run.code).toBe(0);
  const waiting = parseJsonOutput(run.stdout);
  threadId = waiting.threadId;

  // Self-declared, the override is refused; signed with carol's key, it is accepted.
  const unsigned = await runCli(
    [
      "approve",
      threadId,
      "--hash",
      waiting.envelopeHash,
      "--as",
      "carol",
      "--override",
      `separation_of_duties=${REASON}`,
      "--json",
    ],
    env,
  );
  expect(unsigned.code).toBe(2);
  expect(parseJsonOutput(unsigned.stdout).refused.code).toBe("OVERRIDE_NOT_ALLOWED");
  const signed = await runCli(
    [
      "approve",
      threadId,
      "--hash",
      waiting.envelopeHash,
      "--as",
      "carol",
      "--key",
      path.join(keysDir, "carol.key"),
      "--override",
      `separation_of_duties=${REASON}`,
      "--json",
    ],
    env,
  );
  expect(signed.code).toBe(0);
  expect(parseJsonOutput(signed.stdout)).toMatchObject({
    outcome: "VERIFIED",
    decision: { approverId: "carol", verifiedBy: "signature" },
  });
}, 120_000);

afterAll(async () => {
  await portal.emulator.close();
});

describe("audit CLI", () => {
  it("audit list shows the run with its override and outcome; audit verify exits 0", async () => {
    const list = await runCli(["audit", "list", "--json"], env);
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).threads).toEqual([
      expect.objectContaining({
        threadId,
        requestedBy: "carol",
        records: 4,
        lastEvent: "execution_outcome",
        outcome: "VERIFIED",
        overrides: 1,
      }),
    ]);
    const verify = await runCli(["audit", "verify"], env);
    expect(verify.code).toBe(0);
  });

  it("audit show prints the override above everything else, then every evidence object in order", async () => {
    const show = await runCli(["audit", "show", threadId], env);
    expect(show.code).toBe(0);
    const out = show.stdout;
    const at = (s: string) => {
      const i = out.indexOf(s);
      expect(i, `"${s}" in:\n${out}`).toBeGreaterThan(-1);
      return i;
    };
    expect(at("OVERRIDES:     1 POLICY GATE OVERRIDDEN")).toBeLessThan(at("Requested by:  carol"));
    expect(at(`separation_of_duties passed by carol (signature)`)).toBeLessThan(at("Requested by:"));
    expect(out).toContain(`reason: ${REASON}`);
    const order = [
      "approval-request-r1",
      "decision-r1-refused-OVERRIDE_NOT_ALLOWED",
      "decision-r1-accepted-approve",
      "pre-read",
      "invocation",
      "acknowledgement",
      "post-write-read",
      "outcome",
    ];
    const positions = order.map((name) => at(`-${name}]`));
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(out).toContain("causalClaimAllowed=true");
  });

  it("audit export writes a bundle that sha256sum -c accepts, and rejects once a file is changed", async () => {
    const out = path.join(tempDir("ae-audit-export-"), "bundle");
    const exp = await runCli(["audit", "export", threadId, "--out", out], env);
    expect(exp.code).toBe(0);
    // It names the check against the log too: the sums alone vouch only for the files among themselves.
    expect(exp.stdout).toContain(`audit check ${out}`);
    const files = fs.readdirSync(out).sort();
    expect(files).toContain("case-record.json");
    expect(files).toContain("SHA256SUMS");
    expect(files).toContain("01-approval-request-r1.card.txt");
    expect(files.filter((f) => f.endsWith(".json"))).toHaveLength(9); // case record + 8 evidence objects

    const check = await sha256sumCheck(out);
    expect(check.code, check.out).toBe(0);
    expect(check.out.trim().split("\n")).toHaveLength(files.length - 1);

    const caseRecord = JSON.parse(fs.readFileSync(path.join(out, "case-record.json"), "utf8"));
    expect(Object.keys(caseRecord.firstPage)[0]).toBe("overrides");
    expect(caseRecord.firstPage.overrides).toEqual([
      expect.objectContaining({
        gate: "separation_of_duties",
        by: "carol",
        reason: REASON,
        verifiedBy: "signature",
      }),
    ]);
    expect(caseRecord.firstPage).toMatchObject({
      requestedBy: "carol",
      decidedBy: { id: "carol", verifiedBy: "signature" },
      outcome: { outcome: "VERIFIED" },
    });
    expect(caseRecord.auditChain).toMatchObject({ intact: true, checkedFrom: 1, recordsChecked: 4 });
    const invocation = JSON.parse(
      fs.readFileSync(
        path.join(
          out,
          files.find((f) => f.endsWith("-invocation.json"))!,
        ),
        "utf8",
      ),
    );
    expect(invocation.data).toMatchObject({
      tool: "update_task",
      args: { taskId: 4, fields: { TITLE: "LAB-AGENT-EXEC-002 - OVERRIDE AUDITED" } },
      idempotencyKey: expect.any(String),
    });

    fs.appendFileSync(path.join(out, "case-record.json"), " ");
    const broken = await sha256sumCheck(out);
    expect(broken.code).not.toBe(0);
    expect(broken.out).toContain("case-record.json: FAILED");
  });

  it("no secret reaches the audit log or an exported bundle", async () => {
    expect(env["BITRIX24_WEBHOOK_URL"]).toContain(WEBHOOK_CODE); // the secret was there to leak
    const out = path.join(tempDir("ae-audit-export-"), "bundle");
    expect((await runCli(["audit", "export", threadId, "--out", out], env)).code).toBe(0);
    const files = [
      ...fs.readdirSync(out).map((f) => path.join(out, f)),
      ...fs
        .readdirSync(dataDir)
        .filter((f) => f.startsWith("journal.sqlite"))
        .map((f) => path.join(dataDir, f)),
    ];
    expect(files.some((f) => f.endsWith("journal.sqlite"))).toBe(true);
    for (const file of files) {
      const bytes = fs.readFileSync(file).toString("latin1");
      expect(bytes.includes(WEBHOOK_CODE), file).toBe(false);
      expect(bytes.includes(GROQ_KEY), file).toBe(false);
    }
    // The grep can find what is there: the portal host is recorded, only the code is not.
    expect(fs.readFileSync(path.join(out, "case-record.json"), "utf8")).toContain(
      new URL(portal.emulator.webhookUrl).host,
    );
  });

  it("audit check confirms an exported bundle against the log, and refuses one edited with its sums rewritten", async () => {
    const out = path.join(tempDir("ae-audit-export-"), "bundle");
    expect((await runCli(["audit", "export", threadId, "--out", out], env)).code).toBe(0);
    const ok = await runCli(["audit", "check", out], env);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toContain(
      `BUNDLE CONFIRMED: thread ${threadId}, 4 audit records, against the local audit log`,
    );

    // sha256sum -c vouches only for the bundle against itself: an outcome rewritten with its sum passes it.
    const reSum = (dir: string) =>
      fs.writeFileSync(
        path.join(dir, "SHA256SUMS"),
        fs
          .readdirSync(dir)
          .filter((f) => f !== "SHA256SUMS")
          .sort()
          .map(
            (f) =>
              `${createHash("sha256")
                .update(fs.readFileSync(path.join(dir, f)))
                .digest("hex")}  ${f}\n`,
          )
          .join(""),
      );
    const copy = (edit: (c: any) => void) => {
      const dir = path.join(tempDir("ae-audit-forged-"), "bundle");
      fs.cpSync(out, dir, { recursive: true });
      const file = path.join(dir, "case-record.json");
      const c = JSON.parse(fs.readFileSync(file, "utf8"));
      edit(c);
      fs.writeFileSync(file, `${JSON.stringify(c, null, 2)}\n`);
      reSum(dir);
      return { dir, c };
    };
    const forged = copy((c) => (c.firstPage.decidedBy.id = "mallory")).dir;
    expect((await sha256sumCheck(forged)).code).toBe(0);
    const refused = await runCli(["audit", "check", forged], env);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toContain("BUNDLE NOT CONFIRMED");
    expect(refused.stdout).toContain("case-record.json is not what the audit records give");

    // Every other edit, checked against the log's records as `audit show --json` gives them.
    const shown = JSON.parse((await runCli(["audit", "show", threadId, "--json"], env)).stdout);
    const a = shown.caseRecord.auditChain;
    const live = {
      records: shown.caseRecord.auditRecords,
      intact: a.intact,
      problem: a.problem,
      checkedFrom: a.checkedFrom,
    };
    const problemsOf = (dir: string) =>
      checkBundle(dir, readBundleCase(dir), live, "the log").problems.join("\n");
    expect(problemsOf(out)).toBe("");
    const rehash = (r: any) => {
      const { prevHash, hash: _hash, ...body } = r;
      r.hash = recordHash(body, prevHash);
    };
    const edits: Array<[string, (c: any) => void, string]> = [
      ["record edited", (c) => (c.auditRecords[1].approver.id = "mallory"), "states hash"],
      [
        "record edited and re-hashed",
        (c) => {
          c.auditRecords[1].approver.id = "mallory";
          rehash(c.auditRecords[1]);
        },
        "the log's record 2",
      ],
      ["record removed", (c) => c.auditRecords.splice(2, 1), "the log's record 3"],
      ["last record cut", (c) => c.auditRecords.pop(), "the log has 1 later records"],
      ["records reordered", (c) => c.auditRecords.reverse(), "the log's record 1"],
      [
        "record of another thread",
        (c) => {
          c.auditRecords[0].threadId = "other-thread";
          rehash(c.auditRecords[0]);
        },
        "is of thread other-thread",
      ],
      ["outcome rewritten", (c) => (c.firstPage.outcome.outcome = "REJECTED"), "case-record.json is not"],
      ["a claim added", (c) => (c.auditChain.anchoredBy = "an auditor"), "case-record.json is not"],
      [
        "another schema",
        (c) => (c.schema = "action-envelope/case-record/1"),
        "expected a case record of schema",
      ],
    ];
    for (const [what, edit, expected] of edits) expect(problemsOf(copy(edit).dir), what).toContain(expected);
    const extra = copy(() => {}).dir;
    fs.writeFileSync(path.join(extra, "99-note.json"), "{}\n");
    reSum(extra);
    expect(problemsOf(extra)).toContain("99-note.json is not a file the audit records give");
    const evidenceFile = fs.readdirSync(out).find((f) => f.endsWith("-outcome.json"))!;
    const edited = copy(() => {}).dir;
    const o = JSON.parse(fs.readFileSync(path.join(edited, evidenceFile), "utf8"));
    o.data.sideEffectVerified = !o.data.sideEffectVerified;
    fs.writeFileSync(path.join(edited, evidenceFile), JSON.stringify(o));
    reSum(edited);
    expect(problemsOf(edited)).toContain(`${evidenceFile} is not what the audit records give`);
  });

  it("export writes only files of its directory, whatever an API server names the evidence", () => {
    const out = path.join(tempDir("ae-audit-names-"), "bundle");
    const caseRecord = { firstPage: { threadId } } as unknown as CaseRecord;
    const item = (name: string) =>
      ({ name, kind: "outcome", at: "2026-01-01T00:00:00Z", summary: "", data: {} }) as EvidenceObject;
    for (const evidence of [[item("../../escaped")], [item("01-a"), item("01-a")], [item("case-record")]])
      expect(() => exportBundle(out, caseRecord, evidence)).toThrow(/expected evidence objects named like/);
    expect(fs.existsSync(out)).toBe(false);
    expect(fs.existsSync(path.join(out, "..", "..", "escaped.json"))).toBe(false);
    expect(exportBundle(out, caseRecord, [item("01-outcome")]).files).toEqual([
      "01-outcome.json",
      "case-record.json",
      "SHA256SUMS",
    ]);
  });

  it("refuses an unknown thread and a non-empty output directory with exit 1", async () => {
    expect((await runCli(["audit", "show", "no-such-thread"], env)).code).toBe(1);
    const out = tempDir("ae-audit-export-");
    fs.writeFileSync(path.join(out, "stale.json"), "{}");
    const exp = await runCli(["audit", "export", threadId, "--out", out], env);
    expect(exp.code).toBe(1);
    expect(exp.stderr).toContain("not an empty directory");
  });
});
