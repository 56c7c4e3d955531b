/**
 * Our PostgreSQL tables as versioned migrations, and prepareDatabase, which applies them (and the
 * checkpointer's own) safely when several processes start at the same moment.
 */
import type pg from "pg";
import type { DatabaseConfig } from "../config/env.js";
import checkpointerPackage from "@langchain/langgraph-checkpoint-postgres/package.json" with { type: "json" };
import { isUnavailable, lockKey, quoteIdent, storeError, type PoolLease } from "./postgres.js";

/** The mark the checkpointer's migration table carries once this version's setup has run on it. */
const CHECKPOINTER_SET_UP = `set up by @langchain/langgraph-checkpoint-postgres ${checkpointerPackage.version}`;

export interface Migration {
  version: number;
  name: string;
  sql: (schema: string) => string;
}

/**
 * Our tables, in order. A migration, once released, is never edited: a change is a new entry with
 * the next number. `schema_migrations` records which ones a database has.
 */
export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: "journal: decision claims, write-ahead executions, approvals index",
    sql: (s) => `
      CREATE TABLE ${s}.decision_claims (
        envelope_hash TEXT NOT NULL,
        nonce TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        decision_type TEXT NOT NULL,
        approver_id TEXT NOT NULL,
        decided_at TEXT NOT NULL,
        claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (envelope_hash, nonce)
      );
      CREATE TABLE ${s}.executions (
        envelope_hash TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        args_json TEXT NOT NULL,
        sent_at TEXT NOT NULL,
        ack_json TEXT,
        ack_at TEXT,
        recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE TABLE ${s}.approvals (
        id BIGSERIAL UNIQUE,
        envelope_hash TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        requested_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        status TEXT NOT NULL
      );
      CREATE INDEX approvals_status ON ${s}.approvals (status, created_at, id);
      CREATE INDEX approvals_thread ON ${s}.approvals (thread_id);`,
  },
  {
    version: 2,
    name: "audit: append-only hash-chained records",
    sql: (s) => `
      CREATE TABLE ${s}.audit_records (
        seq BIGINT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        event TEXT NOT NULL,
        discriminator TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        record_json TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        record_hash TEXT NOT NULL,
        UNIQUE (thread_id, revision, event, discriminator)
      );
      CREATE INDEX audit_records_thread ON ${s}.audit_records (thread_id, seq);
      -- Stops accidents and careless tools; a deliberate edit (dropping these) is what the chain is for.
      CREATE FUNCTION ${s}.audit_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'audit records are append-only'; END $$;
      CREATE TRIGGER audit_records_no_change BEFORE UPDATE OR DELETE ON ${s}.audit_records
        FOR EACH ROW EXECUTE FUNCTION ${s}.audit_records_append_only();
      CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON ${s}.audit_records
        FOR EACH STATEMENT EXECUTE FUNCTION ${s}.audit_records_append_only();`,
  },
  {
    version: 3,
    name: "journal: threads and the action state machine, rows sealed with an HMAC",
    sql: (s) => `
      CREATE TABLE ${s}.threads (
        thread_id TEXT PRIMARY KEY,
        record_json TEXT NOT NULL,
        mac TEXT NOT NULL,
        closed_json TEXT,
        created_at TEXT NOT NULL
      );
      CREATE TABLE ${s}.actions (
        id BIGSERIAL UNIQUE,
        envelope_hash TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        revision INTEGER NOT NULL,
        registered_json TEXT NOT NULL,
        mac TEXT NOT NULL,
        phase TEXT NOT NULL,
        progress_json TEXT NOT NULL,
        registered_at TEXT NOT NULL
      );
      CREATE INDEX actions_thread ON ${s}.actions (thread_id, id);`,
  },
  {
    version: 4,
    name: "journal: structured questions, so they are listed without loading checkpoints",
    sql: (s) => `
      CREATE TABLE ${s}.questions (
        thread_id TEXT PRIMARY KEY,
        tool_call_id TEXT NOT NULL,
        question TEXT NOT NULL,
        fields_json TEXT NOT NULL,
        asked_at TEXT NOT NULL,
        status TEXT NOT NULL,
        closed_at TEXT
      );
      CREATE INDEX questions_open ON ${s}.questions (status, asked_at);`,
  },
  {
    version: 5,
    name: "journal: object leases, so two approved actions on one object never both pass their pre-read before either writes",
    sql: (s) => `
      CREATE TABLE ${s}.object_leases (
        object_key TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        acquired_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX object_leases_owner ON ${s}.object_leases (owner);`,
  },
  {
    version: 6,
    name: "journal: indexes for listing waiting approvals (oldest first, by requester, by task) without reading every row's JSON",
    // At 100,000 waiting approvals `pending --object N` / `--requested-by U` parsed every waiting
    // row's registered_json as jsonb twice (count and page): ~1.8 s of PostgreSQL per query
    // (bench/README.md, pending-scale-pg). The expressions are exactly those of listRegistered's
    // filters, so the planner matches them; partial on phase = 'registered', so they hold only waiting
    // rows. Built inside the migration's transaction (writes to actions wait for it; seconds at 100,000).
    sql: (s) => `
      CREATE INDEX actions_waiting ON ${s}.actions (registered_at, id) WHERE phase = 'registered';
      CREATE INDEX actions_waiting_requester ON ${s}.actions (((registered_json::jsonb #>> '{envelope,requestedBy}')), registered_at, id) WHERE phase = 'registered';
      CREATE INDEX actions_waiting_task ON ${s}.actions (((registered_json::jsonb #>> '{envelope,object,id}')), registered_at, id) WHERE phase = 'registered';`,
  },
  {
    version: 7,
    name: "journal: a question's invalid answers counted in the journal, so rewriting graph state cannot reset the budget",
    sql: (s) => `ALTER TABLE ${s}.questions ADD COLUMN invalid_answers INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    version: 8,
    name: "journal: why a question's last answer was refused, kept with the question, so the text shown with it is not graph state's",
    sql: (s) => `ALTER TABLE ${s}.questions ADD COLUMN last_refusal TEXT;`,
  },
  {
    version: 9,
    name: "journal: the model's turns, invalid proposals (one per turn at most) and last reply kept in the thread row, so the limits and the reasons they give are not graph state's",
    sql: (s) => `
      ALTER TABLE ${s}.threads
        ADD COLUMN agent_steps INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN invalid_proposals INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN invalid_proposal_step INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN last_reply TEXT;`,
  },
  {
    version: 10,
    name: "journal: the tool calls of the model's last reply kept in the thread row, so propose reads them from the journal, not from graph state",
    sql: (s) => `ALTER TABLE ${s}.threads ADD COLUMN last_tool_calls TEXT;`,
  },
  {
    version: 11,
    name: "journal: write-ahead entries sealed with an HMAC like registered rows, so an edited entry (its protocol, its arguments) is refused",
    sql: (s) => `ALTER TABLE ${s}.executions ADD COLUMN mac TEXT;`,
  },
  {
    version: 12,
    name: "journal: keyset indexes for listing waiting approvals (registered_at, envelope hash) by requester, object and decider",
    // The listing pages by (registered_at, envelope_hash) after a cursor instead of an offset
    // (src/store/waiting-list.ts, whose expressions these are exactly), and these replace migration 6's,
    // which ordered by the serial id.
    sql: (s) => `
      CREATE INDEX actions_waiting_keyset ON ${s}.actions ((registered_at COLLATE "C"), (envelope_hash COLLATE "C"),
        (registered_json::jsonb #>> '{envelope,operation}'), (registered_json::jsonb #>> '{escalatedTo}'),
        (registered_json::jsonb #>> '{set,setHash}')) WHERE phase = 'registered';
      CREATE INDEX actions_waiting_requester_keyset ON ${s}.actions ((registered_json::jsonb #>> '{envelope,requestedBy}'),
        (registered_at COLLATE "C"), (envelope_hash COLLATE "C")) WHERE phase = 'registered';
      CREATE INDEX actions_waiting_object_keyset ON ${s}.actions ((registered_json::jsonb #>> '{envelope,object,id}'),
        (registered_json::jsonb #>> '{envelope,object,type}'), (registered_at COLLATE "C"), (envelope_hash COLLATE "C"))
        WHERE phase = 'registered';
      DROP INDEX IF EXISTS ${s}.actions_waiting;
      DROP INDEX IF EXISTS ${s}.actions_waiting_requester;
      DROP INDEX IF EXISTS ${s}.actions_waiting_task;`,
  },
  {
    version: 13,
    name: "journal: when each open action is next due and why, claimed by workers under a lease, so a worker round reads the due work by index",
    // src/store/due.ts: a waiting approval is due at its expiry (a change set's, else its envelope's);
    // an action past its approval is due now (when it entered its phase is not recorded; the thread
    // lock keeps a live run's thread from being driven twice). An expiry that is not a timestamp (a row
    // edited outside the program) is left without one, as the listing leaves such a row unlisted.
    sql: (s) => `
      ALTER TABLE ${s}.actions
        ADD COLUMN due_at BIGINT,
        ADD COLUMN due_reason TEXT,
        ADD COLUMN due_owner TEXT,
        ADD COLUMN due_lease_until BIGINT;
      UPDATE ${s}.actions SET due_reason = 'expiry',
        due_at = (extract(epoch FROM (COALESCE(registered_json::jsonb #>> '{set,expiresAt}', registered_json::jsonb #>> '{envelope,expiresAt}'))::timestamptz) * 1000)::bigint
        WHERE phase = 'registered'
          AND COALESCE(registered_json::jsonb #>> '{set,expiresAt}', registered_json::jsonb #>> '{envelope,expiresAt}')
            ~ '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$';
      UPDATE ${s}.actions SET due_reason = 'resume', due_at = (extract(epoch FROM now()) * 1000)::bigint
        WHERE phase IN ('decided', 'pre_read', 'intent', 'acknowledged', 'verified');
      CREATE INDEX actions_due ON ${s}.actions (due_at) WHERE due_at IS NOT NULL;`,
  },
  {
    version: 14,
    name: "journal: which side keeps each thread's checkpoints (the CLI or the API server), so each kind of worker claims only due work it can drive",
    // src/store/keeper.ts: set when a thread is registered. A thread registered before this has none
    // (NULL): the journal cannot tell whose checkpoints hold it, so either kind of worker claims it, as
    // both did before, rather than one kind never seeing it.
    sql: (s) => `ALTER TABLE ${s}.threads ADD COLUMN keeper TEXT;`,
  },
  {
    version: 15,
    name: "journal: a waiting row's operation, escalation group and set hash as columns, so the unfiltered and --mine counts are read from the keyset index alone",
    // PostgreSQL answers a query from an index alone only when every column it reads is a plain index
    // column, never an expression's: counting by the JSON fields read each waiting row's registered_json
    // (a sequential scan, ~0.4 ms a row). Generated from the sealed JSON, so no writer sets them, and NULL
    // past the waiting phase, so the rows that move on parse nothing (src/store/waiting-list.ts reads them).
    sql: (s) => `
      ALTER TABLE ${s}.actions
        ADD COLUMN waiting_operation TEXT GENERATED ALWAYS AS
          (CASE WHEN phase = 'registered' THEN registered_json::jsonb #>> '{envelope,operation}' END) STORED,
        ADD COLUMN waiting_escalated_to TEXT GENERATED ALWAYS AS
          (CASE WHEN phase = 'registered' THEN registered_json::jsonb #>> '{escalatedTo}' END) STORED,
        ADD COLUMN waiting_set_hash TEXT GENERATED ALWAYS AS
          (CASE WHEN phase = 'registered' THEN registered_json::jsonb #>> '{set,setHash}' END) STORED;
      DROP INDEX ${s}.actions_waiting_keyset;
      CREATE INDEX actions_waiting_keyset ON ${s}.actions ((registered_at COLLATE "C"), (envelope_hash COLLATE "C"),
        waiting_operation, waiting_escalated_to, waiting_set_hash) WHERE phase = 'registered';`,
  },
  {
    version: 16,
    name: "journal: an index of only the fields the unfiltered and --mine counts read, so they read it alone rather than the table",
    // Migration 15's keyset index held these fields too, but after each row's timestamp and hash: ~1,840
    // pages at 100,000 waiting rows, which the planner costs as random reads, above a sequential scan of
    // the table (~4,000 pages, registered_json stored out of line), so it read the table (~45 ms). This
    // index of three short, mostly repeated values is ~110 pages, read alone in ~15 ms. The keyset index
    // goes back to the listing order alone: a page checks the fields on the rows it reads anyway.
    sql: (s) => `
      CREATE INDEX actions_waiting_count ON ${s}.actions (waiting_operation, waiting_escalated_to, waiting_set_hash)
        WHERE phase = 'registered';
      DROP INDEX ${s}.actions_waiting_keyset;
      CREATE INDEX actions_waiting_keyset ON ${s}.actions ((registered_at COLLATE "C"), (envelope_hash COLLATE "C"))
        WHERE phase = 'registered';`,
  },
];

const prepared = new Map<string, Promise<void>>();

/**
 * Creates the schema, applies our pending migrations and the checkpointer's own, under one advisory
 * lock so that processes starting together take turns instead of racing on CREATE TABLE. Runs once
 * per process and database; later calls wait for the first.
 */
export function prepareDatabase(pools: PoolLease, db: DatabaseConfig): Promise<void> {
  const id = `${db.url}\n${db.schema}`;
  let done = prepared.get(id);
  if (!done) {
    done = migrate(pools, db).catch((e: unknown) => {
      prepared.delete(id);
      throw e;
    });
    prepared.set(id, done);
  }
  return done;
}

async function migrate(pools: PoolLease, db: DatabaseConfig): Promise<void> {
  const s = quoteIdent(db.schema);
  let client: pg.PoolClient;
  try {
    // A lock connection: the migration lock is held while the checkpointer's setup below takes a query connection.
    client = await pools.locks.connect();
  } catch (e) {
    throw storeError(db, "connecting", e);
  }
  let broken: Error | undefined;
  try {
    const key = lockKey(db, "migrate");
    await client.query(`SELECT pg_advisory_lock(${key.sql})`, key.values);
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
      );
      const applied = new Set(
        (await client.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations`)).rows.map(
          (r) => r.version,
        ),
      );
      const newest = Math.max(0, ...applied);
      const known = Math.max(...MIGRATIONS.map((m) => m.version));
      if (newest > known) {
        throw new Error(
          `the database ${db.label} (schema ${db.schema}) is at migration ${newest}, newer than this program knows (${known}); upgrade the program instead of running an older one against it`,
        );
      }
      for (const m of MIGRATIONS) {
        if (applied.has(m.version)) continue;
        await client.query("BEGIN");
        try {
          await client.query(m.sql(s));
          await client.query(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, $2)`, [
            m.version,
            m.name,
          ]);
          await client.query("COMMIT");
        } catch (e) {
          await client.query("ROLLBACK").catch(() => {});
          throw e;
        }
      }
      // The checkpointer keeps its own migration table; running it under the same lock makes it
      // safe for concurrent starts too (its CREATE TABLE IF NOT EXISTS alone is not). It runs once per
      // installed version, as the mark on that table says, and is loaded only then: it brings LangChain
      // core (~0.6 s of CPU), which `pending` never needs otherwise.
      const mark = await client.query<{ note: string | null }>(
        "SELECT obj_description(to_regclass($1), 'pg_class') AS note",
        [`${s}.checkpoint_migrations`],
      );
      if (mark.rows[0]?.note !== CHECKPOINTER_SET_UP) {
        const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
        await new PostgresSaver(pools.pool, undefined, { schema: db.schema }).setup();
        await client.query(`COMMENT ON TABLE ${s}.checkpoint_migrations IS '${CHECKPOINTER_SET_UP}'`);
      }
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${key.sql})`, key.values).catch(() => {});
    }
  } catch (e) {
    if (isUnavailable(e)) broken = e as Error;
    throw storeError(db, "preparing the schema", e);
  } finally {
    pools.locks.release(client, broken);
  }
}
