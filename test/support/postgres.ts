/**
 * Running the suite against PostgreSQL. Set ACTION_ENVELOPE_TEST_DATABASE_URL to a server the tests
 * may create databases and schemas on (`.ci/run` starts a throwaway cluster and sets it). Without it,
 * everything runs on SQLite files and the PostgreSQL-only tests are skipped with NO_POSTGRES.
 *
 * Isolation: every data directory a test creates gets its own schema (named from the directory), so
 * processes a test starts with the same data directory share state and different tests never do.
 * Tests that need to take a database away get a fresh database of their own (createTestDatabase).
 */
import { createHash, randomBytes } from "node:crypto";
import pg from "pg";

/** Any 32 bytes: these tests exercise claims, entries and locks, not the seal of registered rows. */
const TEST_JOURNAL_KEY = randomBytes(32);

export const TEST_DATABASE_URL = process.env.ACTION_ENVELOPE_TEST_DATABASE_URL || undefined;
export const usingPostgres = TEST_DATABASE_URL !== undefined;
export const NO_POSTGRES =
  "PostgreSQL tests skipped: ACTION_ENVELOPE_TEST_DATABASE_URL is not set (.ci/run sets it when it can start a cluster)";

export function schemaFor(dataDir: string): string {
  return `t_${createHash("sha256").update(dataDir).digest("hex").slice(0, 24)}`;
}

/** The storage part of a test's environment. SQLite mode clears DATABASE_URL so a developer's own setting cannot leak into child processes. */
export function databaseEnv(dataDir: string): Record<string, string> {
  return TEST_DATABASE_URL
    ? { DATABASE_URL: TEST_DATABASE_URL, ACTION_ENVELOPE_DB_SCHEMA: schemaFor(dataDir) }
    : { DATABASE_URL: "" };
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** One statement on the server's maintenance connection (the URL the suite was given). */
export async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  sql: string,
  values: unknown[] = [],
  url = TEST_DATABASE_URL,
): Promise<R[]> {
  if (!url) throw new Error(NO_POSTGRES);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  /** Refuse new connections and end the current ones: the database "goes away" for every process using it. */
  takeAway(): Promise<void>;
  bringBack(): Promise<void>;
  drop(): Promise<void>;
}

export async function createTestDatabase(prefix: string): Promise<TestDatabase> {
  const name = `ae_${prefix}_${process.pid}_${randomBytes(4).toString("hex")}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  const url = withDatabase(TEST_DATABASE_URL!, name);
  return {
    name,
    url,
    /** Ends every connection to the database (waiting until each backend has exited) and refuses new ones. */
    async takeAway() {
      await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await adminQuery(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        [name],
      );
    },
    async bringBack() {
      await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    },
    async drop() {
      await adminQuery(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** Whether the write-ahead entry for an envelope is in the PostgreSQL journal a test environment names. */
export async function executionRecorded(env: Record<string, string>, envelopeHash: string): Promise<boolean> {
  const { loadConfig } = await import("../../src/config/env.js");
  const { PostgresJournal } = await import("../../src/store/pg-journal.js");
  const config = loadConfig(env);
  if (!config.database) throw new Error("executionRecorded needs an environment with DATABASE_URL");
  const journal = await PostgresJournal.open(config.database, TEST_JOURNAL_KEY);
  try {
    return (await journal.findExecution(envelopeHash)) !== undefined;
  } finally {
    await journal.close();
  }
}
