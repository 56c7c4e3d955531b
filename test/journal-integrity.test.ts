/**
 * The journal's seal (issue: data-directory tampering). Registered rows carry an HMAC under a key kept
 * outside the data directory; a row edited by someone without the key is refused and audited, with no
 * write and nothing else changed. Real parts throughout: emulator over HTTP, MCP over stdio, SQLite.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { viewThread, type ThreadView } from "../src/app/view-thread.js";
import { loadConfig } from "../src/config/env.js";
import { loadJournalKey } from "../src/store/journal-key.js";
import { ConfigError } from "../src/errors.js";
import { approvalOf as approve, eachTestApp, envFor, ROOT, runCli, tempDir } from "./support/harness.js";
import { ScriptedChatModel, readThenPropose } from "./support/scripted-model.js";

const TITLE = "SEALED TITLE";
const t = eachTestApp();

const sqlite = !process.env["ACTION_ENVELOPE_TEST_DATABASE_URL"];

async function waiting(title = TITLE): Promise<ThreadView> {
  await t.open({
    model: new ScriptedChatModel(readThenPropose(4, { TITLE: title })),
  });
  const view = await startRun(t.app, { request: `rename task 4 to ${title}`, requestedBy: "demo-user" });
  expect(view.status).toBe("awaiting_approval");
  return view;
}

describe.skipIf(!sqlite)("a journal row edited in the data directory", () => {
  it("an edited registered envelope fails its MAC: refused, audited as tampering, nothing written", async () => {
    const view = await waiting();
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    try {
      const r = db
        .prepare("SELECT registered_json FROM actions WHERE envelope_hash = ?")
        .get(view.approval!.envelopeHash) as { registered_json: string };
      const edited = JSON.parse(r.registered_json);
      edited.envelope.params.TITLE = "EDITED IN THE DATA DIRECTORY";
      edited.card = edited.card.replace(TITLE, "EDITED IN THE DATA DIRECTORY");
      db.prepare("UPDATE actions SET registered_json = ? WHERE envelope_hash = ?").run(
        JSON.stringify(edited),
        view.approval!.envelopeHash,
      );
    } finally {
      db.close();
    }
    // Refused, audited, and nothing changed: the approval is not closed by a process that cannot tell
    // an edited row from a wrong key; it can simply never be executed as edited.
    await expect(submitDecision(t.app, view.threadId, approve(view))).rejects.toMatchObject({
      code: "INTEGRITY_CHECK_FAILED",
    });
    expect(await t.portal.writes()).toHaveLength(0);
    const records = await t.app.deps.audit.records({ threadId: view.threadId });
    expect(records.filter((x) => x.event === "tamper_detected").map((x) => x.refusal?.reason)).toContainEqual(
      expect.stringContaining("does not verify against its MAC"),
    );
    expect(records.map((x) => x.event)).not.toContain("decision_accepted");
    const still = await viewThread(t.app, view.threadId);
    expect(still.status).toBe("awaiting_approval");
  });

  it("re-sealing needs the key: a row copied from another thread does not verify either", async () => {
    const first = await waiting();
    await t.close();
    const second = await waiting();
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    try {
      // Move the first thread's sealed row (and its MAC) under the second thread: the seal covers the thread id.
      const r = db
        .prepare("SELECT registered_json, mac FROM actions WHERE envelope_hash = ?")
        .get(first.approval!.envelopeHash) as { registered_json: string; mac: string };
      db.prepare("UPDATE actions SET registered_json = ?, mac = ? WHERE envelope_hash = ?").run(
        r.registered_json,
        r.mac,
        second.approval!.envelopeHash,
      );
    } finally {
      db.close();
    }
    await expect(submitDecision(t.app, second.threadId, approve(second))).rejects.toMatchObject({
      code: "INTEGRITY_CHECK_FAILED",
    });
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("a decision written into the row without the key, or copied with its seal from another action, is never acted on", async () => {
    const done = await waiting();
    expect((await submitDecision(t.app, done.threadId, approve(done))).state!.outcome).toBe("VERIFIED");
    await t.close();
    const pending = await waiting("NEVER APPROVED");
    const hash = pending.approval!.envelopeHash;
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    const setRow = (phase: string, progress: unknown) =>
      db
        .prepare("UPDATE actions SET phase = ?, progress_json = ? WHERE envelope_hash = ?")
        .run(phase, JSON.stringify(progress), hash);
    const approved = JSON.parse(
      (
        db
          .prepare("SELECT progress_json FROM actions WHERE envelope_hash = ?")
          .get(done.approval!.envelopeHash) as {
          progress_json: string;
        }
      ).progress_json,
    );
    const forged = { ...approved.decision, envelopeHash: hash, nonce: pending.approval!.nonce };
    const base = { refusalsCounted: 0, refusalsSeen: 0 };
    const cases: Array<[phase: string, progress: unknown, found: string]> = [
      ["decided", { ...base, decision: forged }, "without a seal"],
      ["pre_read", { ...approved, decision: forged }, "whose seal under the journal key does not hold"],
      [
        "decided",
        { ...base, decision: approved.decision, decisionSeal: approved.decisionSeal },
        "does not hold",
      ],
    ];
    try {
      for (const [phase, progress, found] of cases) {
        setRow(phase, progress);
        await expect(recoverThread(t.app, pending.threadId)).rejects.toMatchObject({
          code: "INTEGRITY_CHECK_FAILED",
          message: expect.stringMatching(
            new RegExp(
              `action ${hash} is ${phase}: expected a decision sealed under the journal key.*${found}`,
            ),
          ),
        });
      }
    } finally {
      db.close();
    }
    expect(await t.portal.writes()).toHaveLength(1);
    const records = await t.app.deps.audit.records({ threadId: pending.threadId });
    expect(records.filter((x) => x.event === "tamper_detected")).not.toHaveLength(0);
    expect(records.map((x) => x.event)).not.toContain("execution_outcome");
  });

  it("an action set to intent by hand with no write-ahead entry: recover sends nothing and says no entry was found", async () => {
    const view = await waiting();
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    try {
      db.prepare("UPDATE actions SET phase = 'intent' WHERE envelope_hash = ?").run(
        view.approval!.envelopeHash,
      );
    } finally {
      db.close();
    }
    const after = await recoverThread(t.app, view.threadId);
    expect(after.state!.reason).toContain(
      "the acknowledgement is missing (the action was moved to intent but no write-ahead entry was found; not re-sent)",
    );
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("a pre-read verdict written into the row without the key: a STALE_STATE action put back at pre_read as MATCH sends nothing", async () => {
    const view = await waiting();
    await t.portal.rest("tasks.task.update", { taskId: 4, fields: { TITLE: "CHANGED BY SOMEONE ELSE" } });
    const stale = await submitDecision(t.app, view.threadId, approve(view));
    expect(stale.state!.reasonCode).toBe("STALE_STATE");
    const hash = view.approval!.envelopeHash;
    const db = new Database(path.join(t.dataDir, "journal.sqlite"));
    try {
      const { progress_json } = db
        .prepare("SELECT progress_json FROM actions WHERE envelope_hash = ?")
        .get(hash) as { progress_json: string };
      const { closed: _closed, ...progress } = JSON.parse(progress_json);
      progress.preRead.verdict = "MATCH";
      db.prepare("UPDATE actions SET phase = 'pre_read', progress_json = ? WHERE envelope_hash = ?").run(
        JSON.stringify(progress),
        hash,
      );
      db.prepare("UPDATE threads SET closed_json = NULL WHERE thread_id = ?").run(view.threadId);
    } finally {
      db.close();
    }
    await expect(recoverThread(t.app, view.threadId)).rejects.toMatchObject({
      code: "INTEGRITY_CHECK_FAILED",
      message: expect.stringContaining(
        `action ${hash} is pre_read: expected the MATCH of its pre-read sealed under the journal key (ACTION_ENVELOPE_JOURNAL_KEY / _FILE), found a pre-read (MATCH) without a seal`,
      ),
    });
    // The only write is the one made by hand on the t.portal.
    expect((await t.portal.writes()).map((w) => w.params)).toEqual([
      { taskId: 4, fields: { TITLE: "CHANGED BY SOMEONE ELSE" } },
    ]);
  });
});

/** From now on, appending an audit record of `event` to the data directory's journal fails (a trigger). */
function refuseRecords(event: string): void {
  const db = new Database(path.join(t.dataDir, "journal.sqlite"));
  try {
    db.exec(
      `CREATE TRIGGER refuse_${event} BEFORE INSERT ON audit_records WHEN NEW.event = '${event}'
         BEGIN SELECT RAISE(ABORT, 'refused by test'); END;`,
    );
  } finally {
    db.close();
  }
}

describe.skipIf(!sqlite)("a transition whose audit record cannot be appended", () => {
  it("registers no action when its approval_requested record fails inside the registration", async () => {
    await t.open({ model: new ScriptedChatModel(readThenPropose(4, { TITLE })) });
    refuseRecords("approval_requested");
    const run = startRun(t.app, { request: `rename task 4 to ${TITLE}`, requestedBy: "demo-user" });
    await expect(run).rejects.toThrow(/refused by test/);
    const db = new Database(path.join(t.dataDir, "journal.sqlite"), { readonly: true });
    try {
      expect(db.prepare("SELECT COUNT(*) AS n FROM actions").get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("does not count a refused decision whose decision_refused record fails", async () => {
    const view = await waiting();
    refuseRecords("decision_refused");
    const wrong = approve(view);
    wrong.decisions[0]!.nonce = "not-the-nonce";
    await expect(submitDecision(t.app, view.threadId, wrong)).rejects.toThrow(/refused by test/);
    const row = await t.app.deps.journal.getAction(view.approval!.envelopeHash);
    expect(row?.progress).toMatchObject({ refusalsSeen: 0, refusalsCounted: 0 });
    expect(row?.phase).toBe("registered");
    expect(await t.portal.writes()).toHaveLength(0);
  });
});

describe("the journal key", () => {
  it("is created on first use outside the data directory, mode 0600, with a message naming it; the same key is read back", () => {
    const dir = tempDir("ae-key-");
    const file = path.join(dir, "nested", "journal.key");
    const config = loadConfig(
      { ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"), ACTION_ENVELOPE_JOURNAL_KEY_FILE: file },
      ROOT,
    );
    const said: string[] = [];
    const key = loadJournalKey(config, (l) => said.push(l));
    expect(key.length).toBe(32);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(said).toEqual([expect.stringContaining(file)]);
    expect(loadJournalKey(config, (l) => said.push(l)).equals(key)).toBe(true);
    expect(said).toHaveLength(1);
  });

  it("is refused inside the data directory, and a short or malformed key is refused with the variable's name", () => {
    const dir = tempDir("ae-key-");
    const inside = loadConfig(
      { ACTION_ENVELOPE_DATA_DIR: dir, ACTION_ENVELOPE_JOURNAL_KEY_FILE: path.join(dir, "journal.key") },
      ROOT,
    );
    expect(() => loadJournalKey(inside, () => {})).toThrow(ConfigError);
    expect(() => loadJournalKey(inside, () => {})).toThrow(/inside the data directory/);
    expect(fs.existsSync(path.join(dir, "journal.key"))).toBe(false);
    // A folder in the data directory whose name starts with ".." is still in it.
    const dotted = path.join(dir, "..keys", "journal.key");
    expect(() =>
      loadJournalKey(
        loadConfig({ ACTION_ENVELOPE_DATA_DIR: dir, ACTION_ENVELOPE_JOURNAL_KEY_FILE: dotted }, ROOT),
      ),
    ).toThrow(/inside the data directory/);
    expect(fs.existsSync(dotted)).toBe(false);
    expect(() => loadConfig({ ACTION_ENVELOPE_JOURNAL_KEY: "c2hvcnQ=" }, ROOT)).toThrow(
      /ACTION_ENVELOPE_JOURNAL_KEY must be at least 32 bytes/,
    );
    const short = path.join(dir, "..", `${path.basename(dir)}-short.key`);
    fs.writeFileSync(short, "c2hvcnQ=\n");
    expect(() =>
      loadJournalKey(
        loadConfig({ ACTION_ENVELOPE_DATA_DIR: dir, ACTION_ENVELOPE_JOURNAL_KEY_FILE: short }, ROOT),
        () => {},
      ),
    ).toThrow(/at least 32 bytes/);
  });

  it.skipIf(!sqlite)(
    "a process with another key cannot use approvals sealed under the first: refused, never executed, and the approval is left for the right key",
    async () => {
      const view = await waiting();
      await t.close();
      const other = envFor(t.portal, t.dataDir, {
        ACTION_ENVELOPE_JOURNAL_KEY_FILE: `${t.dataDir}.other.key`,
      });
      const r = await runCli(
        ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--as", "demo-approver", "--json"],
        other,
      );
      expect(r.stderr).toContain(`${t.dataDir}.other.key`); // the new key's creation is announced
      expect(r.code).toBe(2);
      expect(r.stdout + r.stderr).toContain("INTEGRITY_CHECK_FAILED");
      expect(await t.portal.writes()).toHaveLength(0);
      // The process with the right key still can.
      const ok = await runCli(
        ["approve", view.threadId, "--hash", view.approval!.envelopeHash, "--as", "demo-approver", "--json"],
        envFor(t.portal, t.dataDir),
      );
      expect(ok.code, ok.stderr).toBe(0);
      expect(await t.portal.writes()).toHaveLength(1);
    },
  );
});
