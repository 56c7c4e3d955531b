/**
 * `worker` on whichever backend the suite runs on (SQLite files, or PostgreSQL in the second CI
 * pass): one round sweeps approvals past their expiry and finishes a run whose process was killed
 * mid-execution, from the write-ahead entry, without sending the write again. Also: how DATABASE_URL
 * is validated and how an unreachable database is reported, which needs no server at all.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { ConfigError } from "../src/errors.js";
import type { ThreadView } from "../src/app/view-thread.js";
import {
  RESUME_PROCESS,
  eachTestPortal,
  envFor,
  killedWhen,
  parseJsonOutput,
  recordPendingRename,
  runCli,
  until,
  type Portal,
} from "./support/harness.js";

let portal: Portal;
let dataDir: string;
eachTestPortal((f) => ({ portal, dataDir } = f));

const pending = (title: string, env: Record<string, string> = {}): Promise<ThreadView> =>
  recordPendingRename(portal, dataDir, title, { env });

describe("worker", () => {
  it("one round closes an approval past its expiry through the graph (ended or escalated, as the policy says)", async () => {
    const view = await pending("NEVER APPROVED", { ACTION_ENVELOPE_TTL_SECONDS: "1" });
    await until(
      "the approval to expire",
      async () => Date.now() > Date.parse(view.approval!.expiresAt) + 100,
    );
    const r = await runCli(["worker", "--once", "--json"], envFor(portal, dataDir));
    expect(r.code, r.stderr).toBe(0);
    const round = parseJsonOutput(r.stdout);
    expect(round.error).toBeUndefined();
    expect(round.swept).toHaveLength(1);
    const swept = round.swept[0];
    expect(swept.threadId).toBe(view.threadId);
    expect(round.recovered).toEqual([]);
    const shown = parseJsonOutput(
      (await runCli(["show", view.threadId, "--json"], envFor(portal, dataDir))).stdout,
    );
    // The policy decides: the thread ends expired, or a fresh approval goes to the escalation group.
    if (swept.result === "escalated") {
      expect(shown.status).toBe("awaiting_approval");
      expect(shown.envelopeHash).not.toBe(view.approval!.envelopeHash);
    } else {
      expect(swept.result).toBe("expired");
      expect(shown.reasonCode).toBe("APPROVAL_EXPIRED");
    }
    expect(await portal.writes()).toHaveLength(0);
  });

  it("one round finishes a run whose process was killed after sending the write: honest outcome, no second write", async () => {
    const view = await pending("KILLED AFTER SEND");
    await portal.fault({ method: "tasks.task.update", kind: "timeout_without_apply", times: 1 });
    const resume = {
      decisions: [
        {
          type: "approve",
          envelopeHash: view.approval!.envelopeHash,
          nonce: view.approval!.nonce,
          approver: { id: "demo-approver" },
        },
      ],
    };
    await killedWhen(
      [view.threadId, JSON.stringify(resume)],
      // No resume grace: the worker below may take the run over as soon as its process is gone.
      envFor(portal, dataDir, { BITRIX24_TIMEOUT_MS: "30000", ACTION_ENVELOPE_RESUME_GRACE_MS: "0" }),
      "the write to reach the portal",
      async () => (await portal.calls()).some((c) => c.method === "tasks.task.update"),
      {
        script: RESUME_PROCESS,
      },
    );

    const r = await runCli(["worker", "--once", "--json"], envFor(portal, dataDir));
    expect(r.code, r.stderr).toBe(0);
    const round = parseJsonOutput(r.stdout);
    expect(round.recovered).toEqual([
      { threadId: view.threadId, result: "recovered", detail: "INCONCLUSIVE / INCONCLUSIVE" },
    ]);
    expect(await portal.writes()).toHaveLength(1);

    // The next round has nothing left to do.
    const again = parseJsonOutput(
      (await runCli(["worker", "--once", "--json"], envFor(portal, dataDir))).stdout,
    );
    expect(again.recovered).toEqual([]);
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("DATABASE_URL", () => {
  const configError = (env: Record<string, string>) => {
    try {
      loadConfig(env, "/x");
    } catch (e) {
      if (e instanceof ConfigError) return e;
      throw e;
    }
    throw new Error("expected a ConfigError");
  };

  it("selects PostgreSQL with a label that never carries the password", () => {
    const c = loadConfig(
      { DATABASE_URL: "postgresql://app:s3cr%40t@db.internal:6543/envelopes?sslmode=require" },
      "/x",
    );
    expect(c.database).toEqual({
      url: "postgresql://app:s3cr%40t@db.internal:6543/envelopes?sslmode=require",
      schema: "public",
      label: "postgresql://app@db.internal:6543/envelopes",
      poolSize: 10,
      prepare: true,
    });
    expect(
      loadConfig({ DATABASE_URL: "postgres://db/x", ACTION_ENVELOPE_DB_SCHEMA: "team_a" }, "/x").database
        ?.schema,
    ).toBe("team_a");
    expect(loadConfig({ DATABASE_URL: "" }, "/x").database).toBeUndefined();
  });

  it("refuses other schemes, a schema without a database, and a schema that is not a plain identifier, without echoing the value", () => {
    const bad = configError({ DATABASE_URL: "mysql://root:hunter2@db/x" });
    expect(bad.message).toBe(
      "DATABASE_URL must be a PostgreSQL URL like postgres://user:password@host:5432/database",
    );
    expect(configError({ DATABASE_URL: "postgres:///socket-only" }).variable).toBe("DATABASE_URL");
    expect(configError({ ACTION_ENVELOPE_DB_SCHEMA: "team_a" }).message).toBe(
      "ACTION_ENVELOPE_DB_SCHEMA only applies with DATABASE_URL; set that too or remove it",
    );
    expect(
      configError({ DATABASE_URL: "postgres://db/x", ACTION_ENVELOPE_DB_SCHEMA: 'a"; DROP' }).variable,
    ).toBe("ACTION_ENVELOPE_DB_SCHEMA");
  });

  it("an unreachable database stops a command with an error naming the server, not the password, and no state files", async () => {
    const r = await runCli(
      ["pending"],
      envFor(portal, dataDir, {
        DATABASE_URL: "postgres://app:hunter2-secret@127.0.0.1:1/envelopes",
        ACTION_ENVELOPE_DB_SCHEMA: "",
      }),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      "StoreUnavailableError: the database postgres://app@127.0.0.1:1/envelopes is unavailable while connecting",
    );
    expect(r.stderr).not.toContain("hunter2");
    expect(r.stdout).not.toContain("hunter2");
  });
});
