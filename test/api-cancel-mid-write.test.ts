/**
 * A run cancelled (runs.cancel, action "interrupt") while its approved write is out. The LangGraph API
 * server stops the run, not the node: the node's request stays out and its answer comes later, while
 * the thread's lock goes with the run, so the next run on the thread finds the write-ahead entry
 * without an answer. That write is not lost: it is neither sent again nor judged before its answer.
 * Through the real dev server and @langchain/langgraph-sdk, with idempotent writes on (a lost answer's
 * call would be re-sent with the same key); writes counted in the emulator's call log.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { envFor, startPortal, tempDir, until, type Portal } from "./support/harness.js";
import { startDevServer, type RunningDevServer } from "./support/dev-server.js";
import { closings, readAudit } from "./support/trust-boundary.js";

const GRAPH_ID = "bitrix24_task_agent";
/** How long the emulator holds the approved write before carrying it out and answering. */
const HELD_MS = 5_000;

let portal: Portal;
let server: RunningDevServer;
let dataDir: string;

beforeAll(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-cancel-");
  server = await startDevServer(
    envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: "on", BITRIX24_TIMEOUT_MS: String(HELD_MS * 4) }),
  );
}, 200_000);

afterAll(async () => {
  await server?.stop();
  await portal?.emulator.close();
}, 90_000);

describe("a run cancelled while its write is out", () => {
  it("the next run waits for that write's answer: one call in the emulator's log, VERIFIED", async () => {
    const client = new Client({ apiUrl: server.apiUrl, apiKey: null, callerOptions: { maxRetries: 0 } });
    const { thread_id: threadId } = await client.threads.create();
    const first = (await client.runs.wait(threadId, GRAPH_ID, {
      input: { request: "rename task 4 to Held", requestedBy: "demo-user" },
    })) as { __interrupt__?: Array<{ value: { kind: string; envelopeHash: string; nonce: string } }> };
    const payload = first.__interrupt__?.[0]?.value;
    expect(payload?.kind, JSON.stringify(first).slice(0, 500)).toBe("approval");
    const approve = {
      decisions: [
        {
          type: "approve",
          envelopeHash: payload!.envelopeHash,
          nonce: payload!.nonce,
          approver: { id: "bob" },
        },
      ],
    };

    await portal.fault({ method: "tasks.task.update", kind: "latency", ms: HELD_MS, times: 1 });
    const run = await client.runs.create(threadId, GRAPH_ID, { command: { resume: approve } });
    // The held request consumed its latency fault on arrival: the write is out.
    await until("the write to be out", async () => (await portal.faultsArmed()) === 0, 400);
    const answeredBy = Date.now() + HELD_MS + 1_000;
    await client.runs.cancel(threadId, run.run_id, false, "interrupt");
    await until(
      "the cancelled run to end",
      async () => (await client.runs.get(threadId, run.run_id)).status !== "running",
    );
    expect(await portal.writes()).toEqual([]);

    // The approver sends the decision again; the thread's lock is free.
    const final = (await client.runs.wait(threadId, GRAPH_ID, { command: { resume: approve } })) as {
      outcome?: string;
    };
    expect(final.outcome, JSON.stringify(final).slice(0, 2000)).toBe("VERIFIED");
    // The log lists a call when it is answered: the held one is counted once its hold is over.
    await new Promise((r) => setTimeout(r, Math.max(0, answeredBy - Date.now())));
    const writes = await portal.writes();
    expect(writes.map((w) => [w.method, w.params["fields"], (w as { fault?: string }).fault])).toEqual([
      ["tasks.task.update", { TITLE: "Held" }, undefined],
    ]);
    expect((await portal.task(4))["title"]).toBe("Held");
    expect(closings(await readAudit(dataDir, threadId))).toHaveLength(1);
  }, 120_000);
});
