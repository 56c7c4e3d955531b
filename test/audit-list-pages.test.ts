/**
 * `audit list` reads the threads a page at a time and writes each page before it reads the next, on
 * SQLite and on PostgreSQL (a database of this file's own; skipped without
 * ACTION_ENVELOPE_TEST_DATABASE_URL), locally and through GET /audit/threads (`--api`). Whatever the
 * page size, the output is what the whole list printed at once gives: every thread once, in the order
 * of its first record; and the log is read in as many statements (requests) as there are pages. A
 * page's threads are summed up from reads of at most `readSize` records, however long a thread is.
 */
import path from "node:path";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { Hono } from "hono";
import { serve } from "@hono/node-server";
import { MemorySaver } from "@langchain/langgraph";
import { loadConfig } from "../src/config/env.js";
import { listThreads } from "../src/cli/audit-command.js";
import { apiAudit } from "../src/api/audit-client.js";
import { createAuditRoutes } from "../src/api/audit-routes.js";
import { ANONYMOUS } from "../src/auth/auth.js";
import {
  SqliteAuditLog,
  threadPages,
  type AuditEntry,
  type AuditLog,
  type AuditRecord,
  type AuditThreadSummary,
} from "../src/store/audit.js";
import { PostgresAuditLog } from "../src/store/pg-audit.js";
import { createPool } from "../src/store/postgres.js";
import { SqliteConnection } from "../src/store/statements.js";
import { stringifyJsonSafe } from "../src/text/escape.js";
import {
  NO_POSTGRES,
  adminQuery,
  createTestDatabase,
  usingPostgres,
  type TestDatabase,
} from "./support/postgres.js";
import { tempDir } from "./support/harness.js";
import { refusalEntry } from "./support/audit-entries.js";

if (!usingPostgres) console.info(`test/audit-list-pages.test.ts: ${NO_POSTGRES}`);

/** Seven threads (one of them the empty id the inbox's sign-ins are recorded under), records interleaved. */
const THREADS = ["t-a", "t-b", "", "t-c", "t-d", "t-e", "t-f"];
const RECORDS = 30;

function entry(i: number): AuditEntry {
  // Each thread starts in order, then records fall to threads out of order.
  const threadId = THREADS[i < THREADS.length ? i : (i * 5) % THREADS.length]!;
  const refused: AuditEntry = {
    ...refusalEntry(threadId, i),
    requestedBy: `requester-${threadId}`,
    ...(i % 5 === 0 ? { requesterVerifiedBy: "authentication" as const } : {}),
  };
  // A request the API server refused under the thread's path: no requester, not of the run.
  if (i % 6 === 5)
    return {
      ...refusalEntry(threadId, i),
      event: "request_refused",
      requestedBy: "",
      refusal: { code: "ROUTE_NOT_SERVED", reason: `GET /threads/${threadId}/x: not served` },
    };
  if (i % 4 !== 3) return refused;
  return {
    ...refused,
    event: "decision_accepted",
    override: { gate: "separation_of_duties", by: "carol", reason: "on call" },
    refusal: null,
    outcome: {
      outcome: "succeeded",
      reasonCode: "OK",
      reason: "done",
      finishedAt: null,
      flags: {
        sideEffectAttempted: true,
        sideEffectVerified: true,
        causalClaimAllowed: true,
        duplicateClaimAllowed: false,
      },
    },
  };
}

/** What `audit list` printed before it read in pages: every record of the log, summarised at once. */
function wholeList(records: AuditRecord[]): AuditThreadSummary[] {
  const byThread = new Map<string, AuditThreadSummary>();
  for (const r of records) {
    const s = byThread.get(r.threadId) ?? {
      threadId: r.threadId,
      requestedBy: "",
      requesterVerifiedBy: null,
      records: 0,
      firstAt: r.at,
      lastAt: r.at,
      lastEvent: r.event,
      outcome: null,
      reasonCode: null,
      overrides: 0,
      refusedRequests: 0,
    };
    s.records += 1;
    // Refused requests are counted; the requester and the last event are the run's records'.
    if (r.event === "request_refused") s.refusedRequests += 1;
    else {
      s.requestedBy ||= r.requestedBy;
      s.lastAt = r.at;
      s.lastEvent = r.event;
    }
    if (r.requesterVerifiedBy) s.requesterVerifiedBy = r.requesterVerifiedBy;
    if (r.outcome) {
      s.outcome = r.outcome.outcome;
      s.reasonCode = r.outcome.reasonCode;
    }
    if (r.override && r.event === "decision_accepted") s.overrides += 1;
    byThread.set(r.threadId, s);
  }
  return [...byThread.values()];
}

/** A log of RECORDS records whose statements, and the rows each returns, are counted. */
interface Store {
  log: AuditLog;
  statements(): number;
  /** The most rows one statement has returned since the last call. */
  largestRead(): number;
  /** Replaces record `seq`'s stored JSON with text no JSON reader accepts; the returned function puts it back. */
  damage(seq: number): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

async function fill(log: AuditLog): Promise<void> {
  for (let i = 0; i < RECORDS; i++) await log.append(entry(i));
}

async function sqliteStore(): Promise<Store> {
  const conn = new SqliteConnection(path.join(tempDir("ae-list-pages-"), "journal.sqlite"));
  // The log looks each statement up here once per execution.
  let statements = 0;
  let largest = 0;
  const prepared = conn.sql;
  (conn as { sql: typeof prepared }).sql = (text) => {
    statements += 1;
    const statement = prepared(text);
    return new Proxy(statement, {
      get(target, key) {
        const value = Reflect.get(target, key, target) as unknown;
        if (key === "all")
          return (...args: unknown[]) => {
            const rows = statement.all(...args);
            largest = Math.max(largest, rows.length);
            return rows;
          };
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  const log = new SqliteAuditLog(conn);
  await fill(log);
  return {
    log,
    statements: () => statements,
    largestRead: () => [largest, (largest = 0)][0]!,
    damage: async (seq) => {
      const { record_json } = conn.db
        .prepare("SELECT record_json FROM audit_records WHERE seq = ?")
        .get(seq) as {
        record_json: string;
      };
      conn.db.exec("DROP TRIGGER audit_records_no_update");
      const put = (text: string) =>
        conn.db.prepare("UPDATE audit_records SET record_json = ? WHERE seq = ?").run(text, seq);
      put(`${record_json.slice(0, 40)} (cut)`);
      return async () => void put(record_json);
    },
    close: async () => {
      await log.close();
      conn.close();
    },
  };
}

let pgDatabase: TestDatabase | undefined;

async function postgresStore(): Promise<Store> {
  pgDatabase ??= await createTestDatabase("list_pages");
  const config = loadConfig({
    DATABASE_URL: pgDatabase.url,
    ACTION_ENVELOPE_DB_SCHEMA: "list_pages",
  }).database!;
  // The first open migrates the schema; the log under test runs on a pool whose checkouts are counted.
  await (await PostgresAuditLog.open(config)).close();
  const pool = createPool(config, { name: "list-pages", max: 1 });
  let statements = 0;
  let largest = 0;
  // pool.query checks a connection out once per statement.
  pool.on("acquire", () => (statements += 1));
  const poolQuery = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult>;
  (pool as unknown as { query: typeof poolQuery }).query = async (...args) => {
    const result = await poolQuery(...args);
    largest = Math.max(largest, result.rows.length);
    return result;
  };
  const log = await PostgresAuditLog.open(config, {}, pool);
  await fill(log);
  return {
    log,
    statements: () => statements,
    largestRead: () => [largest, (largest = 0)][0]!,
    damage: async (seq) => {
      const table = `${config.schema}.audit_records`;
      const rows = await adminQuery<{ record_json: string }>(
        `SELECT record_json FROM ${table} WHERE seq = $1`,
        [seq],
        pgDatabase!.url,
      );
      const record_json = rows[0]!.record_json;
      const put = (text: string) =>
        adminQuery(
          `ALTER TABLE ${table} DISABLE TRIGGER USER; UPDATE ${table} SET record_json = '${text.replaceAll("'", "''")}' WHERE seq = ${seq}; ALTER TABLE ${table} ENABLE TRIGGER USER`,
          [],
          pgDatabase!.url,
        );
      await put(`${record_json.slice(0, 40)} (cut)`);
      return async () => void (await put(record_json));
    },
    close: async () => {
      await log.close();
      await pool.end();
    },
  };
}

afterAll(async () => {
  await pgDatabase?.drop();
});

/** What listThreads writes, and each page it read, in the order they happened. */
async function list(
  pages: AsyncIterable<AuditThreadSummary[]>,
  json: boolean,
): Promise<{ text: string; events: string[] }> {
  const events: string[] = [];
  let text = "";
  async function* noted() {
    for await (const page of pages) {
      events.push(`page of ${page.length}`);
      yield page;
    }
  }
  await listThreads(noted(), json, (chunk) => {
    events.push("write");
    text += chunk;
  });
  return { text, events };
}

/** The events of a listing that writes each of these pages' threads before it reads the next page. */
const streamed = (sizes: number[]) =>
  sizes.flatMap((n) => [`page of ${n}`, ...Array<string>(n).fill("write")]);

function pageSizes(threads: number, pageSize: number): number[] {
  return Array.from({ length: Math.ceil(threads / pageSize) }, (_, i) =>
    Math.min(pageSize, threads - i * pageSize),
  );
}

/** An HTTP server with the /audit routes over `log`, open to the anonymous user; counts its requests. */
async function apiServer(log: AuditLog) {
  const app = new Hono();
  const requests: string[] = [];
  app.use(async (c, next) => {
    requests.push(new URL(c.req.url).search);
    (c as unknown as { set(k: string, v: unknown): void }).set("auth", {
      user: { ...ANONYMOUS },
      scopes: ANONYMOUS.permissions,
    });
    await next();
  });
  app.route(
    "/",
    createAuditRoutes(async () => ({ audit: log, checkpointer: new MemorySaver() })),
  );
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  return {
    target: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const backends: Array<[string, () => Promise<Store>, boolean]> = [
  ["SQLite", sqliteStore, true],
  ["PostgreSQL", postgresStore, usingPostgres],
];

for (const [name, open, enabled] of backends) {
  describe.skipIf(!enabled)(`audit list in pages (${name})`, () => {
    it("every thread once, in the order of its first record, whatever the page size; the output of the whole list at once", async () => {
      const s = await open();
      try {
        // What `audit list` printed when it summarised every record at once.
        const whole = wholeList(await s.log.records());
        expect(whole.map((t) => t.threadId)).toEqual(THREADS);
        // t-e's first and last records are refused requests: counted, neither its requester nor its last event.
        expect(whole.find((t) => t.threadId === "t-e")).toMatchObject({
          requestedBy: "requester-t-e",
          refusedRequests: 2,
          lastEvent: "decision_refused",
        });
        const json = `${stringifyJsonSafe({ threads: whole })}\n`;
        const human = (
          await list(
            (async function* () {
              yield whole;
            })(),
            false,
          )
        ).text;
        expect(
          human
            .split("\n")
            .slice(0, -1)
            .map((l) => l.split("  ")[0]),
        ).toEqual(THREADS);
        expect(human).toContain("t-a  by requester-t-a (verified: API token)  ");
        expect(human).toContain("OVERRIDES");
        expect(human).toMatch(/^t-e {2}by requester-t-e .* last decision_refused .* 2 refused requests$/m);

        for (const size of [1, 2, 3, 6, 7, 8, 100]) {
          const before = s.statements();
          const asJson = await list(threadPages(s.log, size), true);
          expect(asJson.text, `page size ${size}`).toBe(json);
          // Two statements a page: the page's first records, then its threads' records.
          expect(s.statements() - before, `page size ${size}`).toBe(2 * Math.ceil(THREADS.length / size));
          expect(asJson.events, `page size ${size}`).toEqual(
            streamed(pageSizes(THREADS.length, size)).concat("write"),
          );
          expect((await list(threadPages(s.log, size), false)).text, `page size ${size}`).toBe(human);
        }
      } finally {
        await s.close();
      }
    });

    it("a page's threads are summarised from their records read a few at a time, however many records a thread has", async () => {
      const s = await open();
      try {
        const whole = wholeList(await s.log.records());
        for (const readSize of [1, 2, 3, 4, 7, 29, 30, 31]) {
          for (const limit of [1, 3, 7]) {
            const before = s.statements();
            s.largestRead();
            const seen: AuditThreadSummary[] = [];
            for (let after = 0; ;) {
              const page = await s.log.threadPage({ after, limit, readSize });
              seen.push(...page.threads);
              if (page.next === null) break;
              after = page.next;
            }
            const at = `readSize ${readSize}, limit ${limit}`;
            expect(seen, at).toEqual(whole);
            // The first records of a page are at most limit + 1 rows; the rest are reads of records.
            expect(s.largestRead(), at).toBeLessThanOrEqual(Math.max(readSize, limit + 1));
            expect(s.statements() - before, at).toBeGreaterThanOrEqual(RECORDS / readSize);
          }
        }
      } finally {
        await s.close();
      }
    });

    it("--api: the route's pages are asked for one at a time, and print what the local log prints", async () => {
      const s = await open();
      const server = await apiServer(s.log);
      try {
        const local = (await list(threadPages(s.log), true)).text;
        const viaApi = await list(apiAudit.threadPages(server.target, 3), true);
        expect(viaApi.text).toBe(local);
        expect(viaApi.events).toEqual(streamed([3, 3, 1]).concat("write"));
        expect(server.requests).toEqual([
          "?limit=3",
          expect.stringMatching(/^\?limit=3&cursor=\d+$/),
          expect.stringMatching(/^\?limit=3&cursor=\d+$/),
        ]);
        server.requests.length = 0;
        // The CLI asks for the server's default page (100 threads): one request here.
        expect((await list(apiAudit.threadPages(server.target), false)).text).toBe(
          (await list(threadPages(s.log), false)).text,
        );
        expect(server.requests).toEqual([""]);
      } finally {
        await server.close();
        await s.close();
      }
    });

    it("a record the database cannot read as JSON is named by its seq; the pages before it are listed", async () => {
      const s = await open();
      // The last thread's last record: on the last page of two threads each.
      const last = THREADS.at(-1)!;
      const seq = (await s.log.records({ threadId: last })).at(-1)!.seq;
      const restore = await s.damage(seq);
      try {
        const listed: string[] = [];
        const listing = (async () => {
          for await (const page of threadPages(s.log, 2)) listed.push(...page.map((t) => t.threadId));
        })();
        await expect(listing).rejects.toThrow(`audit record seq ${seq} is not valid JSON`);
        expect(listed).toEqual(THREADS.slice(0, 6));
      } finally {
        await restore();
        await s.close();
      }
    });

    it("a damaged record past a thread's first read is named by its seq when its read comes", async () => {
      const s = await open();
      // The first thread's records are summed up two at a time; its last one is damaged.
      const first = THREADS[0]!;
      const records = await s.log.records({ threadId: first });
      expect(records.length).toBeGreaterThan(2);
      const seq = records.at(-1)!.seq;
      const restore = await s.damage(seq);
      try {
        await expect(s.log.threadPage({ after: 0, limit: 1, readSize: 2 })).rejects.toThrow(
          `audit record seq ${seq} is not valid JSON`,
        );
      } finally {
        await restore();
        await s.close();
      }
    });
  });
}

describe("audit list of an empty log", () => {
  it("prints the empty list, as JSON and for people, from one page", async () => {
    const log = new SqliteAuditLog(path.join(tempDir("ae-list-pages-"), "audit.sqlite"));
    try {
      expect((await list(threadPages(log, 2), true)).text).toBe(`${stringifyJsonSafe({ threads: [] })}\n`);
      const human = await list(threadPages(log, 2), false);
      expect(human.text).toBe("The audit log has no records yet.\n");
      expect(human.events).toEqual(["page of 0", "write"]);
    } finally {
      await log.close();
    }
  });
});
