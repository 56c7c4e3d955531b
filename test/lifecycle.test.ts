/**
 * Approval lifecycle with a controllable clock: sweep and escalation, cancel, late decisions after
 * every kind of end, reject-and-revise, and structured input. Every test checks the write count.
 */
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { startRun, submitDecision } from "../src/app/threads.js";
import { sweepExpired } from "../src/app/due-work.js";
import { type App } from "../src/app/open-app.js";
import { type ThreadView } from "../src/app/view-thread.js";
import {
  DecisionSchema,
  defaultPolicy,
  generateApproverKeyPair,
  signDecision,
  signedPayloadOf,
} from "../src/envelope/index.js";
import {
  envFor,
  journalSql,
  openTestApp,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import {
  ScriptedChatModel,
  askThenPropose,
  call,
  readThenPropose,
  type Script,
} from "./support/scripted-model.js";

const REQUEST = "rename task 4 to Quarterly plan";

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
  script: Script = readThenPropose(4, { TITLE: "Quarterly plan" }),
  env: Record<string, string> = {},
) {
  app = await openTestApp(portal, dataDir, { model: new ScriptedChatModel(script), clock: () => now, env });
  return app;
}

/** The journal's claim of a nonce, as its table holds it (undefined when the nonce is unclaimed). */
const claimOf = async (nonce: string) =>
  (
    await journalSql(dataDir, "SELECT decision_type, decided_at FROM T.decision_claims WHERE nonce = ?", [
      nonce,
    ])
  )[0];

function policyWithout(field: "escalationGroup"): string {
  const p = defaultPolicy() as Record<string, unknown>;
  delete p[field];
  const file = path.join(dataDir, "policy.json");
  fs.writeFileSync(file, JSON.stringify(p));
  return file;
}

/** The default policy with self-declared approver ids refused (and signatures as given). */
function strictPolicy(requireSignature: boolean): string {
  const p = defaultPolicy() as { approvers: Record<string, unknown>; requireSignature?: boolean };
  p.approvers = { ...p.approvers, allowUnauthenticated: false };
  p.requireSignature = requireSignature;
  const file = path.join(dataDir, "policy.json");
  fs.writeFileSync(file, JSON.stringify(p));
  return file;
}

const approve = (view: ThreadView, approver = "demo-approver", extra: Record<string, unknown> = {}) => ({
  decisions: [
    {
      type: "approve",
      envelopeHash: view.approval!.envelopeHash,
      nonce: view.approval!.nonce,
      approver: { id: approver },
      ...extra,
    },
  ],
});

function later(view: ThreadView, ms = 1000) {
  now = new Date(Date.parse(view.approval!.expiresAt) + ms);
}

describe("the view a run returns", () => {
  it("is the view a fresh read of the thread gives: at the first pause, after an escalation, after a refused decision, at the end", async () => {
    const app = await open();
    const { viewThread } = await import("../src/app/view-thread.js");
    // As the interfaces print it (JSON): built from the run's own stream, without reading the checkpoint.
    const same = async (returned: ThreadView) =>
      expect(JSON.parse(JSON.stringify(returned))).toEqual(
        JSON.parse(JSON.stringify(await viewThread(app, returned.threadId))),
      );
    const first = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect(first.status).toBe("awaiting_approval");
    await same(first);
    later(first);
    const a = first.approval!;
    const escalated = await submitDecision(app, first.threadId, {
      decisions: [
        { type: "expire", envelopeHash: a.envelopeHash, nonce: a.nonce, by: { id: "system:sweep" } },
      ],
    });
    expect(escalated.approval?.escalatedTo).toBe("task-leads");
    await same(escalated);
    const refused = await submitDecision(app, first.threadId, approve(escalated, "mallory"));
    expect(refused.status).toBe("awaiting_approval");
    expect(refused.approval?.lastRefusal?.code).toBe("APPROVER_NOT_ALLOWED");
    await same(refused);
    const done = await submitDecision(app, first.threadId, approve(escalated, "carol"));
    expect(done.state?.outcome).toBe("VERIFIED");
    await same(done);
  });
});

describe("expiry and sweep", () => {
  it("sweep closes an expired approval through the graph as a system decision (no escalation group)", async () => {
    const app = await open(undefined, { ACTION_ENVELOPE_POLICY: policyWithout("escalationGroup") });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    expect(await sweepExpired(app)).toEqual([]); // not yet expired
    later(view);
    const results = await sweepExpired(app);
    expect(results).toEqual([expect.objectContaining({ threadId: view.threadId, result: "expired" })]);
    const ended = await submitDecision(app, view.threadId, approve(view)).catch((e) => e);
    expect(ended.code).toBe("THREAD_ENDED");
    const { viewThread } = await import("../src/app/view-thread.js");
    const final = await viewThread(app, view.threadId);
    expect(final.state?.reasonCode).toBe("APPROVAL_EXPIRED");
    expect(final.state?.decision?.type).toBe("expire");
    expect(final.state?.decision?.approverId).toBe("system:sweep");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("sweep escalates to the policy's group with a fresh nonce, expiry and baseline; the old approval is dead", async () => {
    const app = await open();
    const first = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    // The task changes while the approval waits; the escalated envelope must see the new state.
    await portal.rest("tasks.task.update", { taskId: 4, fields: { DESCRIPTION: "changed while waiting" } });
    later(first);
    const [res] = await sweepExpired(app);
    expect(res?.result).toBe("escalated");
    const { viewThread } = await import("../src/app/view-thread.js");
    const second = await viewThread(app, first.threadId);
    expect(second.status).toBe("awaiting_approval");
    const a = first.approval!;
    const b = second.approval!;
    expect(b.revision).toBe(2);
    expect(b.nonce).not.toBe(a.nonce);
    expect(b.envelopeHash).not.toBe(a.envelopeHash);
    expect(Date.parse(b.expiresAt)).toBeGreaterThan(now.getTime());
    expect(b.envelope.previousEnvelopeHash).toBe(a.envelopeHash);
    expect(b.envelope.baseline.values["DESCRIPTION"]).toBe("changed while waiting");
    expect(b.escalatedTo).toBe("task-leads");

    const stale = await submitDecision(app, first.threadId, approve(first));
    expect(["STALE_REVISION", "NONCE_MISMATCH", "HASH_MISMATCH"]).toContain(
      stale.state?.refusals.at(-1)?.code,
    );
    const notLead = await submitDecision(app, first.threadId, approve(second, "alice"));
    expect(notLead.state?.refusals.at(-1)?.code).toBe("APPROVER_NOT_ALLOWED");
    expect(await portal.writes()).toHaveLength(1); // only the person's edit

    const done = await submitDecision(app, first.threadId, approve(second, "carol"));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(2);
  });

  it("an escalated approval that expires again ends the run; no second escalation", async () => {
    const app = await open();
    const first = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    later(first);
    await sweepExpired(app);
    const { viewThread } = await import("../src/app/view-thread.js");
    const second = await viewThread(app, first.threadId);
    later(second);
    const [res] = await sweepExpired(app);
    expect(res?.result).toBe("expired");
    expect((await viewThread(app, first.threadId)).state?.reasonCode).toBe("APPROVAL_EXPIRED");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("an expiry decision before expiresAt is refused", async () => {
    const app = await open();
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const after = await submitDecision(app, view.threadId, {
      decisions: [{ type: "expire", envelopeHash: a.envelopeHash, nonce: a.nonce, by: { id: "mallory" } }],
    });
    expect(after.status).toBe("awaiting_approval");
    expect(after.state?.refusals.at(-1)?.code).toBe("NOT_EXPIRED");
  });
});

describe("an editor after escalation", () => {
  /** carol's edit of the waiting approval (a change set: of a1, with a2 approved), self-declared as the policy allows. */
  const editByCarol = (view: ThreadView, fields: Record<string, unknown>, set = false) => {
    const bound = {
      envelopeHash: view.approval!.envelopeHash,
      nonce: view.approval!.nonce,
      approver: { id: "carol" },
    };
    const edit = {
      type: "edit",
      ...bound,
      editedAction: { name: "update_task", args: { taskId: 4, fields } },
    };
    return {
      decisions: set
        ? [
            { ...edit, actionId: "a1" },
            { type: "approve", ...bound, actionId: "a2" },
          ]
        : [edit],
    };
  };

  it("an edited approval escalated after expiry still names its editor, who may not approve it though in the group", async () => {
    const app = await open();
    const first = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const edited = await submitDecision(
      app,
      first.threadId,
      editByCarol(first, { TITLE: "Carol's own title" }),
    );
    expect(edited.approval!.envelope.editedBy).toBe("carol");
    later(edited);
    await sweepExpired(app);
    const { viewThread } = await import("../src/app/view-thread.js");
    const escalated = await viewThread(app, first.threadId);
    expect(escalated.approval).toMatchObject({ escalatedTo: "task-leads", envelope: { editedBy: "carol" } });
    const refused = await submitDecision(app, first.threadId, approve(escalated, "carol"));
    expect(refused.approval?.lastRefusal?.code).toBe("SELF_APPROVAL");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("an edited change set escalated after expiry still names its editor, who may not approve it", async () => {
    const actions = [
      { operation: "update_task", taskId: 4, fields: { PRIORITY: "2" } },
      { operation: "update_task", taskId: 5, fields: { PRIORITY: "0" } },
    ];
    const app = await open((messages) => {
      const tools = messages.filter((m) => m.getType() === "tool").map((m) => (m as { name?: string }).name);
      if (tools.includes("propose_change_set")) return new AIMessage("Proposed; waiting for the human.");
      return tools.includes("get_task_by_id")
        ? new AIMessage({
            content: "",
            tool_calls: [call("propose_change_set", { actions, rationale: "asked" })],
          })
        : new AIMessage({
            content: "",
            tool_calls: [4, 5].map((taskId) => call("get_task_by_id", { taskId })),
          });
    });
    const first = await startRun(app, { request: "several changes", requestedBy: "demo-user" });
    const edited = await submitDecision(app, first.threadId, editByCarol(first, { PRIORITY: "0" }, true));
    expect(edited.approval!.changeSet!.set.editedBy).toBe("carol");
    later(edited);
    await sweepExpired(app);
    const { viewThread } = await import("../src/app/view-thread.js");
    const escalated = await viewThread(app, first.threadId);
    expect(escalated.approval!.escalatedTo).toBe("task-leads");
    expect(escalated.approval!.changeSet!.set.editedBy).toBe("carol");
    const refused = await submitDecision(app, first.threadId, approve(escalated, "carol"));
    expect(refused.approval?.lastRefusal?.code).toBe("SELF_APPROVAL");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("cancel and late decisions", () => {
  it("cancel ends NOT_EXECUTED / CANCELLED, voids the nonce, and a later approval is refused", async () => {
    const app = await open();
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "cancel",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          by: { id: "demo-user" },
          reason: "no longer needed",
        },
      ],
    });
    expect(done.state?.outcome).toBe("NOT_EXECUTED");
    expect(done.state?.reasonCode).toBe("CANCELLED");
    expect(done.state?.reason).toContain("no longer needed");
    expect((await claimOf(a.nonce))?.["decision_type"]).toBe("cancel");
    await expect(submitDecision(app, view.threadId, approve(view))).rejects.toMatchObject({
      code: "THREAD_ENDED",
    });
    expect(await portal.writes()).toHaveLength(0);
  });

  const endings: Array<[string, (app: App, v: ThreadView) => Promise<unknown>]> = [
    ["executed", (app, v) => submitDecision(app, v.threadId, approve(v))],
    [
      "rejected",
      (app, v) =>
        submitDecision(app, v.threadId, {
          decisions: [
            {
              type: "reject",
              envelopeHash: v.approval!.envelopeHash,
              nonce: v.approval!.nonce,
              approver: { id: "bob" },
            },
          ],
        }),
    ],
    [
      "expired",
      async (app, v) => {
        later(v);
        return submitDecision(app, v.threadId, approve(v));
      },
    ],
    [
      "cancelled",
      (app, v) =>
        submitDecision(app, v.threadId, {
          decisions: [
            {
              type: "cancel",
              envelopeHash: v.approval!.envelopeHash,
              nonce: v.approval!.nonce,
              by: { id: "demo-user" },
              reason: "stop",
            },
          ],
        }),
    ],
  ];
  it.each(endings)("a decision after the thread was %s is refused and writes nothing", async (_name, end) => {
    const app = await open();
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    await end(app, view);
    const writesBefore = (await portal.writes()).length;
    now = new Date();
    await expect(submitDecision(app, view.threadId, approve(view, "alice"))).rejects.toMatchObject({
      code: "THREAD_ENDED",
    });
    expect(await portal.writes()).toHaveLength(writesBefore);
  });
});

describe("unverified decisions under a policy that refuses self-declared ids", () => {
  it("an unauthenticated cancel naming the requester is refused; the approval stays pending, nothing written", async () => {
    const app = await open(undefined, { ACTION_ENVELOPE_POLICY: strictPolicy(false) });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const after = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "cancel",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          by: { id: "demo-user" },
          reason: "someone else's cancel",
        },
      ],
    });
    expect(after.status).toBe("awaiting_approval");
    expect(after.state?.refusals.at(-1)?.code).toBe("SIGNATURE_REQUIRED");
    expect(after.state?.outcome ?? null).toBeNull();
    expect(await claimOf(a.nonce)).toBeUndefined();
    expect(await portal.writes()).toHaveLength(0);
  });

  it.each([
    ["self-declared ids refused", false],
    ["signatures required", true],
  ])(
    "anonymous decisions that only name an entitled approver do not use up the refusal budget (%s)",
    async (_name, requireSignature) => {
      const keysDir = tempDir("ae-keys-");
      const key = generateApproverKeyPair("demo-approver");
      fs.writeFileSync(path.join(keysDir, "demo-approver.pub"), `${key.publicKeyLine}\n`);
      const app = await open(undefined, {
        ACTION_ENVELOPE_POLICY: strictPolicy(requireSignature),
        ACTION_ENVELOPE_APPROVER_KEYS: keysDir,
        ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: "3",
      });
      const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
      const a = view.approval!;
      // Unsigned, and signed with a key that is not demo-approver's: neither proves who sent it.
      const forger = generateApproverKeyPair("demo-approver");
      for (let i = 0; i < 3; i++) {
        const unsigned = await submitDecision(app, view.threadId, approve(view));
        expect(unsigned.status).toBe("awaiting_approval");
        expect(unsigned.state?.refusals.at(-1)?.code).toBe("SIGNATURE_REQUIRED");
        const item = DecisionSchema.parse({
          type: "reject",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "demo-approver" },
          decidedAt: new Date().toISOString(),
        });
        const forged = await submitDecision(app, view.threadId, {
          decisions: [
            { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), forger.privateKeyPem) },
          ],
        });
        expect(forged.status).toBe("awaiting_approval");
        expect(forged.state?.refusals.at(-1)?.code).toBe("SIGNATURE_INVALID");
      }
      expect(await portal.writes()).toHaveLength(0);
      // The real approver's signed approval is still accepted and runs the one write.
      const item = DecisionSchema.parse({
        type: "approve",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "demo-approver" },
        decidedAt: new Date().toISOString(),
      });
      const done = await submitDecision(app, view.threadId, {
        decisions: [
          { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), key.privateKeyPem) },
        ],
      });
      expect(done.state?.outcome).toBe("VERIFIED");
      expect(await portal.writes()).toHaveLength(1);
    },
  );

  it("refusals of the verified approver still count: three bad signed decisions end the approval", async () => {
    const keysDir = tempDir("ae-keys-");
    const key = generateApproverKeyPair("demo-approver");
    fs.writeFileSync(path.join(keysDir, "demo-approver.pub"), `${key.publicKeyLine}\n`);
    const app = await open(undefined, {
      ACTION_ENVELOPE_POLICY: strictPolicy(false),
      ACTION_ENVELOPE_APPROVER_KEYS: keysDir,
      ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: "3",
    });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    let last: ThreadView | undefined;
    for (let i = 0; i < 3; i++) {
      const item = DecisionSchema.parse({
        type: "approve",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "demo-approver" },
        decidedAt: new Date().toISOString(),
        override: { gate: "not_a_gate", reason: "x" },
      });
      last = await submitDecision(app, view.threadId, {
        decisions: [
          { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), key.privateKeyPem) },
        ],
      });
    }
    expect(last?.state?.reasonCode).toBe("TOO_MANY_REFUSED_DECISIONS");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("the recorded decision time", () => {
  /** The decision time in every place it is recorded: graph state, the journal's claim, the audit's decision_accepted record. */
  async function recorded(app: App, view: ThreadView, after: ThreadView) {
    const claim = await claimOf(view.approval!.nonce);
    const accepted = (await app.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "decision_accepted",
    ) as { approver?: { decidedAt?: string } } | undefined;
    return {
      state: after.state?.decision?.decidedAt,
      claim: claim?.["decided_at"],
      audit: accepted?.approver?.decidedAt,
    };
  }

  it("an unsigned decision dated 2020-01-01 is recorded at this server's time (state, journal claim, audit), not at its claimed time", async () => {
    const app = await open();
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    now = new Date(now.getTime() + 60_000);
    const after = await submitDecision(
      app,
      view.threadId,
      approve(view, "demo-approver", { decidedAt: "2020-01-01T00:00:00.000Z" }),
    );
    expect(after.state?.outcome).toBe("VERIFIED");
    expect(await recorded(app, view, after)).toEqual({
      state: now.toISOString(),
      claim: now.toISOString(),
      audit: now.toISOString(),
    });
    // What the caller sent (its claimed date included) stays in the record as received, never as the decision time.
    expect(
      (after.state?.decision?.raw as { decisions: Array<{ decidedAt: string }> }).decisions[0]!.decidedAt,
    ).toBe("2020-01-01T00:00:00.000Z");
    expect(await portal.writes()).toHaveLength(1);
  });

  it("a signed decision keeps the decidedAt its signature covers", async () => {
    const keysDir = tempDir("ae-keys-");
    const key = generateApproverKeyPair("demo-approver");
    fs.writeFileSync(path.join(keysDir, "demo-approver.pub"), `${key.publicKeyLine}\n`);
    const app = await open(undefined, { ACTION_ENVELOPE_APPROVER_KEYS: keysDir });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    // Signed 30 s after the approval was created (a signed decision dated before it is refused), received 30 s later.
    const signedAt = new Date(now.getTime() + 30_000).toISOString();
    now = new Date(now.getTime() + 60_000);
    const a = view.approval!;
    const item = DecisionSchema.parse({
      type: "approve",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      approver: { id: "demo-approver" },
      decidedAt: signedAt,
    });
    const after = await submitDecision(app, view.threadId, {
      decisions: [
        { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), key.privateKeyPem) },
      ],
    });
    expect(after.state?.decision?.verifiedBy).toBe("signature");
    expect(await recorded(app, view, after)).toEqual({ state: signedAt, claim: signedAt, audit: signedAt });
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("signed decisions: strict time and encoding (issue 26 row 10)", () => {
  it("a validly signed approval dated 2020, or carrying a valid signature re-encoded, is refused and audited; nothing written; the canonical one then writes once", async () => {
    const keysDir = tempDir("ae-keys-");
    const key = generateApproverKeyPair("demo-approver");
    fs.writeFileSync(path.join(keysDir, "demo-approver.pub"), `${key.publicKeyLine}\n`);
    const app = await open(undefined, { ACTION_ENVELOPE_APPROVER_KEYS: keysDir });
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const signedItem = (decidedAt: string) => {
      const item = DecisionSchema.parse({
        type: "approve",
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "demo-approver" },
        decidedAt,
      });
      return { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), key.privateKeyPem) };
    };
    const backdated = await submitDecision(app, view.threadId, {
      decisions: [signedItem("2020-01-01T00:00:00.000Z")],
    });
    expect(backdated.state?.refusals.at(-1)).toMatchObject({
      code: "MALFORMED",
      reason: expect.stringMatching(
        /^decidedAt 2020-01-01T00:00:00.000Z is before this approval was created/,
      ),
    });

    const good = signedItem(new Date(now.getTime() + 1000).toISOString());
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const reencoded = `${good.signature.slice(0, -3)}${alphabet[alphabet.indexOf(good.signature.at(-3)!) | 1]}==`;
    expect(Buffer.from(reencoded, "base64").equals(Buffer.from(good.signature, "base64"))).toBe(true);
    const noncanonical = await submitDecision(app, view.threadId, {
      decisions: [{ ...good, signature: reencoded }],
    });
    expect(noncanonical.state?.refusals.at(-1)?.code).toBe("SIGNATURE_INVALID");
    expect(noncanonical.status).toBe("awaiting_approval");
    const refused = (await app.deps.audit.records({ threadId: view.threadId })).filter(
      (r) => r.event === "decision_refused",
    );
    expect(refused.map((r) => r.refusal?.code)).toEqual(["MALFORMED", "SIGNATURE_INVALID"]);
    expect(await portal.writes()).toHaveLength(0);

    const after = await submitDecision(app, view.threadId, { decisions: [good] });
    expect(after.state?.decision?.verifiedBy).toBe("signature");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("reject and revise", () => {
  /** Proposes "Quarterly plan"; after a rejection, proposes the value quoted in the feedback. */
  const reviser: Script = (messages: BaseMessage[]) => {
    const feedback = [...messages]
      .reverse()
      .find((m) => m instanceof HumanMessage && String(m.content).includes("rejected"));
    const lastIsTool = messages.at(-1)?.getType() === "tool";
    const quoted = feedback ? /"([^"]+)"/.exec(String(feedback.content))?.[1] : undefined;
    if (!messages.some((m) => m.getType() === "tool"))
      return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
    if (feedback && messages.at(-1) === feedback && quoted) {
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", { taskId: 4, fields: { TITLE: quoted }, rationale: "revised after review" }),
        ],
      });
    }
    if (lastIsTool && (messages.at(-1) as { name?: string }).name === "get_task_by_id") {
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", { taskId: 4, fields: { TITLE: "Quarterly plan" }, rationale: "first try" }),
        ],
      });
    }
    return new AIMessage("Nothing more to propose.");
  };

  it("a rejection with feedback yields a second envelope that executes only after its own approval", async () => {
    const app = await open(reviser);
    const first = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = first.approval!;
    const revised = await submitDecision(app, first.threadId, {
      decisions: [
        {
          type: "reject",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "bob" },
          message: 'use "Quarterly plan 2027" instead',
        },
      ],
    });
    expect(revised.status).toBe("awaiting_approval");
    const b = revised.approval!;
    expect(b.revision).toBe(2);
    expect(b.envelope.params).toEqual({ TITLE: "Quarterly plan 2027" });
    expect(await portal.writes()).toHaveLength(0);
    const done = await submitDecision(app, first.threadId, approve(revised, "bob"));
    expect(done.state?.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { TITLE: "Quarterly plan 2027" } });
  });

  it("past the revision limit a rejection ends REJECTED_BY_HUMAN", async () => {
    const app = await open(reviser, { ACTION_ENVELOPE_MAX_REVISIONS: "1" });
    let view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    for (const title of ["Second", "Third"]) {
      const a = view.approval!;
      view = await submitDecision(app, view.threadId, {
        decisions: [
          {
            type: "reject",
            envelopeHash: a.envelopeHash,
            nonce: a.nonce,
            approver: { id: "bob" },
            message: `use "${title}" instead`,
          },
        ],
      });
    }
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    expect(view.state?.reasonCode).toBe("REJECTED_BY_HUMAN");
    expect(await portal.writes()).toHaveLength(0);
  });

  it("a rejection without a message ends the run", async () => {
    const app = await open(reviser);
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const done = await submitDecision(app, view.threadId, {
      decisions: [{ type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "bob" } }],
    });
    expect(done.state?.reasonCode).toBe("REJECTED_BY_HUMAN");
  });
});

describe("amend", () => {
  it("an edit that widens the action to another task is refused like an out-of-scope proposal", async () => {
    const app = await open();
    const view = await startRun(app, { request: REQUEST, requestedBy: "demo-user" });
    const a = view.approval!;
    const after = await submitDecision(app, view.threadId, {
      decisions: [
        {
          type: "edit",
          envelopeHash: a.envelopeHash,
          nonce: a.nonce,
          approver: { id: "bob" },
          editedAction: { name: "update_task", args: { taskId: 5, fields: { TITLE: "x" } } },
        },
      ],
    });
    expect(after.status).toBe("awaiting_approval");
    expect(after.approval?.envelopeHash).toBe(a.envelopeHash);
    expect(after.state?.refusals.at(-1)?.code).toBe("OUT_OF_SCOPE");
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("structured input", () => {
  const asker = askThenPropose(
    { taskId: { type: "enum", description: "task id", choices: ["1", "4"] } },
    { TITLE: "Renamed after a question" },
  );

  it("asks instead of guessing, refuses an invalid answer, and a valid one leads to a normal approval", async () => {
    const app = await open(asker);
    const asked = await startRun(app, {
      request: "rename the lab task to Renamed after a question",
      requestedBy: "demo-user",
    });
    expect(asked.status).toBe("awaiting_input");
    expect(asked.input?.question).toBe("Which task do you mean?");
    expect(asked.input?.answerSchema).toMatchObject({
      properties: { taskId: { type: "string", enum: ["1", "4"] } },
    });

    const bad = await submitDecision(app, asked.threadId, { answers: { taskId: "9" } });
    expect(bad.status).toBe("awaiting_input");
    expect(bad.input?.lastRefusal?.code).toBe("INVALID_ANSWER");

    const good = await submitDecision(app, asked.threadId, { answers: { taskId: "4" } });
    expect(good.status).toBe("awaiting_approval");
    expect(good.approval?.envelope.object.id).toBe(4);
    expect(good.state?.scope?.taskIds).toEqual([4]);
    expect(await portal.writes()).toHaveLength(0);
    const done = await submitDecision(app, asked.threadId, approve(good));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("CLI", () => {
  it("cancel, answer-less sweep and a late approval through separate processes", async () => {
    const env = envFor(portal, dataDir, {
      ACTION_ENVELOPE_TTL_SECONDS: "1",
      ACTION_ENVELOPE_POLICY: policyWithout("escalationGroup"),
    });
    const run1 = parseJsonOutput((await runCli(["run", "rename task 4 to One", "--json"], env)).stdout);
    const run2 = parseJsonOutput((await runCli(["run", "rename task 4 to Two", "--json"], env)).stdout);
    // No invented canceller: without --as (and no ACTION_ENVELOPE_DEFAULT_APPROVER) nothing is sent (the cancel below still ends it).
    const nobody = await runCli(["cancel", run1.threadId, "--reason", "duplicate", "--json"], {
      ...env,
      ACTION_ENVELOPE_DEFAULT_APPROVER: "",
    });
    expect(nobody.code).not.toBe(0);
    expect(nobody.stderr).toContain("cancel needs who cancels: name it with --as <id>");
    const cancelled = await runCli(
      ["cancel", run1.threadId, "--reason", "duplicate", "--as", "demo-user", "--json"],
      env,
    );
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(parseJsonOutput(cancelled.stdout).reasonCode).toBe("CANCELLED");
    await new Promise((r) => setTimeout(r, 1200));
    const swept = await runCli(["sweep", "--json"], env);
    expect(swept.code, swept.stderr).toBe(0);
    expect(parseJsonOutput(swept.stdout).results).toEqual([
      expect.objectContaining({ threadId: run2.threadId, result: "expired" }),
    ]);
    const late = await runCli(["approve", run2.threadId, "--hash", run2.envelopeHash, "--json"], env);
    expect(late.code).toBe(2);
    expect(parseJsonOutput(late.stdout).refused.code).toBe("THREAD_ENDED");
    expect(await portal.writes()).toHaveLength(0);
  }, 120_000);
});
