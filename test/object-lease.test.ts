/**
 * No lost update between runs: two approved actions on the same task. The first holds the task's
 * object lease from its pre-read to its verification; the second (another process) waits, and its
 * pre-read then sees the first one's write, so it ends STALE_STATE instead of overwriting it. Waiting
 * is bounded (TARGET_BUSY, nothing sent). Runs on SQLite files and, in the PostgreSQL pass, there.
 *
 * To make the race certain rather than likely, the first write is held by the emulator (a latency
 * fault, applied after the delay) and the second run starts only once the journal shows the first
 * action at `intent`: without the lease, its pre-read would MATCH the unchanged task and write.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recoverThread, submitDecision } from "../src/app/threads.js";
import { type ThreadView } from "../src/app/view-thread.js";
import type { App } from "../src/app/open-app.js";
import { objectKeyOf } from "../src/store/action-machine.js";
import {
  envFor,
  openTestApp,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  startPortal,
  tempDir,
  until,
  objectLeaseOf,
  journalSql,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";
import { usingPostgres } from "./support/postgres.js";

const FIRST = "LEASE-FIRST approved title";
const SECOND = "LEASE-SECOND approved title";

let portal: Portal;
let dataDir: string;
const apps: App[] = [];

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir();
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
  await portal.emulator.close();
});

async function open(env: Record<string, string> = {}, title = FIRST): Promise<App> {
  const app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: title })),
    env,
  });
  apps.push(app);
  // Starts its MCP server now (a read), so the run below reaches its pre-read while the first write is in flight.
  expect((await app.deps.tools.read("getTask", { taskId: 4 })).ok).toBe(true);
  return app;
}

/** A waiting approval to rename task 4, recorded by its own app (closed again, only the stores remain). */
const pending = (title: string): Promise<ThreadView> =>
  recordPendingRename(portal, dataDir, title, {
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: title })),
  });

function approval(view: ThreadView) {
  const a = view.approval!;
  return {
    decisions: [
      { type: "approve", envelopeHash: a.envelopeHash, nonce: a.nonce, approver: { id: "demo-approver" } },
    ],
  };
}

/** Approves `first` in a CLI process and returns once its write has been sent (journal at intent). */
async function firstWriteInFlight(app: App, first: ThreadView, holdMs: number) {
  await portal.fault({ method: "tasks.task.update", kind: "latency", ms: holdMs, times: 1 });
  // A timeout longer than the hold: the first write is answered, not lost.
  const done = runCli(
    ["approve", first.threadId, "--hash", first.approval!.envelopeHash, "--json"],
    envFor(portal, dataDir, { BITRIX24_TIMEOUT_MS: String(holdMs + 8000) }),
  );
  await until(
    "the first action's write to be in flight",
    async () => (await app.deps.journal.getAction(first.approval!.envelopeHash))?.phase === "intent",
    600,
    25,
  );
  // Wrapped: an async function returning the bare promise would make the caller wait for the whole run.
  return { done };
}

describe("object lease: two approved actions on one task", () => {
  it("from two processes: the second waits for the first's verification, reads its write and ends STALE_STATE; one write, the first title stands", async () => {
    const first = await pending(FIRST);
    const second = await pending(SECOND);
    const app = await open();
    const { done: cli } = await firstWriteInFlight(app, first, 2500);

    const view = await submitDecision(app, second.threadId, approval(second));
    const firstResult = await cli;

    expect(firstResult.code, firstResult.stdout + firstResult.stderr).toBe(0);
    expect(parseJsonOutput(firstResult.stdout).outcome).toBe("VERIFIED");
    expect(view.state!.outcome).toBe("NOT_EXECUTED");
    expect(view.state!.reasonCode).toBe("STALE_STATE");
    const preRead = view.state!.preRead!;
    expect(preRead.verdict).toBe("MISMATCH");
    // The evidence names whom it waited for, and the field that moved, with before and now.
    expect(preRead.lease?.waitedFor?.envelopeHash).toBe(first.approval!.envelopeHash);
    expect(preRead.lease!.waitedMs).toBeGreaterThan(0);
    expect(preRead.moved?.find((m) => m.field === "TITLE")?.now).toBe(FIRST);

    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect((writes[0]!.params["fields"] as Record<string, unknown>)["TITLE"]).toBe(FIRST);
    expect((await portal.task(4))["title"]).toBe(FIRST);
    // Both ended, so nobody holds the task any more.
    expect(await objectLeaseOf(dataDir, objectKeyOf(first.approval!.envelope))).toBeUndefined();
  });

  it("waiting is bounded: past ACTION_ENVELOPE_OBJECT_WAIT_MS the second ends TARGET_BUSY naming the holder, nothing sent by it", async () => {
    const first = await pending(FIRST);
    const second = await pending(SECOND);
    const app = await open({ ACTION_ENVELOPE_OBJECT_WAIT_MS: "300" });
    const { done: cli } = await firstWriteInFlight(app, first, 2500);

    const view = await submitDecision(app, second.threadId, approval(second));
    expect(view.state!.outcome).toBe("NOT_EXECUTED");
    expect(view.state!.reasonCode).toBe("TARGET_BUSY");
    expect(view.state!.reason).toContain(`thread ${first.threadId}`);
    expect(view.state!.reason).toContain("nothing was sent");
    // Ended before any read of its own: the only write is the first action's, still in flight.
    expect(view.state!.preRead ?? null).toBeNull();

    const firstResult = await cli;
    expect(parseJsonOutput(firstResult.stdout).outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
    expect((await portal.task(4))["title"]).toBe(FIRST);
    // The busy one's approval is used up: approving it again is refused, not a second chance to overwrite.
    const again = await submitDecision(app, second.threadId, approval(second)).catch(
      (e: Error & { code?: string }) => e,
    );
    expect((again as { code?: string }).code).toBe("THREAD_ENDED");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("object lease that runs out while its holder is paused", () => {
  /**
   * A approves FIRST and stops (a paused process) at `stopAt` of its journal, after its pre-read MATCH;
   * its lease (400 ms) runs out, B approves SECOND on the same task, writes and ends, releasing the
   * lease; then A goes on.
   */
  async function pausedPastLease(stopAt: "objectLease" | "beginWrite") {
    const first = await pending(FIRST);
    const second = await pending(SECOND);
    const env = { ACTION_ENVELOPE_OBJECT_LEASE_MS: "400" };
    const a = await open(env);
    const b = await open(env, SECOND);
    const journal = a.deps.journal as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const through = journal[stopAt]!.bind(journal);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let calls = 0;
    let stopped = false;
    // At the write step: objectLease is read once by the pre-read's hold, then by the write.
    const stopOn = stopAt === "objectLease" ? 2 : 1;
    journal[stopAt] = async (...args) => {
      if (++calls === stopOn) {
        stopped = true;
        await gate;
      }
      return through(...args);
    };
    const paused = submitDecision(a, first.threadId, approval(first));
    await until("A to stop after its pre-read", async () => stopped, 200, 10);
    expect((await a.deps.journal.getAction(first.approval!.envelopeHash))!.phase).toBe("pre_read");
    await new Promise((r) => setTimeout(r, 500));
    const viewB = await submitDecision(b, second.threadId, approval(second));
    expect(viewB.state!.outcome).toBe("VERIFIED");
    go();
    return { view: await paused, first };
  }

  it("stopped at the write-ahead entry: refused TARGET_BUSY in that transaction, nothing sent; the other's title stands", async () => {
    const { view, first } = await pausedPastLease("beginWrite");
    expect(view.state!.outcome).toBe("NOT_EXECUTED");
    expect(view.state!.reasonCode).toBe("TARGET_BUSY");
    expect(view.state!.reason).toContain("another approved action took task 4 and ended since");
    expect(await titlesWritten()).toEqual([SECOND]);
    expect((await portal.task(4))["title"]).toBe(SECOND);
    expect(await objectLeaseOf(dataDir, objectKeyOf(first.approval!.envelope))).toBeUndefined();
  });

  it("stopped before the write step: takes the object again, reads again, ends STALE_STATE on the other's write; nothing sent", async () => {
    const { view } = await pausedPastLease("objectLease");
    expect(view.state!.outcome).toBe("NOT_EXECUTED");
    expect(view.state!.reasonCode).toBe("STALE_STATE");
    expect(view.state!.preRead!.reason).toContain("no longer covered by the object lease it took");
    expect(await titlesWritten()).toEqual([SECOND]);
    expect((await portal.task(4))["title"]).toBe(SECOND);
  });
});

describe("a write-ahead entry whose lease another action took before the request left", () => {
  /** A approves FIRST and, once its write-ahead entry is recorded, pauses (`then` "pause") or dies ("die"). */
  async function afterWriteAhead(then: "pause" | "die", env: Record<string, string>) {
    const first = await pending(FIRST);
    const second = await pending(SECOND);
    const a = await open(env);
    const b = await open(env, SECOND);
    const journal = a.deps.journal;
    const beginWrite = journal.beginWrite.bind(journal);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let stopped = false;
    journal.beginWrite = async (...args) => {
      const begun = await beginWrite(...args);
      journal.beginWrite = beginWrite;
      stopped = true;
      if (then === "die") throw new Error("the process died after its write-ahead entry");
      await gate;
      return begun;
    };
    const run = submitDecision(a, first.threadId, approval(first)).catch((e: Error) => e);
    await until("A to stop after its write-ahead entry", async () => stopped, 200, 10);
    // A's lease (400 ms) runs out; B approves SECOND on the same task, writes it and ends.
    await new Promise((r) => setTimeout(r, 500));
    expect((await submitDecision(b, second.threadId, approval(second))).state!.outcome).toBe("VERIFIED");
    go();
    return { a, first, run };
  }

  it("a paused process sends nothing when it goes on: NOT_EXECUTED / TARGET_BUSY", async () => {
    const { run } = await afterWriteAhead("pause", { ACTION_ENVELOPE_OBJECT_LEASE_MS: "400" });
    const view = (await run) as ThreadView;
    expect(view.state!.outcome).toBe("NOT_EXECUTED");
    expect(view.state!.reasonCode).toBe("TARGET_BUSY");
    expect(view.state!.reason).toContain("nothing was sent");
    expect(await titlesWritten()).toEqual([SECOND]);
    expect((await portal.task(4))["title"]).toBe(SECOND);
  });

  it("a dead process's write carrying an Idempotency-Key is not re-sent by recovery: MISSING, the other's value found", async () => {
    const env = { ACTION_ENVELOPE_OBJECT_LEASE_MS: "400", BITRIX24_IDEMPOTENCY: "on" };
    const { a, first, run } = await afterWriteAhead("die", env);
    expect(await run).toBeInstanceOf(Error);
    const view = await recoverThread(a, first.threadId);
    // The acknowledgement stays MISSING; the fresh read finds the other action's value.
    expect(view.state!.outcome).toBe("VERIFICATION_FAILED");
    expect(view.state!.reason).toContain(
      "not re-sent (its object lease ran out and another action took task 4",
    );
    expect(await titlesWritten()).toEqual([SECOND]);
    expect((await portal.task(4))["title"]).toBe(SECOND);
  });
});

// SQLite's thread lock runs out; PostgreSQL's is a session lock, held while the paused process's connection lives.
describe.skipIf(usingPostgres)("a write-ahead entry whose process paused past its thread lock", () => {
  it("recovered by another meanwhile (INCONCLUSIVE, the lease still the action's): the paused one sends nothing when it goes on", async () => {
    const first = await pending(FIRST);
    const a = await open();
    const b = await open();
    const journal = a.deps.journal;
    const beginWrite = journal.beginWrite.bind(journal);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let stopped = false;
    journal.beginWrite = async (...args) => {
      const begun = await beginWrite(...args);
      stopped = true;
      await gate;
      return begun;
    };
    const paused = submitDecision(a, first.threadId, approval(first));
    await until("A to stop after its write-ahead entry", async () => stopped, 200, 10);
    // Its thread lock runs out (a process stopped for longer than the lock holds) and B recovers the thread.
    await journalSql(dataDir, "UPDATE T.thread_locks SET expires_at = 0");
    const recovered = await recoverThread(b, first.threadId);
    expect(recovered.state!.outcome).toBe("INCONCLUSIVE");
    go();
    // The action has ended: its outcome stands, and nothing is sent for it any more.
    expect((await paused).state!.outcome).toBe("INCONCLUSIVE");
    expect(await titlesWritten()).toEqual([]);
    expect((await portal.task(4))["title"]).not.toBe(FIRST);
  });
});

/** The titles written to task 4, in order. */
async function titlesWritten(): Promise<unknown[]> {
  return (await portal.writes()).map((w) => (w.params["fields"] as Record<string, unknown>)["TITLE"]);
}

describe("object lease after a write whose answer was lost", () => {
  it("kept until it runs out: a write that timed out may still land, so the next action on the task ends TARGET_BUSY instead of being overwritten by it", async () => {
    const first = await pending(FIRST);
    const second = await pending(SECOND);
    // The emulator holds the first write 2.5 s and applies it then; the client gives up after 1 s.
    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: 2500, times: 1 });
    const firstResult = await runCli(
      ["approve", first.threadId, "--hash", first.approval!.envelopeHash, "--json"],
      envFor(portal, dataDir, { BITRIX24_TIMEOUT_MS: "1000" }),
    );
    const firstView = parseJsonOutput(firstResult.stdout);
    expect(firstView.outcome).not.toBe("VERIFIED");
    const app = await open({ ACTION_ENVELOPE_OBJECT_WAIT_MS: "300" });
    const lease = await objectLeaseOf(dataDir, objectKeyOf(first.approval!.envelope));
    expect(lease?.owner).toBe(first.approval!.envelopeHash);

    const view = await submitDecision(app, second.threadId, approval(second));
    expect(view.state!.reasonCode).toBe("TARGET_BUSY");
    // The late write lands; the second action sent nothing that it could overwrite.
    await until("the late write to land", async () => (await portal.task(4))["title"] === FIRST);
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("object lease in the journal", () => {
  it("held by one action at a time, renewed by its holder, released by the move to closed, free once expired or once the holder's action ended", async () => {
    const a = await pending(FIRST);
    const b = await pending(SECOND);
    const app = await open();
    const journal = app.deps.journal;
    const key = objectKeyOf(a.approval!.envelope);
    expect(key).toBe(objectKeyOf(b.approval!.envelope));
    const A = { envelopeHash: a.approval!.envelopeHash, threadId: a.threadId };
    const B = { envelopeHash: b.approval!.envelopeHash, threadId: b.threadId };

    expect((await journal.acquireObjectLease(key, A, 60_000)).acquired).toBe(true);
    const refused = await journal.acquireObjectLease(key, B, 60_000);
    expect(refused.acquired).toBe(false);
    if (!refused.acquired) expect(refused.holder.owner).toBe(A.envelopeHash);
    // Renewal by the holder keeps the original acquisition time and extends the expiry.
    const before = (await objectLeaseOf(dataDir, key))!;
    await new Promise((r) => setTimeout(r, 5));
    expect((await journal.acquireObjectLease(key, A, 120_000)).acquired).toBe(true);
    const renewed = (await objectLeaseOf(dataDir, key))!;
    expect(renewed.acquiredAt).toBe(before.acquiredAt);
    expect(renewed.expiresAt).toBeGreaterThan(before.expiresAt);

    // The move that ends A releases its lease in the same transaction.
    expect(
      (
        await journal.moveAction(A.envelopeHash, "closed", {
          closed: {
            outcome: "NOT_EXECUTED",
            reasonCode: "CANCELLED",
            reason: "test",
            at: new Date().toISOString(),
          },
        })
      ).ok,
    ).toBe(true);
    expect(await objectLeaseOf(dataDir, key)).toBeUndefined();
    expect((await journal.acquireObjectLease(key, B, 60_000)).acquired).toBe(true);

    // Beginning a write is one transaction: with the lease held by another action, or with the action
    // not at pre_read, nothing of it is committed (no write-ahead entry, no lease, no move).
    const intent = (h: string, t: string) => ({
      envelopeHash: h,
      threadId: t,
      idempotencyKey: `k-${h.slice(7, 20)}`,
      args: { taskId: 4, fields: {} },
    });
    const blocked = await journal.beginWrite(intent(A.envelopeHash, A.threadId), new Date().toISOString(), {
      objectKey: key,
      holdMs: 60_000,
    });
    expect("leaseHolder" in blocked && blocked.leaseHolder?.owner).toBe(B.envelopeHash);
    expect(await journal.findExecution(A.envelopeHash)).toBeUndefined();
    // B renews for 1 ms only, and that runs out.
    expect((await journal.acquireObjectLease(key, B, 1)).acquired).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    const notReady = await journal.beginWrite(intent(B.envelopeHash, B.threadId), new Date().toISOString(), {
      objectKey: key,
      holdMs: 60_000,
    });
    expect("refused" in notReady && notReady.refused).toContain("registered");
    expect(await journal.findExecution(B.envelopeHash)).toBeUndefined();
    expect((await journal.getAction(B.envelopeHash))!.phase).toBe("registered");
    expect((await objectLeaseOf(dataDir, key))!.expiresAt).toBeLessThan(Date.now());

    // An expired lease (a holder that died and was never recovered) is taken over.
    await new Promise((r) => setTimeout(r, 10));
    const c = await pending("LEASE-THIRD");
    const C = { envelopeHash: c.approval!.envelopeHash, threadId: c.threadId };
    expect((await journal.acquireObjectLease(key, C, 60_000)).acquired).toBe(true);
    expect((await objectLeaseOf(dataDir, key))!.owner).toBe(C.envelopeHash);
  });
});
