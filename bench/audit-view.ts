/**
 * What one thread's evidence view costs as the audit log grows (`audit show` / `export`, the API's
 * `GET /audit/threads/{thread}`, the inbox's evidence page: all build the case record through
 * `caseOf`, src/evidence/case-source.ts). The view checks the chain from where the thread's records
 * begin (its journal row's `auditFrom`) to the head; before, it checked the whole chain, which is
 * `audit verify` (also measured, in the same run, as the reference). Logs of --sizes records shaped
 * like real ones (three a thread: a request of ~6 KB, a decision of ~4 KB and an outcome of ~24 KB
 * carrying the pre-read, acknowledgement and verification reads), each thread registered in the
 * journal and its records appended through the log, on SQLite and, with DATABASE_URL, PostgreSQL (a
 * fresh schema, dropped at the end). At each size: the newest thread's view, a thread halfway back,
 * the oldest thread's view and the whole check, wall and CPU ms (median of --repeat).
 *
 *   npm run bench -- audit-view [--sizes 1000,10000,50000] [--repeat 3]
 *   DATABASE_URL=postgres://… npm run bench -- audit-view
 */
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { loadConfig } from "../src/config/env.js";
import { randomBytes } from "node:crypto";
import type { AuditEntry } from "../src/store/audit.js";
import { openStores } from "../src/store/backends.js";
import { caseOf } from "../src/evidence/case-source.js";
import {
  intArg,
  removeScratch,
  round,
  strArg,
  summary,
  tempDir,
  writeResult,
  ROOT,
} from "./support/common.js";

const SIZES = strArg("sizes", "1000,10000,50000")
  .split(",")
  .map((s) => Number(s.trim()));
const REPEAT = intArg("repeat", 3);
const PER_THREAD = 3;

/** A deterministic blob of about `bytes` characters of JSON: a task as `tasks.task.get` answers it. */
function taskBlob(i: number, bytes: number): Record<string, unknown> {
  const fields: Record<string, string> = {};
  for (let k = 0; JSON.stringify(fields).length < bytes; k++)
    fields[`UF_FIELD_${k}`] = `value ${i}-${k} ${"Задача ".repeat(4)}`;
  return { result: { task: { id: String(4 + i), title: `task ${i}`, ...fields } } };
}

/** The k-th record of thread t: a request, a decision, an outcome (sizes like a real run's). */
function entry(t: number, k: number, i: number): AuditEntry {
  const threadId = `thread-${t}`;
  const at = new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
  const base = {
    threadId,
    revision: 1,
    discriminator: "",
    at,
    requestedBy: "demo-user",
    risk: null,
    what: {
      operation: "update_task",
      taskId: 4 + t,
      params: { TITLE: `renamed ${t}` },
      envelopeHash: null,
      envelope: k === 0 ? taskBlob(i, 3000) : null,
    },
    approver: null,
    override: null,
    policy: { id: "default", version: "1" },
    refusal: null,
    outcome: null,
  };
  if (k === 0)
    return { ...base, event: "approval_requested", received: { card: taskBlob(i, 2500) } } as AuditEntry;
  if (k === 1)
    return { ...base, event: "decision_accepted", received: { decision: taskBlob(i, 3800) } } as AuditEntry;
  return {
    ...base,
    event: "execution_outcome",
    received: {
      preRead: { raw: taskBlob(i, 3400), fields: taskBlob(i + 1, 3500) },
      acknowledgement: { body: taskBlob(i, 3400) },
      verification: { raw: taskBlob(i, 3400), fields: taskBlob(i + 2, 3800) },
    },
  } as AuditEntry;
}

type Stores = Awaited<ReturnType<typeof openStores>>;

interface Timed {
  wallMs: number;
  cpuMs: number;
}

async function timed(fn: () => Promise<unknown>): Promise<Timed[]> {
  const out: Timed[] = [];
  for (let r = 0; r < REPEAT; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await fn();
    const c = process.cpuUsage(c0);
    out.push({ wallMs: performance.now() - t0, cpuMs: (c.user + c.system) / 1000 });
  }
  return out;
}

const med = (xs: Timed[], k: keyof Timed) => round(summary(xs.map((x) => x[k])).median);

async function measure(backend: string, { journal, audit: log }: Stores, sizes: number[]) {
  const rows = [];
  let appended = 0;
  for (const size of sizes) {
    const t0 = performance.now();
    for (; appended < size; appended++) {
      const i = appended;
      const t = Math.floor(i / PER_THREAD);
      if (i % PER_THREAD === 0)
        await journal.registerThread({
          threadId: `thread-${t}`,
          request: `rename task ${4 + t}`,
          requestedBy: "demo-user",
          scope: {},
          createdAt: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
        });
      await log.append(entry(t, i % PER_THREAD, i));
    }
    const fillS = round((performance.now() - t0) / 1000, 1);
    const threads = Math.floor(size / PER_THREAD);
    const source = { audit: log, journal, thread: async () => ({ status: "finished" as const }) };
    const view = (t: number) => async () => {
      const found = await caseOf(source, `thread-${t}`);
      if (!found?.caseRecord.auditChain.intact) throw new Error(`thread-${t}: chain not intact`);
    };
    const newest = await timed(view(threads - 1));
    const halfway = await timed(view(Math.floor(threads / 2)));
    const oldest = await timed(view(0));
    const whole = await timed(async () => {
      const v = await log.verify();
      if (!v.intact || v.records !== size) throw new Error(`whole check: ${JSON.stringify(v)}`);
    });
    const row = {
      backend,
      records: size,
      fillSeconds: fillS,
      newestViewMs: med(newest, "wallMs"),
      newestViewCpuMs: med(newest, "cpuMs"),
      halfwayViewMs: med(halfway, "wallMs"),
      oldestViewMs: med(oldest, "wallMs"),
      wholeCheckMs: med(whole, "wallMs"),
      wholeCheckCpuMs: med(whole, "cpuMs"),
      newestOverWhole: round(med(newest, "wallMs") / med(whole, "wallMs"), 4),
      raw: { newest, halfway, oldest, whole },
    };
    console.log(
      `${backend} ${size}: newest view ${row.newestViewMs} ms (CPU ${row.newestViewCpuMs}), halfway ${row.halfwayViewMs}, oldest ${row.oldestViewMs}, whole check ${row.wholeCheckMs} ms (CPU ${row.wholeCheckCpuMs}); filled in ${fillS} s`,
    );
    rows.push(row);
  }
  return rows;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const sizes = [...SIZES].sort((a, b) => a - b);
  if (sizes.some((n) => !Number.isInteger(n) || n < PER_THREAD))
    throw new Error(`--sizes takes whole numbers of at least ${PER_THREAD}, got ${SIZES.join(",")}`);
  const dir = tempDir("ae-bench-audit-view-");
  const results = [];
  // The journal key beside the data directory (removed with it), never in the real home.
  const env = {
    ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"),
    ACTION_ENVELOPE_JOURNAL_KEY: randomBytes(32).toString("base64"),
  };
  try {
    const sqlite = await openStores(loadConfig(env, ROOT));
    try {
      results.push(...(await measure("SQLite", sqlite, sizes)));
    } finally {
      await sqlite.journal.close();
    }
    const url = process.env["DATABASE_URL"];
    if (url) {
      const schema = `bench_audit_view_${Date.now()}`;
      const stores = await openStores(
        loadConfig({ ...env, DATABASE_URL: url, ACTION_ENVELOPE_DB_SCHEMA: schema }, ROOT),
      );
      try {
        results.push(...(await measure("PostgreSQL", stores, sizes)));
      } finally {
        await stores.audit.close();
        await stores.journal.close();
        const admin = new pg.Client({ connectionString: url });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await admin.end();
      }
    }
  } finally {
    removeScratch(dir);
  }
  console.table(results.map(({ raw: _raw, ...r }) => r));
  writeResult(
    "audit-view",
    {
      setup: {
        sizes,
        repeat: REPEAT,
        recordsPerThread: PER_THREAD,
        recordShape: "request ~6 KB, decision ~4 KB, outcome ~24 KB (the sizes of a real run's records)",
        note: "a view checks the chain from its thread's first record to the head; the whole check is audit verify, what a view ran before",
      },
      results,
    },
    startedAt,
  );
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
