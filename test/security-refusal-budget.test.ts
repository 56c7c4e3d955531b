/**
 * A change set under a policy that refuses self-declared approver ids: decisions that only name an
 * entitled approver (unsigned, or signed with someone else's key) and an unauthenticated cancel naming
 * the requester neither end the set's approval nor use up its refused-decision budget. The graph and
 * the emulator over HTTP; writes counted in the emulator's call log.
 */
import fs from "node:fs";
import path from "node:path";
import { AIMessage } from "@langchain/core/messages";
import { describe, expect, it } from "vitest";
import { startRun, submitDecision } from "../src/app/threads.js";
import {
  DecisionSchema,
  defaultPolicy,
  generateApproverKeyPair,
  signDecision,
  signedPayloadOf,
} from "../src/envelope/index.js";
import { eachTestApp, tempDir } from "./support/harness.js";
import { ScriptedChatModel, call, type Script } from "./support/scripted-model.js";

const COMMENT = "Moved to review; please check the numbers.";
const ACTIONS = [
  { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
  { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: COMMENT } },
];

const proposeSet: Script = (messages) => {
  if (messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "propose_change_set"))
    return new AIMessage("Proposed; waiting for the human.");
  if (!messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === "get_task_by_id"))
    return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
  return new AIMessage({
    content: "",
    tool_calls: [call("propose_change_set", { actions: ACTIONS, rationale: "requested by the user" })],
  });
};

const t = eachTestApp();

describe("change set: unverified decisions under a policy that refuses self-declared ids", () => {
  it("neither end the approval nor use up its budget; the approver's signed approval then runs both actions", async () => {
    const policy = defaultPolicy() as { approvers: Record<string, unknown> };
    policy.approvers = { ...policy.approvers, allowUnauthenticated: false };
    const policyFile = path.join(t.dataDir, "policy.json");
    fs.writeFileSync(policyFile, JSON.stringify(policy));
    const keysDir = tempDir("ae-keys-");
    const key = generateApproverKeyPair("demo-approver");
    fs.writeFileSync(path.join(keysDir, "demo-approver.pub"), `${key.publicKeyLine}\n`);
    await t.open({
      model: new ScriptedChatModel(proposeSet),
      env: {
        ACTION_ENVELOPE_POLICY: policyFile,
        ACTION_ENVELOPE_APPROVER_KEYS: keysDir,
        ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: "2",
      },
    });
    const view = await startRun(t.app, {
      request: `set status of task 4 to awaiting control and comment on task 4: ${COMMENT}`,
      requestedBy: "demo-user",
    });
    expect(view.status).toBe("awaiting_approval");
    const a = view.approval!;
    expect(a.changeSet?.actions).toHaveLength(2);
    const forger = generateApproverKeyPair("demo-approver");
    const forged = (type: string, actionId?: string) => {
      const item = DecisionSchema.parse({
        type,
        envelopeHash: a.envelopeHash,
        nonce: a.nonce,
        approver: { id: "demo-approver" },
        decidedAt: new Date().toISOString(),
        ...(actionId ? { actionId } : {}),
      });
      return { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), forger.privateKeyPem) };
    };
    for (let i = 0; i < 3; i++) {
      const whole = await submitDecision(t.app, view.threadId, {
        decisions: [
          { type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
        ],
      });
      expect(whole.status).toBe("awaiting_approval");
      expect(whole.state?.refusals.at(-1)?.code).toBe("SIGNATURE_REQUIRED");
      const perAction = await submitDecision(t.app, view.threadId, {
        decisions: [forged("approve", "a1"), forged("reject", "a2")],
      });
      expect(perAction.status).toBe("awaiting_approval");
      expect(perAction.state?.refusals.at(-1)?.code).toBe("SIGNATURE_INVALID");
      const cancel = await submitDecision(t.app, view.threadId, {
        decisions: [
          {
            type: "cancel",
            envelopeHash: a.envelopeHash,
            nonce: a.nonce,
            by: { id: "demo-user" },
            reason: "not mine to cancel",
          },
        ],
      });
      expect(cancel.status).toBe("awaiting_approval");
      expect(cancel.state?.refusals.at(-1)?.code).toBe("SIGNATURE_REQUIRED");
    }
    expect(await t.portal.writes()).toHaveLength(0);

    const item = DecisionSchema.parse({
      type: "approve",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      approver: { id: "demo-approver" },
      decidedAt: new Date().toISOString(),
    });
    const done = await submitDecision(t.app, view.threadId, {
      decisions: [
        { ...item, signature: signDecision(signedPayloadOf(item, view.threadId), key.privateKeyPem) },
      ],
    });
    expect(done.state?.outcome).toBe("VERIFIED");
    expect((await t.portal.writes()).map((w) => w.method)).toEqual([
      "tasks.task.update",
      "task.commentitem.add",
    ]);
  });
});
