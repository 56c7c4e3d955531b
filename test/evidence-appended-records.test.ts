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
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import type { App } from "../src/app/open-app.js";
import { checkBundle, readBundleCase } from "../src/evidence/check-bundle.js";
import { caseOf, threadFromCheckpoints } from "../src/evidence/case-source.js";
import { exportBundle } from "../src/evidence/export.js";
import { checkpointReader } from "../src/graph/graph.js";
import { nextLink } from "../src/store/audit-chain.js";
import type { AuditEntry, AuditRecord } from "../src/store/audit.js";
import {
  approvalOf as approve,
  openTestApp,
  startPortal,
  stopOnceBeforeMove,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { startUndo } from "../src/app/undo.js";
import { ScriptedChatModel, readThenPropose, readThenProposeSet } from "./support/scripted-model.js";

let portal: Portal;
let dataDir: string;
let app: App | undefined;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

/**
 * What a writer of the data directory does: links each entry after the chain's head, with the hash the
 * log's own append would give it (the algorithm is public; no key is involved).
 */
function appendAtTail(entries: AuditEntry[]): void {
  const db = new Database(path.join(dataDir, "journal.sqlite"));
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
  audit: app!.deps.audit,
  thread: (id: string) => threadFromCheckpoints(checkpointReader(app!.checkpointer), id),
  journal: app!.deps.journal,
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
    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Never approved" })),
    });
    const view = await startRun(app, {
      request: "rename task 4 to Never approved",
      requestedBy: "demo-user",
    });
    expect(view.status).toBe("awaiting_approval");
    const head = await app.deps.audit.verify();
    expect(head.intact).toBe(true);
    const anchored = head.intact ? head.head!.hash : "";

    const records = await app.deps.audit.records({ threadId: view.threadId });
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
    expect((await app.deps.audit.verify({ head: anchored })).intact).toBe(true);

    const { exported, check } = await exportedAndChecked(view.threadId);
    const chain = exported.caseRecord.auditChain;
    expect(chain.intact).toBe(false);
    expect(chain.problem).toMatch(/journal/);
    expect(check.confirmed).toBe(false);
    expect(check.problems.join("\n")).toMatch(/journal/);
    // Nothing was decided or sent.
    expect(await portal.writes()).toEqual([]);
    expect((await app.deps.journal.getAction(requested.what.envelopeHash!))?.phase).toBe("registered");
  });

  it("a write that went out, its run stopped before it closed, given a forged NOT_EXECUTED close: the view says the journal holds its write-ahead entry", async () => {
    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "Sent for sure" })),
    });
    const view = await startRun(app, { request: "rename task 4 to Sent for sure", requestedBy: "demo-user" });
    expect(view.status).toBe("awaiting_approval");
    stopOnceBeforeMove(app, "verified");
    await expect(submitDecision(app, view.threadId, approve(view))).rejects.toThrow(/stopped/);
    expect(await portal.writes()).toHaveLength(1);

    const records = await app.deps.audit.records({ threadId: view.threadId });
    const accepted = records.find((r) => r.event === "decision_accepted")!;
    expect(records.some((r) => r.event === "execution_outcome" || r.event === "run_ended")).toBe(false);
    const at = new Date().toISOString();
    appendAtTail([
      forged(accepted, {
        event: "run_ended",
        discriminator: "",
        at,
        approver: accepted.approver,
        outcome: {
          outcome: "NOT_EXECUTED",
          reasonCode: "STALE_STATE",
          reason: "the task changed after approval",
          finishedAt: at,
          flags: notSentFlags,
        },
      }),
    ]);

    const { exported, check } = await exportedAndChecked(view.threadId);
    expect(exported.caseRecord.firstPage.outcome?.outcome).toBe("NOT_EXECUTED");
    expect(exported.caseRecord.auditChain.intact).toBe(false);
    expect(exported.caseRecord.auditChain.problem).toMatch(/write-ahead/);
    expect(check.confirmed).toBe(false);
  });
});

describe("what the program itself records agrees with the journal", () => {
  it("an edit, a partial approval of a change set and an undo: every view's chain is intact", async () => {
    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(readThenPropose(4, { TITLE: "First title" })),
    });
    // An edit (revision 2, approved and VERIFIED), then its undo.
    const edited = await startRun(app, { request: "rename task 4 to First title", requestedBy: "demo-user" });
    const a = edited.approval!;
    const revised = await submitDecision(app, edited.threadId, {
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
    const done = await submitDecision(app, edited.threadId, approve(revised));
    expect(done.state?.outcome).toBe("VERIFIED");
    const undo = await startUndo(app, edited.threadId, "demo-user");
    const undone = await submitDecision(app, undo.threadId, approve(undo));
    expect(undone.state?.outcome).toBe("VERIFIED");
    await app.close();

    app = await openTestApp(portal, dataDir, {
      model: new ScriptedChatModel(
        readThenProposeSet([
          { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
          { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
        ]),
      ),
    });
    const set = await startRun(app, { request: "several changes", requestedBy: "demo-user" });
    const s = set.approval!;
    const partly = await submitDecision(app, set.threadId, {
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
    expect(await portal.writes()).toHaveLength(3);

    for (const threadId of [edited.threadId, undo.threadId, set.threadId]) {
      const found = (await caseOf(caseSource(), threadId))!;
      expect({ threadId, chain: found.caseRecord.auditChain.problem }).toEqual({ threadId, chain: null });
      expect(found.caseRecord.auditChain.intact).toBe(true);
    }
  });
});
