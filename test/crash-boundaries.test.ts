/**
 * SIGKILL at every post-approval boundary, on SQLite and (in the PostgreSQL pass) PostgreSQL: a real
 * child process approves and kills itself right after the journal commits the boundary
 * (test/support/crash-process.ts); `recover` continues from the journal. Counted in the emulator's call
 * log: never a second applied write, never a second send of a plain REST 2 call, and the outcome is
 * VERIFIED exactly when the portal shows the change. Also counts the journal's commits for one
 * approved action: two durable (the write-ahead and the close).
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import {
  ROOT,
  approvalOf,
  envFor,
  killGroup,
  openTestApp,
  runCli,
  startPortal,
  tempDir,
  until,
  updatesTitled,
  type Portal,
} from "./support/harness.js";
import type { Boundary } from "./support/crash-process.js";

const CRASH_PROCESS = path.join(ROOT, "test/support/crash-process.ts");

let portal: Portal;
let dataDir: string;
/** The recovering process (idempotent writes on: it re-sends only a call that carried a key). */
let app: App;
/**
 * A write sent and never answered keeps its object's lease until it runs out (releasesLease); short,
 * so the next case on the same task waits for it instead of ending TARGET_BUSY.
 */
const LEASE = { ACTION_ENVELOPE_OBJECT_LEASE_MS: "3000" };

beforeAll(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-crash-");
  app = await openTestApp(portal, dataDir, { env: { BITRIX24_IDEMPOTENCY: "on", ...LEASE } });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await portal.emulator.close();
});

const CASES: Array<[Boundary, "on" | "off"]> = [
  ["decided", "off"],
  ["pre_read", "off"],
  ["intent", "on"],
  ["intent", "off"],
  ["sent", "on"],
  ["sent", "off"],
  ["acknowledged", "off"],
  ["verified", "on"],
];

describe("SIGKILL at every post-approval boundary", () => {
  it.each(CASES)(
    "killed after %s (idempotent writes %s): recovered with no second send and no false outcome",
    async (boundary, idempotency) => {
      const title = `CRASH ${boundary.toUpperCase()} ${idempotency.toUpperCase()}`;
      const view = await startRun(app, { request: `rename task 4 to ${title}`, requestedBy: "demo-user" });
      expect(view.status).toBe("awaiting_approval");

      let pid = 0;
      const env = envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: idempotency, ...LEASE });
      const killed = await runCli([view.threadId, JSON.stringify(approvalOf(view)), boundary], env, {
        script: CRASH_PROCESS,
        onSpawn: (p) => (pid = p),
      });
      killGroup(pid);
      // tsx runs the script in a child node and exits 137 (128 + SIGKILL) when that child is killed.
      expect(
        killed.signal === "SIGKILL" || killed.code === 137,
        `exit ${killed.code} ${killed.signal}\n${killed.stdout}\n${killed.stderr}`,
      ).toBe(true);
      const before = await updatesTitled(portal, title);
      // Killed before the send: nothing left; from `sent` on: the one write the dead process made.
      expect(before.sent).toBe(["decided", "pre_read", "intent"].includes(boundary) ? 0 : 1);

      // On PostgreSQL the dead process's thread lock is a session advisory lock, released once the
      // server sees its connection closed; a recover a moment before that is refused IN_PROGRESS.
      const done = await until("the dead process's thread lock to be released", async () => {
        try {
          return await recoverThread(app, view.threadId);
        } catch (e) {
          if ((e as { code?: string }).code === "IN_PROGRESS") return undefined;
          throw e;
        }
      });
      expect(done.status).toBe("finished");
      const after = await updatesTitled(portal, title);
      const shown = (await portal.task(4)).title === title;
      expect(after.applied).toBe(shown ? 1 : 0);
      // A plain REST 2 call is sent at most once, ever; a keyed one may be re-sent (a replay), never applied twice.
      if (idempotency === "off") expect(after.sent).toBeLessThanOrEqual(1);
      else expect(after.sent - after.applied).toBeLessThanOrEqual(1);
      const said = `${done.state?.outcome} (${done.state?.reasonCode}): ${done.state?.reason}; ack ${JSON.stringify(done.state?.acknowledgement)}`;
      // No false outcome: VERIFIED only when the portal shows the change; a change shown is VERIFIED, or
      // INCONCLUSIVE when a plain REST 2 call's answer was lost (it is not proven this write made it).
      if (done.state?.outcome === "VERIFIED") expect(shown, said).toBe(true);
      if (shown) expect(["VERIFIED", "INCONCLUSIVE"], said).toContain(done.state?.outcome);
      // Where nothing was lost that a re-send (with its key) cannot recover, the run ends VERIFIED.
      if (!(idempotency === "off" && (boundary === "intent" || boundary === "sent")))
        expect(done.state?.outcome, said).toBe("VERIFIED");
    },
    120_000,
  );

  it("one approved action makes at most two durable commits (the write-ahead and the close)", async () => {
    const view = await startRun(app, {
      request: "rename task 4 to COUNTED COMMITS",
      requestedBy: "demo-user",
    });
    const commits = app.deps.journal.commits;
    const start = { ...commits };
    const done = await submitDecision(app, view.threadId, approvalOf(view));
    expect(done.state?.outcome).toBe("VERIFIED");
    const used = { total: commits.total - start.total, durable: commits.durable - start.durable };
    console.log(
      `journal commits per approved action (${process.env["ACTION_ENVELOPE_TEST_DATABASE_URL"] ? "PostgreSQL" : "SQLite"}): ${used.total}, of which durable: ${used.durable}`,
    );
    expect(used.durable).toBe(2);
    expect(used.total).toBeGreaterThan(used.durable);
  }, 120_000);
});
