/**
 * Records appended at the audit log's tail by a writer of the data directory (no journal key): the
 * chain is an unkeyed hash chain, so whoever can write the file can link new records after its head, and
 * `audit verify --head` (an earlier head, kept elsewhere) still passes, since that head is still in the
 * chain. What such records claim (an approver, a write, an outcome) must not reach a case record, a
 * view or a bundle as confirmed when the journal's sealed rows contradict it. Real runs: scripted
 * model, our MCP server over stdio, the emulator over HTTP; writes counted in its call log.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import { checkBundle, readBundleCase } from "../src/evidence/check-bundle.js";
import { caseOf, threadFromCheckpoints } from "../src/evidence/case-source.js";
import { isClosingRecord } from "../src/evidence/recorded.js";
import { exportBundle } from "../src/evidence/export.js";
import { checkpointReader } from "../src/graph/graph.js";
import { nextLink } from "../src/store/audit-chain.js";
import type { AuditEntry, AuditRecord } from "../src/store/audit.js";
import { approvalOf as approve, eachTestApp, stopOnceBeforeMove, tempDir } from "./support/harness.js";
import { startUndo } from "../src/app/undo.js";
import { ScriptedChatModel, readThenPropose, readThenProposeSet } from "./support/scripted-model.js";
import { approveValue } from "./support/trust-boundary.js";

const t = eachTestApp();

const closed = (outcome: string, reasonCode: string, at: string, flags = notSentFlags) => ({
  outcome,
  reasonCode,
  reason: "forged",
  finishedAt: at,
  flags,
});

/** Links a forged close of the thread (run_ended) after the head, in the name of `decision`'s record and approver. */
function appendForgedClose(decision: AuditRecord, outcome: ReturnType<typeof closed>): void {
  appendAtTail([
    forged(decision, {
      event: "run_ended",
      discriminator: "",
      at: outcome.finishedAt,
      approver: decision.approver,
      outcome,
    }),
  ]);
}

/** A run approved and stopped after its first write, before it closed (no closing record yet): its view and records. */
async function stoppedAfterFirstWrite(model: ScriptedChatModel, request: string) {
  await t.open({ model });
  const view = await startRun(t.app, { request, requestedBy: "demo-user" });
  expect(view.status).toBe("awaiting_approval");
  stopOnceBeforeMove(t.app, "verified");
  await expect(submitDecision(t.app, view.threadId, approve(view))).rejects.toThrow(/stopped/);
  expect(await t.portal.writes()).toHaveLength(1);
  const records = await t.app.deps.audit.records({ threadId: view.threadId });
  expect(records.some((r) => r.event === "run_ended" || r.event === "execution_outcome")).toBe(false);
  return { view, records };
}

/**
 * What a writer of the data directory does: links each entry after the chain's head, with the hash the
 * log's own append would give it (the algorithm is public; no key is involved).
 */
function appendAtTail(entries: AuditEntry[]): void {
  const db = new Database(path.join(t.dataDir, "journal.sqlite"));
  try {
    for (const entry of entries) {
      const last = db
        .prepare("SELECT seq, record_hash FROM audit_records ORDER BY seq DESC LIMIT 1")
        .get() as { seq: number; record_hash: string };
      const link = nextLink(entry, last, new Date());
      db.prepare(
        `INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(...link.values);
    }
  } finally {
    db.close();
  }
}

/** An entry built on one of the thread's real records (its envelope, risk, policy), as a forger copies it. */
function forged(from: AuditRecord, over: Partial<AuditEntry>): AuditEntry {
  const { seq: _seq, recordedAt: _at, prevHash: _p, hash: _h, ...entry } = from;
  return { ...entry, refusal: null, outcome: null, approver: null, override: null, ...over } as AuditEntry;
}

const caseSource = () => ({
  audit: t.app.deps.audit,
  thread: (id: string) => threadFromCheckpoints(checkpointReader(t.app.checkpointer), id),
  journal: t.app.deps.journal,
});

/** The bundle `audit export` writes, checked as `audit check` checks it against the live log. */
async function exportedAndChecked(threadId: string) {
  const exported = (await caseOf(caseSource(), threadId))!;
  const dir = path.join(tempDir("ae-bundle-"), "bundle");
  exportBundle(dir, exported.caseRecord, exported.evidence);
  const live = (await caseOf(caseSource(), threadId))!.caseRecord;
  const check = checkBundle(
    dir,
    readBundleCase(dir),
    {
      records: live.auditRecords,
      intact: live.auditChain.intact,
      problem: live.auditChain.problem,
      checkedFrom: live.auditChain.checkedFrom,
    },
    "the local audit log",
  );
  expect(fs.existsSync(dir)).toBe(true);
  return { exported, check };
}

const verifiedFlags = {
  sideEffectAttempted: true,
  sideEffectVerified: true,
  causalClaimAllowed: true,
  duplicateClaimAllowed: false,
};
const notSentFlags = {
  sideEffectAttempted: false,
  sideEffectVerified: false,
  causalClaimAllowed: false,
  duplicateClaimAllowed: false,
};

describe("records appended at the log's tail that the journal contradicts", () => {
  it("a waiting approval given a forged signed approval and a VERIFIED outcome: the view and the bundle say the journal contradicts them", async () => {
    await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Never approved" })),
    });
    const view = await startRun(t.app, {
      request: "rename task 4 to Never approved",
      requestedBy: "demo-user",
    });
    expect(view.status).toBe("awaiting_approval");
    const head = await t.app.deps.audit.verify();
    expect(head.intact).toBe(true);
    const anchored = head.intact ? head.head!.hash : "";

    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    const requested = records.find((r) => r.event === "approval_requested")!;
    const at = new Date().toISOString();
    appendAtTail([
      forged(requested, {
        event: "decision_accepted",
        discriminator: "",
        at,
        approver: { id: "cfo", verifiedBy: "signature", decision: "approve", decidedAt: at },
      }),
      forged(requested, {
        event: "execution_outcome",
        discriminator: "",
        at,
        approver: { id: "cfo", verifiedBy: "signature", decision: "approve", decidedAt: at },
        outcome: {
          outcome: "VERIFIED",
          reasonCode: "VERIFIED",
          reason: "",
          finishedAt: at,
          flags: verifiedFlags,
        },
      }),
    ]);

    // The head kept elsewhere is still in the chain: appending after it is what the log itself does.
    expect((await t.app.deps.audit.verify({ head: anchored })).intact).toBe(true);

    const { exported, check } = await exportedAndChecked(view.threadId);
    const chain = exported.caseRecord.auditChain;
    expect(chain.intact).toBe(false);
    expect(chain.problem).toMatch(/journal/);
    expect(check.confirmed).toBe(false);
    expect(check.problems.join("\n")).toMatch(/journal/);
    // Nothing was decided or sent.
    expect(await t.portal.writes()).toEqual([]);
    expect((await t.app.deps.journal.getAction(requested.what.envelopeHash!))?.phase).toBe("registered");
  });

  it("a write that went out, its run stopped before it closed, given a forged NOT_EXECUTED close: the view says the journal holds its write-ahead entry", async () => {
    const { view, records } = await stoppedAfterFirstWrite(
      new ScriptedChatModel(readThenPropose(4, { TITLE: "Sent for sure" })),
      "rename task 4 to Sent for sure",
    );
    const accepted = records.find((r) => r.event === "decision_accepted")!;
    appendForgedClose(accepted, {
      ...closed("NOT_EXECUTED", "STALE_STATE", new Date().toISOString()),
      reason: "the task changed after approval",
    });

    const { exported, check } = await exportedAndChecked(view.threadId);
    expect(exported.caseRecord.firstPage.outcome?.outcome).toBe("NOT_EXECUTED");
    expect(exported.caseRecord.auditChain.intact).toBe(false);
    expect(exported.caseRecord.auditChain.problem).toMatch(/write-ahead/);
    expect(check.confirmed).toBe(false);
  });
});

describe("what the program itself records agrees with the journal", () => {
  it("a change set approved whole: both actions written and VERIFIED, its view intact", async () => {
    await t.open({ model: new ScriptedChatModel(readThenProposeSet(SET)) });
    const view = await startRun(t.app, { request: "rename tasks 4 and 5", requestedBy: "demo-user" });
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => Number(w.params["taskId"]))).toEqual([4, 5]);
    expect(await problemOf(view.threadId)).toBeNull();
  });

  it("an edit, a partial approval of a change set and an undo: every view's chain is intact", async () => {
    await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "First title" })),
    });
    // An edit (revision 2, approved and VERIFIED), then its undo.
    const edited = await startRun(t.app, {
      request: "rename task 4 to First title",
      requestedBy: "demo-user",
    });
    const a = edited.approval!;
    const revised = await submitDecision(t.app, edited.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          editedAction: { name: "update_task", args: { taskId: 4, fields: { TITLE: "Edited title" } } },
        },
      ],
    });
    expect(revised.status).toBe("awaiting_approval");
    const done = await submitDecision(t.app, edited.threadId, approve(revised));
    expect(done.state?.outcome).toBe("VERIFIED");
    const undo = await startUndo(t.app, edited.threadId, "demo-user");
    const undone = await submitDecision(t.app, undo.threadId, approve(undo));
    expect(undone.state?.outcome).toBe("VERIFIED");
    await t.app.close();

    await t.open({
      model: new ScriptedChatModel(
        readThenProposeSet([
          { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
          { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
        ]),
      ),
    });
    const set = await startRun(t.app, { request: "several changes", requestedBy: "demo-user" });
    const s = set.approval!;
    const partly = await submitDecision(t.app, set.threadId, {
      decisions: [
        {
          type: "approve",
          envelopeHash: s.envelopeHash,
          nonce: s.nonce,
          approver: { id: "alice" },
          actionId: "a1",
        },
        {
          type: "reject",
          envelopeHash: s.envelopeHash,
          nonce: s.nonce,
          approver: { id: "alice" },
          actionId: "a2",
          message: "leave task 5 alone",
        },
      ],
    });
    expect(partly.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(3);

    for (const threadId of [edited.threadId, undo.threadId, set.threadId]) {
      const found = (await caseOf(caseSource(), threadId))!;
      expect({ threadId, chain: found.caseRecord.auditChain.problem }).toEqual({ threadId, chain: null });
      expect(found.caseRecord.auditChain.intact).toBe(true);
    }
  });
});

/** The problem of a thread's view (null: intact), as `audit show` computes it. */
async function problemOf(threadId: string): Promise<string | null> {
  const found = (await caseOf(caseSource(), threadId))!;
  expect(found.caseRecord.auditChain.intact).toBe(found.caseRecord.auditChain.problem === null);
  return found.caseRecord.auditChain.problem;
}

/** Two renames, of tasks 4 and 5; `round` keeps each thread's titles new. */
const setOf = (round = 1) => [
  { operation: "update_task", taskId: 4, fields: { TITLE: `Set one ${round}` } },
  { operation: "update_task", taskId: 5, fields: { TITLE: `Set two ${round}` } },
];
const SET = setOf();

describe("a change set's closing record held against its actions' write-ahead entries", () => {
  it("a set whose first write went out, its run stopped before it closed, given a forged NOT_EXECUTED close naming the set: the view says the journal holds that write", async () => {
    const { view, records } = await stoppedAfterFirstWrite(
      new ScriptedChatModel(readThenProposeSet(SET)),
      "rename tasks 4 and 5",
    );
    // The set's decision record names the set's hash, beside its first action's envelope.
    const accepted = records.find((r) => r.event === "decision_accepted")!;
    expect(accepted.what.envelopeHash).toBe(view.approval!.envelopeHash);
    appendForgedClose(accepted, closed("NOT_EXECUTED", "STALE_STATE", new Date().toISOString()));

    const { exported, check } = await exportedAndChecked(view.threadId);
    expect(exported.caseRecord.firstPage.outcome?.outcome).toBe("NOT_EXECUTED");
    expect(exported.caseRecord.auditChain.intact).toBe(false);
    expect(exported.caseRecord.auditChain.problem).toMatch(
      /nothing of change set .* write-ahead entries of a1/,
    );
    expect(check.confirmed).toBe(false);
  });

  it("a set stopped at its second action (stale), given a forged close naming that action, VERIFIED or NOT_EXECUTED: each contradicts the first action's write", async () => {
    const runs = [1, 2].map(setOf);
    let next = 0;
    await t.open({
      model: new ScriptedChatModel((messages, tools) => readThenProposeSet(runs[next]!)(messages, tools)),
    });
    const forgeries = [
      {
        outcome: "VERIFIED",
        reasonCode: "VERIFIED",
        problem: /every action of change set .* no sealed write-ahead entry of a2/,
      },
      {
        outcome: "NOT_EXECUTED",
        reasonCode: "STALE_STATE",
        problem: /nothing of change set .* write-ahead entries of a1/,
      },
    ];
    for (const [round, forgery] of forgeries.entries()) {
      next = round;
      const view = await startRun(t.app, { request: "rename tasks 4 and 5", requestedBy: "demo-user" });
      // Someone changes task 5 after the card was shown: a1 is written, a2 is not.
      const priority = String(round + 1);
      expect(
        (await t.portal.rest("tasks.task.update", { taskId: 5, fields: { PRIORITY: priority } })).status,
      ).toBe(200);
      const before = (await t.portal.writes()).length;
      const done = await submitDecision(t.app, view.threadId, approve(view));
      expect(done.state?.outcome).toBe("PARTIALLY_EXECUTED");
      expect((await t.portal.writes()).slice(before).map((w) => Number(w.params["taskId"]))).toEqual([4]);
      expect(await problemOf(view.threadId)).toBeNull();

      const records = await t.app.deps.audit.records({ threadId: view.threadId });
      const ending = records.find(isClosingRecord)!;
      const second = records.find(
        (r) => r.event === "action_ended" && r.outcome?.reasonCode === "STALE_STATE",
      )!;
      const at = new Date().toISOString();
      // Built on a2's own record: its envelope, and no write, as the journal holds for a2.
      appendAtTail([
        forged(second, {
          event: "run_ended",
          // Beside the genuine close (the log keys a record by thread, revision, event and discriminator).
          discriminator: "forged",
          at,
          approver: ending.approver,
          outcome: closed(forgery.outcome, forgery.reasonCode, at),
          request: ending.request,
          requesterVerifiedBy: ending.requesterVerifiedBy,
        }),
      ]);
      expect(await problemOf(view.threadId)).toMatch(forgery.problem);
    }
  });

  it("a rejected set given a forged VERIFIED execution_outcome naming the set, one that says only that a write was sent, or a forged approver on its close: the journal contradicts each", async () => {
    const runs = [1, 2, 3].map(setOf);
    let next = 0;
    await t.open({
      model: new ScriptedChatModel((messages, tools) => readThenProposeSet(runs[next]!)(messages, tools)),
    });
    const forgeries = [
      {
        event: "execution_outcome" as const,
        approver: undefined,
        outcome: (at: string) => closed("VERIFIED", "VERIFIED", at, verifiedFlags),
        problem: /write-ahead entry of a1, a2/,
      },
      {
        event: "execution_outcome" as const,
        approver: undefined,
        outcome: (at: string) =>
          closed("NOT_EXECUTED", "REJECTED_BY_HUMAN", at, { ...notSentFlags, sideEffectAttempted: true }),
        problem: /a write was sent for change set .* no sealed write-ahead entry of any/,
      },
      {
        event: "run_ended" as const,
        approver: (at: string) => ({
          id: "cfo",
          verifiedBy: "signature" as const,
          decision: "reject",
          decidedAt: at,
        }),
        outcome: (at: string) => closed("NOT_EXECUTED", "REJECTED_BY_HUMAN", at),
        problem: /reject by cfo \(signature\).*sealed decision is reject by demo-approver/,
      },
    ];
    for (const [round, forgery] of forgeries.entries()) {
      next = round;
      const view = await startRun(t.app, { request: "rename tasks 4 and 5", requestedBy: "demo-user" });
      const done = await submitDecision(
        t.app,
        view.threadId,
        approveValue({ ...view.approval!, threadId: view.threadId }, "demo-approver", {
          type: "reject",
          message: "not now",
        }),
      );
      expect(done.state?.outcome).toBe("NOT_EXECUTED");
      expect(await t.portal.writes()).toEqual([]);
      expect(await problemOf(view.threadId)).toBeNull();

      const records = await t.app.deps.audit.records({ threadId: view.threadId });
      const accepted = records.find((r) => r.event === "decision_accepted")!;
      const at = new Date().toISOString();
      appendAtTail([
        forged(accepted, {
          event: forgery.event,
          discriminator: "forged",
          at,
          approver: forgery.approver?.(at) ?? accepted.approver,
          outcome: forgery.outcome(at),
        }),
      ]);
      expect(await problemOf(view.threadId)).toMatch(forgery.problem);
    }
  });

  it("a partially approved set given a forged close naming its first revision: the journal's later revision replaces it", async () => {
    await t.open({ model: new ScriptedChatModel(readThenProposeSet(SET)) });
    const view = await startRun(t.app, { request: "rename tasks 4 and 5", requestedBy: "demo-user" });
    const s = view.approval!;
    const decide = (type: string, actionId: string) => ({
      type,
      envelopeHash: s.envelopeHash,
      nonce: s.nonce,
      approver: { id: "alice" },
      actionId,
      ...(type === "reject" ? { message: "leave task 5 alone" } : {}),
    });
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [decide("approve", "a1"), decide("reject", "a2")],
    });
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await t.portal.writes()).toHaveLength(1);
    expect(await problemOf(view.threadId)).toBeNull();

    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    // The first revision's decision: nothing of that revision was written.
    const first = records.find((r) => r.event === "decision_accepted" && r.revision === 1)!;
    appendForgedClose(first, closed("NOT_EXECUTED", "REJECTED_BY_HUMAN", new Date().toISOString()));
    expect(await problemOf(view.threadId)).toMatch(/replaces; a thread ends on its last revision/);
  });

  /** A single action stopped by its pre-read (task 4 changed after the card was shown): its view intact, its closing record. */
  async function stoppedByPreRead() {
    await t.open({
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Never written" })),
    });
    const view = await startRun(t.app, {
      request: "rename task 4 to Never written",
      requestedBy: "demo-user",
    });
    expect((await t.portal.rest("tasks.task.update", { taskId: 4, fields: { PRIORITY: "2" } })).status).toBe(
      200,
    );
    const before = (await t.portal.writes()).length;
    const done = await submitDecision(t.app, view.threadId, approve(view));
    expect(done.state?.reasonCode).toBe("STALE_STATE");
    expect((await t.portal.writes()).slice(before)).toEqual([]);
    expect(await problemOf(view.threadId)).toBeNull();
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    return { threadId: view.threadId, ending: records.find((r) => r.event === "run_ended")! };
  }

  /** Links a forged copy of `ending` after the head, saying `outcome`. */
  function forgeEnding(ending: AuditRecord, outcome: (at: string) => ReturnType<typeof closed>): void {
    const at = new Date().toISOString();
    appendAtTail([
      forged(ending, { discriminator: "forged", at, approver: ending.approver, outcome: outcome(at) }),
    ]);
  }

  it("a single action stopped by its pre-read given a forged VERIFIED run_ended that claims no write: VERIFIED needs one, and the journal holds none", async () => {
    const { threadId, ending } = await stoppedByPreRead();
    forgeEnding(ending, (at) => closed("VERIFIED", "VERIFIED", at));
    expect(await problemOf(threadId)).toMatch(/says a write was sent for envelope/);
  });

  it("a single action stopped by its pre-read given a forged close that claims no write either, with another outcome: the journal's sealed close says otherwise", async () => {
    const { threadId, ending } = await stoppedByPreRead();
    // Nothing sent either way, so no write-ahead entry contradicts it: only the sealed close does.
    forgeEnding(ending, (at) => closed("NOT_EXECUTED", "CANCELLED", at));
    expect(await problemOf(threadId)).toMatch(
      /ends the thread NOT_EXECUTED \/ CANCELLED; the journal's sealed close says NOT_EXECUTED \/ STALE_STATE/,
    );
  });
});
