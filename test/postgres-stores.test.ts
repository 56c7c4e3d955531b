/**
 * The PostgreSQL journal and audit log against a real server (a database of this file's own), with
 * contention made real by separate pools, i.e. separate server connections: claims and write-ahead
 * entries are won once, the audit chain stays linear, migrations survive concurrent starts, thread
 * locks end with their connection, and an outage is a clear error that names no password.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { loadConfig, type DatabaseConfig } from "../src/config/env.js";
import { PostgresJournal } from "../src/store/pg-journal.js";
import { toClaim, type ClaimRow } from "../src/store/journal.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import { StoreUnavailableError, createPool } from "../src/store/postgres.js";
import { MIGRATIONS } from "../src/store/pg-migrations.js";
import { closeCheckpointer, createCheckpointer } from "../src/store/checkpointer.js";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import {
  copyCheckpoint,
  emptyCheckpoint,
  uuid6,
  type BaseCheckpointSaver,
} from "@langchain/langgraph-checkpoint";
import { PAUSE_STAGES, pauseStages } from "./support/pause-stages.js";
import { approvalOf, leaseFor, readyToWrite, testAction } from "./support/journal-rows.js";
import { NO_POSTGRES, createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";
import { randomBytes } from "node:crypto";
import { refusalEntry } from "./support/audit-entries.js";

/** Any 32 bytes: these tests exercise claims, entries and locks, not the seal of registered rows. */
const TEST_JOURNAL_KEY = randomBytes(32);

if (!usingPostgres) console.info(`test/postgres-stores.test.ts: ${NO_POSTGRES}`);

let db: TestDatabase;
let schemaSeq = 0;

/** A fresh schema in this file's database: every test starts from an empty store. */
function freshConfig(): DatabaseConfig {
  schemaSeq += 1;
  return loadConfig({
    DATABASE_URL: db.url,
    ACTION_ENVELOPE_DB_SCHEMA: `s${schemaSeq}_${Date.now() % 100000}`,
  }).database!;
}

/** The claim of a nonce in the schema of `config`, as the journal's table holds it. */
async function claimOf(config: DatabaseConfig, nonce: string) {
  const [row] = await sql<ClaimRow>(`SELECT * FROM "${config.schema}".decision_claims WHERE nonce = $1`, [
    nonce,
  ]);
  return row ? toClaim(row) : undefined;
}

async function sql<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}

const entry = refusalEntry;

describe.skipIf(!usingPostgres)("PostgreSQL stores", () => {
  beforeAll(async () => {
    db = await createTestDatabase("stores");
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("reads bytea[][] (how the checkpointer loads a checkpoint's values) exactly as pg's own parser does", async () => {
    const config = freshConfig();
    const ours = createPool(config, { name: "bytea-test", max: 1 });
    const plain = new pg.Pool({ connectionString: config.url, max: 1 });
    // Empty, NULL, quotes, backslashes, braces, commas, non-UTF-8 bytes and a value of 70 KB, in both
    // of the server's output formats.
    const text = `SELECT array[
        array['channel'::bytea, 'json'::bytea, convert_to(repeat('{"a\\",}', 10000), 'UTF8')],
        array[''::bytea, NULL, '\\x00ff7b7d2c22'::bytea],
        array['NULL'::bytea, 'a"b\\\\c'::bytea, decode(repeat('e2', 5), 'hex')]
      ] AS v, array[]::bytea[] AS empty, NULL::bytea[] AS none`;
    // The pool parses bytea[] with its own parser (the comparison below would hold for pg's own too).
    type Parsers = { getTypeParser(oid: number, format: string): unknown };
    const byteaArrays = (t: Parsers) => t.getTypeParser(1001, "text");
    expect(byteaArrays((ours.options as unknown as { types: Parsers }).types)).not.toBe(
      byteaArrays(pg.types as unknown as Parsers),
    );
    try {
      for (const format of ["hex", "escape"]) {
        const read = async (p: pg.Pool) => {
          const client = await p.connect();
          try {
            await client.query(`SET bytea_output = ${format}`);
            return (await client.query(text)).rows[0] as Record<string, unknown>;
          } finally {
            client.release();
          }
        };
        const [a, b] = [await read(ours), await read(plain)];
        expect(a, format).toEqual(b);
        expect((a["v"] as Buffer[][])[0]![2]!.length).toBe(70_000);
        expect((a["v"] as Array<Array<Buffer | null>>)[1]).toEqual([
          Buffer.alloc(0),
          null,
          Buffer.from("00ff7b7d2c22", "hex"),
        ]);
      }
    } finally {
      await Promise.all([ours.end(), plain.end()]);
    }
  });

  it("saves checkpoints and writes in one statement each as PostgresSaver saves them: same tuples, same conflict rules", async () => {
    const [ours, theirs] = [freshConfig(), freshConfig()];
    for (const c of [ours, theirs]) await (await PostgresJournal.open(c, TEST_JOURNAL_KEY)).close();
    const plain = new pg.Pool({ connectionString: theirs.url, max: 2 });
    const savers = [
      createCheckpointer(loadConfig({ DATABASE_URL: ours.url, ACTION_ENVELOPE_DB_SCHEMA: ours.schema })),
      new PostgresSaver(plain, undefined, { schema: theirs.schema }),
    ];
    const cfg = (checkpoint_id?: string) => ({
      configurable: { thread_id: "t", checkpoint_ns: "", ...(checkpoint_id ? { checkpoint_id } : {}) },
    });
    const saved = async (saver: BaseCheckpointSaver) => {
      const first = emptyCheckpoint();
      first.channel_values = { a: "one", b: { nested: [1, 2] }, big: "x".repeat(50_000) };
      first.channel_versions = { a: 1, b: 1, big: 1 };
      const c1 = await saver.put(
        cfg(),
        first,
        { source: "input", step: -1, parents: {} },
        { a: 1, b: 1, big: 1 },
      );
      const second = { ...copyCheckpoint(first), id: uuid6(-1) };
      second.channel_values = { a: "two", b: first.channel_values["b"], big: first.channel_values["big"] };
      second.channel_versions = { a: 2, b: 1, big: 1, gone: 2 };
      const c2 = await saver.put(c1, second, { source: "loop", step: 0, parents: {} }, { a: 2, gone: 2 });
      // Ordinary writes keep the first of a (task, idx); writes all to special channels replace it.
      await saver.putWrites(
        c2,
        [
          ["a", "w1"],
          ["b", "w2"],
        ],
        "task-1",
      );
      await saver.putWrites(c2, [["a", "again"]], "task-1");
      await saver.putWrites(
        c2,
        [
          ["__interrupt__", [{ value: 1 }]],
          ["__interrupt__", [{ value: 2 }]],
        ],
        "task-2",
      );
      await saver.putWrites(c2, [["__interrupt__", [{ value: 3 }]]], "task-2");
      await saver.putWrites(
        c2,
        [
          ["__interrupt__", [{ value: 4 }]],
          ["a", "x"],
          ["__interrupt__", [{ value: 5 }]],
        ],
        "task-3",
      );
      const tuple = await saver.getTuple(cfg());
      const older = await saver.getTuple(cfg(first.id));
      return {
        checkpoint: { ...tuple!.checkpoint, id: "newest", ts: "" },
        metadata: tuple!.metadata,
        pendingWrites: tuple!.pendingWrites,
        older: { ...older!.checkpoint.channel_values },
      };
    };
    try {
      const [a, b] = [await saved(savers[0]!), await saved(savers[1]!)];
      expect(a).toEqual(b);
      expect(a.pendingWrites).toContainEqual(["task-1", "a", "w1"]);
      expect(a.pendingWrites).toContainEqual(["task-2", "__interrupt__", [{ value: 3 }]]);
      expect(a.pendingWrites).toContainEqual(["task-3", "__interrupt__", [{ value: 4 }]]);
    } finally {
      await closeCheckpointer(savers[0]!);
      await plain.end();
    }
  });

  it("says a thread is paused at an interrupt from the newest checkpoint's interrupt writes, as getState does, at every stage of a run", async () => {
    const config = freshConfig();
    // Opening the journal migrates the schema, the checkpointer's tables included.
    await (await PostgresJournal.open(config, TEST_JOURNAL_KEY)).close();
    const saver = createCheckpointer(
      loadConfig({ DATABASE_URL: config.url, ACTION_ENVELOPE_DB_SCHEMA: config.schema }),
    );
    try {
      expect(await pauseStages(saver)).toEqual(PAUSE_STAGES);
    } finally {
      await closeCheckpointer(saver);
    }
  });

  it("concurrent starts on an empty schema migrate once, and a newer database is refused clearly", async () => {
    const config = freshConfig();
    // Separate processes would each have their own once-per-process cache; a distinct URL spelling per
    // opener defeats it here, so every opener really runs the migration path against the server.
    const openers = Array.from({ length: 6 }, (_, i) =>
      PostgresJournal.open({ ...config, url: `${config.url}?application_name=m${i}` }, TEST_JOURNAL_KEY),
    );
    const journals = await Promise.all(openers);
    await Promise.all(journals.map((j) => j.close()));
    const applied = await sql<{ version: number }>(
      `SELECT version FROM ${config.schema}.schema_migrations ORDER BY version`,
    );
    expect(applied.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const checkpointTables = await sql<{ v: number }>(`SELECT v FROM ${config.schema}.checkpoint_migrations`);
    expect(checkpointTables.length).toBeGreaterThan(0);

    await sql(
      `INSERT INTO ${config.schema}.schema_migrations (version, name) VALUES (999, 'from the future')`,
    );
    const err = await PostgresJournal.open(
      { ...config, url: `${config.url}?application_name=late` },
      TEST_JOURNAL_KEY,
    ).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/at migration 999, newer than this program knows/);
  });

  it("eight connections claiming one nonce at once: exactly one claim, the others see the winner", async () => {
    const config = freshConfig();
    const journals = await Promise.all(
      Array.from({ length: 8 }, () => PostgresJournal.open(config, TEST_JOURNAL_KEY)),
    );
    try {
      for (let round = 0; round < 10; round++) {
        const nonce = `nonce-${round}`;
        const action = testAction("t", `sha256:${round}`, { nonce });
        await journals[0]!.registerAction(action, action.envelope.createdAt);
        const results = await Promise.all(
          journals.map((j, i) => {
            const { claim, decision } = approvalOf(action, `approver-${i}`);
            return j.decideAction(action.envelopeHash, claim, decision);
          }),
        );
        const winners = results.filter((r) => r.claimed);
        expect(winners).toHaveLength(1);
        const stored = await claimOf(config, nonce);
        for (const r of results) if (!r.claimed && "existing" in r) expect(r.existing).toEqual(stored);
      }
      // The same nonce under another envelope hash is still consumed.
      const other = testAction("t-other", "sha256:other", { nonce: "nonce-0" });
      await journals[0]!.registerAction(other, other.envelope.createdAt);
      const { claim, decision } = approvalOf(other, "x");
      const again = await journals[0]!.decideAction(other.envelopeHash, claim, decision);
      expect(again.claimed).toBe(false);
      expect((await journals[0]!.getAction(other.envelopeHash))?.phase).toBe("registered");
    } finally {
      await Promise.all(journals.map((j) => j.close()));
    }
  });

  it("write-ahead entries: one intent per envelope under concurrency; the acknowledgement is recorded once", async () => {
    const config = freshConfig();
    const journals = await Promise.all(
      Array.from({ length: 8 }, () => PostgresJournal.open(config, TEST_JOURNAL_KEY)),
    );
    try {
      const action = testAction("t1", "sha256:e1");
      await readyToWrite(journals[0]!, action);
      const intent = (i: number) => ({
        envelopeHash: "sha256:e1",
        threadId: "t1",
        idempotencyKey: "k1",
        args: { taskId: 4, fields: { TITLE: `from ${i}` } },
      });
      const results = await Promise.all(
        journals.map((j, i) => j.beginWrite(intent(i), new Date().toISOString(), leaseFor(action))),
      );
      expect(results.filter((r) => r.begun)).toHaveLength(1);
      const stored = await journals[0]!.findExecution("sha256:e1");
      expect(stored?.acknowledgement).toBeUndefined();
      for (const r of results) if (!r.begun) expect("existing" in r ? r.existing : r).toEqual(stored);
      await journals[1]!.recordAcknowledgement("sha256:e1", { status: "OK" }, "2026-01-01T00:00:01Z");
      await journals[2]!.recordAcknowledgement("sha256:e1", { status: "LATE" }, "2026-01-01T00:00:02Z");
      expect((await journals[3]!.findExecution("sha256:e1"))?.acknowledgement).toEqual({ status: "OK" });
    } finally {
      await Promise.all(journals.map((j) => j.close()));
    }
  });

  it("an older version's approvals table: its waiting rows without an action are listed, oldest first, until the table is retired", async () => {
    const config = freshConfig();
    const j = await PostgresJournal.open(config, TEST_JOURNAL_KEY);
    try {
      await j.registerAction(testAction("a", "h1"), "2026-01-01T00:00:01Z");
      const rows: Array<[string, string, string, string]> = [
        ["h1", "a", "2026-01-01T00:00:01Z", "pending"],
        ["h3", "c", "2026-01-01T00:00:03Z", "pending"],
        ["h2", "b", "2026-01-01T00:00:02Z", "pending"],
        ["h4", "d", "2026-01-01T00:00:00Z", "expired"],
      ];
      for (const [hash, thread, at, status] of rows) {
        await sql(
          `INSERT INTO "${config.schema}".approvals (envelope_hash, thread_id, revision, requested_by, created_at, expires_at, status) VALUES ($1, $2, 1, 'u', $3, $3, $4)`,
          [hash, thread, at, status],
        );
      }
      expect(await j.legacyApprovals()).toEqual([
        { envelopeHash: "h2", threadId: "b" },
        { envelopeHash: "h3", threadId: "c" },
      ]);
      await j.retireLegacyApprovals();
      await j.retireLegacyApprovals();
      expect(await j.legacyApprovals()).toBeNull();
      expect(
        await sql(`SELECT envelope_hash FROM "${config.schema}".approvals_adopted ORDER BY envelope_hash`),
      ).toHaveLength(4);
    } finally {
      await j.close();
    }
  });

  it("at 100,000 waiting rows every listing page (first, after a cursor, by requester, object, --mine, age) and every count is read through a waiting-rows index, with sequential scans allowed", async () => {
    const config = freshConfig();
    const j = await PostgresJournal.open(config, TEST_JOURNAL_KEY);
    const s = `"${config.schema}"`;
    // The statements listRegistered and countRegistered really send, so a change to their SQL that stops
    // matching migration 12's indexes fails here rather than in production.
    const sent: Array<{ text: string; values: unknown[] }> = [];
    const pool = (j as unknown as { pool: pg.Pool }).pool;
    const original = pool.query.bind(pool) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    (pool as unknown as { query: typeof original }).query = (text, values) => {
      if (text.includes("phase = 'registered'")) sent.push({ text, values: values ?? [] });
      return original(text, values);
    };
    const N = 100_000;
    try {
      // Half the rows wait; the rest are closed history, as in a journal that has run a while. Committed
      // synchronously: VACUUM marks rows visible to all only once their commit's WAL is flushed, so after
      // an asynchronous commit (CI's server) it would leave the visibility map empty, as autovacuum,
      // coming later, does not, and an index-only read would visit every row.
      await sql(`
        SET synchronous_commit = on;
        INSERT INTO ${s}.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at)
        SELECT 'sha256:' || lpad(i::text, 64, '0'), 't' || i, 1,
          json_build_object('envelope', json_build_object('requestedBy', 'u' || (i % 100),
            'operation', CASE WHEN i % 3 = 0 THEN 'update_deal' ELSE 'update_task' END,
            'object', json_build_object('type', CASE WHEN i % 3 = 0 THEN 'deal' ELSE 'task' END, 'id', i % 1000)),
            'escalatedTo', CASE WHEN i % 10 = 0 THEN 'task-leads' ELSE NULL END)::text,
          'x', CASE WHEN i % 2 = 0 THEN 'registered' ELSE 'closed' END, '{}',
          to_char(timestamp '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        FROM generate_series(1, ${2 * N}) AS i`);
      // Vacuumed as autovacuum leaves a table, so the visibility map lets a count read the index alone.
      await sql(`VACUUM ANALYZE ${s}.actions`);
      const after = {
        registeredAt: "2026-01-01T12:00:00.000Z",
        envelopeHash: `sha256:${"0".repeat(59)}43200`,
      };
      const mine = { operations: ["update_deal"], exclude: true, groups: ["task-approvers", "task-leads"] };
      const filters = [
        {},
        { requestedBy: "u8" },
        { object: { type: "task", id: 8 } },
        { decidable: mine },
        { registeredBefore: "2026-01-02T00:00:00.000Z" },
      ];
      for (const f of filters) {
        expect((await j.listRegistered({ ...f, limit: 100 })).length).toBeGreaterThan(0);
        await j.listRegistered({ ...f, after, limit: 100 });
      }
      await j.countRegistered({ requestedBy: "u8" });
      await j.countRegistered({ object: { type: "task", id: 8 } });
      // Waiting rows not on a deal (i even, not a multiple of 3); their escalation group is one of mine.
      expect(await j.countRegistered({ decidable: mine })).toBe(N - Math.floor((2 * N) / 6));
      expect(await j.countRegistered({})).toBe(N);
    } finally {
      await j.close();
    }
    expect(sent).toHaveLength(14);
    const plans: Array<[string, string]> = [];
    for (const q of sent)
      plans.push([
        q.text,
        (await sql<{ "QUERY PLAN": string }>(`EXPLAIN ${q.text}`, q.values))
          .map((r) => r["QUERY PLAN"])
          .join("\n"),
      ]);
    if (process.env["SHOW_PLANS"])
      for (const [text, plan] of plans) console.log(`${text}\n  ${plan.replaceAll("\n", "\n  ")}`);
    // Pages and counts: an index of waiting rows, never the table read whole.
    for (const [text, plan] of plans) {
      expect(plan, text).not.toMatch(/Seq Scan/);
      expect(plan, text).toMatch(/actions_waiting_(keyset|requester_keyset|object_keyset|count)/);
    }
    expect(plans[2]![1]).toMatch(/actions_waiting_requester_keyset/);
    expect(plans[3]![1]).toMatch(/actions_waiting_requester_keyset/);
    expect(plans[4]![1]).toMatch(/actions_waiting_object_keyset/);
    expect(plans[5]![1]).toMatch(/actions_waiting_object_keyset/);
    // The cursor is a range of the index, not a filter over the rows before it.
    for (const i of [1, 3, 5, 7, 9])
      expect(plans[i]![1]).toMatch(
        /Index Cond: .*ROW\(\(registered_at\)::text, \(envelope_hash\)::text\) > ROW/,
      );
    expect(plans[8]![1]).toMatch(/Index Cond: .*\(registered_at\)::text < /);
    expect(plans[10]![1]).toMatch(/actions_waiting_requester_keyset/);
    expect(plans[11]![1]).toMatch(/actions_waiting_object_keyset/);
    // The --mine and unfiltered counts read migration 16's narrow index alone, no row.
    expect(plans[12]![1]).toMatch(/Index Only Scan using actions_waiting_count/);
    expect(plans[13]![1]).toMatch(/Index Only Scan using actions_waiting_count/);
    // Migration 12 replaced migration 6's indexes; migration 16 added the counts'.
    const indexes = (
      await sql<{ indexname: string }>(
        "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND indexname LIKE 'actions_waiting%' ORDER BY indexname",
        [config.schema],
      )
    ).map((r) => r.indexname);
    expect(indexes).toEqual([
      "actions_waiting_count",
      "actions_waiting_keyset",
      "actions_waiting_object_keyset",
      "actions_waiting_requester_keyset",
    ]);
  }, 120_000);

  it("the checkpointer's setup is marked with its version, and runs again when its tables are gone", async () => {
    const config = freshConfig();
    const mark = async () =>
      (
        await sql<{ note: string | null }>("SELECT obj_description(to_regclass($1), 'pg_class') AS note", [
          `"${config.schema}".checkpoint_migrations`,
        ])
      )[0]?.note;
    await (await PostgresJournal.open(config, TEST_JOURNAL_KEY)).close();
    expect(await mark()).toMatch(/^set up by @langchain\/langgraph-checkpoint-postgres \d+\.\d+\.\d+/);
    await sql(
      `DROP TABLE "${config.schema}".checkpoint_migrations, "${config.schema}".checkpoints, "${config.schema}".checkpoint_blobs, "${config.schema}".checkpoint_writes`,
    );
    // Another URL: this process has not prepared the database under it yet.
    const again = await PostgresJournal.open(
      { ...config, url: `${config.url}?application_name=again` },
      TEST_JOURNAL_KEY,
    );
    await again.close();
    expect(await mark()).toMatch(/^set up by /);
    expect(await sql(`SELECT 1 FROM "${config.schema}".checkpoints`)).toEqual([]);
  });

  it("a thread lock is held by one owner at a time and ends with its connection", async () => {
    const config = freshConfig();
    const [a, b] = await Promise.all([
      PostgresJournal.open(config, TEST_JOURNAL_KEY),
      PostgresJournal.open(config, TEST_JOURNAL_KEY),
    ]);
    try {
      expect(await a.acquireThreadLock("t1", "owner-a", 1000)).toBe(true);
      expect(await b.acquireThreadLock("t1", "owner-b", 1000)).toBe(false);
      expect(await b.acquireThreadLock("t2", "owner-b", 1000)).toBe(true);
      await a.releaseThreadLock("t1", "owner-a");
      expect(await b.acquireThreadLock("t1", "owner-b", 1000)).toBe(true);
      await b.releaseThreadLock("t1", "owner-b");

      // A holder whose connection dies (process killed, host lost) frees the thread without any lease running out.
      // pg_terminate_backend with a timeout returns once the backend has exited (and its locks are gone).
      expect(await a.acquireThreadLock("t3", "owner-a", 60_000)).toBe(true);
      expect(await b.acquireThreadLock("t3", "owner-b", 60_000)).toBe(false);
      const killed = await sql<{ n: string }>(
        `SELECT count(pg_terminate_backend(l.pid, 10000)) AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
         WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1 AND l.objsubid = 1
           AND l.classid::bigint = (hashtextextended($2, 0) >> 32) & 4294967295
           AND l.objid::bigint = hashtextextended($2, 0) & 4294967295`,
        [db.name, `action-envelope:${config.schema}:thread:t3`],
      );
      expect(Number(killed[0]!.n)).toBe(1);
      expect(await b.acquireThreadLock("t3", "owner-b", 60_000)).toBe(true);
      // Releasing a lock whose connection is gone is quiet: the server already let it go.
      await a.releaseThreadLock("t3", "owner-a");
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("audited threads page by the seq of their first record; records and threads added between pages are neither skipped nor repeated", async () => {
    const config = freshConfig();
    const log = await PostgresAuditLog.open(config);
    try {
      let i = 0;
      for (const t of ["t1", "t2", "t1", "t3", "t2", "t4", "t5"]) await log.append(entry(t, i++));
      const seen: string[] = [];
      let after: number | undefined;
      for (let page = 0; page < 10; page++) {
        const p = await log.threadPage({ ...(after !== undefined ? { after } : {}), limit: 2 });
        seen.push(...p.threads.map((t) => t.threadId));
        if (page === 0) for (const t of ["t1", "t4", "t6"]) await log.append(entry(t, i++));
        if (p.next === null) break;
        after = p.next;
      }
      expect(seen).toEqual(["t1", "t2", "t3", "t4", "t5", "t6"]);
      const all = await log.threadPage({ limit: 100 });
      expect(all.threads.map((t) => [t.threadId, t.records])).toEqual([
        ["t1", 3],
        ["t2", 2],
        ["t3", 1],
        ["t4", 2],
        ["t5", 1],
        ["t6", 1],
      ]);
      expect(all.next).toBeNull();
    } finally {
      await log.close();
    }
  });

  it("the audit chain stays linear with eight writers appending at once, and records are append-only", async () => {
    const config = freshConfig();
    const logs = await Promise.all(Array.from({ length: 8 }, () => PostgresAuditLog.open(config)));
    try {
      await Promise.all(
        logs.map((log, w) =>
          (async () => {
            for (let i = 0; i < 25; i++) await log.append(entry(`thread-${w}`, i));
          })(),
        ),
      );
      // A re-run of the same step gets the existing record back.
      const dup = await logs[3]!.append(entry("thread-5", 7));
      expect(dup.appended).toBe(false);
      expect(dup.record.seq).toBeGreaterThan(0);

      const verified = await logs[0]!.verify();
      expect(verified).toMatchObject({ intact: true, records: 200 });
      const records = await logs[1]!.records();
      expect(records.map((r) => r.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      for (let i = 1; i < records.length; i++) expect(records[i]!.prevHash).toBe(records[i - 1]!.hash);
      expect(await logs[2]!.records({ threadId: "thread-4" })).toHaveLength(25);
      const summary = (await logs[2]!.threadPage({ limit: 100 })).threads.find(
        (t) => t.threadId === "thread-4",
      );
      expect(summary).toMatchObject({ records: 25, lastEvent: "decision_refused" });

      await expect(
        sql(`UPDATE ${config.schema}.audit_records SET discriminator = 'x' WHERE seq = 1`),
      ).rejects.toThrow(/append-only/);
      await expect(sql(`DELETE FROM ${config.schema}.audit_records WHERE seq = 200`)).rejects.toThrow(
        /append-only/,
      );
      await expect(sql(`TRUNCATE ${config.schema}.audit_records`)).rejects.toThrow(/append-only/);

      // Someone who drops the guard and edits a record is caught by the chain.
      await sql(`ALTER TABLE ${config.schema}.audit_records DISABLE TRIGGER audit_records_no_change`);
      await sql(
        `UPDATE ${config.schema}.audit_records SET record_json = replace(record_json, '"requestedBy":"demo-user"', '"requestedBy":"mallory"') WHERE seq = 50`,
      );
      const broken = await logs[0]!.verify();
      expect(broken.intact).toBe(false);
      if (!broken.intact) expect(broken.problem).toMatchObject({ kind: "edited", seq: 50 });
    } finally {
      await Promise.all(logs.map((l) => l.close()));
    }
  });

  it("a database that goes away gives StoreUnavailableError naming the server but not the password; it works again once back", async () => {
    const config = freshConfig();
    const u = new URL(config.url);
    u.username ||= "postgres";
    u.password = "hunter2-secret";
    const withPassword = loadConfig({
      DATABASE_URL: u.toString(),
      ACTION_ENVELOPE_DB_SCHEMA: config.schema,
    }).database!;
    expect(withPassword.label).not.toContain("hunter2");
    const j = await PostgresJournal.open(withPassword, TEST_JOURNAL_KEY);
    try {
      const action = testAction("t", "sha256:x", { nonce: "n-outage" });
      await j.registerAction(action, action.envelope.createdAt);
      const { claim, decision } = approvalOf(action, "a", "2026-01-01T00:00:00Z");
      await db.takeAway();
      const err = await j.decideAction(action.envelopeHash, claim, decision).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailableError);
      const message = (err as Error).message;
      expect(message).toContain(new URL(config.url).host);
      expect(message).toContain("deciding action sha256:x");
      expect(message).not.toContain("hunter2");
      await db.bringBack();
      // The failed claim left nothing behind: the nonce is still free.
      expect(await claimOf(config, "n-outage")).toBeUndefined();
      expect(await j.decideAction(action.envelopeHash, claim, decision)).toMatchObject({ claimed: true });
    } finally {
      await db.bringBack();
      await j.close();
    }

    const unreachable = loadConfig({
      DATABASE_URL: "postgres://postgres:hunter2-secret@127.0.0.1:1/nowhere",
    }).database!;
    const refused = await PostgresAuditLog.open(unreachable).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as Error).message).toContain("127.0.0.1:1");
    expect((refused as Error).message).not.toContain("hunter2");
  });
});
