/**
 * Evidence that explains itself (issue 17, A1–A5), checked on exported bundles and audit records of
 * real runs: scripted model, our MCP server over stdio, the emulator over HTTP. Writes are counted in
 * the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { AIMessage } from "@langchain/core/messages";
import { startRun, submitDecision } from "../src/app/threads.js";
import { viewThread } from "../src/app/view-thread.js";
import { sha256Json } from "../src/envelope/index.js";
import { RAW_IN_JOURNAL } from "../src/envelope/records.js";
import { buildCase } from "../src/evidence/bundle.js";
import type { RunStatus } from "../src/evidence/case-input.js";
import { exportBundle } from "../src/evidence/export.js";
import { caseOf, threadFromCheckpoints } from "../src/evidence/case-source.js";
import { checkpointReader } from "../src/graph/graph.js";
import { renderCase } from "../src/evidence/render.js";
import { approvalOf as approve, eachTestApp, tempDir } from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose, type Script } from "./support/scripted-model.js";

const t = eachTestApp();

async function waiting(request: string, script: Script) {
  await t.open({ model: new ScriptedChatModel(script) });
  return startRun(t.app, { request, requestedBy: "demo-user" });
}

/** Exports the run's bundle exactly as `audit export` does and reads it back from disk. */
async function exported(threadId: string) {
  const view = await viewThread(t.app, threadId);
  const records = await t.app.deps.audit.records({ threadId });
  const chain = await t.app.deps.audit.verify();
  const { caseRecord, evidence } = buildCase({
    threadId,
    status: view.status as RunStatus,
    state: view.state,
    records,
    chain,
  });
  const dir = path.join(tempDir("ae-bundle-"), "bundle");
  exportBundle(dir, caseRecord, evidence);
  const files = fs.readdirSync(dir);
  const read = (stem: string): any => {
    const file = files.find((f) => f.endsWith(".json") && f.includes(stem));
    if (!file) throw new Error(`no ${stem} in the bundle: ${files.join(", ")}`);
    return JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
  };
  return { files, read, text: renderCase(caseRecord, evidence), records };
}

describe("A1: every comparison names its normalisation rule", () => {
  it("a deadline approved in Z and read back in +03:00 is recorded as applied under datetime-instant-equal, and the bundle carries the rule table", async () => {
    const view = await waiting(
      "set the deadline of task 4 to 2026-12-20T15:00:00Z",
      readThenPropose(4, { DEADLINE: "2026-12-20T15:00:00Z" }),
    );
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);

    const b = await exported(view.threadId);
    const post = b.read("post-write-read").data;
    const deadline = post.fields.find((f: any) => f.field === "DEADLINE");
    expect(deadline).toMatchObject({
      status: "applied",
      expected: "2026-12-20T15:00:00Z",
      actual: "2026-12-20T18:00:00+03:00",
      normalised: true,
      rule: { id: "datetime-instant-equal", text: expect.stringContaining("same instant") },
    });
    // Every field the verification compared names its rule, and every rule named is in the bundle's table.
    const table = b.read("case-record").normalisationRules.map((r: any) => r.id);
    expect(table).toEqual(
      expect.arrayContaining([
        "null-only-null",
        "numeric-string-equal",
        "datetime-instant-equal",
        "id-set-equal",
        "string-exact",
        "canonical-json-equal",
      ]),
    );
    const pre = b.read("pre-read").data;
    for (const f of [
      ...pre.fields,
      ...post.fields.filter((x: any) => x.role !== "other" && x.role !== "automatic"),
    ]) {
      if (f.status === "unknown") continue;
      expect(table).toContain(f.rule.id);
    }
    expect(pre.fields.find((f: any) => f.field === "STATUS")).toMatchObject({
      role: "invariant",
      status: "match",
      rule: { id: "numeric-string-equal" },
    });
    expect(b.text).toMatch(
      /DEADLINE: applied .* rule datetime-instant-equal \(matched only under this rule\)/,
    );
  });
});

describe("A2: every moved field is named with before and now", () => {
  it("a STATUS changed in Bitrix24 after approval is named as the moved field, with its baseline and current value; nothing is written", async () => {
    const view = await waiting(
      "rename task 4 to Evidence names STATUS",
      readThenPropose(4, { TITLE: "Evidence names STATUS" }),
    );
    const before = view.approval!.envelope.baseline.values["STATUS"];
    // Someone edits the task in Bitrix24 between the approval request and the write.
    const foreign = await t.portal.rest("tasks.task.update", { taskId: 4, fields: { STATUS: "5" } });
    expect(foreign.status).toBe(200);
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(done.state?.reasonCode).toBe("STALE_STATE");
    // The only write in the portal's log is the foreign one.
    const writes = await t.portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toMatchObject({ fields: { STATUS: "5" } });

    const b = await exported(view.threadId);
    const pre = b.read("pre-read").data;
    expect(pre.verdict).toBe("MISMATCH");
    const status = pre.moved.find((m: any) => m.field === "STATUS");
    expect(status).toMatchObject({
      role: "invariant",
      before,
      now: "5",
      rule: { id: "numeric-string-equal" },
    });
    expect(pre.reason).toMatch(new RegExp(`STATUS was ${JSON.stringify(before)}, now "5"`));
    expect(done.state?.reason).toContain("STATUS was");
    expect(b.text).toMatch(/moved since the baseline: \d+ fields?/);
    expect(b.text).toContain(`STATUS: before ${JSON.stringify(before)}, now "5"`);
  });
});

describe("A3: an answer about another object is an identity MISMATCH", () => {
  it("a pre-read answered with task 5's body ends IDENTITY_MISMATCH, recorded as identity MISMATCH, with no write", async () => {
    const view = await waiting(
      "rename task 4 to Identity checked",
      readThenPropose(4, { TITLE: "Identity checked" }),
    );
    const other = await t.portal.rest("tasks.task.get", { taskId: 5 });
    await t.portal.fault({
      method: "tasks.task.get",
      kind: "malformed",
      body: JSON.stringify(other.body),
      times: 1,
    });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(done.state?.reasonCode).toBe("IDENTITY_MISMATCH");
    expect(await t.portal.writes()).toHaveLength(0);

    const b = await exported(view.threadId);
    const pre = b.read("pre-read").data;
    expect(pre.verdict).toBe("MISMATCH");
    expect(pre.identity).toEqual({ expected: 4, answered: "5", status: "MISMATCH" });
    expect(pre.reason).toMatch(/identity mismatch: the answer is about task string "5", not task 4/);
    expect(b.read("outcome").data).toMatchObject({
      outcome: "NOT_EXECUTED",
      reasonCode: "IDENTITY_MISMATCH",
      sideEffectAttempted: false,
    });
    expect(b.text).toContain('identity: MISMATCH (expected task 4, answer names "5")');
  });
});

describe("A4: a tool the model was not offered is a boundary event", () => {
  it("records boundary_refused (tool, arguments sha256, time) and ends WRITE_ATTEMPT_REFUSED, not NO_PROPOSAL with the model's words", async () => {
    const args = { taskId: 4, fields: { TITLE: "pwned" } };
    let turn = 0;
    const script: Script = () => {
      turn += 1;
      if (turn === 1)
        return new AIMessage({
          content: "",
          tool_calls: [call("update_task", args), call("tasks.task.delete", { taskId: 4 })],
        });
      return new AIMessage("I could not make the change, sorry.");
    };
    const view = await waiting("rename task 4 to pwned", script);
    expect(view.status).toBe("finished");
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("WRITE_ATTEMPT_REFUSED");
    expect(view.state?.reason).toMatch(
      /update_task \(arguments sha256:[0-9a-f]{64}\).*write attempt was refused/,
    );
    expect(view.state?.reason).not.toContain("sorry");
    expect(await t.portal.writes()).toHaveLength(0);
    expect(
      (await t.portal.calls()).filter((c) => c.method !== "tasks.task.get" && c.method !== "tasks.task.list"),
    ).toHaveLength(0);

    const b = await exported(view.threadId);
    const boundary = b.records.filter((r) => r.event === "boundary_refused");
    expect(boundary.map((r) => (r.received as any).tool)).toEqual(["update_task", "tasks.task.delete"]);
    expect(boundary[0]).toMatchObject({
      revision: 0,
      refusal: { code: "TOOL_NOT_OFFERED" },
      received: {
        tool: "update_task",
        argumentsSha256: sha256Json(args),
        offered: expect.arrayContaining(["get_task_by_id", "propose_change"]),
      },
      at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
    });
    // The audit keeps the hash, never the model's arguments.
    expect(JSON.stringify(boundary)).not.toContain("pwned");
    const event = b.read("boundary-refused-update_task");
    expect(event).toMatchObject({
      kind: "boundary_event",
      data: { tool: "update_task", argumentsSha256: sha256Json(args) },
    });
    expect(b.read("outcome").data).toMatchObject({
      reasonCode: "WRITE_ATTEMPT_REFUSED",
      sideEffectAttempted: false,
    });
    expect((await t.app.deps.audit.verify()).intact).toBe(true);
  });
});

describe("A4: a model that keeps trying", () => {
  it("each attempt is its own boundary event; the run ends INVALID_PROPOSAL and the reason says write attempts were refused", async () => {
    const script: Script = () =>
      new AIMessage({
        content: "",
        tool_calls: [call("bitrix24_update_task", { taskId: 4, fields: { TITLE: "again" } })],
      });
    const view = await waiting("rename task 4 to again", script);
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("INVALID_PROPOSAL");
    expect(view.state?.reason).toMatch(
      /bitrix24_update_task \(arguments sha256:[0-9a-f]{64}\), which it was not offered; the write attempt was refused/,
    );
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const boundary = records.filter((r) => r.event === "boundary_refused");
    expect(boundary.length).toBe(t.app.deps.config.limits.maxInvalidProposals + 1);
    expect(new Set(boundary.map((r) => r.discriminator)).size).toBe(boundary.length);
    expect(await t.portal.writes()).toHaveLength(0);
  });
});

describe("A5: the concurrent-writer window is stated, not hidden behind VERIFIED", () => {
  it("a VERIFIED run's post-write read names the pre-read → write window and that Bitrix24 has no conditional write", async () => {
    const view = await waiting(
      "rename task 4 to Window stated",
      readThenPropose(4, { TITLE: "Window stated" }),
    );
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);

    const b = await exported(view.threadId);
    const post = b.read("post-write-read");
    const w = post.data.concurrentWriterWindow;
    expect(w).toMatchObject({
      preReadAt: done.state!.preRead!.at,
      writeSentAt: done.state!.invocation!.sentAt,
      fieldsOverwritten: ["TITLE"],
    });
    expect(w.uncoveredMs).toBeGreaterThanOrEqual(0);
    expect(w.statement).toMatch(/no conditional write/);
    expect(post.summary).toMatch(/^VERIFIED: .*not covered: Bitrix24 offers no conditional write/);
    expect(b.read("outcome").data.concurrentWriterWindow.statement).toBe(w.statement);
    expect(b.text).toMatch(/window not covered: \d+ ms between pre-read/);
  });
});

describe("raw answers live in the journal and the audit log, not in graph state", () => {
  it("state keeps the verdicts without the target's answers; the bundle's raw answers come from the hash-chained record, and a rewritten checkpoint cannot change them", async () => {
    const view = await waiting(
      "rename task 4 to Raw kept apart",
      readThenPropose(4, { TITLE: "Raw kept apart" }),
    );
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);

    const config = { configurable: { thread_id: view.threadId } };
    const raw = (await t.app.graph.getState(config)).values as any;
    expect(raw.preRead.verdict).toBe("MATCH");
    expect(raw.verification.verdict).toBe("VERIFIED");
    for (const kept of [raw.preRead.raw, raw.verification.raw, raw.acknowledgement.body])
      expect(kept).toBe(RAW_IN_JOURNAL);
    // State keeps each field's name, role and status; the values read and the rules are the journal's,
    // and the thread's view shows them.
    expect(raw.verification.fields.find((f: any) => f.field === "TITLE")).toEqual({
      field: "TITLE",
      taskKey: "title",
      role: "requested",
      status: "applied",
    });
    expect(raw.preRead.lease).toBeUndefined();
    expect(done.state!.verification!.fields.find((f) => f.field === "TITLE")).toMatchObject({
      actual: "Raw kept apart",
      rule: { id: "string-exact" },
    });
    expect(done.state!.preRead!.lease).toBeDefined();
    // The record that ended the run carries the journal's copy, answers included.
    const ending = (await t.app.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "execution_outcome",
    )!;
    expect((ending.received as any).verification.raw.result.task.title).toBe("Raw kept apart");

    // A client rewrites the evidence channels (the API's updateState): the reducer keeps no answer from it,
    // and the bundle still shows the journal's answers.
    await t.app.graph.updateState(config, {
      verification: { ...raw.verification, raw: { result: { task: { id: "4", title: "FORGED" } } } },
      preRead: { ...raw.preRead, raw: { result: { task: { id: "4", title: "FORGED" } } } },
    });
    const edited = (await t.app.graph.getState(config)).values as any;
    expect(edited.verification.raw).toBe(RAW_IN_JOURNAL);
    const b = await exported(view.threadId);
    expect(b.read("post-write-read").data.raw.result.task.title).toBe("Raw kept apart");
    expect(b.read("pre-read").data.raw.result.task.id).toBe("4");
    expect(JSON.stringify(b.read("pre-read").data.raw)).not.toContain("FORGED");
  });

  it("each step writes only the mirror channels that changed, none with a raw answer; a mirror a client rewrote is written back from the journal", async () => {
    const view = await waiting(
      "rename task 4 to Written once",
      readThenPropose(4, { TITLE: "Written once" }),
    );
    const config = { configurable: { thread_id: view.threadId } };
    // A client rewrites the envelope and card mirrors while the approval waits (the API's updateState),
    // and the run is driven back to its interrupt.
    const before = (await t.app.graph.getState(config)).values as any;
    await t.app.graph.updateState(
      config,
      { envelope: { ...before.envelope, params: { TITLE: "FORGED" } }, card: "FORGED CARD" },
      "build_envelope",
    );
    await t.app.graph.invoke(null, config);
    const again = await viewThread(t.app, view.threadId);
    expect(again.status).toBe("awaiting_approval");
    const done = await submitDecision(t.app, view.threadId, approve(again));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);

    // Every write of every step, as the checkpointer holds them (a checkpoint's pending writes are
    // those of the step that ran from it).
    const writes: Array<{ channel: string; value: any }> = [];
    for await (const c of t.app.checkpointer.list(config))
      for (const [, channel, value] of c.pendingWrites ?? []) writes.push({ channel, value });
    const of = (channel: string) => writes.filter((w) => w.channel === channel).map((w) => w.value);
    // build_envelope wrote the envelope and card, the client its forgeries, and the first node that
    // saw them wrote the journal's copy back; none of the other steps rewrote them.
    expect(
      of("envelope")
        .map((e) => e.params.TITLE)
        .sort(),
    ).toEqual(["FORGED", "Written once", "Written once"]);
    expect(of("card").filter((c) => c === "FORGED CARD")).toHaveLength(1);
    expect(of("card")).toHaveLength(3);
    const after = (await t.app.graph.getState(config)).values as any;
    expect(after.envelope.params.TITLE).toBe("Written once");
    expect(after.card).not.toBe("FORGED CARD");
    // The evidence mirrors are written once each, as state keeps them: without the target's answers.
    for (const channel of ["preRead", "verification"]) {
      expect(of(channel)).toHaveLength(1);
      expect(of(channel)[0].raw).toBe(RAW_IN_JOURNAL);
    }
    expect(of("acknowledgement")).toHaveLength(1);
    expect(of("acknowledgement")[0].body).toBe(RAW_IN_JOURNAL);
    // The accepted decision is mirrored once, by check_decision; carry_out does not write it again.
    expect(of("decision").filter((d) => d !== null)).toHaveLength(1);
    expect(
      (await t.app.deps.audit.records({ threadId: view.threadId })).some(
        (r) => r.event === "tamper_detected",
      ),
    ).toBe(true);
  });
});

describe("the case record reports what the audit log holds, not a rewritten checkpoint", () => {
  it("a rejected thread whose state is rewritten to VERIFIED by bob (signature) is still NOT_EXECUTED, rejected by its approver, in the case record and its outcome evidence", async () => {
    const view = await waiting(
      "rename task 4 to Never written",
      readThenPropose(4, { TITLE: "Never written" }),
    );
    const a = view.approval!;
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          message: "not now",
        },
      ],
    });
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(await t.portal.writes()).toEqual([]);
    const config = { configurable: { thread_id: view.threadId } };
    const st = (await t.app.graph.getState(config)).values as any;
    // Anyone who can write the checkpoints (or the API's state) rewrites the ending.
    await t.app.graph.updateState(config, {
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
      reason: "forged",
      decision: { ...st.decision, type: "approve", approverId: "bob", verifiedBy: "signature" },
    });
    expect(((await t.app.graph.getState(config)).values as any).outcome).toBe("VERIFIED");

    const found = await caseOf(
      {
        audit: t.app.deps.audit,
        thread: (id) => threadFromCheckpoints(checkpointReader(t.app.checkpointer), id),
      },
      view.threadId,
    );
    const page = found!.caseRecord.firstPage;
    expect(page.outcome).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "REJECTED_BY_HUMAN" });
    expect(page.decidedBy).toMatchObject({ id: "alice", decision: "reject" });
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const closing = records.find((r) => r.event === "run_ended" || r.event === "execution_outcome")!;
    expect(page.flags).toEqual(closing.outcome!.flags);
    // The decision record keeps the rejection's message (what `show --api` reports it from).
    expect(records.find((r) => r.event === "decision_accepted")?.message).toBe("not now");
    expect(page.flags?.sideEffectAttempted).toBe(false);
    const outcome = found!.evidence.find((e) => e.kind === "outcome")!;
    expect(outcome.data["outcome"]).toBe("NOT_EXECUTED");
    expect(JSON.stringify(found!.caseRecord)).not.toContain("forged");
  });

  it("a registered thread whose records were cut from the log's tail reports nothing from a state rewritten to VERIFIED", async () => {
    const view = await waiting("rename task 4 to Cut", readThenPropose(4, { TITLE: "Cut" }));
    const config = { configurable: { thread_id: view.threadId } };
    await t.app.graph.updateState(config, { outcome: "VERIFIED", reasonCode: "VERIFIED", reason: "forged" });
    // A writer of the data directory removes the thread's records, the tail of the log (the trigger
    // only stops accidents).
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    try {
      db.exec("DROP TRIGGER audit_records_no_delete");
      expect(
        db.prepare("DELETE FROM audit_records WHERE thread_id = ?").run(view.threadId).changes,
      ).toBeGreaterThan(0);
    } finally {
      db.close();
    }
    expect(await t.app.deps.audit.records({ threadId: view.threadId })).toEqual([]);
    const found = await caseOf(
      {
        audit: t.app.deps.audit,
        thread: (id) => threadFromCheckpoints(checkpointReader(t.app.checkpointer), id),
        journal: t.app.deps.journal,
      },
      view.threadId,
    );
    expect(found!.caseRecord.firstPage.outcome).toBeFalsy();
    expect(JSON.stringify(found!.caseRecord)).not.toMatch(/forged|"VERIFIED"/);
    expect(await t.portal.writes()).toEqual([]);
  });

  it("the request's text and the refused-decision count come from the records, not from a request or refusals a client writes into state", async () => {
    const view = await waiting("rename task 4 to Kept", readThenPropose(4, { TITLE: "Kept" }));
    const a = view.approval!;
    const config = { configurable: { thread_id: view.threadId } };
    // While the approval waits, as build_envelope (the run then still pauses there); after the end, as the last node.
    const forge = (asNode?: string) =>
      t.app.graph.updateState(
        config,
        {
          request: "FORGED REQUEST: delete every task",
          refusals: Array.from({ length: 3 }, (_, i) => ({
            code: "HASH_MISMATCH",
            reason: "FORGED",
            at: `2026-01-0${i + 1}T00:00:00.000Z`,
            envelopeHash: a.envelopeHash,
            raw: null,
          })),
        },
        asNode,
      );
    const page = async () => {
      const found = await caseOf(
        {
          audit: t.app.deps.audit,
          thread: (id) => threadFromCheckpoints(checkpointReader(t.app.checkpointer), id),
        },
        view.threadId,
      );
      return found!.caseRecord.firstPage;
    };
    // Waiting: the approval record carries the request. The run is then driven back to its interrupt.
    await forge("build_envelope");
    expect((await page()).request).toBe("rename task 4 to Kept");
    expect((await page()).refusedDecisions).toBe(0);
    await t.app.graph.invoke(null, config);
    expect((await viewThread(t.app, view.threadId)).status).toBe("awaiting_approval");

    // One real refusal (a wrong hash), then the approval.
    const wrong = await submitDecision(t.app, view.threadId, {
      decisions: [
        {
          type: "approve",
          envelopeHash: `sha256:${"0".repeat(64)}`,
          nonce: a.nonce,
          approver: { id: "demo-approver" },
        },
      ],
    });
    expect(wrong.status).toBe("awaiting_approval");
    const again = wrong.approval!;
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [
        {
          type: "approve",
          envelopeHash: again.envelopeHash,
          nonce: again.nonce,
          approver: { id: "demo-approver" },
        },
      ],
    });
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);

    await forge();
    const after = await page();
    expect(after.request).toBe("rename task 4 to Kept");
    expect(after.refusedDecisions).toBe(1);
    const closing = (await t.app.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "execution_outcome",
    )!;
    expect(closing.request).toBe("rename task 4 to Kept");
    expect(JSON.stringify(after)).not.toContain("FORGED");
  });

  it("a waiting thread whose state is rewritten to a decision, a write and VERIFIED shows none of them: no outcome, no decider, no invocation", async () => {
    const view = await waiting(
      "rename task 4 to Still waiting",
      readThenPropose(4, { TITLE: "Still waiting" }),
    );
    const a = view.approval!;
    const config = { configurable: { thread_id: view.threadId } };
    const at = "2026-01-01T00:00:00.000Z";
    await t.app.graph.updateState(
      config,
      {
        outcome: "VERIFIED",
        reasonCode: "VERIFIED",
        reason: "FORGED",
        finishedAt: at,
        decision: {
          type: "approve",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          revision: 1,
          approverId: "bob",
          verifiedBy: "signature",
          decidedAt: at,
          acceptedAt: at,
          raw: null,
        },
        invocation: {
          tool: "tasks.task.update",
          args: { taskId: 4, fields: { TITLE: "FORGED" } },
          idempotencyKey: "FORGED",
          sentAt: at,
        },
      },
      "build_envelope",
    );
    const found = await caseOf(
      {
        audit: t.app.deps.audit,
        thread: (id) => threadFromCheckpoints(checkpointReader(t.app.checkpointer), id),
      },
      view.threadId,
    );
    const page = found!.caseRecord.firstPage;
    expect(page.outcome).toBeNull();
    expect(page.decidedBy).toBeNull();
    expect(page.flags).toBeNull();
    expect(found!.evidence.map((e) => e.kind)).toEqual(["approval_request"]);
    expect(JSON.stringify(found!.caseRecord)).not.toContain("FORGED");
    expect(await t.portal.writes()).toEqual([]);
  });
});
