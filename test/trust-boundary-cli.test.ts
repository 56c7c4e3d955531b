/**
 * Issue 12, row 4: someone who can write the data directory edits `checkpoints.sqlite` while an
 * approval waits (through LangGraph's own saver, so the edit is exactly what its serde would have
 * written): the envelope and hash in state and in the interrupt's pending write now name an edited
 * title, the card text is left as it was. Then the CLI, each command its own process: `show` must
 * still print the registered card, envelope and hash; `approve --hash <edited hash>` must be refused
 * HASH_MISMATCH with nothing written; the registered hash still approves exactly the registered params.
 *
 * SQLite only: the attack is an edit of the checkpoint file. (On PostgreSQL the same edit is a
 * database write; the journal checks it would meet are the ones test/trust-boundary-graph.test.ts runs there.)
 */
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { startRun } from "../src/app/threads.js";
import type { Envelope } from "../src/envelope/index.js";
import {
  envFor,
  openTestApp,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";
import { usingPostgres } from "./support/postgres.js";
import { events, forgeEnvelope, readAudit, writeMark, writesSince } from "./support/trust-boundary.js";

const NEW_TITLE = "LAB-AGENT-EXEC-002 - CLEAN TRUE PATH";
const EDITED_TITLE = "EDITED IN THE DATA DIRECTORY";
const soft = expect.soft;

let portal: Portal;
let dataDir: string;

beforeEach(async () => {
  portal = await startPortal();
  dataDir = tempDir("ae-tb-cli-");
});

afterEach(async () => {
  await portal.emulator.close();
});

interface Payload {
  envelopeHash: string;
  nonce: string;
  threadId: string;
  envelope: Envelope;
  actionRequests: Array<{
    name: string;
    args: { taskId: number; fields: Record<string, unknown> };
    description: string;
  }>;
}

/** Rewrites the thread's latest checkpoint and its interrupt write in place, as a data-directory writer can. */
async function editCheckpoint(
  threadId: string,
  forged: { envelope: Envelope; envelopeHash: string },
): Promise<void> {
  const saver = SqliteSaver.fromConnString(path.join(dataDir, "checkpoints.sqlite"));
  try {
    const tuple = await saver.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } });
    expect(tuple, "the waiting thread's checkpoint").toBeDefined();
    const checkpoint = tuple!.checkpoint;
    checkpoint.channel_values = {
      ...checkpoint.channel_values,
      envelope: forged.envelope,
      envelopeHash: forged.envelopeHash,
    };
    // Same checkpoint id and parent: INSERT OR REPLACE overwrites the row the thread points at.
    await saver.put(
      tuple!.parentConfig ?? { configurable: { thread_id: threadId, checkpoint_ns: "" } },
      checkpoint,
      tuple!.metadata!,
    );
    const interrupts = (tuple!.pendingWrites ?? []).filter(([, channel]) => channel === "__interrupt__");
    expect(interrupts.length, "the pending interrupt write").toBeGreaterThan(0);
    for (const [taskId, channel, value] of interrupts) {
      const edited = (value as Array<{ id?: string; value: Payload }>).map((i) => ({
        ...i,
        value: {
          ...i.value,
          envelope: forged.envelope,
          envelopeHash: forged.envelopeHash,
          // The card text (description) is left as it was rendered for the original envelope.
          actionRequests: [
            {
              ...i.value.actionRequests[0]!,
              args: { taskId: forged.envelope.object.id, fields: forged.envelope.params },
            },
          ],
        },
      }));
      await saver.putWrites(
        { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: checkpoint.id } },
        [[channel, edited]],
        taskId,
      );
    }
  } finally {
    (saver as unknown as { db: { close(): void } }).db.close();
  }
}

describe.skipIf(usingPostgres)(
  "issue 12 row 4: a checkpoint edited in the data directory before approval",
  () => {
    it("show prints the registered card; approve --hash <edited hash> is refused HASH_MISMATCH and writes nothing; the registered hash still approves", async () => {
      const app = await openTestApp(portal, dataDir, {
        model: new ScriptedChatModel(readThenPropose(4, { TITLE: NEW_TITLE })),
      });
      let p: Payload;
      let threadId: string;
      try {
        const view = await startRun(app, {
          request: `rename task 4 to ${NEW_TITLE}`,
          requestedBy: "demo-user",
        });
        expect(view.status).toBe("awaiting_approval");
        threadId = view.threadId;
        p = view.approval as unknown as Payload;
      } finally {
        await app.close();
      }
      const forged = await forgeEnvelope(portal, p.envelope, { params: { TITLE: EDITED_TITLE } });
      await editCheckpoint(threadId, forged);
      const env = envFor(portal, dataDir);
      const mark = await writeMark(portal);

      const shownJson = await runCli(["show", threadId, "--json"], env);
      soft(shownJson.code, shownJson.stderr).toBe(0);
      const shown = parseJsonOutput(shownJson.stdout);
      soft(shown.status).toBe("awaiting_approval");
      soft(shown.envelopeHash).toBe(p.envelopeHash);
      soft(shown.envelope).toEqual(p.envelope);
      soft(shown.card).toBe(p.actionRequests[0]!.description);
      const shownText = await runCli(["show", threadId], env);
      soft(shownText.stdout).toContain(p.actionRequests[0]!.description);
      soft(shownText.stdout).toContain(p.envelopeHash);
      soft(shownText.stdout).not.toContain(forged.envelopeHash);

      const attack = await runCli(
        ["approve", threadId, "--hash", forged.envelopeHash, "--as", "demo-approver", "--json"],
        env,
      );
      soft(attack.code, attack.stdout + attack.stderr).toBe(2);
      const refused = parseJsonOutput(attack.stdout);
      soft(refused.status).toBe("awaiting_approval");
      soft(refused.envelopeHash).toBe(p.envelopeHash);
      soft(refused.refused?.code).toBe("HASH_MISMATCH");
      soft((await writesSince(portal, mark)).map((w) => w.params)).toEqual([]);
      soft((await portal.task(4))["title"]).not.toBe(EDITED_TITLE);
      const audit = await readAudit(dataDir, threadId);
      soft(events(audit, "decision_refused").map((r) => r.refusal?.code)).toContain("HASH_MISMATCH");
      soft(events(audit, "tamper_detected").length).toBeGreaterThan(0);

      const legit = await runCli(
        ["approve", threadId, "--hash", p.envelopeHash, "--as", "demo-approver", "--json"],
        env,
      );
      soft(legit.code, legit.stdout + legit.stderr).toBe(0);
      soft(parseJsonOutput(legit.stdout).outcome).toBe("VERIFIED");
      soft((await writesSince(portal, mark)).map((w) => w.params)).toEqual([
        { taskId: 4, fields: p.envelope.params },
      ]);
      soft((await portal.task(4))["title"]).toBe(NEW_TITLE);
    });
  },
);
