/**
 * Idempotent writes across a crash (issue 17, B5): a process SIGKILLed between sending the write and
 * receiving its answer is recovered by re-sending the SAME call with the SAME Idempotency-Key, and the
 * portal's replay of its first answer becomes the acknowledgement: one applied write, VERIFIED. With
 * idempotent writes off, nothing is re-sent and the outcome stays INCONCLUSIVE. A key the portal says
 * was used with another body (422) is a hard error recorded as such.
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ThreadView } from "../src/app/view-thread.js";
import { startEmulator } from "../src/offline-demo/emulator/index.js";
import { loadConfig } from "../src/config/env.js";
import { ConfigError } from "../src/errors.js";
import { idempotentWrites } from "../src/executor/write.js";
import {
  eachTestPortal,
  envFor,
  journalSql,
  killedWhen,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  tempDir,
  type Portal,
} from "./support/harness.js";

let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

type Call = { method: string; status: number; fault?: string; params: Record<string, unknown> };
const updates = async () => (await portal.calls("tasks.task.update")) as Call[];
/** Calls the portal carried out (a replay is answered from the kept answer, not carried out again). */
const applied = async () =>
  (await updates()).filter(
    (c) =>
      c.fault !== "idempotent_replay" &&
      c.fault !== "idempotency_conflict" &&
      c.fault !== "timeout_without_apply",
  );

const pending = (title: string, env: Record<string, string>): Promise<ThreadView> =>
  recordPendingRename(portal, dataDir, title, { env });

/** Approves in a child process and SIGKILLs it once the write has reached the portal (its answer is held). */
async function approveAndKill(view: ThreadView, env: Record<string, string>): Promise<void> {
  const killed = await killedWhen(
    ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--json"],
    { ...env, BITRIX24_TIMEOUT_MS: "30000" },
    "the write to reach the portal",
    async () => (await updates()).length > 0,
  );
  expect(killed.signal ?? killed.code).toBeTruthy();
}

/**
 * A rename titled `title` approved in a process SIGKILLed between sending its write and receiving the
 * answer (the portal applies the write and holds its answer), with idempotent writes `idempotency`.
 */
async function killedAfterSend(
  title: string,
  idempotency: "on" | "off",
): Promise<{ env: Record<string, string>; view: ThreadView }> {
  const env = envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: idempotency });
  const view = await pending(title, env);
  await portal.fault({ method: "tasks.task.update", kind: "apply_then_timeout", times: 1 });
  await approveAndKill(view, env);
  return { env, view };
}

describe("idempotent writes and crash recovery", () => {
  it("SIGKILL between send and answer, idempotency on: recovery re-sends with the same key, the replay is the acknowledgement, one applied write, VERIFIED", async () => {
    const { env, view } = await killedAfterSend("IDEMPOTENT AFTER KILL", "on");
    expect(await applied()).toHaveLength(1);

    const r = await runCli(["recover", view.threadId, "--json"], env);
    expect(r.code, r.stderr).toBe(0);
    const out = parseJsonOutput(r.stdout);
    expect(out.outcome).toBe("VERIFIED");
    expect(out.acknowledgement.status).toBe("OK");
    expect(out.acknowledgement.replayed).toBe(true);
    expect(out.acknowledgement.protocol).toBe("rest3-idempotency-key");
    expect(out.acknowledgement.resent.firstSentAt).toBe(out.invocation.sentAt);
    expect(out.invocation.protocol).toBe("rest3-idempotency-key");

    // Two calls reached the portal (the first and the re-send), one was carried out.
    const calls = await updates();
    expect(calls).toHaveLength(2);
    expect(calls[1]!.fault).toBe("idempotent_replay");
    expect(calls[1]!.params).toEqual(calls[0]!.params);
    expect(await applied()).toHaveLength(1);
    expect((await portal.task(4)).title).toBe("IDEMPOTENT AFTER KILL");
    const history = (await portal.rest("tasks.task.history.list", { taskId: 4 })).body.result.list as Array<{
      field: string;
      value: { to: string };
    }>;
    expect(history.filter((h) => h.field === "TITLE" && h.value.to === "IDEMPOTENT AFTER KILL")).toHaveLength(
      1,
    );

    // The key sent is the one the journal recorded before sending, derived from the envelope hash.
    const key = createHash("sha256")
      .update(`${view.approval!.envelopeHash}\n${view.approval!.nonce}`)
      .digest("hex")
      .slice(0, 32);
    expect(out.invocation.idempotencyKey).toBe(key);

    // Nothing is left for the worker, and nothing more is sent.
    const round = parseJsonOutput((await runCli(["worker", "--once", "--json"], env)).stdout);
    expect(round.recovered).toEqual([]);
    expect(await updates()).toHaveLength(2);
  });

  it("idempotency off: the same crash is never re-sent and stays INCONCLUSIVE (REST 2 rule)", async () => {
    const { env, view } = await killedAfterSend("PLAIN REST 2 AFTER KILL", "off");

    const out = parseJsonOutput((await runCli(["recover", view.threadId, "--json"], env)).stdout);
    expect(out.outcome).toBe("INCONCLUSIVE");
    expect(out.acknowledgement.status).toBe("MISSING");
    expect(out.acknowledgement.reason).toMatch(/not re-sent .*REST 2/);
    expect(out.invocation.protocol).toBe("rest2");
    expect(await updates()).toHaveLength(1);
  });

  it("a call sent with a key is not re-sent by a process where idempotency is off", async () => {
    const { view } = await killedAfterSend("KEY SENT, RECOVERY OFF", "on");

    const out = parseJsonOutput(
      (
        await runCli(
          ["recover", view.threadId, "--json"],
          envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: "off" }),
        )
      ).stdout,
    );
    expect(out.outcome).toBe("INCONCLUSIVE");
    expect(out.acknowledgement.reason).toMatch(/idempotent writes are off/);
    expect(await updates()).toHaveLength(1);
  });

  it("the key reused with another body (422) on the re-send is a hard error, recorded as such; REJECTED_BY_TARGET", async () => {
    const env = envFor(portal, dataDir, { BITRIX24_IDEMPOTENCY: "on" });
    const view = await pending("NEVER LANDS", env);
    await portal.fault({ method: "tasks.task.update", kind: "timeout_without_apply", times: 1 });
    await approveAndKill(view, env);
    // Someone else uses the same key with another body before recovery.
    const key = createHash("sha256")
      .update(`${view.approval!.envelopeHash}\n${view.approval!.nonce}`)
      .digest("hex")
      .slice(0, 32);
    const other = await fetch(`${portal.emulator.webhookUrl}tasks.task.update`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify({ taskId: 4, fields: { TITLE: "SOMEONE ELSE" } }),
    });
    expect(other.status).toBe(200);

    const out = parseJsonOutput((await runCli(["recover", view.threadId, "--json"], env)).stdout);
    expect(out.acknowledgement.status).toBe("ERROR");
    expect(out.acknowledgement.error.httpStatus).toBe(422);
    expect(out.acknowledgement.reason).toMatch(/hard error/);
    // The target refused our call; the fresh read shows our value did not land.
    expect(out.outcome).toBe("REJECTED_BY_TARGET");
    expect((await portal.task(4)).title).toBe("SOMEONE ELSE");
    expect((await updates()).at(-1)!.fault).toBe("idempotency_conflict");
  });

  // A write-ahead entry is data in the data directory: a re-send is rebuilt from the sealed envelope,
  // and an entry that disagrees with it is refused as tampering, with nothing sent.
  const rewrites: Array<[string, (args: Record<string, unknown>) => Record<string, unknown>]> = [
    ["another task id", (a) => ({ ...a, taskId: 5 })],
    ["another operation", (a) => ({ ...a, operation: "add_task", fields: { TITLE: "FORGED NEW TASK" } })],
    // Issue 26 rows 5b and 5c: an operation on another kind of object, and one the policy denies.
    [
      "update_deal on deal 1",
      (a) => ({ operation: "update_deal", id: 1, fields: { STAGE_ID: "WON" }, protocol: a["protocol"] }),
    ],
    ["delete_task of task 9", (a) => ({ operation: "delete_task", taskId: 9, protocol: a["protocol"] })],
  ];
  it.each(rewrites)(
    "a write-ahead entry rewritten to %s before recovery: nothing is re-sent, the refusal is audited, the action closes INCONCLUSIVE (ENVELOPE_TAMPERED)",
    async (_name, rewrite) => {
      const { env, view } = await killedAfterSend("SEALED, NOT THE ROW", "on");
      const task5 = (await portal.task(5)).title;
      const writesBefore = (await portal.writes()).length;
      expect(writesBefore).toBe(1);

      const [row] = await journalSql(
        dataDir,
        "SELECT args_json, ack_json FROM T.executions WHERE envelope_hash = ?",
        [view.approval!.envelopeHash],
      );
      expect(row!["ack_json"]).toBeNull();
      await journalSql(dataDir, "UPDATE T.executions SET args_json = ? WHERE envelope_hash = ?", [
        JSON.stringify(rewrite(JSON.parse(row!["args_json"] as string))),
        view.approval!.envelopeHash,
      ]);

      const out = parseJsonOutput((await runCli(["recover", view.threadId, "--json"], env)).stdout);
      expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
        outcome: "INCONCLUSIVE",
        reasonCode: "ENVELOPE_TAMPERED",
      });
      expect(out.reason).toMatch(/write-ahead entry .* was changed outside this program/);
      expect(out.acknowledgement.status).toBe("MISSING");
      // Nothing sent: not to the other object, not the sealed call either.
      expect(await portal.writes()).toHaveLength(writesBefore);
      expect(await portal.calls("tasks.task.add")).toHaveLength(0);
      expect((await portal.task(5)).title).toBe(task5);
      const audit = parseJsonOutput((await runCli(["audit", "show", view.threadId, "--json"], env)).stdout);
      expect(JSON.stringify(audit)).toContain("ENVELOPE_TAMPERED");
      expect(JSON.stringify(audit)).toContain("tamper_detected");
    },
  );

  // The answer recorded on a write-ahead entry is sealed with it: one written there by hand (the action
  // left at intent by a crash) would otherwise stand for the target's and stop the same-key re-send.
  const forgedAnswers: Array<[string, Record<string, unknown>]> = [
    [
      "an ERROR",
      {
        status: "ERROR",
        error: { kind: "target_error", code: "ACCESS_DENIED", description: "forged refusal" },
        at: "2026-12-05T00:00:00.000Z",
        protocol: "rest3-idempotency-key",
      },
    ],
    [
      "an OK",
      {
        status: "OK",
        body: { result: { task: { id: "4", title: "FORGED OK" } } },
        at: "2026-12-05T00:00:00.000Z",
        protocol: "rest3-idempotency-key",
      },
    ],
  ];
  it.each(forgedAnswers)(
    "%s answer written onto the write-ahead entry before recovery is not taken: nothing is re-sent, the refusal is audited, INCONCLUSIVE (ENVELOPE_TAMPERED)",
    async (_name, answer) => {
      const { env, view } = await killedAfterSend("ANSWER NOT THE TARGET'S", "on");
      const hash = view.approval!.envelopeHash;
      expect(await updates()).toHaveLength(1);
      await journalSql(dataDir, "UPDATE T.executions SET ack_json = ?, ack_at = ? WHERE envelope_hash = ?", [
        JSON.stringify(answer),
        answer["at"],
        hash,
      ]);

      const out = parseJsonOutput((await runCli(["recover", view.threadId, "--json"], env)).stdout);
      expect({ outcome: out.outcome, reasonCode: out.reasonCode }).toEqual({
        outcome: "INCONCLUSIVE",
        reasonCode: "ENVELOPE_TAMPERED",
      });
      expect(out.reason).toMatch(/expected a sealed answer on it, found one without a seal/);
      expect(out.acknowledgement.status).toBe("MISSING");
      expect(JSON.stringify(out)).not.toContain("forged refusal");
      expect(JSON.stringify(out)).not.toContain("FORGED OK");
      // Not re-sent on the forged answer's word, and nothing else sent.
      expect(await updates()).toHaveLength(1);
      const audit = parseJsonOutput((await runCli(["audit", "show", view.threadId, "--json"], env)).stdout);
      expect(JSON.stringify(audit)).toContain("tamper_detected");
    },
  );

  it("BITRIX24_IDEMPOTENCY accepts auto, on, off (default auto) and names itself otherwise", () => {
    const on = (env: Record<string, string>, embedded: boolean) =>
      idempotentWrites({ config: loadConfig(env, "/x"), ...(embedded ? { emulator: {} as never } : {}) });
    expect(on({}, true)).toBe(true); // auto: the embedded emulator implements it
    expect(on({}, false)).toBe(false); // auto: a real portal is plain REST 2 unless told otherwise
    expect(on({ BITRIX24_IDEMPOTENCY: "on" }, false)).toBe(true);
    expect(on({ BITRIX24_IDEMPOTENCY: "off" }, true)).toBe(false);
    let err: unknown;
    try {
      loadConfig({ BITRIX24_IDEMPOTENCY: "yes" }, "/x");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/BITRIX24_IDEMPOTENCY/);
  });

  it("the emulator keeps an idempotent answer in its state file: a restarted portal still replays it instead of applying again", async () => {
    const statePath = path.join(tempDir(), "portal.sqlite");
    const send = (url: string) =>
      fetch(`${url}tasks.task.update`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": "restart-key" },
        body: JSON.stringify({ taskId: 4, fields: { TITLE: "ONCE ACROSS RESTART" } }),
      });
    const first = await startEmulator({ port: 0, rate: 0, statePath });
    expect((await send(first.webhookUrl)).headers.get("idempotent-replayed")).toBeNull();
    await first.close();
    const second = await startEmulator({ port: 0, rate: 0, statePath });
    try {
      const again = await send(second.webhookUrl);
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      const history = await fetch(`${second.webhookUrl}tasks.task.history.list`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ taskId: 4 }),
      });
      const list = (
        (await history.json()) as { result: { list: Array<{ field: string; value: { to: string } }> } }
      ).result.list;
      expect(list.filter((h) => h.field === "TITLE" && h.value.to === "ONCE ACROSS RESTART")).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});
