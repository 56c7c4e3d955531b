/**
 * The audit log as the graph writes it: real emulator over HTTP, our MCP server over stdio, SQLite
 * files; only the model is scripted. Each decision kind leaves a record with the six fields of the
 * approval path, overrides show on the case record's first page, and re-running nodes after a crash
 * adds nothing.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import {
  DecisionSchema,
  generateApproverKeyPair,
  hashEnvelope,
  signDecision,
  signedPayloadOf,
  type Envelope,
} from "../src/envelope/index.js";
import { buildCase } from "../src/evidence/bundle.js";
import { renderCase } from "../src/evidence/render.js";
import type { AuditRecord } from "../src/store/audit.js";
import { openTestApp, startPortal, stopOnceBeforeMove, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

const NEW_TITLE = "LAB-AGENT-EXEC-002 - AUDITED";
const REQUEST = `rename task 4 to ${NEW_TITLE}`;

let portal: Portal;
let dataDir: string;
let app: App | undefined;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-audit-");
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

async function waiting(
  opts: {
    requestedBy?: string;
    fields?: Record<string, unknown>;
    env?: Record<string, string>;
  } = {},
) {
  const model = new ScriptedChatModel(readThenPropose(4, opts.fields ?? { TITLE: NEW_TITLE }));
  app = await openTestApp(portal, dataDir, {
    model,
    ...(opts.env ? { env: opts.env } : {}),
  });
  const view = await startRun(app, { request: REQUEST, requestedBy: opts.requestedBy ?? "demo-user" });
  return { app, view };
}

function decision(
  view: ThreadView,
  type: "approve" | "reject",
  approverId: string,
  extra: Record<string, unknown> = {},
) {
  const a = view.approval!;
  return {
    decisions: [
      { type, envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: approverId }, ...extra },
    ],
  };
}

/** The six fields the approval path demands, as one object, so every test checks the same thing. */
function sixFields(r: AuditRecord) {
  for (const key of ["requestedBy", "risk", "what", "approver", "at", "override"] as const)
    expect(r).toHaveProperty(key);
  expect(Number.isNaN(Date.parse(r.at))).toBe(false);
  if (r.what.envelope) expect(hashEnvelope(r.what.envelope as Envelope)).toBe(r.what.envelopeHash);
  return {
    requestedBy: r.requestedBy,
    risk: r.risk,
    envelopeHash: r.what.envelopeHash,
    approver: r.approver,
    override: r.override,
  };
}

const events = (records: AuditRecord[]) =>
  records.map(
    (r) =>
      `${r.event}:${r.revision}${r.discriminator && !r.discriminator.startsWith("sha256:") ? `:${r.discriminator}` : ""}`,
  );

describe("audit records written by the graph", () => {
  it("approved: the accepted decision and the execution outcome carry the six fields; the chain verifies", async () => {
    const { app, view } = await waiting();
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, decision(view, "approve", "alice"));
    expect(done.state?.outcome).toBe("VERIFIED");

    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(events(records)).toEqual(["approval_requested:1", "decision_accepted:1", "execution_outcome:1"]);
    const [requested, accepted, outcome] = records as [AuditRecord, AuditRecord, AuditRecord];
    expect(requested.shown?.card).toBe(a.actionRequests[0].description);
    expect(sixFields(accepted)).toEqual({
      requestedBy: "demo-user",
      risk: { level: "medium", reversibility: "reversible" },
      envelopeHash: a.envelopeHash,
      approver: {
        id: "alice",
        verifiedBy: "self_declared",
        decision: "approve",
        decidedAt: expect.any(String),
      },
      override: null,
    });
    expect(accepted.policy).toEqual({ id: "default", version: a.envelope.policy.version });
    expect(accepted.threadId).toBe(view.threadId);
    expect(accepted.prevHash).toBe(requested.hash);
    expect(sixFields(outcome).approver).toMatchObject({ id: "alice", decision: "approve" });
    expect(outcome.outcome).toMatchObject({
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
      flags: {
        sideEffectAttempted: true,
        sideEffectVerified: true,
        causalClaimAllowed: true,
        duplicateClaimAllowed: true,
      },
    });
    expect(await app.deps.audit.verify()).toMatchObject({ intact: true, records: 3 });
  });

  it("rejected: the rejection is an accepted decision of type reject, and the run's end says REJECTED_BY_HUMAN", async () => {
    const { app, view } = await waiting();
    const done = await submitDecision(
      app,
      view.threadId,
      decision(view, "reject", "bob", { message: "wrong task" }),
    );
    expect(done.state?.reasonCode).toBe("REJECTED_BY_HUMAN");
    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(events(records)).toEqual(["approval_requested:1", "decision_accepted:1", "run_ended:1"]);
    expect(sixFields(records[1]!)).toEqual({
      requestedBy: "demo-user",
      risk: { level: "medium", reversibility: "reversible" },
      envelopeHash: view.approval!.envelopeHash,
      approver: { id: "bob", verifiedBy: "self_declared", decision: "reject", decidedAt: expect.any(String) },
      override: null,
    });
    expect(records[2]!.outcome).toMatchObject({
      outcome: "NOT_EXECUTED",
      reasonCode: "REJECTED_BY_HUMAN",
      flags: { sideEffectAttempted: false },
    });
    expect(await portal.writes()).toHaveLength(0);
  });

  it("refused: each refused decision is its own record with its code and the unverified approver it claimed", async () => {
    const { app, view } = await waiting({ requestedBy: "alice" });
    const self = await submitDecision(app, view.threadId, decision(view, "approve", "alice"));
    expect(self.status).toBe("awaiting_approval");
    const wrongHash = decision(view, "approve", "bob");
    (wrongHash.decisions[0] as { envelopeHash: string }).envelopeHash = `sha256:${"ab".repeat(32)}`;
    await submitDecision(app, view.threadId, wrongHash);

    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(events(records)).toEqual(["approval_requested:1", "decision_refused:1:1", "decision_refused:1:2"]);
    const [, selfApproval, mismatch] = records as [AuditRecord, AuditRecord, AuditRecord];
    expect(sixFields(selfApproval)).toEqual({
      requestedBy: "alice",
      risk: { level: "medium", reversibility: "reversible" },
      envelopeHash: view.approval!.envelopeHash,
      approver: { id: "alice", verifiedBy: "unverified", decision: "approve", decidedAt: null },
      override: null,
    });
    expect(selfApproval.refusal?.code).toBe("SELF_APPROVAL");
    expect(selfApproval.received).toEqual(decision(view, "approve", "alice"));
    expect(mismatch.refusal?.code).toBe("HASH_MISMATCH");
    expect(mismatch.approver?.id).toBe("bob");
  });

  it("a decision carrying text the canonical form refuses (an unpaired surrogate) is refused and recorded, not a crash", async () => {
    const { app, view } = await waiting();
    const after = await submitDecision(app, view.threadId, decision(view, "approve", "\ud800mallory"));
    expect(after.status).toBe("awaiting_approval");
    const refused = (await app.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "decision_refused",
    )!;
    expect(refused.refusal?.code).toBe("APPROVER_NOT_ALLOWED");
    expect(refused.approver?.id).toBe("\ufffdmallory");
    expect(await app.deps.audit.verify()).toMatchObject({ intact: true });
  });

  it("overridden: a signed separation-of-duties override is in the audit record and on the case record's first page", async () => {
    const keysDir = tempDir("ae-keys-");
    const carol = generateApproverKeyPair("carol");
    fs.writeFileSync(path.join(keysDir, "carol.pub"), `${carol.publicKeyLine}\n`);
    const { app, view } = await waiting({
      requestedBy: "carol",
      env: { ACTION_ENVELOPE_APPROVER_KEYS: keysDir },
    });
    const a = view.approval!;
    const reason = "on-call lead, approver pool unreachable during the incident";
    const item = DecisionSchema.parse({
      type: "approve",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      approver: { id: "carol" },
      decidedAt: new Date().toISOString(),
      override: { gate: "separation_of_duties", reason },
    });
    const signed = {
      ...item,
      signature: signDecision(signedPayloadOf(item, view.threadId), carol.privateKeyPem),
    };
    const done = await submitDecision(app, view.threadId, { decisions: [signed] });
    expect(done.state?.outcome).toBe("VERIFIED");

    const records = await app.deps.audit.records({ threadId: view.threadId });
    const accepted = records.find((r) => r.event === "decision_accepted")!;
    expect(sixFields(accepted)).toEqual({
      requestedBy: "carol",
      risk: { level: "medium", reversibility: "reversible" },
      envelopeHash: a.envelopeHash,
      approver: { id: "carol", verifiedBy: "signature", decision: "approve", decidedAt: item.decidedAt },
      override: { gate: "separation_of_duties", by: "carol", reason },
    });
    expect(records.find((r) => r.event === "execution_outcome")?.override).toEqual({
      gate: "separation_of_duties",
      by: "carol",
      reason,
    });

    const { caseRecord, evidence } = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await app.deps.audit.verify(),
    });
    expect(Object.keys(caseRecord)[1]).toBe("firstPage");
    expect(Object.keys(caseRecord.firstPage)[0]).toBe("overrides");
    expect(caseRecord.firstPage.overrides).toEqual([
      {
        gate: "separation_of_duties",
        by: "carol",
        reason,
        verifiedBy: "signature",
        revision: 1,
        envelopeHash: a.envelopeHash,
        at: accepted.at,
      },
    ]);
    const text = renderCase(caseRecord, evidence);
    expect(text.indexOf("separation_of_duties passed by carol (signature)")).toBeGreaterThan(-1);
    expect(text.indexOf("separation_of_duties passed by carol")).toBeLessThan(text.indexOf("Requested by:"));
  });

  it("an override from a self-declared identity is refused, and the refusal is recorded with no override applied", async () => {
    const { app, view } = await waiting({ requestedBy: "carol" });
    await submitDecision(
      app,
      view.threadId,
      decision(view, "approve", "carol", { override: { gate: "separation_of_duties", reason: "trust me" } }),
    );
    const refused = (await app.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "decision_refused",
    )!;
    expect(refused.refusal?.code).toBe("OVERRIDE_NOT_ALLOWED");
    expect(sixFields(refused)).toMatchObject({
      requestedBy: "carol",
      approver: { id: "carol", verifiedBy: "unverified" },
      override: null,
    });
  });

  it("a proposal the policy denies is recorded as proposal_denied and never as an approval request", async () => {
    const model = new ScriptedChatModel(readThenPropose(4, { CREATED_BY: "7" }));
    app = await openTestApp(portal, dataDir, { model });
    const view = await startRun(app, { request: "change the creator of task 4", requestedBy: "demo-user" });
    expect(view.state?.reasonCode).toBe("DENIED_BY_POLICY");
    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(events(records)).toEqual(["proposal_denied:1", "run_ended:0"]);
    expect(records[0]!.refusal?.code).toBe("DENIED_FIELD");
    expect(sixFields(records[0]!)).toEqual({
      requestedBy: "demo-user",
      risk: { level: "medium", reversibility: "reversible" },
      envelopeHash: null,
      approver: null,
      override: null,
    });
    expect(records[0]!.what).toMatchObject({ taskId: 4, params: { CREATED_BY: "7" } });
  });

  it("an edit's decision on revision 1 stays in the audit log after state moves on to revision 2", async () => {
    const { app, view } = await waiting();
    const a = view.approval!;
    const edited = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "bob" },
          editedAction: {
            name: "update_task",
            args: { taskId: 4, fields: { TITLE: `${NEW_TITLE} (edited)` } },
          },
        },
      ],
    });
    expect(edited.approval?.revision).toBe(2);
    const done = await submitDecision(app, view.threadId, decision(edited, "approve", "alice"));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(done.state?.decision?.type).toBe("approve");

    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(events(records)).toEqual([
      "approval_requested:1",
      "decision_accepted:1",
      "approval_requested:2",
      "decision_accepted:2",
      "execution_outcome:2",
    ]);
    expect(records[1]!.approver).toMatchObject({ id: "bob", decision: "edit" });
    const { evidence } = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await app.deps.audit.verify(),
    });
    expect(evidence.map((e) => e.name)).toEqual([
      "01-approval-request-r1",
      "02-decision-r1-accepted-edit",
      "03-approval-request-r2",
      "04-decision-r2-accepted-approve",
      "05-pre-read",
      "06-invocation",
      "07-acknowledgement",
      "08-post-write-read",
      "09-outcome",
    ]);
  });
});

describe("crash and resume", () => {
  it("a run stopped after the decision and finished by a new process, then a replayed check_decision step, add no duplicate records", async () => {
    const first = await waiting();
    const threadId = first.view.threadId;
    stopOnceBeforeMove(first.app, "pre_read");
    await expect(
      submitDecision(first.app, threadId, decision(first.view, "approve", "alice")),
    ).rejects.toThrow(/move to pre_read/);
    const stopped = await viewThread(first.app, threadId);
    expect(stopped.status).toBe("interrupted_run");
    expect(stopped.next).toEqual(["check_decision"]);
    await first.app.close(); // the process is gone; the next one picks the thread up from SQLite
    app = undefined;

    let now = new Date();
    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
      clock: () => now,
    });
    const done = await recoverThread(app, threadId);
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
    const after = await app.deps.audit.records({ threadId });
    expect(events(after)).toEqual(["approval_requested:1", "decision_accepted:1", "execution_outcome:1"]);

    // Re-run check_decision (which also carries out and closes the run) from the checkpoint before it,
    // as LangGraph does when a process dies between a node's side effects and its checkpoint.
    let beforeClose: Awaited<ReturnType<App["graph"]["getState"]>> | undefined;
    for await (const snapshot of app.graph.getStateHistory({ configurable: { thread_id: threadId } })) {
      if (snapshot.next.includes("check_decision")) {
        beforeClose = snapshot;
        break;
      }
    }
    expect(beforeClose).toBeDefined();
    now = new Date(now.getTime() + 60_000);
    const replayed = await app.graph.invoke(null, { ...beforeClose!.config, durability: "sync" });
    expect(replayed.outcome).toBe("VERIFIED");
    // The journal closed the thread once: the replay reports that close, not a new one. check_decision,
    // reached after the close, is refused (one transition_refused record) and finish reports the close.
    expect(replayed.finishedAt).toBe(done.state?.finishedAt);
    expect(replayed.finishedAt).not.toBe(now.toISOString());
    const again = await app.deps.audit.records({ threadId });
    expect(again.slice(0, after.length)).toEqual(after);
    expect(events(again.slice(after.length))).toEqual([
      expect.stringMatching(/^transition_refused:1:check_decision:/),
    ]);
    expect(await app.deps.audit.verify()).toMatchObject({ intact: true, records: 4 });
    expect((await viewThread(app, threadId)).status).toBe("finished");

    // The key is a UNIQUE constraint, not a convention: the database itself refuses a second row.
    const db = new Database(path.join(dataDir, "journal.sqlite"));
    try {
      const row = db
        .prepare("SELECT * FROM audit_records WHERE thread_id = ? AND event = 'execution_outcome'")
        .get(threadId) as Record<string, unknown>;
      expect(() =>
        db
          .prepare(
            "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (1000, ?, ?, ?, ?, ?, ?, ?, ?)",
          )
          .run(
            row["thread_id"],
            row["revision"],
            row["event"],
            row["discriminator"],
            row["recorded_at"],
            row["record_json"],
            row["prev_hash"],
            row["record_hash"],
          ),
      ).toThrow(/UNIQUE constraint failed/);
    } finally {
      db.close();
    }
  });
});

describe("evidence flags", () => {
  it("a lost acknowledgement forbids both the causal and the duplicate claim", async () => {
    const { app, view } = await waiting();
    await portal.fault({ method: "tasks.task.update", kind: "apply_then_timeout" });
    const done = await submitDecision(app, view.threadId, decision(view, "approve", "alice"));
    expect(done.state?.acknowledgement?.status).toBe("MISSING");
    const records = await app.deps.audit.records({ threadId: view.threadId });
    const { caseRecord, evidence } = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records,
      chain: await app.deps.audit.verify(),
    });
    const expected = {
      sideEffectAttempted: true,
      sideEffectVerified: false,
      causalClaimAllowed: false,
      duplicateClaimAllowed: false,
    };
    expect(caseRecord.firstPage.flags).toEqual(expected);
    expect(records.at(-1)!.outcome?.flags).toEqual(expected);
    expect(evidence.find((e) => e.kind === "outcome")!.data).toMatchObject(expected);
    expect(evidence.find((e) => e.kind === "acknowledgement")!.data).toMatchObject({ status: "MISSING" });
  });

  it("a pre-read that cannot tell forbids the causal claim; nothing was attempted", async () => {
    const { app, view } = await waiting();
    await portal.fault({ method: "tasks.task.get", kind: "malformed" });
    const done = await submitDecision(app, view.threadId, decision(view, "approve", "alice"));
    expect(done.state?.reasonCode).toBe("PRECHECK_UNKNOWN");
    const { caseRecord, evidence } = buildCase({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records: await app.deps.audit.records({ threadId: view.threadId }),
      chain: await app.deps.audit.verify(),
    });
    expect(caseRecord.firstPage.flags).toEqual({
      sideEffectAttempted: false,
      sideEffectVerified: false,
      causalClaimAllowed: false,
      duplicateClaimAllowed: true,
    });
    expect(evidence.map((e) => e.kind)).toEqual(["approval_request", "decision", "pre_read", "outcome"]);
    expect(await portal.writes()).toHaveLength(0);
  });
});
