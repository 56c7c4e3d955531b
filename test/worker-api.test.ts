/**
 * `worker --api URL`: approvals the LangGraph API server keeps expire on time through the server. The
 * real dev server with a token file, and worker processes sharing its journal (the same data directory,
 * or its PostgreSQL schema on the PostgreSQL pass) with an admin token. Two workers racing expire one
 * approval once (journal lease, then the server's decision claim); the server's run escalates it with a
 * fresh envelope as the default policy says; an approval not yet expired is left alone, and an early
 * expiry sent straight to the server is refused by its clock. Writes are counted in the emulator's log.
 *
 * A run the server stopped between steps (its write-ahead entry committed, then nothing: the served
 * graph of test/support/stalling-served-graph.ts stops the run there and the test cancels it) is
 * finished by `recover --api` or `worker --api` with an admin token: the server continues it from its
 * journal, one write in the emulator's log, the outcome from the verification read.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import {
  envFor,
  parseJsonOutput,
  runCli,
  selfDeclaredRequestersPolicy,
  startPortal,
  tempDir,
  until,
  type Portal,
} from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { closings, events, readAudit } from "./support/trust-boundary.js";
import { adminQuery, schemaFor, usingPostgres } from "./support/postgres.js";
import Database from "better-sqlite3";
import { newApiToken } from "../src/auth/tokens.js";
import { STALL_MARK } from "./support/stalling-served-graph.js";

const GRAPH_ID = "bitrix24_task_agent";
/** A renamed title waits this long; other fields keep the policy's hour. */
const TITLE_TTL_SECONDS = 3;

let portal: Portal;
let dataDir: string;
let env: Record<string, string>;
let server: RunningDevServer;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  const tokenFile = path.join(tempDir("ae-worker-api-tokens-"), "api-tokens.json");
  const entries = Object.entries({ dave: ["requester"], bob: ["approver"], sweeper: ["admin"] } as const).map(
    ([identity, roles]) => {
      const made = newApiToken(identity, [...roles]);
      tokens[identity] = made.token;
      return made.entry;
    },
  );
  fs.writeFileSync(tokenFile, JSON.stringify({ tokens: entries }, null, 2));
  const policy = selfDeclaredRequestersPolicy((p) => {
    p.operations.update_task.fields.TITLE.ttlSeconds = TITLE_TTL_SECONDS;
  });
  portal = await startPortal();
  dataDir = tempDir("ae-worker-api-");
  env = envFor(portal, dataDir, {
    ACTION_ENVELOPE_POLICY: policy,
    ACTION_ENVELOPE_API_TOKENS: tokenFile,
    // A write whose answer was lost is re-sent with its key on recovery (the emulator keeps the answer).
    BITRIX24_IDEMPOTENCY: "on",
    // A stopped run is due for a worker this long after its last step.
    ACTION_ENVELOPE_RESUME_GRACE_MS: "500",
  });
  server = await startDevServer(env, {
    graphs: { [GRAPH_ID]: "test/support/stalling-served-graph.ts:graph" },
  });
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

const clientAs = (who: string) =>
  new Client({
    apiUrl: server.apiUrl,
    apiKey: null,
    defaultHeaders: { Authorization: `Bearer ${tokens[who]}` },
    callerOptions: { maxRetries: 0 },
  });

interface Waiting {
  envelopeHash: string;
  nonce: string;
  expiresAt: string;
  escalatedTo?: string;
}

async function waitingOf(client: Client, threadId: string): Promise<Waiting | undefined> {
  const state = await client.threads.getState(threadId);
  const value = state.tasks.flatMap((t) => t.interrupts ?? [])[0]?.value as
    (Waiting & { kind: string }) | undefined;
  return value?.kind === "approval" ? value : undefined;
}

async function startWaiting(request: string): Promise<{ threadId: string; waiting: Waiting }> {
  const dave = clientAs("dave");
  const thread = await dave.threads.create();
  await dave.runs.wait(thread.thread_id, GRAPH_ID, { input: { request } });
  const waiting = await waitingOf(dave, thread.thread_id);
  expect(waiting, `${request}: no approval is waiting`).toBeDefined();
  return { threadId: thread.thread_id, waiting: waiting! };
}

/** Which side the shared journal records as keeping the thread's checkpoints (src/store/keeper.ts). */
async function keeperOf(threadId: string): Promise<string | null | undefined> {
  if (usingPostgres)
    return (
      await adminQuery<{ keeper: string | null }>(
        `SELECT keeper FROM ${schemaFor(dataDir)}.threads WHERE thread_id = $1`,
        [threadId],
      )
    )[0]?.keeper;
  const db = new Database(path.join(dataDir, "journal.sqlite"), { readonly: true, fileMustExist: true });
  try {
    return (
      db.prepare("SELECT keeper FROM threads WHERE thread_id = ?").get(threadId) as
        { keeper: string | null } | undefined
    )?.keeper;
  } finally {
    db.close();
  }
}

type Round = {
  error?: string;
  swept: Array<{ threadId: string; result: string; detail: string }>;
  recovered: Array<{ threadId: string }>;
};

describe("worker --api", () => {
  it("two workers racing expire a server thread's approval once: escalated inside the server's run, audited once, nothing written; one not yet expired is left alone", async () => {
    const expiring = await startWaiting("rename task 4 to NEVER APPROVED OVER THE API");
    const open = await startWaiting("set deadline of task 4 to 2026-07-01T18:00:00+03:00");
    expect(Date.parse(open.waiting.expiresAt) - Date.now()).toBeGreaterThan(60_000);
    await until(
      "the approval to expire",
      async () => Date.now() > Date.parse(expiring.waiting.expiresAt) + 200,
    );

    // The journal records the server's threads as the server's: a plain worker on the same journal
    // claims none of them (so it does not defer them a minute for the API workers either).
    expect(await keeperOf(expiring.threadId)).toBe("api");
    const local = await runCli(["worker", "--once", "--json"], env);
    expect(local.code, local.stdout + local.stderr).toBe(0);
    expect(parseJsonOutput(local.stdout)).toMatchObject({ swept: [], recovered: [] });

    const workerEnv = { ...env, LANGGRAPH_API_TOKEN: tokens["sweeper"]! };
    const runs = await Promise.all(
      [1, 2].map(() => runCli(["worker", "--api", server.apiUrl, "--once", "--json"], workerEnv)),
    );
    const rounds = runs.map((r) => {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const round = parseJsonOutput(r.stdout) as Round;
      expect(round.error, r.stdout).toBeUndefined();
      return round;
    });
    const swept = rounds.flatMap((r) => r.swept);
    expect(swept.filter((s) => s.threadId === open.threadId)).toEqual([]);
    const done = swept.filter((s) => s.threadId === expiring.threadId && s.result !== "skipped");
    expect(done, JSON.stringify(rounds)).toHaveLength(1);
    expect(done[0]!.result).toBe("escalated");

    // Through the API: a fresh envelope for the escalation group, the expired one superseded.
    const after = await waitingOf(clientAs("sweeper"), expiring.threadId);
    expect(after).toBeDefined();
    expect(after!.envelopeHash).not.toBe(expiring.waiting.envelopeHash);
    expect(after!.escalatedTo).toBe("task-leads");
    const audit = await readAudit(dataDir, expiring.threadId);
    const expired = events(audit, "approval_expired");
    expect(expired).toHaveLength(1);
    expect(expired[0]!.what?.envelopeHash).toBe(expiring.waiting.envelopeHash);
    // With a token, who expired it is the authenticated caller the server filled in.
    expect(expired[0]!["approver"]).toMatchObject({ id: "sweeper", verifiedBy: "authentication" });

    // The approval not yet expired: untouched by the round, still the same envelope, nothing audited.
    expect((await waitingOf(clientAs("sweeper"), open.threadId))?.envelopeHash).toBe(
      open.waiting.envelopeHash,
    );
    expect(events(await readAudit(dataDir, open.threadId), "approval_expired")).toEqual([]);
    expect(await portal.writes()).toHaveLength(0);
  });

  it("an admin token sends a system expiry and nothing else; an early expiry is refused by the server's clock", async () => {
    const open = await startWaiting("set deadline of task 4 to 2026-08-01T18:00:00+03:00");
    const sweeper = clientAs("sweeper");
    const decision = { envelopeHash: open.waiting.envelopeHash, nonce: open.waiting.nonce };
    await expect(
      sweeper.runs.wait(open.threadId, GRAPH_ID, {
        command: { resume: { decisions: [{ type: "approve", ...decision }] } },
      }),
    ).rejects.toThrow(/admin for a system expiry alone/);

    await sweeper.runs.wait(open.threadId, GRAPH_ID, {
      command: { resume: { decisions: [{ type: "expire", ...decision }] } },
    });
    expect((await waitingOf(sweeper, open.threadId))?.envelopeHash).toBe(open.waiting.envelopeHash);
    const audit = await readAudit(dataDir, open.threadId);
    expect(events(audit, "decision_refused").map((r) => r.refusal?.code)).toEqual(["NOT_EXPIRED"]);
    expect(events(audit, "approval_expired")).toEqual([]);
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("sweep --api", () => {
  it("one pass expires a server thread's approval past its expiry through the API", async () => {
    const expiring = await startWaiting("rename task 4 to SWEPT OVER THE API");
    await until(
      "the approval to expire",
      async () => Date.now() > Date.parse(expiring.waiting.expiresAt) + 200,
    );
    const r = await runCli(["sweep", "--api", server.apiUrl, "--json"], {
      ...env,
      LANGGRAPH_API_TOKEN: tokens["sweeper"]!,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const { results } = parseJsonOutput(r.stdout) as { results: Round["swept"] };
    expect(results.filter((s) => s.threadId === expiring.threadId)).toMatchObject([{ result: "escalated" }]);
    expect(events(await readAudit(dataDir, expiring.threadId), "approval_expired")).toHaveLength(1);
    expect(await portal.writes()).toHaveLength(0);
  });
});

/** The phase the shared journal records for an action (src/store/action-machine.ts). */
async function phaseOf(envelopeHash: string): Promise<string | undefined> {
  if (usingPostgres)
    return (
      await adminQuery<{ phase: string }>(
        `SELECT phase FROM ${schemaFor(dataDir)}.actions WHERE envelope_hash = $1`,
        [envelopeHash],
      )
    )[0]?.phase;
  const db = new Database(path.join(dataDir, "journal.sqlite"), { readonly: true, fileMustExist: true });
  try {
    return (
      db.prepare("SELECT phase FROM actions WHERE envelope_hash = ?").get(envelopeHash) as
        { phase: string } | undefined
    )?.phase;
  } finally {
    db.close();
  }
}

/** The portal's writes that carry `text`. */
const writesOf = async (text: string) =>
  (await portal.writes()).filter((w) => JSON.stringify(w.params).includes(text));

/**
 * An approved action whose run the server stopped right after the journal committed its write-ahead
 * entry: the approval's run stalls there (stalling-served-graph.ts) and is cancelled, nothing sent.
 */
async function stoppedAfterIntent(taskId: number, text: string): Promise<{ threadId: string }> {
  const { threadId, waiting } = await startWaiting(`set description of task ${taskId} to ${text}`);
  const bob = clientAs("bob");
  const run = await bob.runs.create(threadId, GRAPH_ID, {
    command: {
      resume: { decisions: [{ type: "approve", envelopeHash: waiting.envelopeHash, nonce: waiting.nonce }] },
    },
  });
  await until("the write-ahead entry", async () => (await phaseOf(waiting.envelopeHash)) === "intent");
  await bob.runs.cancel(threadId, run.run_id, true, "interrupt");
  expect(await writesOf(text)).toEqual([]);
  expect((await clientAs("sweeper").threads.getState(threadId)).next).toEqual(["check_decision"]);
  return { threadId };
}

describe("recover --api", () => {
  it("an admin token finishes a run the server stopped after the write's intent: one write, VERIFIED; other roles are refused; a second recover does nothing", async () => {
    const text = `${STALL_MARK} RECOVERED`;
    const { threadId } = await stoppedAfterIntent(4, text);
    const recover = (who: string) =>
      runCli(["recover", threadId, "--api", server.apiUrl, "--json"], {
        ...env,
        LANGGRAPH_API_TOKEN: tokens[who]!,
      });

    for (const who of ["dave", "bob"]) {
      const refused = await recover(who);
      expect(refused.code, refused.stdout + refused.stderr).not.toBe(0);
      expect(refused.stderr + refused.stdout).toMatch(/needs the role admin/);
    }
    expect(await writesOf(text)).toEqual([]);

    const r = await recover("sweeper");
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(parseJsonOutput(r.stdout)).toMatchObject({
      threadId,
      status: "finished",
      outcome: "VERIFIED",
      verification: { verdict: "VERIFIED" },
    });
    expect(await writesOf(text)).toHaveLength(1);
    expect((await portal.task(4))["description"]).toBe(text);
    expect(closings(await readAudit(dataDir, threadId))).toHaveLength(1);

    const again = await recover("sweeper");
    expect(again.code, again.stdout + again.stderr).toBe(1);
    expect(again.stderr).toMatch(/nothing to recover \(status finished\)/);
    expect(await writesOf(text)).toHaveLength(1);
  });

  it("worker --api finishes such a run in its round: one write, VERIFIED", async () => {
    const text = `${STALL_MARK} BY THE WORKER`;
    const { threadId } = await stoppedAfterIntent(5, text);
    const workerEnv = { ...env, LANGGRAPH_API_TOKEN: tokens["sweeper"]! };
    const r = await runCli(["worker", "--api", server.apiUrl, "--once", "--json"], workerEnv);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const round = parseJsonOutput(r.stdout) as Round & {
      recovered: Array<{ result: string; detail: string }>;
    };
    expect(round.error, r.stdout).toBeUndefined();
    expect(round.recovered.filter((x) => x.threadId === threadId)).toMatchObject([
      { result: "recovered", detail: expect.stringMatching(/^VERIFIED/) },
    ]);
    expect(await writesOf(text)).toHaveLength(1);
    expect((await portal.task(5))["description"]).toBe(text);
  });
});
