/**
 * `audit verify` reads the chain a page at a time, on SQLite and on PostgreSQL (a database of this
 * file's own; skipped without ACTION_ENVELOPE_TEST_DATABASE_URL). Every kind of tampering, at every
 * place in a chain of seven records, is named as that kind at the same record whatever the page size,
 * so the damaged record is the first or the last of a page, or its link points into the page before;
 * and the chain is read in as many statements as its pages.
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { loadConfig } from "../src/config/env.js";
import { SqliteAuditLog, recordHash, type AuditLog, type AuditRecord } from "../src/store/audit.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import { createPool } from "../src/store/postgres.js";
import { SqliteConnection } from "../src/store/statements.js";
import { NO_POSTGRES, createTestDatabase, usingPostgres, type TestDatabase } from "./support/postgres.js";
import { tempDir } from "./support/harness.js";
import { refusalEntry } from "./support/audit-entries.js";
import { caseOf } from "../src/evidence/case-source.js";

if (!usingPostgres) console.info(`test/audit-verify-pages.test.ts: ${NO_POSTGRES}`);

const N = 7;

const entry = (i: number) => refusalEntry(`thread-${i % 3}`, i);

/** A log of N records whose table a test may rewrite (`run`, with `?` placeholders) and put back. */
interface Store {
  log: AuditLog;
  records: AuditRecord[];
  /** The statements verify has read the chain with so far. */
  reads(): number;
  run(sql: string, ...values: unknown[]): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

async function fill(log: AuditLog): Promise<AuditRecord[]> {
  for (let i = 1; i <= N; i++) await log.append(entry(i));
  return log.records();
}

async function sqliteStore(): Promise<Store> {
  const conn = new SqliteConnection(path.join(tempDir("ae-verify-pages-"), "journal.sqlite"));
  // The log looks each statement up here once per execution.
  let reads = 0;
  const prepared = conn.sql;
  (conn as { sql: typeof prepared }).sql = (text) => {
    if (text.startsWith("SELECT * FROM audit_records")) reads += 1;
    return prepared(text);
  };
  const log = new SqliteAuditLog(conn);
  const records = await fill(log);
  conn.db.exec(
    "DROP TRIGGER audit_records_no_update; DROP TRIGGER audit_records_no_delete; CREATE TABLE audit_pristine AS SELECT * FROM audit_records",
  );
  const run = async (sql: string, ...values: unknown[]) => void conn.db.prepare(sql).run(...values);
  return {
    log,
    records,
    reads: () => reads,
    run,
    restore: async () => {
      await run("DELETE FROM audit_records");
      await run("INSERT INTO audit_records SELECT * FROM audit_pristine");
    },
    close: async () => {
      await log.close();
      conn.close();
    },
  };
}

let pgDatabase: TestDatabase | undefined;

async function postgresStore(): Promise<Store> {
  pgDatabase ??= await createTestDatabase("verify_pages");
  const config = loadConfig({
    DATABASE_URL: pgDatabase.url,
    ACTION_ENVELOPE_DB_SCHEMA: "verify_pages",
  }).database!;
  // The first open migrates the schema; the log under test runs on a pool whose checkouts are counted.
  await (await PostgresAuditLog.open(config)).close();
  const pool = createPool(config, { name: "verify-pages", max: 1 });
  let reads = 0;
  // pool.query checks a connection out once per statement.
  pool.on("acquire", () => (reads += 1));
  const log = await PostgresAuditLog.open(config, {}, pool);
  const records = await fill(log);
  const client = new pg.Client({ connectionString: config.url });
  await client.connect();
  const run = async (sql: string, ...values: unknown[]) => {
    let n = 0;
    await client.query(
      sql.replace(/\?/g, () => `$${++n}`),
      values,
    );
  };
  await run(`SET search_path TO ${config.schema}`);
  await run("ALTER TABLE audit_records DISABLE TRIGGER USER");
  await run("CREATE TABLE audit_pristine AS SELECT * FROM audit_records");
  return {
    log,
    records,
    reads: () => reads,
    run,
    restore: async () => {
      await run("DELETE FROM audit_records");
      await run("INSERT INTO audit_records SELECT * FROM audit_pristine");
    },
    close: async () => {
      await client.end();
      await log.close();
      await pool.end();
    },
  };
}

type Expected = { kind: string; seq: number } | { intact: true; records: number };

interface Damage {
  name: string;
  /** The places it is made at. */
  at: number[];
  damage(s: Store, p: number): Promise<void>;
  expected(p: number): Expected;
  /** The anchored head to verify against, when the damage needs one to be seen. */
  head?: (s: Store) => string;
}

const places = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

const bodyOf = (r: AuditRecord) => {
  const { prevHash: _p, hash: _h, ...body } = r;
  return body;
};

/** Moves the records from seq p on one place up, freeing seq p. */
async function makeRoomAt(s: Store, p: number) {
  await s.run("UPDATE audit_records SET seq = seq + 1000 WHERE seq >= ?", p);
  await s.run("UPDATE audit_records SET seq = seq - 999 WHERE seq >= 1000");
}

const DAMAGES: Damage[] = [
  {
    name: "an edited field",
    at: places(1, N),
    damage: (s, p) =>
      s.run(
        'UPDATE audit_records SET record_json = replace(record_json, \'"requestedBy":"demo-user"\', \'"requestedBy":"mallory"\') WHERE seq = ?',
        p,
      ),
    expected: (p) => ({ kind: "edited", seq: p }),
  },
  {
    name: "a broken link",
    at: places(1, N),
    damage: (s, p) => s.run("UPDATE audit_records SET prev_hash = 'sha256:elsewhere' WHERE seq = ?", p),
    expected: (p) => ({ kind: "edited", seq: p }),
  },
  {
    name: "an edited record whose own hash was recomputed",
    at: places(1, N - 1),
    damage: async (s, p) => {
      const r = s.records[p - 1]!;
      const forged = { ...bodyOf(r), requestedBy: "mallory" };
      await s.run(
        "UPDATE audit_records SET record_json = ?, record_hash = ? WHERE seq = ?",
        JSON.stringify(forged),
        recordHash(forged, r.prevHash),
        p,
      );
    },
    expected: (p) => ({ kind: "edited", seq: p }),
  },
  {
    name: "a removed record",
    at: places(1, N - 1),
    damage: (s, p) => s.run("DELETE FROM audit_records WHERE seq = ?", p),
    expected: (p) => ({ kind: "removed", seq: p }),
  },
  {
    name: "a truncated head, without the anchor",
    at: [N],
    damage: (s, p) => s.run("DELETE FROM audit_records WHERE seq >= ?", p),
    expected: () => ({ intact: true, records: N - 1 }),
  },
  {
    name: "a truncated head, with the anchor",
    at: places(1, N),
    damage: (s, p) => s.run("DELETE FROM audit_records WHERE seq >= ?", p),
    expected: (p) => ({ kind: "removed", seq: p }),
    head: (s) => s.records[N - 1]!.hash,
  },
  {
    name: "a swapped pair",
    at: places(1, N - 1),
    damage: async (s, p) => {
      await s.run("UPDATE audit_records SET seq = -1 WHERE seq = ?", p);
      await s.run("UPDATE audit_records SET seq = ? WHERE seq = ?", p, p + 1);
      await s.run("UPDATE audit_records SET seq = ? WHERE seq = -1", p + 1);
    },
    expected: (p) => ({ kind: "reordered", seq: p }),
  },
  {
    name: "a record moved to the end",
    at: places(1, N - 1),
    damage: (s, p) => s.run("UPDATE audit_records SET seq = ? WHERE seq = ?", N + 1, p),
    // The record standing in its place is named: the one written after it.
    expected: (p) => ({ kind: "reordered", seq: p + 1 }),
  },
  {
    name: "an inserted record, correctly hashed and linked, the rest renumbered",
    at: places(2, N),
    damage: async (s, p) => {
      const r = s.records[p - 2]!;
      const forged = { ...bodyOf(r), seq: p, discriminator: "forged" };
      await makeRoomAt(s, p);
      await s.run(
        "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        p,
        forged.threadId,
        forged.revision,
        forged.event,
        forged.discriminator,
        forged.recordedAt,
        JSON.stringify(forged),
        r.hash,
        recordHash(forged, r.hash),
      );
    },
    expected: (p) => ({ kind: "inserted", seq: p }),
  },
  {
    name: "a crudely inserted record",
    at: places(1, N),
    damage: async (s, p) => {
      await makeRoomAt(s, p);
      await s.run(
        "INSERT INTO audit_records (seq, thread_id, revision, event, discriminator, recorded_at, record_json, prev_hash, record_hash) VALUES (?, 'x', 1, 'decision_refused', '', 'x', ?, 'x', 'x')",
        p,
        JSON.stringify({ seq: p }),
      );
    },
    expected: (p) => ({ kind: "inserted", seq: p }),
  },
];

const BACKENDS = [
  { backend: "SQLite", open: sqliteStore, skip: false },
  { backend: "PostgreSQL", open: postgresStore, skip: !usingPostgres },
];

/** Opens a store for a block's tests (unless skipped), and closes it and the PostgreSQL database after them. */
function storePerBlock(open: () => Promise<Store>, skip: boolean, use: (s: Store) => void): void {
  let opened: Store | undefined;
  beforeAll(async () => {
    if (skip) return;
    opened = await open();
    use(opened);
  });
  afterAll(async () => {
    await opened?.close();
    await pgDatabase?.drop();
    pgDatabase = undefined;
  });
}

describe.each(BACKENDS)("audit verify in pages on $backend", ({ open, skip }) => {
  let store!: Store;
  storePerBlock(open, skip, (s) => (store = s));

  it.skipIf(skip)(
    "reads an intact chain of N records in ⌊N / k⌋ + 1 statements of k, with the same answer",
    async () => {
      const whole = await store.log.verify();
      expect(whole).toEqual({ intact: true, records: N, head: { seq: N, hash: store.records[N - 1]!.hash } });
      for (const pageSize of [1, 2, 3, N, N + 1, 1000]) {
        const before = store.reads();
        expect(await store.log.verify({ pageSize }), `pages of ${pageSize}`).toEqual(whole);
        expect(store.reads() - before, `pages of ${pageSize}`).toBe(Math.floor(N / pageSize) + 1);
      }
    },
  );

  it.skipIf(skip)("refuses a page size that is not a positive whole number", async () => {
    for (const pageSize of [0, -1, 2.5])
      await expect(store.log.verify({ pageSize })).rejects.toThrow(RangeError);
  });

  for (const d of DAMAGES) {
    it.skipIf(skip)(`finds ${d.name} at each place, the same in pages of every size`, async () => {
      for (const p of d.at) {
        await store.restore();
        await d.damage(store, p);
        const head = d.head?.(store);
        const opts = head === undefined ? {} : { head };
        const whole = await store.log.verify(opts);
        const want = d.expected(p);
        if ("intact" in want) expect(whole, `at ${p}`).toMatchObject(want);
        else expect(whole, `at ${p}`).toMatchObject({ intact: false, problem: want });
        for (let pageSize = 1; pageSize <= N + 1; pageSize++)
          expect(await store.log.verify({ ...opts, pageSize }), `at ${p}, pages of ${pageSize}`).toEqual(
            whole,
          );
      }
    });
  }
});

/** A check from a seq reports what the whole chain's check reports at or after it, and nothing before it. */
describe.each(BACKENDS)(
  "audit verify from a seq on $backend (what a thread's view checks)",
  ({ open, skip }) => {
    let store!: Store;
    storePerBlock(open, skip, (s) => (store = s));

    it.skipIf(skip)(
      "checks the records from the seq on, reading the one before it and their pages only",
      async () => {
        await store.restore();
        const head = { seq: N, hash: store.records[N - 1]!.hash };
        expect(await store.log.verify({ from: 1 })).toEqual({ intact: true, records: N, head });
        for (let from = 2; from <= N + 2; from++) {
          const checked = Math.max(0, N - from + 1);
          for (const pageSize of [1, 2, N, 1000]) {
            const before = store.reads();
            expect(await store.log.verify({ from, pageSize }), `from ${from}, pages of ${pageSize}`).toEqual({
              intact: true,
              records: checked,
              from: Math.min(from, N + 1),
              head,
            });
            // The record before `from`, then the pages from there: none of the records before it.
            expect(store.reads() - before, `from ${from}, pages of ${pageSize}`).toBe(
              1 + Math.floor(checked / pageSize) + 1,
            );
          }
        }
      },
    );

    it.skipIf(skip)(
      "refuses a start that is not a positive whole seq, and one with an anchored head",
      async () => {
        for (const from of [0, -1, 2.5]) await expect(store.log.verify({ from })).rejects.toThrow(RangeError);
        await expect(store.log.verify({ from: 2, head: store.records[N - 1]!.hash })).rejects.toThrow(
          /without `from`/,
        );
      },
    );

    for (const d of DAMAGES.filter((x) => !x.head)) {
      it.skipIf(skip)(
        `finds ${d.name} as the whole chain's check does, from every seq it lies at or before`,
        async () => {
          for (const p of d.at) {
            await store.restore();
            await d.damage(store, p);
            const whole = await store.log.verify();
            for (let from = 2; from <= N; from++) {
              const partial = await store.log.verify({ from });
              const where = `damage at ${p}, from ${from}`;
              if (whole.intact) {
                expect(partial, where).toMatchObject({ intact: true, head: whole.head });
              } else if (whole.problem.seq >= from) {
                expect(partial, where).toMatchObject({ intact: false, problem: whole.problem });
                for (const pageSize of [1, 3])
                  expect(
                    await store.log.verify({ from, pageSize }),
                    `${where}, pages of ${pageSize}`,
                  ).toEqual(partial);
              }
            }
          }
        },
      );
    }

    it.skipIf(skip)(
      "leaves a record before the seq unchecked: an edit there is found by the whole chain's check only",
      async () => {
        for (const d of DAMAGES.filter((x) => x.name === "an edited field" || x.name === "a broken link")) {
          for (let p = 1; p < N; p++) {
            await store.restore();
            await d.damage(store, p);
            expect(await store.log.verify(), `${d.name} at ${p}`).toMatchObject({ intact: false });
            expect(await store.log.verify({ from: p + 1 }), `${d.name} at ${p}`).toMatchObject({
              intact: true,
            });
            expect(await store.log.verify({ from: p }), `${d.name} at ${p}`).toMatchObject({
              intact: false,
              problem: { kind: "edited", seq: p },
            });
          }
        }
      },
    );

    it.skipIf(skip)(
      "names a record slipped in just before the seq as the whole chain's check does: the next one links past it",
      async () => {
        const d = DAMAGES.find((x) => x.name.startsWith("an inserted record, correctly hashed"))!;
        for (const p of d.at) {
          await store.restore();
          await d.damage(store, p);
          const whole = await store.log.verify();
          expect(whole, `at ${p}`).toMatchObject({ intact: false, problem: { kind: "inserted", seq: p } });
          expect(await store.log.verify({ from: p + 1 }), `at ${p}`).toMatchObject({
            intact: false,
            problem: whole.intact ? {} : whole.problem,
          });
        }
      },
    );

    it.skipIf(skip)(
      "a case record without the thread's journal row checks the whole chain, as audit verify does",
      async () => {
        // thread-0's records are seq 3 and 6 (entry i goes to thread i % 3); with no journal at hand
        // nothing says where its records begin (test/thread-scope-stores.test.ts has the journal's case).
        const source = { audit: store.log, thread: async () => ({ status: "finished" as const }) };
        const chainOf = async () => (await caseOf(source, "thread-0"))!.caseRecord.auditChain;
        await store.restore();
        expect(await chainOf()).toMatchObject({
          intact: true,
          checkedFrom: 1,
          recordsChecked: N,
          threadRecords: [{ seq: 3 }, { seq: 6 }],
        });
        await DAMAGES.find((x) => x.name === "an edited field")!.damage(store, 1);
        expect(await chainOf()).toMatchObject({
          intact: false,
          problem: expect.stringMatching(/^edited at seq 1:/),
        });
      },
    );
  },
);
