/**
 * The graph end to end, in process: scripted model, our MCP server over stdio, the emulator over
 * HTTP, SqliteSaver and the journal on files. Every test counts writes in the emulator's call log.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AIMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { hashEnvelope } from "../src/envelope/index.js";
import { DecisionNotAcceptedError } from "../src/errors.js";
import {
  journalSql,
  openTestApp,
  startPortal,
  stopOnceBefore,
  stopOnceBeforeMove,
  tempDir,
  type Portal,
  TASK_READS_FAIL,
} from "./support/harness.js";
import { ScriptedChatModel, call, readThenPropose, type Script } from "./support/scripted-model.js";

const NEW_TITLE = "LAB-AGENT-EXEC-002 - CLEAN TRUE PATH";
const REQUEST = `rename task 4 to ${NEW_TITLE}`;

let portal: Portal;
let dataDir: string;
let app: App | undefined;
let now: Date;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
  now = new Date();
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await portal.emulator.close();
});

async function open(
  script: Script = readThenPropose(4, { TITLE: NEW_TITLE }),
  extra: Parameters<typeof openTestApp>[2] = {},
) {
  const model = new ScriptedChatModel(script);
  app = await openTestApp(portal, dataDir, { model, clock: () => now, ...extra });
  return { app, model };
}

function approval(view: ThreadView, overrides: Record<string, unknown> = {}) {
  const a = view.approval!;
  return {
    decisions: [
      {
        type: "approve",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "demo-approver" },
        ...overrides,
      },
    ],
  };
}

async function waiting(request = REQUEST, script?: Script, extra?: Parameters<typeof openTestApp>[2]) {
  const { app, model } = await open(script, extra);
  const view = await startRun(app, { request, requestedBy: "demo-user" });
  return { app, model, view };
}

describe("positive path", () => {
  it("ends VERIFIED with exactly one write whose fields deep-equal the approved params", async () => {
    const { app, model, view } = await waiting();
    expect(view.status).toBe("awaiting_approval");
    expect(await portal.writes()).toHaveLength(0);
    const a = view.approval!;
    expect(a.actionRequests[0]).toMatchObject({
      name: "update_task",
      args: { taskId: 4, fields: { TITLE: NEW_TITLE } },
    });
    expect(a.reviewConfigs[0].allowedDecisions).toEqual(["approve", "edit", "reject"]);
    expect(a.envelopeHash).toBe(hashEnvelope(a.envelope));
    expect(a.actionRequests[0].description).toContain(NEW_TITLE);

    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: a.envelope.params });
    expect((await portal.task(4)).title).toBe(NEW_TITLE);
    expect(done.state?.acknowledgement?.status).toBe("OK");
    expect(done.state?.preRead?.verdict).toBe("MATCH");
    expect(done.state?.verification?.verdict).toBe("VERIFIED");
    expect(done.state?.invocation?.args).toEqual({ taskId: 4, fields: a.envelope.params });
    // The model was never offered a write-capable tool.
    const offered = model.boundToolNames.flat();
    expect(offered).toContain("get_task_by_id");
    expect(offered).not.toContain("update_task");
  });
});

describe("before approval", () => {
  it("refuses a proposal that changes nothing (NO_CHANGE) before any approval is shown", async () => {
    const current = (await portal.task(4)).title as string;
    const { app } = await open(readThenPropose(4, { TITLE: current }));
    const view = await startRun(app, { request: `rename task 4 to ${current}`, requestedBy: "demo-user" });
    expect(view.status).toBe("finished");
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("NO_CHANGE");
    expect(view.state?.reason).toContain("TITLE");
    expect(await portal.writes()).toHaveLength(0);
    const records = await app.deps.audit.records({ threadId: view.threadId });
    expect(records.map((r) => r.event)).toEqual(["proposal_denied", "run_ended"]);
    expect(records[0]!.refusal?.code).toBe("NO_CHANGE");
  });

  it("refuses a write-shaped tool call from the model without any call to Bitrix24", async () => {
    const script: Script = () =>
      new AIMessage({
        content: "",
        tool_calls: [call("update_task", { taskId: 4, fields: { TITLE: "pwned" } })],
      });
    const { view } = await waiting(REQUEST, script);
    expect(view.status).toBe("finished");
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("INVALID_PROPOSAL");
    expect(view.state?.reason).toContain("update_task is not available");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("sends an invalid proposal back to the model, then accepts the corrected one", async () => {
    let turn = 0;
    const script: Script = () => {
      turn += 1;
      if (turn === 1)
        return new AIMessage({
          content: "",
          tool_calls: [call("propose_change", { taskId: "four", fields: {}, rationale: "" })],
        });
      return new AIMessage({
        content: "",
        tool_calls: [call("propose_change", { taskId: 4, fields: { TITLE: NEW_TITLE }, rationale: "fixed" })],
      });
    };
    const { view } = await waiting(REQUEST, script);
    expect(view.status).toBe("awaiting_approval");
    const errors = view.state!.messages.filter(
      (m) => m.getType() === "tool" && (m as { status?: string }).status === "error",
    );
    expect(errors).toHaveLength(1);
    expect(String(errors[0]!.content)).toContain("taskId");
  });

  it("denies a proposal for another task before any approval is shown", async () => {
    const { view } = await waiting(REQUEST, readThenPropose(5, { TITLE: NEW_TITLE }));
    expect(view.status).toBe("finished");
    expect(view.state?.reasonCode).toBe("DENIED_BY_POLICY");
    expect(view.state?.reason).toMatch(/task 5/);
    expect(view.state?.envelope).toBeNull();
    expect(await portal.writes()).toHaveLength(0);
  });

  it("denies a proposal that touches a field outside the request's scope", async () => {
    const { view } = await waiting(REQUEST, readThenPropose(4, { TITLE: NEW_TITLE, RESPONSIBLE_ID: "2" }));
    expect(view.state?.reasonCode).toBe("DENIED_BY_POLICY");
    expect(view.state?.reason).toContain("RESPONSIBLE_ID");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("decision validation", () => {
  it("refuses a plain {type:'approve'} without hash and keeps waiting, then executes the bound approval", async () => {
    const { app, view } = await waiting();
    const refused = await submitDecision(app, view.threadId, { decisions: [{ type: "approve" }] });
    expect(refused.status).toBe("awaiting_approval");
    expect(refused.state?.refusals.at(-1)?.code).toBe("MALFORMED");
    expect(refused.approval?.lastRefusal?.code).toBe("MALFORMED");
    expect(await portal.writes()).toHaveLength(0);
    const done = await submitDecision(app, view.threadId, approval(refused));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
  });

  it("refuses a wrong hash and a wrong nonce with their own codes", async () => {
    const { app, view } = await waiting();
    const wrongHash = await submitDecision(
      app,
      view.threadId,
      approval(view, { envelopeHash: `sha256:${"0".repeat(64)}` }),
    );
    expect(wrongHash.state?.refusals.at(-1)?.code).toBe("HASH_MISMATCH");
    const wrongNonce = await submitDecision(app, view.threadId, approval(view, { nonce: "0".repeat(32) }));
    expect(wrongNonce.state?.refusals.at(-1)?.code).toBe("NONCE_MISMATCH");
    expect(wrongNonce.status).toBe("awaiting_approval");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("ends APPROVAL_EXPIRED when the approval arrives after expiresAt", async () => {
    const { app, view } = await waiting();
    now = new Date(Date.parse(view.approval!.expiresAt) + 1000);
    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(done.state?.reasonCode).toBe("APPROVAL_EXPIRED");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("ends APPROVAL_EXPIRED when the approval expires between the decision and the write", async () => {
    // The process stops right after the decision was claimed, before the pre-read is recorded.
    const { app, view } = await waiting();
    stopOnceBeforeMove(app, "pre_read");
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(/move to pre_read/);
    expect((await app.deps.journal.currentAction(view.threadId))?.phase).toBe("decided");
    now = new Date(Date.parse(view.approval!.expiresAt) + 1);
    const done = await recoverThread(app, view.threadId);
    expect(done.state?.reasonCode).toBe("APPROVAL_EXPIRED");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("reads the task again before writing when the pre-read was made by a process that stopped: a change since stops the write", async () => {
    // The process stops after the pre-read was recorded, before the write-ahead entry (nothing sent).
    const { app, view } = await waiting();
    const journal = app.deps.journal;
    stopOnceBefore(app, "beginWrite", "the write-ahead entry was recorded");
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(/write-ahead entry/);
    expect((await journal.currentAction(view.threadId))?.phase).toBe("pre_read");
    // Someone renames the task before the action is recovered.
    expect((await portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "THEIRS" } })).status).toBe(
      200,
    );
    const done = await recoverThread(app, view.threadId);
    expect({ outcome: done.state?.outcome, reasonCode: done.state?.reasonCode }).toEqual({
      outcome: "NOT_EXECUTED",
      reasonCode: "STALE_STATE",
    });
    expect(done.state?.reason).toMatch(/^read again before the write, .*TITLE was .*, now "THEIRS"/);
    expect((await portal.writes()).map((w) => w.params)).toEqual([
      { taskId: 4, fields: { TITLE: "THEIRS" } },
    ]);
    expect((await portal.task(4))["title"]).toBe("THEIRS");
  });

  it("rejects with the message and no write", async () => {
    const { app, view } = await waiting();
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          message: "not this week",
        },
      ],
    });
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(done.state?.reasonCode).toBe("REJECTED_BY_HUMAN");
    expect(done.state?.reason).toContain("not this week");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("turns an edit into a new revision whose own approval is required; the old one is stale", async () => {
    const { app, view } = await waiting();
    const a = view.approval!;
    const edited = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "alice" },
          editedAction: { name: "update_task", args: { taskId: 4, fields: { TITLE: "Edited by a human" } } },
        },
      ],
    });
    expect(edited.status).toBe("awaiting_approval");
    const b = edited.approval!;
    expect(b.revision).toBe(2);
    expect(b.envelopeHash).not.toBe(a.envelopeHash);
    expect(b.nonce).not.toBe(a.nonce);
    expect(b.envelope.params).toEqual({ TITLE: "Edited by a human" });
    expect(await portal.writes()).toHaveLength(0);

    const stale = await submitDecision(app, view.threadId, approval(view, { nonce: b.nonce }));
    expect(stale.state?.refusals.at(-1)?.code).toBe("STALE_REVISION");
    expect(await portal.writes()).toHaveLength(0);

    const done = await submitDecision(app, view.threadId, approval(edited, { approver: { id: "bob" } }));
    expect(done.state?.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { TITLE: "Edited by a human" } });
  });

  it("refuses a decision for a thread that has ended and writes nothing more", async () => {
    const { app, view } = await waiting();
    await submitDecision(app, view.threadId, approval(view));
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(
      DecisionNotAcceptedError,
    );
    await expect(submitDecision(app, "no-such-thread", approval(view))).rejects.toMatchObject({
      code: "NO_SUCH_THREAD",
    });
    expect(await portal.writes()).toHaveLength(1);
  });

  it("cannot spend an approval twice by replaying the checkpoint where it was waiting", async () => {
    const { app, view } = await waiting();
    const resume = approval(view);
    await submitDecision(app, view.threadId, resume);
    expect(await portal.writes()).toHaveLength(1);
    // Time travel: resume the historical checkpoint that was waiting at the interrupt, as Studio can.
    let atInterrupt;
    for await (const snap of app.graph.getStateHistory({ configurable: { thread_id: view.threadId } })) {
      if (snap.next.includes("await_approval") && snap.tasks.some((t) => t.interrupts.length > 0)) {
        atInterrupt = snap;
        break;
      }
    }
    expect(atInterrupt).toBeDefined();
    await app.graph.invoke(new Command({ resume }), { ...atInterrupt!.config, durability: "sync" });
    const forked = await app.graph.getState({ configurable: { thread_id: view.threadId } });
    // The journal holds the action closed: the fork's await_approval is refused and the run goes to
    // where the journal says the thread is (ended, VERIFIED), reporting the journal's outcome.
    expect(forked.values.outcome).toBe("VERIFIED");
    expect(forked.next).toEqual([]);
    expect(await portal.writes()).toHaveLength(1);
    const refusals = (await app.deps.audit.records({ threadId: view.threadId })).filter(
      (r) => r.event === "transition_refused",
    );
    expect(refusals.map((r) => r.refusal?.reason)).toEqual([
      expect.stringContaining("await_approval was reached, but action"),
    ]);
  });
});

describe("crash between consuming the nonce and checkpointing", () => {
  /** What a process that died right after check_decision's journal transaction left behind: the action decided, no checkpoint after it. */
  async function decidedThenCrashed(app: App, view: ThreadView, approverId: string) {
    const a = view.approval!;
    const decidedAt = new Date().toISOString();
    const claimed = await app.deps.journal.decideAction(
      a.envelopeHash,
      {
        threadId: view.threadId,
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        revision: 1,
        decisionType: "approve",
        approverId,
        decidedAt,
      },
      {
        type: "approve",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        revision: 1,
        approverId,
        verifiedBy: "self_declared",
        decidedAt,
        acceptedAt: decidedAt,
        raw: null,
      },
    );
    expect(claimed.claimed).toBe(true);
  }

  it("the approver deciding again continues the accepted approval and executes once", async () => {
    const { app, view } = await waiting();
    await decidedThenCrashed(app, view, "demo-approver");
    const done = await submitDecision(
      app,
      view.threadId,
      approval(view, { decidedAt: new Date().toISOString() }),
    );
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(done.state?.decision?.approverId).toBe("demo-approver");
    expect(await portal.writes()).toHaveLength(1);
  });

  it("a later, different decision does not replace the one the journal accepted first", async () => {
    const { app, view } = await waiting();
    await decidedThenCrashed(app, view, "alice");
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: view.approval!.envelopeHash,
          nonce: view.approval!.nonce,
          approver: { id: "demo-approver" },
          message: "no",
        },
      ],
    });
    // alice's approval was accepted (and recorded) before the crash; it is what runs, once.
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(done.state?.decision).toMatchObject({ type: "approve", approverId: "alice" });
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("pre-read verdicts", () => {
  it("STALE_STATE when the task changed between approval and execution", async () => {
    const { app, view } = await waiting();
    const human = await portal.rest("tasks.task.update", {
      taskId: 4,
      fields: { TITLE: "Changed by a person" },
    });
    expect(human.status).toBe(200);
    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.reasonCode).toBe("STALE_STATE");
    expect(done.state?.preRead?.verdict).toBe("MISMATCH");
    expect(done.state?.preRead?.fields.some((f) => f.field === "TITLE" && f.status !== "match")).toBe(true);
    expect(await portal.writes()).toHaveLength(1); // the person's own edit only
    expect((await portal.task(4)).title).toBe("Changed by a person");
  });

  it("PRECHECK_UNKNOWN when the read answer is not the documented shape", async () => {
    const { app, view } = await waiting();
    await portal.fault({ method: "tasks.task.get", kind: "malformed", times: 1 });
    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.reasonCode).toBe("PRECHECK_UNKNOWN");
    expect(done.state?.preRead?.verdict).toBe("UNKNOWN");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("PRECHECK_ERROR when the read fails", async () => {
    const { app, view } = await waiting();
    await portal.fault(TASK_READS_FAIL);
    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.reasonCode).toBe("PRECHECK_ERROR");
    expect(done.state?.preRead?.verdict).toBe("ERROR");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("NOT_PERMITTED before any approval when the baseline read says the acting user may not edit the task", async () => {
    // The envelope-time read already shows action.edit=false: no card, no approver asked (test/doomed-write.test.ts).
    const { view } = await waiting("rename task 6 to Something", readThenPropose(6, { TITLE: "Something" }));
    expect(view.status).toBe("finished");
    expect(view.approval).toBeUndefined();
    expect(view.state?.reasonCode).toBe("NOT_PERMITTED");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("execution and verification", () => {
  const cases: Array<[string, Record<string, unknown>, string, string, string]> = [
    [
      "target rejection",
      { kind: "error", status: 400, error: "ERROR_CORE", description: "Task title is not specified<br>" },
      "REJECTED_BY_TARGET",
      "ERROR",
      "VERIFICATION_FAILED",
    ],
    ["ack without apply", { kind: "ack_without_apply" }, "VERIFICATION_FAILED", "OK", "VERIFICATION_FAILED"],
    [
      "side effect on another field",
      { kind: "side_effect", field: "PRIORITY", value: "2" },
      "INVARIANT_VIOLATION",
      "OK",
      "INVARIANT_VIOLATION",
    ],
    ["applied, then no answer", { kind: "apply_then_timeout" }, "INCONCLUSIVE", "MISSING", "INCONCLUSIVE"],
    // The emulator never applies it, but the client cannot know that: with no answer the write may
    // still land after the fresh read, so "not applied" would be a guess. A timeout is neither success
    // nor failure: INCONCLUSIVE (the reason says it may still land).
    [
      "no answer, not applied (yet)",
      { kind: "timeout_without_apply" },
      "INCONCLUSIVE",
      "MISSING",
      "INCONCLUSIVE",
    ],
    // A 5xx to a write may come while the portal is carrying it out: outcome unknown, like a lost answer.
    [
      "HTTP 500 to the write",
      { kind: "error", status: 500, error: "INTERNAL_SERVER_ERROR", description: "Internal server error" },
      "INCONCLUSIVE",
      "MISSING",
      "INCONCLUSIVE",
    ],
    // OVERLOAD_LIMIT: the portal blocked the REST API and did not run the call; a refusal, outcome known.
    [
      "HTTP 503 OVERLOAD_LIMIT",
      {
        kind: "error",
        status: 503,
        error: "OVERLOAD_LIMIT",
        description: "REST API is blocked due to overload.",
      },
      "REJECTED_BY_TARGET",
      "ERROR",
      "VERIFICATION_FAILED",
    ],
  ];
  it.each(cases)("%s → %s with exactly one write attempt", async (_name, fault, outcome, ack, verdict) => {
    const { app, view } = await waiting();
    await portal.fault({ method: "tasks.task.update", times: 1, ...fault });
    const done = await submitDecision(app, view.threadId, approval(view));
    expect(done.state?.outcome).toBe(outcome);
    expect(done.state?.acknowledgement?.status).toBe(ack);
    expect(done.state?.verification?.verdict).toBe(verdict);
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("tampering with the checkpoint after approval", () => {
  it("no pause can be asked for between the claim and the write: interruptBefore carry_out does not stop an approval", async () => {
    const { app, view } = await waiting(REQUEST, undefined, {
      compile: { interruptBefore: ["carry_out"] as never },
    });
    const done = await submitDecision(app, view.threadId, approval(view));
    expect({ status: done.status, outcome: done.state?.outcome }).toEqual({
      status: "finished",
      outcome: "VERIFIED",
    });
    expect(await portal.writes()).toHaveLength(1);
  });

  const tampers: Array<[string, (e: any) => any]> = [
    ["params", (e) => ({ ...e, params: { TITLE: "Something else entirely" } })],
    ["target id", (e) => ({ ...e, object: { ...e.object, id: 5 } })],
    [
      "baseline",
      (e) => ({ ...e, baseline: { ...e.baseline, values: { ...e.baseline.values, TITLE: "forged" } } }),
    ],
  ];
  it.each(tampers)(
    "edited %s → ignored: exactly the approved call is written, and the edit is recorded as tampering",
    async (_name, tamper) => {
      const { app, view } = await waiting();
      const approved = view.approval!.envelope;
      // The process stops right after the decision was claimed; its checkpoint stays before that step.
      stopOnceBeforeMove(app, "pre_read");
      await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(/move to pre_read/);
      const paused = await viewThread(app, view.threadId);
      expect({ status: paused.status, next: paused.next }).toEqual({
        status: "interrupted_run",
        next: ["check_decision"],
      });
      const forged = tamper(paused.state!.envelope);
      // An attacker with checkpoint access would update the stored hash too; the journal still holds the approved one.
      await app.graph.updateState(
        { configurable: { thread_id: view.threadId } },
        { envelope: forged, envelopeHash: hashEnvelope(forged) },
      );
      const done = await recoverThread(app, view.threadId);
      expect(done.state?.outcome).toBe("VERIFIED");
      const writes = await portal.writes();
      expect(writes.map((w) => w.params)).toEqual([{ taskId: approved.object.id, fields: approved.params }]);
      const tamper_ = (await app.deps.audit.records({ threadId: view.threadId })).filter(
        (r) => r.event === "tamper_detected",
      );
      expect(tamper_.length).toBeGreaterThan(0);
      expect(tamper_[0]!.refusal?.reason).toContain(hashEnvelope(forged));
    },
  );
});

describe("what Studio sees of the steps after the approval", () => {
  it("each phase streams a custom event: the pre-read verdict, the write sent, the acknowledgement, the verification", async () => {
    const { app, view } = await waiting();
    const events: any[] = [];
    const stream = await app.graph.stream(new Command({ resume: { [view.interruptId!]: approval(view) } }), {
      configurable: { thread_id: view.threadId },
      streamMode: "custom",
    });
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.step)).toEqual(["pre_read", "write", "verify"]);
    for (const e of events)
      expect(e).toMatchObject({ event: "action_envelope_phase", envelopeHash: view.approval!.envelopeHash });
    expect(events[0].preRead).toMatchObject({ verdict: "MATCH" });
    expect(events[1].invocation).toMatchObject({
      tool: "update_task",
      args: { taskId: 4, fields: { TITLE: NEW_TITLE } },
    });
    expect(events[1].acknowledgement).toMatchObject({ status: "OK" });
    expect(events[2].verification).toMatchObject({ verdict: "VERIFIED" });
    // Raw answers stay in the journal.
    expect(JSON.stringify(events)).not.toContain('"result"');
    expect(await portal.writes()).toHaveLength(1);
    expect((await viewThread(app, view.threadId)).state?.outcome).toBe("VERIFIED");
  });
});

describe("what Studio sees of a recovered run whose journal was edited", () => {
  it("a phase event leaves out a part whose seal does not hold and says why (withheld)", async () => {
    const { app, view } = await waiting();
    stopOnceBeforeMove(app, "verified");
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(/move to verified/);
    const hash = view.approval!.envelopeHash;
    // The write-ahead entry's arguments rewritten while the run is stopped before its verification.
    const [entry] = await journalSql(dataDir, "SELECT args_json FROM T.executions WHERE envelope_hash = ?", [
      hash,
    ]);
    await journalSql(dataDir, "UPDATE T.executions SET args_json = ? WHERE envelope_hash = ?", [
      String(entry!["args_json"]).replace(NEW_TITLE, "WRITTEN BY HAND"),
      hash,
    ]);
    const events: any[] = [];
    const stream = await app.graph.stream(null, {
      configurable: { thread_id: view.threadId },
      streamMode: "custom",
    });
    for await (const e of stream) events.push(e);
    expect(events.map((e) => e.step)).toEqual(["verify"]);
    expect(events[0].verification).toMatchObject({ verdict: "VERIFIED" });
    expect(events[0].invocation).toBeUndefined();
    expect(events[0].withheld.invocation).toContain(
      "write-ahead entry of this action does not match its seal",
    );
    expect(JSON.stringify(events)).not.toContain("WRITTEN BY HAND");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("recovery", () => {
  it("a run stopped inside the executor after the write resumes from the journal's phase without a second write", async () => {
    const { app, view } = await waiting();
    // The process stops after the write's answer was recorded and before the verification is: the
    // journal's move to verified fails once, as a crash there would leave it.
    const journal = app.deps.journal;
    stopOnceBeforeMove(app, "verified");
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toThrow(/move to verified/);
    expect((await journal.currentAction(view.threadId))?.phase).toBe("acknowledged");
    expect(await portal.writes()).toHaveLength(1);
    const stopped = await viewThread(app, view.threadId);
    expect({ status: stopped.status, next: stopped.next }).toEqual({
      status: "interrupted_run",
      next: ["check_decision"],
    });
    const done = await recoverThread(app, view.threadId);
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
    await expect(submitDecision(app, view.threadId, approval(view))).rejects.toMatchObject({
      code: "THREAD_ENDED",
    });
  });
});
