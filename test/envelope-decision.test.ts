import { createPublicKey, generateKeyPairSync } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createEnvelope,
  defaultPolicy,
  generateApproverKeyPair,
  hashEnvelope,
  KeyRegistryError,
  parsePolicy,
  parsePublicKeyLines,
  signDecision,
  signedPayloadOf,
  validateDecision,
  verifyDecisionSignature,
  DecisionSchema,
  type DecisionContext,
  type Envelope,
  type Policy,
  type RefusalCode,
  type SignedDecisionPayload,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";
import defaultJson from "../policy/default.json" with { type: "json" };
import { identityEstablished } from "../src/envelope/decision-identity.js";

const CREATED = new Date("2026-11-30T10:00:00Z");
const NOW = new Date("2026-11-30T10:05:00Z");
const DECIDED = "2026-11-30T10:04:00Z";
const keys = {
  alice: generateApproverKeyPair("alice"),
  carol: generateApproverKeyPair("carol"),
  bob: generateApproverKeyPair("bob"),
};
const registry = parsePublicKeyLines(
  Object.values(keys)
    .map((k) => k.publicKeyLine)
    .join("\n"),
);

function envelope(
  over: { requestedBy?: string; params?: Record<string, unknown>; policy?: Policy } = {},
): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params: over.params ?? { TITLE: "Renamed" },
    task: exampleTask(),
    requestedBy: over.requestedBy ?? "demo-user",
    runContext: { threadId: "thread-1" },
    policy: over.policy ?? defaultPolicy(),
    now: CREATED,
  });
}

function ctx(e: Envelope, over: Partial<DecisionContext> = {}): DecisionContext {
  return {
    now: NOW,
    policy: defaultPolicy(),
    threadId: "thread-1",
    envelopeHash: hashEnvelope(e),
    nonceConsumed: false,
    supersededHashes: [],
    publicKeys: registry,
    scope: { taskIds: [4] },
    ...over,
  };
}

function approve(e: Envelope, approverId = "demo-approver", extra: Record<string, unknown> = {}) {
  return {
    type: "approve",
    envelopeHash: hashEnvelope(e),
    nonce: e.nonce,
    approver: { id: approverId },
    ...extra,
  };
}

/** A decision signed by the approver's private key the way the approver's CLI would. */
function signed(decision: Record<string, unknown>, privateKeyPem: string, threadId = "thread-1") {
  const d = DecisionSchema.parse({ decidedAt: DECIDED, ...decision });
  return { ...d, signature: signDecision(signedPayloadOf(d, threadId), privateKeyPem) };
}

function policyWith(mutate: (j: any) => void): Policy {
  const j = structuredClone(defaultJson) as any;
  mutate(j);
  return parsePolicy(j);
}

describe("validateDecision accepts", () => {
  it("the decision time to record: a signed decision's own decidedAt; an unsigned one at this server's time, its claim kept apart", () => {
    const e = envelope();
    const unsigned = validateDecision(e, approve(e, "alice", { decidedAt: "2020-01-01T00:00:00Z" }), ctx(e));
    expect(unsigned).toMatchObject({
      ok: true,
      decidedAt: NOW.toISOString(),
      claimedDecidedAt: "2020-01-01T00:00:00Z",
    });
    const authenticated = validateDecision(
      e,
      approve(e, "alice", { decidedAt: "2020-01-01T00:00:00Z" }),
      ctx(e, { authenticatedUser: "alice" }),
    );
    expect(authenticated).toMatchObject({
      ok: true,
      identity: { verifiedBy: "authentication" },
      decidedAt: NOW.toISOString(),
    });
    const none = validateDecision(e, approve(e, "alice"), ctx(e));
    expect(none).toMatchObject({ ok: true, decidedAt: NOW.toISOString() });
    expect(none).not.toHaveProperty("claimedDecidedAt");
    const sig = validateDecision(e, signed(approve(e, "alice"), keys.alice.privateKeyPem), ctx(e));
    expect(sig).toMatchObject({ ok: true, identity: { verifiedBy: "signature" }, decidedAt: DECIDED });
    expect(sig).not.toHaveProperty("claimedDecidedAt");
  });

  it("a self-declared approval from an allowed approver when policy allows unauthenticated approvers, recorded as such", () => {
    const e = envelope();
    const r = validateDecision(e, approve(e), ctx(e));
    expect(r).toMatchObject({
      ok: true,
      identity: { approverId: "demo-approver", verifiedBy: "self_declared" },
    });
  });

  it("a signed approval, as verified by signature", () => {
    const e = envelope();
    const r = validateDecision(e, signed(approve(e, "alice"), keys.alice.privateKeyPem), ctx(e));
    expect(r).toMatchObject({ ok: true, identity: { approverId: "alice", verifiedBy: "signature" } });
  });

  it("a signed rejection with its feedback, the message covered by the signature", () => {
    const e = envelope();
    const d = signed(
      { ...approve(e, "alice"), type: "reject", message: "use the Q4 template" },
      keys.alice.privateKeyPem,
    );
    expect(signedPayloadOf(d, "thread-1")).toMatchObject({
      decision: "reject",
      message: "use the Q4 template",
    });
    expect(validateDecision(e, d, ctx(e))).toMatchObject({
      ok: true,
      identity: { approverId: "alice", verifiedBy: "signature" },
      decision: { type: "reject", message: "use the Q4 template" },
    });
  });

  it("an approval from the authenticated user, as verified by authentication", () => {
    const e = envelope();
    const r = validateDecision(e, approve(e, "bob"), ctx(e, { authenticatedUser: "bob" }));
    expect(r).toMatchObject({ ok: true, identity: { approverId: "bob", verifiedBy: "authentication" } });
  });

  it("a rejection by the requester (it cannot be self-serving)", () => {
    const e = envelope({ requestedBy: "alice" });
    const r = validateDecision(
      e,
      {
        type: "reject",
        envelopeHash: hashEnvelope(e),
        nonce: e.nonce,
        approver: { id: "alice" },
        message: "not now",
      },
      ctx(e),
    );
    expect(r).toMatchObject({ ok: true, decision: { type: "reject", message: "not now" } });
  });

  it("an edit, returning the edited proposal checked against policy and scope", () => {
    const e = envelope();
    const edit = {
      type: "edit",
      envelopeHash: hashEnvelope(e),
      nonce: e.nonce,
      approver: { id: "alice" },
      editedAction: { name: "update_task", args: { taskId: 4, fields: { TITLE: "Renamed better" } } },
    };
    const r = validateDecision(e, edit, ctx(e));
    expect(r).toMatchObject({
      ok: true,
      edit: { proposal: { operation: "update_task", taskId: 4, fields: { TITLE: "Renamed better" } } },
    });
  });

  it("a self-approval overridden by a verified override officer, with the override recorded", () => {
    const e = envelope({ requestedBy: "carol" });
    const d = signed(
      approve(e, "carol", {
        override: { gate: "separation_of_duties", reason: "on-call, nobody else reachable" },
      }),
      keys.carol.privateKeyPem,
    );
    const r = validateDecision(e, d, ctx(e));
    expect(r).toMatchObject({
      ok: true,
      override: { gate: "separation_of_duties", by: "carol", reason: "on-call, nobody else reachable" },
    });
  });

  it("a requester approving a change below the separation-of-duties level", () => {
    const policy = policyWith((j) => (j.operations.update_task.level = "low"));
    const e = envelope({ requestedBy: "alice", params: { PRIORITY: "2" }, policy });
    expect(e.risk.level).toBe("low");
    expect(validateDecision(e, approve(e, "alice"), ctx(e, { policy })).ok).toBe(true);
  });
});

describe("validateDecision refuses, with a code and a reason saying what was expected and what arrived", () => {
  type Case = {
    name: string;
    code: RefusalCode;
    run: () => ReturnType<typeof validateDecision>;
    reason: RegExp;
  };
  const e = envelope();
  const h = hashEnvelope(e);
  const other = "sha256:" + "0".repeat(64);
  const later = new Date(Date.parse(e.expiresAt) + 1);
  const cases: Case[] = [
    {
      name: "a decision that is not an object",
      code: "MALFORMED",
      run: () => validateDecision(e, "yes", ctx(e)),
      reason: /expected \{type/,
    },
    {
      name: "a decision without nonce",
      code: "MALFORMED",
      run: () => validateDecision(e, { type: "approve", envelopeHash: h, approver: { id: "alice" } }, ctx(e)),
      reason: /nonce/,
    },
    {
      name: "an unknown decision type",
      code: "MALFORMED",
      run: () => validateDecision(e, { ...approve(e), type: "accept" }, ctx(e)),
      reason: /type/,
    },
    {
      name: "an unexpected key",
      code: "MALFORMED",
      run: () => validateDecision(e, { ...approve(e), args: {} }, ctx(e)),
      reason: /args/,
    },
    {
      name: "a signature without decidedAt",
      code: "MALFORMED",
      run: () => validateDecision(e, { ...approve(e, "alice"), signature: "AAAA" }, ctx(e)),
      reason: /must carry the decidedAt/,
    },
    {
      name: "a decidedAt far in the future",
      code: "MALFORMED",
      run: () => validateDecision(e, approve(e, "alice", { decidedAt: "2026-11-30T10:30:00Z" }), ctx(e)),
      reason: /after now/,
    },
    {
      name: "another envelope's hash",
      code: "HASH_MISMATCH",
      run: () => validateDecision(e, { ...approve(e), envelopeHash: other }, ctx(e)),
      reason: new RegExp(`expected envelopeHash ${h}.*names ${other}`),
    },
    {
      name: "an envelope altered after it was shown",
      code: "HASH_MISMATCH",
      run: () => validateDecision({ ...e, params: { TITLE: "Something else" } }, approve(e), ctx(e)),
      reason: /changed after display/,
    },
    {
      name: "a decision for another thread",
      code: "HASH_MISMATCH",
      run: () => validateDecision(e, approve(e), ctx(e, { threadId: "thread-2" })),
      reason: /belongs to thread thread-1, not to thread thread-2/,
    },
    {
      name: "another nonce",
      code: "NONCE_MISMATCH",
      run: () => validateDecision(e, { ...approve(e), nonce: "f".repeat(32) }, ctx(e)),
      reason: new RegExp(`expected nonce ${e.nonce}`),
    },
    {
      name: "a superseded revision",
      code: "STALE_REVISION",
      run: () =>
        validateDecision(e, { ...approve(e), envelopeHash: other }, ctx(e, { supersededHashes: [other] })),
      reason: /earlier revision; the current revision is 1/,
    },
    {
      name: "a decision after expiry (injected clock)",
      code: "EXPIRED",
      run: () => validateDecision(e, approve(e), ctx(e, { now: later })),
      reason: new RegExp(`closed at ${e.expiresAt}`),
    },
    {
      name: "a spent nonce",
      code: "ALREADY_CONSUMED",
      run: () => validateDecision(e, approve(e), ctx(e, { nonceConsumed: true })),
      reason: /already used/,
    },
    {
      name: "an approver outside the allowed groups",
      code: "APPROVER_NOT_ALLOWED",
      run: () => validateDecision(e, approve(e, "mallory"), ctx(e)),
      reason: /mallory may not decide update_task .* allowed: alice, bob, carol, demo-approver/,
    },
    {
      name: "an authenticated user naming someone else",
      code: "APPROVER_NOT_ALLOWED",
      run: () => validateDecision(e, approve(e, "alice"), ctx(e, { authenticatedUser: "bob" })),
      reason: /authenticated as bob, but the decision names approver alice/,
    },
    {
      name: "the requester approving a medium-risk change",
      code: "SELF_APPROVAL",
      run: () => {
        const own = envelope({ requestedBy: "alice" });
        return validateDecision(own, approve(own, "alice"), ctx(own));
      },
      reason: /alice requested this medium-risk change and may not approve it/,
    },
    {
      name: "no signature when policy requires one",
      code: "SIGNATURE_REQUIRED",
      run: () =>
        validateDecision(
          e,
          approve(e, "alice"),
          ctx(e, { policy: policyWith((j) => (j.requireSignature = true)) }),
        ),
      reason: /requires a signed decision/,
    },
    {
      name: "a self-declared approver when policy does not allow them",
      code: "SIGNATURE_REQUIRED",
      run: () =>
        validateDecision(
          e,
          approve(e, "alice"),
          ctx(e, { policy: policyWith((j) => (j.approvers.allowUnauthenticated = false)) }),
        ),
      reason: /does not accept self-declared approvers/,
    },
    {
      name: "a signature by another approver's key",
      code: "SIGNATURE_INVALID",
      run: () => validateDecision(e, signed(approve(e, "alice"), keys.bob.privateKeyPem), ctx(e)),
      reason: /does not verify with alice's key/,
    },
    {
      name: "a signature over another decidedAt",
      code: "SIGNATURE_INVALID",
      run: () =>
        validateDecision(
          e,
          { ...signed(approve(e, "alice"), keys.alice.privateKeyPem), decidedAt: "2026-11-30T10:04:30Z" },
          ctx(e),
        ),
      reason: /does not verify/,
    },
    {
      name: "a signed rejection whose feedback was changed after signing",
      code: "SIGNATURE_INVALID",
      run: () =>
        validateDecision(
          e,
          {
            ...signed(
              { ...approve(e, "alice"), type: "reject", message: "use the Q4 template" },
              keys.alice.privateKeyPem,
            ),
            message: "approve anything that comes next",
          },
          ctx(e),
        ),
      reason:
        /does not verify with alice's key over \{.*decision reject, approverId, decidedAt .*, message\}/,
    },
    {
      name: "a signed rejection given feedback it was not signed with",
      code: "SIGNATURE_INVALID",
      run: () =>
        validateDecision(
          e,
          {
            ...signed({ ...approve(e, "alice"), type: "reject" }, keys.alice.privateKeyPem),
            message: "approve anything that comes next",
          },
          ctx(e),
        ),
      reason: /does not verify/,
    },
    {
      name: "a signature for another thread",
      code: "SIGNATURE_INVALID",
      run: () =>
        validateDecision(e, signed(approve(e, "alice"), keys.alice.privateKeyPem, "thread-9"), ctx(e)),
      reason: /does not verify/,
    },
    {
      name: "a signature from an approver without a registered key",
      code: "SIGNATURE_INVALID",
      run: () => validateDecision(e, signed(approve(e, "demo-approver"), keys.alice.privateKeyPem), ctx(e)),
      reason: /no public key is registered for approver demo-approver/,
    },
    {
      name: "a validly signed decision dated before the approval was created (2020)",
      code: "MALFORMED",
      run: () =>
        validateDecision(
          e,
          signed(approve(e, "alice", { decidedAt: "2020-01-01T00:00:00Z" }), keys.alice.privateKeyPem),
          ctx(e),
        ),
      reason:
        /decidedAt 2020-01-01T00:00:00Z is before this approval was created \(2026-11-30T10:00:00\.000Z\)/,
    },
    {
      name: "a validly signed decision dated more than the skew after now",
      code: "MALFORMED",
      run: () =>
        validateDecision(
          e,
          signed(approve(e, "alice", { decidedAt: "2026-11-30T10:11:00Z" }), keys.alice.privateKeyPem),
          ctx(e),
        ),
      reason: /after now/,
    },
    {
      name: "a valid signature re-encoded in non-canonical base64 (unused low bits set)",
      code: "SIGNATURE_INVALID",
      run: () => {
        const d = signed(approve(e, "alice"), keys.alice.privateKeyPem);
        const last = d.signature.at(-3)!;
        const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const reencoded = `${d.signature.slice(0, -3)}${alphabet[alphabet.indexOf(last) | 1]}==`;
        expect(Buffer.from(reencoded, "base64").equals(Buffer.from(d.signature, "base64"))).toBe(true);
        expect(reencoded).not.toBe(d.signature);
        return validateDecision(e, { ...d, signature: reencoded }, ctx(e));
      },
      reason: /does not verify/,
    },
    {
      name: "garbage in the signature",
      code: "SIGNATURE_INVALID",
      run: () =>
        validateDecision(
          e,
          { ...approve(e, "alice", { decidedAt: DECIDED }), signature: "not base64!" },
          ctx(e),
        ),
      reason: /does not verify/,
    },
    {
      name: "an override of a gate that can never be overridden",
      code: "OVERRIDE_NOT_ALLOWED",
      run: () =>
        validateDecision(e, approve(e, "carol", { override: { gate: "expiry", reason: "please" } }), ctx(e)),
      reason: /gate expiry can never be overridden/,
    },
    {
      name: "an override by someone without the role",
      code: "OVERRIDE_NOT_ALLOWED",
      run: () => {
        const own = envelope({ requestedBy: "alice" });
        return validateDecision(
          own,
          signed(
            approve(own, "alice", { override: { gate: "separation_of_duties", reason: "x" } }),
            keys.alice.privateKeyPem,
          ),
          ctx(own),
        );
      },
      reason: /needs role override-officer, which alice does not hold/,
    },
    {
      name: "an override by a self-declared officer",
      code: "OVERRIDE_NOT_ALLOWED",
      run: () => {
        const own = envelope({ requestedBy: "carol" });
        return validateDecision(
          own,
          approve(own, "carol", { override: { gate: "separation_of_duties", reason: "x" } }),
          ctx(own),
        );
      },
      reason: /needs a verified identity/,
    },
    {
      name: "an override the policy does not offer",
      code: "OVERRIDE_NOT_ALLOWED",
      run: () =>
        validateDecision(
          e,
          approve(e, "carol", { override: { gate: "separation_of_duties", reason: "x" } }),
          ctx(e, { policy: policyWith((j) => (j.overrides = {})) }),
        ),
      reason: /does not let anyone override separation_of_duties/,
    },
  ];

  it.each(cases.map((c) => [c.code, c.name, c] as const))("%s: %s", (code, _name, c) => {
    const r = c.run();
    expect(r).toMatchObject({ ok: false, code });
    expect(!r.ok && r.reason).toMatch(c.reason);
  });

  it("every refusal code is produced by at least one case", () => {
    const all: RefusalCode[] = [
      "MALFORMED",
      "HASH_MISMATCH",
      "NONCE_MISMATCH",
      "STALE_REVISION",
      "EXPIRED",
      "ALREADY_CONSUMED",
      "APPROVER_NOT_ALLOWED",
      "SELF_APPROVAL",
      "SIGNATURE_REQUIRED",
      "SIGNATURE_INVALID",
      "OVERRIDE_NOT_ALLOWED",
    ];
    const produced = new Set(
      cases.map((c) => {
        const r = c.run();
        return r.ok ? "ok" : r.code;
      }),
    );
    for (const code of all) expect(produced, code).toContain(code);
  });

  it("the approver who wrote a revision by an edit may not approve it either", () => {
    const edited = createEnvelope({
      portal: "127.0.0.1:43210",
      taskId: 4,
      params: { TITLE: "Alice's wording" },
      task: exampleTask(),
      requestedBy: "demo-user",
      editedBy: "alice",
      runContext: { threadId: "thread-1" },
      policy: defaultPolicy(),
      now: CREATED,
      revision: 2,
      previousEnvelopeHash: h,
    });
    expect(validateDecision(edited, approve(edited, "alice"), ctx(edited))).toMatchObject({
      ok: false,
      code: "SELF_APPROVAL",
      reason: expect.stringMatching(/alice wrote \(by an edit\) this medium-risk change/),
    });
    expect(validateDecision(edited, approve(edited, "bob"), ctx(edited)).ok).toBe(true);
  });

  it("expiry is judged by the receiving clock alone: a decidedAt after expiry neither expires a live approval nor revives a dead one", () => {
    const justBefore = new Date(Date.parse(e.expiresAt) - 1000);
    expect(
      validateDecision(e, approve(e, "alice", { decidedAt: e.expiresAt }), ctx(e, { now: justBefore })).ok,
    ).toBe(true);
    expect(
      validateDecision(
        e,
        approve(e, "alice", { decidedAt: "2999-01-01T00:00:00Z" }),
        ctx(e, { now: justBefore }),
      ),
    ).toMatchObject({ ok: false, code: "MALFORMED" });
    expect(
      validateDecision(
        e,
        approve(e, "alice", { decidedAt: justBefore.toISOString() }),
        ctx(e, { now: later }),
      ),
    ).toMatchObject({ ok: false, code: "EXPIRED" });
  });

  it("rejections are bound the same way (hash, nonce, expiry, approver)", () => {
    const reject = (over: Record<string, unknown>) => ({
      type: "reject",
      envelopeHash: h,
      nonce: e.nonce,
      approver: { id: "alice" },
      ...over,
    });
    expect(validateDecision(e, reject({ envelopeHash: other }), ctx(e))).toMatchObject({
      ok: false,
      code: "HASH_MISMATCH",
    });
    expect(validateDecision(e, reject({ nonce: "0".repeat(32) }), ctx(e))).toMatchObject({
      ok: false,
      code: "NONCE_MISMATCH",
    });
    expect(validateDecision(e, reject({}), ctx(e, { now: later }))).toMatchObject({
      ok: false,
      code: "EXPIRED",
    });
    expect(validateDecision(e, reject({ approver: { id: "mallory" } }), ctx(e))).toMatchObject({
      ok: false,
      code: "APPROVER_NOT_ALLOWED",
    });
  });

  it("edits are checked like proposals: scope, operation, field, value, and the envelope's task", () => {
    const edit = (name: string, taskId: number, fields: Record<string, unknown>) => ({
      type: "edit",
      envelopeHash: h,
      nonce: e.nonce,
      approver: { id: "alice" },
      editedAction: { name, args: { taskId, fields } },
    });
    // An edit changes values, never the operation: another operation is refused whatever the policy says of it.
    expect(validateDecision(e, edit("delete_task", 4, { TITLE: "x" }), ctx(e))).toMatchObject({
      ok: false,
      code: "OUT_OF_SCOPE",
      reason: expect.stringMatching(/names operation "delete_task", but this envelope is for update_task/),
    });
    expect(validateDecision(e, edit("add_task_comment", 4, { POST_MESSAGE: "x" }), ctx(e))).toMatchObject({
      ok: false,
      code: "OUT_OF_SCOPE",
    });
    expect(
      validateDecision(
        e,
        edit("update_task", 4, { TITLE: "x" }),
        ctx(e, { scope: { taskIds: [4], fields: ["DEADLINE"] } }),
      ),
    ).toMatchObject({
      ok: false,
      code: "OUT_OF_SCOPE",
      reason: expect.stringMatching(/field TITLE outside/),
    });
    expect(validateDecision(e, edit("update_task", 5, { TITLE: "x" }), ctx(e))).toMatchObject({
      ok: false,
      code: "OUT_OF_SCOPE",
      reason: expect.stringMatching(/targets task 5.*about task 4/),
    });
    expect(validateDecision(e, edit("update_task", 4, { CREATED_BY: 1 }), ctx(e))).toMatchObject({
      ok: false,
      code: "DENIED_FIELD",
    });
    expect(validateDecision(e, edit("update_task", 4, { STATUS: "9" }), ctx(e))).toMatchObject({
      ok: false,
      code: "INVALID_VALUE",
      reason: expect.stringMatching(/STATUS must be one of/),
    });
  });

  it("a signed edit binds the edited fields: changing them after signing breaks the signature", () => {
    const d = signed(
      {
        type: "edit",
        envelopeHash: h,
        nonce: e.nonce,
        approver: { id: "alice" },
        editedAction: { name: "update_task", args: { taskId: 4, fields: { TITLE: "A" } } },
      },
      keys.alice.privateKeyPem,
    );
    expect(validateDecision(e, d, ctx(e)).ok).toBe(true);
    const tampered = {
      ...d,
      editedAction: { name: "update_task", args: { taskId: 4, fields: { TITLE: "B" } } },
    };
    expect(validateDecision(e, tampered, ctx(e))).toMatchObject({ ok: false, code: "SIGNATURE_INVALID" });
  });

  it("property: an approval for any other hash or nonce is never accepted", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[0-9a-f]{64}$/),
        fc.stringMatching(/^[0-9a-f]{32}$/),
        fc.boolean(),
        (hex, nonce, changeHash) => {
          const d = changeHash ? { ...approve(e), envelopeHash: `sha256:${hex}` } : { ...approve(e), nonce };
          fc.pre(changeHash ? `sha256:${hex}` !== h : nonce !== e.nonce);
          expect(validateDecision(e, d, ctx(e)).ok).toBe(false);
        },
      ),
    );
  });
});

describe("approver keys and signatures", () => {
  const payload: SignedDecisionPayload = {
    envelopeHash: "sha256:" + "a".repeat(64),
    nonce: "b".repeat(32),
    threadId: "t",
    decision: "approve",
    approverId: "alice",
    decidedAt: DECIDED,
  };

  it("generateApproverKeyPair gives PEMs and a registry line that parses back to the same key", () => {
    const k = generateApproverKeyPair("alice");
    expect(k.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(k.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect(k.publicKeyLine).toMatch(/^alice ed25519 [A-Za-z0-9+/]+=*$/);
    const map = parsePublicKeyLines(`# approvers\n\n${k.publicKeyLine}\r\n`);
    expect([...map.keys()]).toEqual(["alice"]);
    expect(map.get("alice")!.equals(createPublicKey(k.publicKeyPem))).toBe(true);
    expect(() => generateApproverKeyPair("two words")).toThrow(KeyRegistryError);
  });

  it("a signature verifies over exactly the signed payload and nothing else", () => {
    const sig = signDecision(payload, keys.alice.privateKeyPem);
    const pub = registry.get("alice")!;
    expect(verifyDecisionSignature(payload, sig, pub)).toBe(true);
    expect(verifyDecisionSignature({ ...payload, decision: "reject" }, sig, pub)).toBe(false);
    expect(verifyDecisionSignature(payload, sig, registry.get("bob")!)).toBe(false);
    expect(verifyDecisionSignature(payload, sig.slice(0, -4) + "AAA=", pub)).toBe(false);
    expect(verifyDecisionSignature(payload, "", pub)).toBe(false);
    // Key order of the payload object does not matter: the canonical form is signed.
    const reordered = Object.fromEntries(
      Object.entries(payload).reverse(),
    ) as unknown as SignedDecisionPayload;
    expect(verifyDecisionSignature(reordered, sig, pub)).toBe(true);
  });

  it("the runtime's registry holds public keys only", () => {
    for (const key of registry.values()) expect(key.type).toBe("public");
  });

  const badLines: Array<[string, string, RegExp]> = [
    ["too few fields", "alice ed25519", /2 fields/],
    ["another algorithm", `alice rsa ${keys.alice.publicKeyLine.split(" ")[2]}`, /algorithm "ed25519"/],
    ["non-base64 data", "alice ed25519 !!!", /base64/],
    ["undecodable key", "alice ed25519 AAAA", /SPKI DER/],
    [
      "a duplicate approver",
      `${keys.alice.publicKeyLine}\n${keys.alice.publicKeyLine}`,
      /a second key for alice.*line 2|line 2.*a second key for alice/,
    ],
    [
      "an RSA key",
      `alice ed25519 ${generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "der" }).toString("base64")}`,
      /Ed25519 key on line 1.*rsa/,
    ],
  ];
  it.each(badLines)("parsePublicKeyLines refuses %s, naming the line", (_, text, message) => {
    expect(() => parsePublicKeyLines(text)).toThrow(KeyRegistryError);
    expect(() => parsePublicKeyLines(text)).toThrow(message);
  });
});

describe("size caps on decision fields", () => {
  const e = envelope();
  it("an approver id, nonce or rejection message past its cap is MALFORMED, naming the field", () => {
    const base = {
      type: "approve",
      envelopeHash: hashEnvelope(e),
      nonce: e.nonce,
      approver: { id: "alice" },
    };
    expect(validateDecision(e, { ...base, approver: { id: "a".repeat(129) } }, ctx(e))).toMatchObject({
      ok: false,
      code: "MALFORMED",
      reason: expect.stringContaining("approver.id: approver id is at most 128 characters"),
    });
    expect(validateDecision(e, { ...base, nonce: "n".repeat(129) }, ctx(e))).toMatchObject({
      ok: false,
      code: "MALFORMED",
      reason: expect.stringContaining("nonce"),
    });
    expect(validateDecision(e, { ...base, type: "reject", message: "m".repeat(4001) }, ctx(e))).toMatchObject(
      { ok: false, code: "MALFORMED", reason: expect.stringContaining("at most 4,000 characters") },
    );
    expect(validateDecision(e, { ...base, approver: { id: "a".repeat(128) } }, ctx(e))).toMatchObject({
      ok: false,
      code: "APPROVER_NOT_ALLOWED",
    });
  });
});

describe("identityEstablished: whose refusals may count toward the budget", () => {
  const strict = policyWith((j) => {
    j.approvers.allowUnauthenticated = false;
  });
  const at = (policy: Policy, authenticatedUser?: string) => ({
    policy,
    publicKeys: registry,
    threadId: "thread-1",
    ...(authenticatedUser ? { authenticatedUser } : {}),
  });
  it("self-declared counts only where the policy accepts it; a signature must verify with the named approver's key over this thread", () => {
    const e = envelope();
    expect(identityEstablished(approve(e, "alice"), at(defaultPolicy()))).toBe(
      defaultPolicy().approvers.allowUnauthenticated && !defaultPolicy().requireSignature,
    );
    expect(identityEstablished(approve(e, "alice"), at(strict))).toBe(false);
    expect(identityEstablished(signed(approve(e, "alice"), keys.alice.privateKeyPem), at(strict))).toBe(true);
    expect(identityEstablished(signed(approve(e, "alice"), keys.carol.privateKeyPem), at(strict))).toBe(
      false,
    );
    expect(
      identityEstablished(signed(approve(e, "alice"), keys.alice.privateKeyPem, "thread-2"), at(strict)),
    ).toBe(false);
    expect(identityEstablished(approve(e, "alice"), at(strict, "alice"))).toBe(true);
    expect(identityEstablished(approve(e, "alice"), at(defaultPolicy(), "bob"))).toBe(false);
    expect(identityEstablished({ type: "approve" }, at(defaultPolicy()))).toBe(false);
  });
});
