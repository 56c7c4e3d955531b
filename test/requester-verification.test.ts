/**
 * Verified requesters (issue 26 item 4, issue 30's default requester), in process and through the
 * CLI, with the repository's real default policy (a high-risk change needs a verified requester).
 * The verification is the journal's thread record, taken from the run's auth context when the thread
 * is registered: run input and graph state cannot set or upgrade it. The model is scripted, the
 * emulator runs over HTTP and its call log counts the writes. (Through the API server, open and with
 * tokens: test/api-auth.test.ts.)
 */
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { App } from "../src/app/open-app.js";
import { startRun, submitDecision } from "../src/app/threads.js";
import { generateApproverKeyPair, signRequest, type Envelope } from "../src/envelope/index.js";
import { DEFAULT_POLICY, eachTestApp, envFor, parseJsonOutput, runCli } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose, type Script } from "./support/scripted-model.js";
import { events, readAudit, writeMark, writesSince } from "./support/trust-boundary.js";

const REAL_DEFAULT = { ACTION_ENVELOPE_POLICY: DEFAULT_POLICY };
/** A high-risk change under the default policy (RESPONSIBLE_ID is level high). */
const ASSIGN = readThenPropose(4, { RESPONSIBLE_ID: "7" });
/** A medium-risk change (TITLE). */
const RENAME = readThenPropose(4, { TITLE: "Requester verification" });

const t = eachTestApp("ae-requester-");

async function open(script: Script, opts: { interruptBefore?: string[] } = {}): Promise<App> {
  await t.open({
    model: new ScriptedChatModel(script),
    env: REAL_DEFAULT,
    // "propose" is not in the compile option's type (src/graph/graph.ts) but LangGraph accepts any node.
    ...(opts.interruptBefore
      ? { compile: { interruptBefore: opts.interruptBefore as Array<"propose"> } }
      : {}),
  });
  return t.app;
}

const cfg = (threadId: string, caller?: string) => ({
  configurable: {
    thread_id: threadId,
    // What the LangGraph API server puts into every run of a token-authenticated caller (src/auth/identity.ts).
    ...(caller
      ? { langgraph_auth_user: { identity: caller, is_authenticated: true, permissions: ["role:requester"] } }
      : {}),
  },
  durability: "sync" as const,
});

async function payloadOf(
  threadId: string,
): Promise<
  { kind: string; envelope: Envelope; envelopeHash: string; nonce: string; card?: string } | undefined
> {
  const s = await t.app.graph.getState(cfg(threadId));
  return s.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as never;
}

describe("a self-declared requester (CLI, in process, open server)", () => {
  it("a high-risk change ends REQUESTER_NOT_VERIFIED before any approval: nobody is asked, nothing is read for it or written, audited", async () => {
    await open(ASSIGN);
    const mark = await writeMark(t.portal);
    const view = await startRun(t.app, { request: "assign task 4 to user 7", requestedBy: "dave" });
    expect(view.status).toBe("finished");
    expect(view.state).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "REQUESTER_NOT_VERIFIED" });
    expect(view.state?.reason).toMatch(
      /the requester dave is self-declared .* requires a verified requester .* at or above high risk; this change is high/,
    );
    expect(view.interruptId).toBeUndefined();
    expect(await t.app.deps.journal.currentAction(view.threadId)).toBeUndefined();
    expect(await t.app.deps.journal.getThread(view.threadId)).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "self_declared",
      macValid: true,
    });
    const denied = events(await readAudit(t.dataDir, view.threadId), "proposal_denied");
    expect(denied.map((r) => (r as { refusal?: { code: string } }).refusal?.code)).toEqual([
      "REQUESTER_NOT_VERIFIED",
    ]);
    expect(await writesSince(t.portal, mark)).toEqual([]);
  });

  it("a medium-risk change waits, its card says self-declared, and separation of duties says the name it compares is unverified", async () => {
    await open(RENAME);
    const mark = await writeMark(t.portal);
    const view = await startRun(t.app, {
      request: "rename task 4 to Requester verification",
      requestedBy: "bob",
    });
    expect(view.status).toBe("awaiting_approval");
    const p = (await payloadOf(view.threadId))!;
    expect(p.envelope.requesterVerifiedBy).toBe("self_declared");
    expect((await t.app.deps.journal.currentAction(view.threadId))!.card).toContain(
      "Requested by: bob (self-declared)",
    );
    const self = {
      decisions: [{ type: "approve", envelopeHash: p.envelopeHash, nonce: p.nonce, approver: { id: "bob" } }],
    };
    const after = await submitDecision(t.app, view.threadId, self);
    expect(after.status).toBe("awaiting_approval");
    const refusal = (await t.app.deps.journal.currentAction(view.threadId))!.progress.lastRefusal;
    expect(refusal?.code).toBe("SELF_APPROVAL");
    expect(refusal?.reason).toMatch(
      /bob requested this medium-risk change and may not approve it .*\(requester bob is self-declared: the comparison is with the name given, which nothing checked\)/,
    );
    expect(await writesSince(t.portal, mark)).toEqual([]);
    const other = {
      decisions: [
        { type: "approve", envelopeHash: p.envelopeHash, nonce: p.nonce, approver: { id: "alice" } },
      ],
    };
    const done = await submitDecision(t.app, view.threadId, other);
    expect(done.state).toMatchObject({ outcome: "VERIFIED" });
    expect((await writesSince(t.portal, mark)).map((w) => w.method)).toEqual(["tasks.task.update"]);
  });

  it("the CLI's run --as says why and exits 2; nothing is written", async () => {
    const mark = await writeMark(t.portal);
    const r = await runCli(
      ["run", "--as", "dave", "assign task 4 to user 7"],
      envFor(t.portal, t.dataDir, REAL_DEFAULT),
    );
    expect(r.code, r.stderr).toBe(2);
    expect(`${r.stdout}\n${r.stderr}`).toMatch(/REQUESTER_NOT_VERIFIED/);
    expect(`${r.stdout}\n${r.stderr}`).toMatch(/dave is self-declared/);
    expect(await writesSince(t.portal, mark)).toEqual([]);
  });
});

describe("a token-authenticated caller", () => {
  it("is the requester: the thread records authentication, the card says verified, and a high-risk change goes to approval", async () => {
    await open(ASSIGN);
    const threadId = randomUUID();
    await t.app.graph.invoke({ request: "assign task 4 to user 7" } as never, cfg(threadId, "dave"));
    const p = (await payloadOf(threadId))!;
    expect(p.kind).toBe("approval");
    expect(p.envelope).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "authentication",
      risk: { level: "high" },
    });
    expect((await t.app.deps.journal.currentAction(threadId))!.card).toContain(
      "Requested by: dave (verified: API token)",
    );
    expect(await t.app.deps.journal.getThread(threadId)).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "authentication",
    });
  });

  it("a run naming another requester is refused REQUESTER_NOT_CALLER; nothing is registered or written", async () => {
    await open(ASSIGN);
    const mark = await writeMark(t.portal);
    const threadId = randomUUID();
    const out = (await t.app.graph.invoke(
      { request: "assign task 4 to user 7", requestedBy: "bob" } as never,
      cfg(threadId, "dave"),
    )) as { outcome?: string; reasonCode?: string; reason?: string };
    expect(out).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "INVALID_INPUT" });
    expect(out.reason).toMatch(
      /^REQUESTER_NOT_CALLER: input field "requestedBy" is "bob", but the run is authenticated as dave/,
    );
    expect(await t.app.deps.journal.currentAction(threadId)).toBeUndefined();
    expect(await writesSince(t.portal, mark)).toEqual([]);
  });
});

describe("graph state cannot upgrade the requester", () => {
  it("rewriting requestedBy in state and continuing as an authenticated caller changes nothing: still self-declared, REQUESTER_NOT_VERIFIED, no write", async () => {
    await open(ASSIGN, { interruptBefore: ["propose"] });
    const mark = await writeMark(t.portal);
    const threadId = randomUUID();
    await t.app.graph.invoke(
      { request: "assign task 4 to user 7", requestedBy: "mallory" } as never,
      cfg(threadId),
    );
    expect((await t.app.graph.getState(cfg(threadId))).next).toEqual(["propose"]);
    // Whatever a caller of the graph can write: the requester channel (and a field the journal keeps, which state does not have).
    await t.app.graph.updateState(cfg(threadId), {
      requestedBy: "dave",
      requesterVerifiedBy: "authentication",
    } as never);
    // Continued by a token-authenticated caller: the thread was registered before, so its record stands.
    await t.app.graph.invoke(null as never, cfg(threadId, "dave"));
    const values = (await t.app.graph.getState(cfg(threadId))).values as {
      outcome?: string;
      reasonCode?: string;
      reason?: string;
    };
    expect(values).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "REQUESTER_NOT_VERIFIED" });
    expect(values.reason).toMatch(/the requester mallory is self-declared/);
    expect(await t.app.deps.journal.getThread(threadId)).toMatchObject({
      requestedBy: "mallory",
      requesterVerifiedBy: "self_declared",
      macValid: true,
    });
    expect(await writesSince(t.portal, mark)).toEqual([]);
  });
});

describe("a signed request (run --key)", () => {
  /** dave's key pair, his public key registered in the key file the runtime reads, his private key 0600. */
  function daveKeys(): { env: Record<string, string>; pem: string; keyFile: string } {
    const pair = generateApproverKeyPair("dave");
    const keysFile = path.join(t.dataDir, "keys.pub");
    fs.writeFileSync(keysFile, `${pair.publicKeyLine}\n`, { mode: 0o644 });
    const keyFile = path.join(t.dataDir, "dave.pem");
    fs.writeFileSync(keyFile, pair.privateKeyPem, { mode: 0o600 });
    return {
      env: { ...REAL_DEFAULT, ACTION_ENVELOPE_APPROVER_KEYS: keysFile },
      pem: pair.privateKeyPem,
      keyFile,
    };
  }
  const REQUEST = "assign task 4 to user 7";

  it("a valid signature records the requester as verified by signature: the high-risk change waits, the card says so", async () => {
    const keys = daveKeys();
    await t.open({ model: new ScriptedChatModel(ASSIGN), env: keys.env });
    const threadId = randomUUID();
    const requesterSignature = signRequest(
      { kind: "request", threadId, request: REQUEST, requestedBy: "dave", scope: {} },
      keys.pem,
    );
    const view = await startRun(
      t.app,
      { request: REQUEST, requestedBy: "dave", requesterSignature },
      { threadId },
    );
    expect(view.status, JSON.stringify(view.state)).toBe("awaiting_approval");
    expect(await t.app.deps.journal.getThread(threadId)).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "signature",
      macValid: true,
    });
    expect(view.approval?.envelope).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "signature",
      risk: { level: "high" },
    });
    expect((await t.app.deps.journal.currentAction(threadId))!.card).toContain(
      "Requested by: dave (verified: signature)",
    );
  });

  it.each([
    [
      "signed for another thread",
      (p: ReturnType<typeof daveKeys>, threadId: string) =>
        signRequest(
          { kind: "request", threadId: `${threadId}x`, request: REQUEST, requestedBy: "dave", scope: {} },
          p.pem,
        ),
    ],
    [
      "signed for another request",
      (p: ReturnType<typeof daveKeys>, threadId: string) =>
        signRequest(
          { kind: "request", threadId, request: "rename task 4", requestedBy: "dave", scope: {} },
          p.pem,
        ),
    ],
    [
      "signed by another key",
      (_p: ReturnType<typeof daveKeys>, threadId: string) =>
        signRequest(
          { kind: "request", threadId, request: REQUEST, requestedBy: "dave", scope: {} },
          generateApproverKeyPair("dave").privateKeyPem,
        ),
    ],
    ["not base64", () => "not a signature"],
  ])(
    "a signature %s is refused REQUESTER_SIGNATURE_INVALID: nothing is registered, read or written",
    async (_what, forge) => {
      const keys = daveKeys();
      await t.open({ model: new ScriptedChatModel(ASSIGN), env: keys.env });
      const mark = await writeMark(t.portal);
      const threadId = randomUUID();
      const view = await startRun(
        t.app,
        { request: REQUEST, requestedBy: "dave", requesterSignature: forge(keys, threadId) },
        { threadId },
      );
      expect(view.state).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "INVALID_INPUT" });
      expect(view.state?.reason).toMatch(
        /^REQUESTER_SIGNATURE_INVALID: the signature is not dave's canonical Ed25519 signature over this request/,
      );
      expect(await t.app.deps.journal.currentAction(threadId)).toBeUndefined();
      expect(await writesSince(t.portal, mark)).toEqual([]);
    },
  );

  it("a signed request from a requester with no registered key is refused, naming the key registry", async () => {
    const keys = daveKeys();
    await t.open({ model: new ScriptedChatModel(ASSIGN), env: keys.env });
    const threadId = randomUUID();
    const requesterSignature = signRequest(
      { kind: "request", threadId, request: REQUEST, requestedBy: "erin", scope: {} },
      keys.pem,
    );
    const view = await startRun(
      t.app,
      { request: REQUEST, requestedBy: "erin", requesterSignature },
      { threadId },
    );
    expect(view.state?.reason).toMatch(
      /^REQUESTER_SIGNATURE_INVALID: the request is signed, but no key is registered for erin in ACTION_ENVELOPE_APPROVER_KEYS/,
    );
    expect(await t.app.deps.journal.currentAction(threadId)).toBeUndefined();
  });

  it("the CLI's run --as dave --key signs the request: the approval waits with the requester verified by signature", async () => {
    const keys = daveKeys();
    const mark = await writeMark(t.portal);
    const r = await runCli(
      ["run", "--as", "dave", "--key", keys.keyFile, "--json", REQUEST],
      envFor(t.portal, t.dataDir, keys.env),
    );
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout) as { threadId: string; status: string };
    expect(out.status).toBe("awaiting_approval");
    await t.open({ env: keys.env });
    expect(await t.app.deps.journal.getThread(out.threadId)).toMatchObject({
      requestedBy: "dave",
      requesterVerifiedBy: "signature",
      macValid: true,
    });
    expect(await writesSince(t.portal, mark)).toEqual([]);
    await t.close();
    // Every listing says how the requester was established, like the card: pending, audit list, audit show.
    const env = envFor(t.portal, t.dataDir, keys.env);
    const pending = await runCli(["pending"], env);
    expect(pending.stdout).toMatch(new RegExp(`${out.threadId} .* by dave \\(verified: signature\\)`));
    const pendingJson = parseJsonOutput((await runCli(["pending", "--json"], env)).stdout) as {
      pending: Array<{ threadId: string; requesterVerifiedBy: string }>;
    };
    expect(pendingJson.pending.find((p) => p.threadId === out.threadId)).toMatchObject({
      requesterVerifiedBy: "signature",
    });
    expect((await runCli(["audit", "list"], env)).stdout).toMatch(
      new RegExp(`${out.threadId}  by dave \\(verified: signature\\)`),
    );
    const show = await runCli(["audit", "show", out.threadId], env);
    expect(show.stdout).toContain("Requested by:  dave (verified: signature)");
    expect(
      parseJsonOutput((await runCli(["audit", "show", out.threadId, "--json"], env)).stdout),
    ).toMatchObject({ caseRecord: { firstPage: { requesterVerifiedBy: "signature" } } });
  });
});
