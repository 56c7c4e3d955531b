/**
 * People by name (issue 17, B3): user.get in the emulator, the REST client and our MCP server (a read
 * tool, allowlisted like the others); names next to user ids on the card, read by code when the
 * envelope is built and recorded with it; edits that name a person (RESPONSIBLE_ID=Bob Smith) resolved
 * to exactly one active user, or refused. Real emulator over HTTP, our MCP server over stdio.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { createBitrix24Tools, type Bitrix24Tools } from "../src/tools/bitrix24-tools.js";
import { startRun, submitDecision } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { type ThreadView } from "../src/app/view-thread.js";
import {
  createEnvelope,
  defaultPolicy,
  generateApproverKeyPair,
  hashEnvelope,
  parsePublicKeyLines,
  renderCard,
  signDecision,
  signedPayloadOf,
  typedNamesIn,
  userIdsOnCard,
  validateDecision,
  type NameResolution,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";
import { cardSection } from "../src/inbox/card-view.js";
import { lookupNames, resolveName } from "../src/hitl/people.js";
import { buildEvidence } from "../src/evidence/evidence-objects.js";
import {
  envFor,
  openTestApp,
  parseJsonOutput,
  runCli,
  startPortal,
  tempDir,
  type Portal,
} from "./support/harness.js";
import { PASSWORDS, startInboxWorld, type InboxWorld } from "./support/inbox.js";
import { usingPostgres } from "./support/postgres.js";
import { startTaskMcpServer, type McpHttpServer } from "./support/mcp-http.js";

async function rest(
  emu: RunningEmulator,
  method: string,
  params: Record<string, unknown>,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${emu.webhookUrl}${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return { status: res.status, body: await res.json() };
}
const ids = (body: any) => (body.result as Array<{ ID: string }>).map((u) => Number(u.ID));

describe("user.get in the emulator", () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
  });
  afterAll(async () => {
    await emu.close();
  });

  it("answers the documented shape: result[] in UPPER_SNAKE with string ids, total, time", async () => {
    const { status, body } = await rest(emu, "user.get", { ID: 5 });
    expect(status).toBe(200);
    expect(body.total).toBe(1);
    expect(body.time).toMatchObject({ start: expect.any(Number), finish: expect.any(Number) });
    expect(body.result[0]).toMatchObject({
      ID: "5",
      ACTIVE: true,
      NAME: "Elena",
      LAST_NAME: "Kuznetsova",
      EMAIL: "elena.kuznetsova@example.test",
      USER_TYPE: "employee",
      UF_DEPARTMENT: [1],
    });
  });

  it("filters with the documented prefixes, NAME_SEARCH and ACTIVE; dismissed users only when asked", async () => {
    expect(ids((await rest(emu, "user.get", { FILTER: { "@ID": [6, 2, 99] } })).body)).toEqual([2, 6]);
    expect(ids((await rest(emu, "user.get", { filter: { NAME: "Iva%" } })).body)).toEqual([2]);
    expect(ids((await rest(emu, "user.get", { filter: { "%LAST_NAME": "mor" } })).body)).toEqual([8, 9]);
    expect(ids((await rest(emu, "user.get", { filter: { NAME_SEARCH: "bob smith" } })).body)).toEqual([
      7, 10,
    ]);
    expect(
      ids((await rest(emu, "user.get", { filter: { NAME_SEARCH: "bob smith", ACTIVE: true } })).body),
    ).toEqual([7]);
    expect(ids((await rest(emu, "user.get", { filter: { ACTIVE: false } })).body)).toEqual([10]);
    expect(
      ids(
        (await rest(emu, "user.get", { filter: { "!@ID": [1, 2, 3, 4, 5, 6] }, SORT: "ID", ORDER: "desc" }))
          .body,
      ),
    ).toEqual([10, 9, 8, 7]);
  });

  it("pages by 50 with start, total and next", async () => {
    const big = await startEmulator({
      port: 0,
      rate: 0,
      seed: {
        users: Array.from({ length: 120 }, (_, i) => ({
          id: i + 1,
          name: `User${i + 1}`,
          login: `u${i + 1}`,
        })),
        tasks: [],
      },
    });
    try {
      const first = (await rest(big, "user.get", {})).body;
      expect([first.result.length, first.total, first.next]).toEqual([50, 120, 50]);
      const last = (await rest(big, "user.get", { start: 100 })).body;
      expect([last.result.length, last.total, last.next]).toEqual([20, 120, undefined]);
      expect(last.result[0].ID).toBe("101");
    } finally {
      await big.close();
    }
  });

  it("needs the user scope (or user_brief / user_basic): 403 insufficient_scope otherwise", async () => {
    const taskOnly = await startEmulator({ port: 0, rate: 0, scopes: ["task"] });
    const brief = await startEmulator({ port: 0, rate: 0, scopes: ["task", "user_brief"] });
    try {
      const refused = await rest(taskOnly, "user.get", { ID: 5 });
      expect(refused).toEqual({
        status: 403,
        body: {
          error: "insufficient_scope",
          error_description: "The request requires higher privileges than provided by the webhook token",
        },
      });
      const ok = await rest(brief, "user.get", { ID: 5 });
      expect(ok.status).toBe(200);
      expect(ok.body.result[0].NAME).toBe("Elena");
      expect(ok.body.result[0]).not.toHaveProperty("EMAIL");
    } finally {
      await taskOnly.close();
      await brief.close();
    }
  });
});

describe("user.get through the REST client and the MCP server", () => {
  let emu: RunningEmulator;
  let tools: Bitrix24Tools;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    tools = await createBitrix24Tools({
      mode: "stdio",
      env: { BITRIX24_WEBHOOK_URL: emu.webhookUrl, BITRIX24_RATE: "0" },
    });
  });
  afterAll(async () => {
    await tools.close();
    await emu.close();
  });

  it("the client checks the shape and keeps total and next", async () => {
    const client = new Bitrix24Client({ webhookUrl: emu.webhookUrl, rate: 0 });
    const body = await client.getUsers({ filter: { NAME_SEARCH: "Alex Morgan", ACTIVE: true } });
    expect(body.total).toBe(2);
    expect(body.result.map((u) => u.ID)).toEqual(["8", "9"]);
  });

  it("get_users is a read tool offered to the model, bound to user.get, read-only", async () => {
    expect(tools.readTools.map((t) => t.name)).toContain("get_users");
    expect(tools.roles.getUsers).toEqual({ toolName: "get_users", method: "user.get", readOnly: true });
    expect(tools.missingRoles).toEqual([]);
    const res = await tools.read("getUsers", { filter: { "@ID": [5] } });
    expect(res.ok && (res.body as any).result[0].LAST_NAME).toBe("Kuznetsova");
    const viaModel = await tools.readTools
      .find((t) => t.name === "get_users")!
      .invoke({ filter: { NAME_SEARCH: "Bob" } });
    expect(JSON.parse(viaModel as string).result.map((u: any) => u.ID)).toEqual(["7", "10"]);
  });
});

// ── The card and edits, through the graph ──────────────────────────────────────────────────────────

describe("names on the card and in edits, end to end", () => {
  let portal: Portal;
  let dataDir: string;
  let app: App | undefined;

  beforeEach(async () => {
    portal = await startPortal();
    dataDir = tempDir();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await portal.emulator.close();
  });

  /** "assign task 4 to user 3": the offline model proposes RESPONSIBLE_ID 3 (Maria Volkova) for task 4 (now Elena Kuznetsova's). */
  async function waiting(): Promise<ThreadView> {
    app = await openTestApp(portal, dataDir);
    const view = await startRun(app, { request: "assign task 4 to user 3", requestedBy: "demo-user" });
    expect(view.status).toBe("awaiting_approval");
    return view;
  }
  const editTo = (view: ThreadView, fields: Record<string, unknown>, approver = "alice") => ({
    decisions: [
      {
        type: "edit",
        envelopeHash: view.approval!.envelopeHash,
        nonce: view.approval!.nonce,
        approver: { id: approver },
        editedAction: { name: "update_task", args: { taskId: 4, fields } },
      },
    ],
  });
  const approve = (view: ThreadView, approver: string) => ({
    decisions: [
      {
        type: "approve",
        envelopeHash: view.approval!.envelopeHash,
        nonce: view.approval!.nonce,
        approver: { id: approver },
      },
    ],
  });

  it("the card shows each person's name next to the id, read by code once and recorded so the journal reproduces the card", async () => {
    const view = await waiting();
    const card = view.approval!.actionRequests[0]!.description;
    expect(card).toMatch(/before: +"5" \(Elena Kuznetsova\)/);
    expect(card).toMatch(/requested: "3" \(Maria Volkova\)/);
    expect(card).toContain('CREATED_BY: "1" (Anna Petrova)');
    expect(card).toContain('AUDITORS: ["2", "6"] (2 Ivan Sokolov; 6 Pavel Smirnov)');
    expect(card).toContain('ACCOMPLICES: ["3"] (3 Maria Volkova)');
    // One deterministic read (the model read no users), and names are not part of the envelope.
    expect(await portal.calls("user.get")).toHaveLength(1);
    expect(JSON.stringify(view.approval!.envelope)).not.toMatch(/Kuznetsova|Volkova/);
    expect(view.approval!.envelope.params).toEqual({ RESPONSIBLE_ID: "3" });

    const row = (await app!.deps.journal.currentAction(view.threadId))!;
    expect(row.card).toBe(card);
    expect(row.macValid).toBe(true);
    expect(row.people).toMatchObject({
      method: "user.get",
      names: {
        "5": { name: "Elena Kuznetsova", active: true },
        "3": { name: "Maria Volkova", active: true },
      },
    });
    expect(renderCard(row.envelope, row.envelopeHash, "text", { people: row.people!.names }).text).toBe(
      row.card,
    );
    const shown = (await app!.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "approval_requested",
    );
    expect(shown?.shown?.card).toBe(card);
    const page = cardSection(row).toString();
    expect(page).toContain("(Elena Kuznetsova)");
    expect(page).toContain("(Maria Volkova)");
    expect(await portal.writes()).toHaveLength(0);
  });

  it.skipIf(usingPostgres)(
    "the names are sealed with the card: a name edited in the data directory fails the row's MAC",
    async () => {
      const view = await waiting();
      const db = new Database(path.join(dataDir, "journal.sqlite"));
      try {
        const r = db
          .prepare("SELECT registered_json FROM actions WHERE envelope_hash = ?")
          .get(view.approval!.envelopeHash) as { registered_json: string };
        const edited = JSON.parse(r.registered_json);
        edited.people.names["5"].name = "Someone Else";
        db.prepare("UPDATE actions SET registered_json = ? WHERE envelope_hash = ?").run(
          JSON.stringify(edited),
          view.approval!.envelopeHash,
        );
      } finally {
        db.close();
      }
      expect((await app!.deps.journal.getAction(view.approval!.envelopeHash))!.macValid).toBe(false);
    },
  );

  it("an edit naming a person (RESPONSIBLE_ID=Bob Smith) resolves to the one active Bob Smith: the envelope holds id 7, one write, VERIFIED", async () => {
    const view = await waiting();
    const edited = await submitDecision(app!, view.threadId, editTo(view, { RESPONSIBLE_ID: "Bob Smith" }));
    expect(edited.status).toBe("awaiting_approval");
    expect(edited.approval!.envelope.params).toEqual({ RESPONSIBLE_ID: "7" });
    expect(edited.approval!.actionRequests[0]!.description).toMatch(/requested: "7" \(Bob Smith\)/);
    // What was typed and what it resolved to: in the journal's decision and the audit record of the edit.
    const first = (await app!.deps.journal.getAction(view.approval!.envelopeHash))!;
    const resolved = {
      field: "RESPONSIBLE_ID",
      typed: "Bob Smith",
      status: "resolved",
      id: "7",
      name: "Bob Smith",
    };
    expect(first.progress.decision?.edit).toMatchObject({
      fields: { RESPONSIBLE_ID: "7" },
      names: [resolved],
    });
    const accepted = (await app!.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "decision_accepted",
    );
    expect(accepted?.resolvedNames).toEqual([
      expect.objectContaining({
        ...resolved,
        searched: JSON.stringify({ NAME_SEARCH: "Bob Smith", ACTIVE: true }),
      }),
    ]);
    expect(accepted?.received).toMatchObject({
      decisions: [{ editedAction: { args: { fields: { RESPONSIBLE_ID: "Bob Smith" } } } }],
    });

    const done = await submitDecision(app!, view.threadId, approve(edited, "bob"));
    expect(done.state?.outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { RESPONSIBLE_ID: "7" } });
    expect((await portal.task(4)).responsibleId).toBe("7");
    // The run's evidence says it too.
    const evidence = buildEvidence({
      threadId: view.threadId,
      status: "finished",
      state: done.state,
      records: await app!.deps.audit.records({ threadId: view.threadId }),
    } as Parameters<typeof buildEvidence>[0]);
    const editRecord = evidence.find((o) => o.kind === "decision" && o.data["decision"] === "edit")!;
    expect(editRecord.summary).toContain('RESPONSIBLE_ID "Bob Smith" → user 7');
    expect(editRecord.data["resolvedNames"]).toEqual([expect.objectContaining(resolved)]);
  });

  it("an ambiguous name is refused listing the candidates (id and name); nothing is written and the approval keeps waiting", async () => {
    const view = await waiting();
    const refused = await submitDecision(
      app!,
      view.threadId,
      editTo(view, { RESPONSIBLE_ID: "alex morgan" }),
    );
    expect(refused.status).toBe("awaiting_approval");
    expect(refused.approval!.envelopeHash).toBe(view.approval!.envelopeHash);
    const last = refused.state!.refusals.at(-1)!;
    expect(last.code).toBe("INVALID_VALUE");
    expect(last.reason).toContain(
      'RESPONSIBLE_ID "alex morgan" is ambiguous: 2 active users have that name: 8 Alex Morgan (Support engineer), 9 Alex Morgan (Designer); give the user id instead',
    );
    const audit = (await app!.deps.audit.records({ threadId: view.threadId })).find(
      (r) => r.event === "decision_refused",
    );
    expect(audit?.resolvedNames).toEqual([
      expect.objectContaining({
        status: "ambiguous",
        candidates: [expect.objectContaining({ id: "8" }), expect.objectContaining({ id: "9" })],
      }),
    ]);
    expect(await portal.writes()).toHaveLength(0);
  });

  it("an unknown name is refused naming what was searched; an id stays an id", async () => {
    const view = await waiting();
    const refused = await submitDecision(app!, view.threadId, editTo(view, { RESPONSIBLE_ID: "Bob Smyth" }));
    const last = refused.state!.refusals.at(-1)!;
    expect(last.code).toBe("INVALID_VALUE");
    expect(last.reason).toContain(
      'RESPONSIBLE_ID "Bob Smyth": no active user has that name (searched user.get {"NAME_SEARCH":"Bob Smyth","ACTIVE":true})',
    );
    expect(await portal.writes()).toHaveLength(0);

    const lookups = (await portal.calls("user.get")).length;
    const byId = await submitDecision(app!, view.threadId, editTo(view, { RESPONSIBLE_ID: "6" }));
    expect(byId.approval!.envelope.params).toEqual({ RESPONSIBLE_ID: "6" });
    // Only the new card's names were read; the id itself was not looked up.
    expect(await portal.calls("user.get")).toHaveLength(lookups + 1);
    expect(await portal.writes()).toHaveLength(0);
  });

  it("user.get failing: the card is still shown, each id with 'name unavailable: why', the envelope unchanged; approving still writes once", async () => {
    await portal.fault({
      method: "user.get",
      kind: "error",
      status: 403,
      error: "insufficient_scope",
      description: "The request requires higher privileges than provided by the webhook token",
      times: 10,
    });
    const view = await waiting();
    const card = view.approval!.actionRequests[0]!.description;
    expect(card).toMatch(/before: +"5" \(name unavailable: user\.get failed: [^)]*insufficient_scope[^)]*\)/);
    expect(card).toMatch(/requested: "3" \(name unavailable: /);
    expect(view.approval!.envelope.params).toEqual({ RESPONSIBLE_ID: "3" });
    const row = (await app!.deps.journal.currentAction(view.threadId))!;
    expect(renderCard(row.envelope, row.envelopeHash, "text", { people: row.people!.names }).text).toBe(
      row.card,
    );

    // A name typed in an edit cannot be resolved now: refused, asking for the id.
    const refused = await submitDecision(app!, view.threadId, editTo(view, { RESPONSIBLE_ID: "Bob Smith" }));
    expect(refused.state!.refusals.at(-1)!.reason).toMatch(
      /RESPONSIBLE_ID "Bob Smith": the name could not be looked up \(user\.get failed: .*\); give the user id instead/,
    );

    const done = await submitDecision(app!, view.threadId, approve(refused, "bob"));
    expect(done.state?.outcome).toBe("VERIFIED");
    expect(await portal.writes()).toHaveLength(1);
  });
});

describe("names from the command line, each command its own process", () => {
  let portal: Portal;
  let dataDir: string;
  beforeEach(async () => {
    portal = await startPortal();
    dataDir = tempDir();
  });
  afterEach(async () => {
    await portal.emulator.close();
  });

  it('show prints the names; edit --set RESPONSIBLE_ID="Bob Smith" holds id 7; another approver approves: one write, VERIFIED', async () => {
    const env = envFor(portal, dataDir);
    const run = await runCli(["run", "assign task 4 to user 3", "--no-prompt", "--json"], env);
    expect(run.code, run.stderr).toBe(0);
    const waiting = parseJsonOutput(run.stdout);
    expect(waiting.card).toMatch(/requested: "3" \(Maria Volkova\)/);

    const show = await runCli(["show", waiting.threadId], env);
    expect(show.stdout).toMatch(/before: +"5" \(Elena Kuznetsova\)/);

    const edit = await runCli(
      ["edit", waiting.threadId, "--set", "RESPONSIBLE_ID=Bob Smith", "--as", "alice", "--json"],
      env,
    );
    expect(edit.code, edit.stderr).toBe(0);
    const edited = parseJsonOutput(edit.stdout);
    expect(edited).toMatchObject({
      status: "awaiting_approval",
      revision: 2,
      envelope: { params: { RESPONSIBLE_ID: "7" } },
    });
    expect(edited.card).toMatch(/requested: "7" \(Bob Smith\)/);

    const ambiguous = await runCli(
      ["edit", waiting.threadId, "--set", "RESPONSIBLE_ID=Alex Morgan", "--as", "alice", "--json"],
      env,
    );
    expect(ambiguous.code).toBe(2);
    expect(JSON.stringify(parseJsonOutput(ambiguous.stdout))).toMatch(
      /ambiguous: 2 active users have that name: 8 Alex Morgan \(Support engineer\), 9 Alex Morgan \(Designer\)/,
    );

    const approve = await runCli(
      ["approve", waiting.threadId, "--hash", edited.envelopeHash, "--as", "bob", "--json"],
      env,
    );
    expect(approve.code, approve.stderr).toBe(0);
    expect(parseJsonOutput(approve.stdout).outcome).toBe("VERIFIED");
    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.params).toEqual({ taskId: 4, fields: { RESPONSIBLE_ID: "7" } });
  });
});

describe("an external MCP server without a user tool", () => {
  let emu: RunningEmulator;
  let mcp: McpHttpServer;
  let url: string;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
    mcp = await startTaskMcpServer(emu.webhookUrl, {
      get: "get_task_by_id",
      list: "list_tasks",
      history: "get_task_history",
      update: "update_task",
    });
    url = mcp.url;
  });
  afterAll(async () => {
    await mcp.close();
    await emu.close();
  });

  it("connects without it: names are unavailable (said why), nothing else changes; naming the role explicitly must match a tool", async () => {
    const tools = await createBitrix24Tools({ mode: "url", url, toolNames: {} });
    try {
      expect(tools.missingRoles).toEqual([
        "getUsers",
        "getDeal",
        "listDeals",
        "listTaskComments",
        "getTaskComment",
      ]);
      expect(tools.readTools.map((t) => t.name).sort()).toEqual([
        "get_task_by_id",
        "get_task_history",
        "list_tasks",
      ]);
      const names = await lookupNames(tools, ["5"], () => new Date("2026-12-01T10:00:00Z"));
      expect(names?.names["5"]).toEqual({
        unavailable: expect.stringMatching(
          /^user\.get failed: invalid_request: the MCP server offers no tool for user\.get \(no "get_users"\); name one with BITRIX24_MCP_TOOLS getUsers=<tool>/,
        ),
      });
      const typed = await resolveName(tools, { field: "RESPONSIBLE_ID", typed: "Bob Smith" });
      expect(typed.status).toBe("unavailable");
    } finally {
      await tools.close();
    }
    await expect(
      createBitrix24Tools({ mode: "url", url, toolNames: { getUsers: "get_users" } }),
    ).rejects.toThrow(/getUsers → "get_users", but the server has no such tool/);
    const calls = (await (await fetch(`${emu.baseUrl}/_emulator/calls`)).json()) as {
      calls: Array<{ method: string }>;
    };
    expect(calls.calls.filter((c) => c.method === "user.get")).toEqual([]);
  });
});

describe("the pure part: names on the card, typed names in a decision", () => {
  const envelope = () =>
    createEnvelope({
      portal: "127.0.0.1:43210",
      taskId: 4,
      params: { RESPONSIBLE_ID: "7", AUDITORS: ["2", "6"] },
      task: exampleTask(),
      requestedBy: "demo-user",
      requesterVerifiedBy: "authentication",
      runContext: { threadId: "thread-1" },
      policy: defaultPolicy(),
      now: new Date("2026-11-30T10:00:00Z"),
    });
  const resolved = (field: string, typed: string, id: string): NameResolution => ({
    field,
    typed,
    searched: "{}",
    status: "resolved",
    id,
    name: typed,
  });

  it("shows names, dismissed people and failures next to ids; a name is escaped like any value and raises its warning", () => {
    const e = envelope();
    const { text, warnings } = renderCard(e, hashEnvelope(e), "text", {
      people: {
        "5": { name: "Elena Kuznetsova", active: true },
        "7": { name: "Bob\u202E Smith", active: false },
        "2": { unavailable: "user.get failed: auth" },
        "1": { name: "Anna Petrova", active: true },
      },
    });
    expect(text).toContain('before:    "5" (Elena Kuznetsova)');
    expect(text).toContain('requested: "7" (Bob⟨U+202E⟩ Smith, dismissed)');
    expect(text).toContain(
      'requested: ["2", "6"] (2 name unavailable: user.get failed: auth; 6 name unavailable: not looked up)',
    );
    expect(warnings.join("\n")).toMatch(
      /RESPONSIBLE_ID \(requested\) name: contains ⟨U\+202E⟩ RIGHT-TO-LEFT OVERRIDE/,
    );
    // Before and requested values of the changes (5 → 7; 2, 6) and the people in the fields that must stay (creator 1, accomplice 3).
    expect(userIdsOnCard(e)).toEqual(["1", "2", "3", "5", "6", "7"]);
    // Without a lookup (cards registered before names existed) nothing is added.
    expect(renderCard(e, hashEnvelope(e), "text").text).toContain('requested: "7"\n');
  });

  it("validateDecision takes the resolved id, refuses a typed name it has no resolution for, and verifies a signature over what was typed", () => {
    const e = envelope();
    const h = hashEnvelope(e);
    const keys = generateApproverKeyPair("alice");
    const ctx = {
      now: new Date("2026-11-30T10:05:00Z"),
      policy: { ...defaultPolicy(), requireSignature: true },
      threadId: "thread-1",
      envelopeHash: h,
      nonceConsumed: false,
      supersededHashes: [],
      publicKeys: parsePublicKeyLines(keys.publicKeyLine),
      scope: { taskIds: [4] },
    };
    const edit = {
      type: "edit" as const,
      envelopeHash: h,
      nonce: e.nonce,
      approver: { id: "alice" },
      decidedAt: "2026-11-30T10:04:00Z",
      editedAction: {
        name: "update_task",
        args: { taskId: 4, fields: { RESPONSIBLE_ID: "Bob Smith", AUDITORS: ["2", "Alex Morgan"] } },
      },
    };
    const signature = signDecision(signedPayloadOf(edit, "thread-1"), keys.privateKeyPem);
    expect(typedNamesIn(edit.editedAction.args.fields)).toEqual([
      { field: "RESPONSIBLE_ID", typed: "Bob Smith" },
      { field: "AUDITORS", typed: "Alex Morgan" },
    ]);
    const ok = validateDecision(
      e,
      { ...edit, signature },
      {
        ...ctx,
        people: [resolved("RESPONSIBLE_ID", "Bob Smith", "7"), resolved("AUDITORS", "Alex Morgan", "8")],
      },
    );
    expect(ok).toMatchObject({
      ok: true,
      identity: { verifiedBy: "signature" },
      edit: { proposal: { fields: { RESPONSIBLE_ID: "7", AUDITORS: ["2", "8"] } } },
    });
    const missing = validateDecision(e, { ...edit, signature }, ctx);
    expect(missing).toMatchObject({ ok: false, code: "INVALID_VALUE" });
    expect(JSON.stringify(missing)).toContain(
      'RESPONSIBLE_ID \\"Bob Smith\\" is not a user id, and no lookup of it was made',
    );
  });
});

describe("names in the web inbox (plain HTTP)", () => {
  let w: InboxWorld;
  beforeAll(async () => {
    w = await startInboxWorld({ 4: "Quarterly plan" });
  });
  afterAll(async () => {
    await w?.close();
  });

  /** Minimal cookie-keeping client: sign in, read a page, post a form. */
  async function session(user: string) {
    const cookies = new Map<string, string>();
    const req = async (path: string, form?: Record<string, string>) => {
      const res = await fetch(w.inbox.url.replace(/\/$/, "") + path, {
        method: form ? "POST" : "GET",
        headers: {
          accept: "text/html",
          cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; "),
          ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
        },
        ...(form ? { body: new URLSearchParams(form).toString() } : {}),
        redirect: "manual",
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const eq = pair!.indexOf("=");
        cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
      return res;
    };
    const login = await (await req("/login")).text();
    await req("/login", {
      csrf: /name="csrf" value="([^"]+)"/.exec(login)![1]!,
      user,
      password: PASSWORDS[user]!,
    });
    return req;
  }

  it("the card page shows the names; an edit typing a name becomes a revision holding the id, whose card shows it", async () => {
    // The scripted model proposes a title; the request's scope also covers the responsible person.
    const view = await startRun(w.app, {
      request: "rename task 4 to the proposed title",
      requestedBy: "demo-user",
      scope: { taskIds: [4], fields: ["TITLE", "RESPONSIBLE_ID"] },
    });
    const alice = await session("alice");
    const page = await (await alice(`/t/${view.threadId}`)).text();
    expect(page).toMatch(
      /RESPONSIBLE_ID<\/th><td><pre class="value">&quot;5&quot;<\/pre> <small class="value-name">\(Elena Kuznetsova\)<\/small>/,
    );
    const res = await alice(`/t/${view.threadId}/decide`, {
      csrf: /name="csrf" value="([^"]+)"/.exec(page)![1]!,
      action: "edit",
      envelopeHash: view.approval!.envelopeHash,
      nonce: view.approval!.nonce,
      "field.TITLE": "Quarterly plan",
      "field.RESPONSIBLE_ID": "Bob Smith",
    });
    const after = await res.text();
    expect(res.status, after.slice(0, 2000)).toBe(200);
    expect(after).toContain("A new revision (2) now waits for a fresh approval");
    const row = (await w.app.deps.journal.currentAction(view.threadId))!;
    expect(row.envelope.params).toEqual({ TITLE: "Quarterly plan", RESPONSIBLE_ID: "7" });
    expect(row.card).toMatch(/requested: "7" \(Bob Smith\)/);
    expect(after).toContain("(Bob Smith)");
    expect(await w.portal.writes()).toHaveLength(0);
  });
});
