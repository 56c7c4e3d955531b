/**
 * A process that STALLS (SIGSTOP) while its approved write is out, and is taken over after its thread
 * lease ran out: the CLI `approve` runs in a process group of its own (node and its MCP child) and is
 * stopped once the emulator holds its request; the lock row's expiry is set in the past through SQL, as
 * after a stop longer than the lease; `recover` runs to completion in another process; then the group
 * is continued (SIGCONT). Whatever each process prints and exits with must be the journal's close and
 * the audit log's one closing record, and the emulator's call log must show no second applied write.
 */
import { describe, expect, it } from "vitest";
import {
  eachTestPortal,
  envFor,
  journalSql,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  until,
  updatesTitled,
  type CliResult,
  type Portal,
} from "./support/harness.js";
import { closings, readAudit } from "./support/trust-boundary.js";
import { usingPostgres } from "./support/postgres.js";

let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

/** How long the emulator holds the approved write before carrying it out and answering. */
const HELD_MS = 6_000;

/** The thread's close as the journal holds it. */
interface Close {
  outcome: string;
  reasonCode: string;
}

/** The thread's close as the journal holds it (undefined while open). */
async function journalClose(threadId: string): Promise<Close | undefined> {
  const [row] = await journalSql(dataDir, "SELECT closed_json FROM T.threads WHERE thread_id = ?", [
    threadId,
  ]);
  return row?.["closed_json"] ? (JSON.parse(String(row["closed_json"])) as Close) : undefined;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  process.kill(-pid, signal);
}

/**
 * Approves `title`'s pending rename with the CLI, stops the approving process group once its write is
 * held by the emulator, lets its thread lease (and the worker's grace) run out, sends the same approval
 * again from another process, runs `takeover` (`recover`, or one worker round) to its end, waits
 * `afterRecoverMs` (the held write lands meanwhile), and continues the stopped group. Returns every
 * CLI result, `show` after it all, and the journal's close as it stood while the first was stopped.
 */
async function stalledApproval(
  title: string,
  extra: Record<string, string>,
  takeover: "recover" | "worker",
  afterRecoverMs = 0,
) {
  const pending = await recordPendingRename(portal, dataDir, title);
  const env = envFor(portal, dataDir, { BITRIX24_TIMEOUT_MS: String(HELD_MS * 4), ...extra });
  await portal.fault({ method: "tasks.task.update", kind: "latency", ms: HELD_MS, times: 1 });
  let pid = 0;
  const approving = runCli(
    ["approve", pending.threadId, "--hash", pending.approval!.envelopeHash, "--json"],
    env,
    { onSpawn: (p) => (pid = p) },
  );
  let recovered: CliResult;
  let second: CliResult;
  let closedWhileStopped: Close | undefined;
  try {
    // The held request consumed its latency fault on arrival: the write is out.
    await until("the write to be out", async () => (await portal.faultsArmed()) === 0, 800);
    signalGroup(pid, "SIGSTOP");
    // The stop outlasts the thread lease (five minutes): its row has run out.
    await journalSql(dataDir, "UPDATE T.thread_locks SET expires_at = 0");
    // And outlasts the grace after which a worker takes up an action left in a post-approval phase.
    await journalSql(dataDir, "UPDATE T.actions SET due_at = 0 WHERE due_at IS NOT NULL");
    // A second approval of the same card from another process: the run is past its approval.
    second = await runCli(
      ["approve", pending.threadId, "--hash", pending.approval!.envelopeHash, "--json"],
      env,
    );
    recovered = await runCli(
      takeover === "recover" ? ["recover", pending.threadId, "--json"] : ["worker", "--once", "--json"],
      env,
    );
    closedWhileStopped = await journalClose(pending.threadId);
    if (afterRecoverMs > 0) await new Promise((r) => setTimeout(r, afterRecoverMs));
  } finally {
    if (pid) signalGroup(pid, "SIGCONT");
  }
  const approved = await approving;
  const shown = await runCli(["show", pending.threadId, "--json"], env);
  return { threadId: pending.threadId, approved, recovered, second, shown, closedWhileStopped };
}

// SQLite's thread lock runs out; PostgreSQL's is a session lock, held while the stopped process's connection lives.
describe.skipIf(usingPostgres)(
  "a CLI approve stopped while its write is out, recovered by another process, then continued",
  () => {
    it.each([
      ["plain REST 2", "recover", { BITRIX24_IDEMPOTENCY: "off" }],
      ["idempotent writes on", "recover", { BITRIX24_IDEMPOTENCY: "on" }],
      ["plain REST 2", "worker", { BITRIX24_IDEMPOTENCY: "off" }],
      ["idempotent writes on", "worker", { BITRIX24_IDEMPOTENCY: "on" }],
    ] as const)(
      "%s, taken over by %s: every process reports the journal's one close; never a second applied write",
      async (_label, takeover, extra) => {
        const title = `STALLED ${extra.BITRIX24_IDEMPOTENCY.toUpperCase()} ${takeover.toUpperCase()}`;
        const { threadId, approved, recovered, second, shown, closedWhileStopped } = await stalledApproval(
          title,
          extra,
          takeover,
          HELD_MS,
        );
        const close = (await journalClose(threadId))!;
        const audit = closings(await readAudit(dataDir, threadId));
        const report = (r: CliResult) => {
          const v = parseJsonOutput(r.stdout);
          return { outcome: v.state?.outcome ?? v.outcome, reasonCode: v.state?.reasonCode ?? v.reasonCode };
        };
        const context = [approved, second, recovered, shown]
          .map((r) => `${r.stdout}\n${r.stderr}`)
          .join("\n---\n");
        // The other process finished the thread while the first was stopped; the close stands after it went on.
        expect(closedWhileStopped, context).toEqual(close);
        // The second approval is refused, and names no outcome.
        expect(second.code, context).toBe(2);
        expect(second.stdout + second.stderr).toMatch(/NOT_AWAITING_APPROVAL|IN_PROGRESS/);
        expect(audit, context).toHaveLength(1);
        expect(audit[0]!.outcome).toMatchObject({ outcome: close.outcome, reasonCode: close.reasonCode });
        if (takeover === "recover")
          expect(report(recovered), context).toMatchObject({
            outcome: close.outcome,
            reasonCode: close.reasonCode,
          });
        expect(report(shown), context).toMatchObject({
          outcome: close.outcome,
          reasonCode: close.reasonCode,
        });
        expect(report(approved), context).toMatchObject({
          outcome: close.outcome,
          reasonCode: close.reasonCode,
        });
        expect(approved.code).toBe(close.outcome === "VERIFIED" ? 0 : 2);
        if (takeover === "recover") expect(recovered.code).toBe(close.outcome === "VERIFIED" ? 0 : 2);
        // The write went out: whatever the outcome, it is never "not executed".
        expect(close.outcome).not.toBe("NOT_EXECUTED");
        const sends = await updatesTitled(portal, title);
        expect(sends.applied).toBe(1);
        if (extra.BITRIX24_IDEMPOTENCY === "off") expect(sends.sent).toBe(1);
        // VERIFIED only with the approved value on the portal.
        if (close.outcome === "VERIFIED") expect((await portal.task(4))["title"]).toBe(title);
      },
      120_000,
    );
  },
);
