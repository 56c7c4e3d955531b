/**
 * What the PostgreSQL scale benchmarks share: CLI processes timed under /usr/bin/time -v, and the
 * population of sealed index-only replicas copied from real registered rows (pending-scale-pg, scale-pg).
 */
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { hashEnvelope, renderCard, type Envelope } from "../../src/envelope/index.js";
import {
  sealAction,
  sealThread,
  toActionRow,
  toThreadRecord,
  type ActionDbRow,
  type ThreadDbRow,
} from "../../src/store/action-rows.js";
import { emptyProgress, type RegisteredAction } from "../../src/store/action-machine.js";
import { dueOnRegister } from "../../src/store/due.js";
import { ROOT, round } from "./common.js";

const TIME = "/usr/bin/time";
const CLI = path.join(ROOT, "dist/cli/main.js");

export interface Spawned {
  label: string;
  command: string;
  wallMs: number;
  cpuMs: number | null;
  maxRssKb: number | null;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/** `node dist/cli/main.js ARGS` under /usr/bin/time -v. */
/** `node dist/cli/main.js ARGS` under /usr/bin/time -v. */
export function cli(label: string, args: string[], env: Record<string, string>): Promise<Spawned> {
  const withTime = fs.existsSync(TIME);
  const argv = ["node", CLI, ...args];
  const [cmd, ...rest] = withTime ? [TIME, "-v", ...argv] : argv;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd!, rest, {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const wallMs = performance.now() - t0;
      const num = (re: RegExp) => {
        const m = re.exec(stderr);
        return m ? Number(m[1]) : null;
      };
      const user = num(/User time \(seconds\): ([\d.]+)/);
      const sys = num(/System time \(seconds\): ([\d.]+)/);
      resolve({
        label,
        command: `node dist/cli/main.js ${args.join(" ")}`,
        wallMs: round(wallMs),
        cpuMs: user !== null && sys !== null ? round((user + sys) * 1000) : null,
        maxRssKb: num(/Maximum resident set size \(kbytes\): (\d+)/),
        exitCode: code,
        stdout,
        stderr,
      });
    });
  });
}

export function jsonOf(s: Spawned): any {
  const start = s.stdout.indexOf("{");
  if (start < 0)
    throw new Error(
      `${s.label}: no JSON in output (exit ${s.exitCode}):\n${s.stdout.slice(0, 1500)}\n${s.stderr.slice(-1500)}`,
    );
  return JSON.parse(s.stdout.slice(start));
}

export const brief = (s: Spawned) => ({
  label: s.label,
  command: s.command,
  wallMs: s.wallMs,
  cpuMs: s.cpuMs,
  maxRssKb: s.maxRssKb,
  exitCode: s.exitCode,
  stdoutBytes: s.stdout.length,
});

export interface Template {
  action: RegisteredAction;
  request: string;
  scope: RegisteredAction["scope"];
  createdAtMs: number;
  ttlMs: number;
  cardMatches: boolean;
}

/** What the real registered rows hold, checked: each seal verifies and its card re-renders identically. */
export async function templates(db: pg.Pool, schema: string, key: Buffer): Promise<Template[]> {
  const s = pg.escapeIdentifier(schema);
  const rows = (
    await db.query<ActionDbRow & { t_record_json: string; t_mac: string; t_created_at: string }>(
      `SELECT a.*, t.record_json AS t_record_json, t.mac AS t_mac, t.created_at AS t_created_at FROM ${s}.actions a JOIN ${s}.threads t USING (thread_id) WHERE a.phase = 'registered' ORDER BY a.id`,
    )
  ).rows;
  return rows.map((r) => {
    const row = toActionRow(r, key);
    const thread = toThreadRecord(
      {
        thread_id: r.thread_id,
        record_json: r.t_record_json,
        mac: r.t_mac,
        closed_json: null,
        created_at: r.t_created_at,
      } as ThreadDbRow,
      key,
    );
    if (!row.macValid || !thread.macValid)
      throw new Error(`real row ${r.envelope_hash} does not verify with the journal key`);
    const action: RegisteredAction = {
      envelopeHash: row.envelopeHash,
      threadId: row.threadId,
      revision: row.revision,
      envelope: row.envelope,
      card: row.card,
      scope: row.scope,
      policy: row.policy,
      escalatedTo: row.escalatedTo,
      supersededHashes: row.supersededHashes,
      editedBy: row.editedBy,
      ...(row.people ? { people: row.people } : {}),
    };
    const again = renderCard(
      row.envelope,
      row.envelopeHash,
      "text",
      row.people ? { people: row.people.names } : {},
    ).text;
    return {
      action,
      request: thread.request,
      scope: thread.scope,
      createdAtMs: Date.parse(row.envelope.createdAt),
      ttlMs: Date.parse(row.envelope.expiresAt) - Date.parse(row.envelope.createdAt),
      cardMatches: again === row.card,
    };
  });
}

/** Index-only replicas in batches: thread and action rows, each sealed with the journal key. */
export async function replicate(
  db: pg.Pool,
  schema: string,
  key: Buffer,
  from: Template[],
  count: number,
  opts: { requesters: number; spreadMs: number; first?: number; of?: number },
): Promise<{ seconds: number; sealSeconds: number }> {
  // Replica k of `of` (k counted from `first`): a population grown in steps spreads as one made at once.
  const { requesters: REQUESTERS, spreadMs: SPREAD_MS } = opts;
  const first = opts.first ?? 0;
  const of = opts.of ?? count;
  const s = pg.escapeIdentifier(schema);
  const oldest = Math.min(...from.map((t) => t.createdAtMs));
  const t0 = performance.now();
  let sealMs = 0;
  const BATCH = 1000;
  for (let start = 0; start < count; start += BATCH) {
    const n = Math.min(BATCH, count - start);
    const th = { id: [] as string[], json: [] as string[], mac: [] as string[], at: [] as string[] };
    const ac = {
      hash: [] as string[],
      thread: [] as string[],
      json: [] as string[],
      mac: [] as string[],
      at: [] as string[],
      due: [] as number[],
    };
    const s0 = performance.now();
    for (let i = 0; i < n; i++) {
      const k = first + start + i;
      const t = from[k % from.length]!;
      const threadId = randomUUID();
      const requestedBy = `bench-user-${String(k % REQUESTERS).padStart(2, "0")}`;
      const created = new Date(oldest - SPREAD_MS + Math.floor((k * SPREAD_MS) / of));
      const base = t.action.envelope;
      const envelope: Envelope = {
        ...base,
        envelopeId: randomUUID(),
        requestedBy,
        runContext: { threadId, ...(base.runContext.runId ? { runId: randomUUID() } : {}) },
        createdAt: created.toISOString(),
        expiresAt: new Date(created.getTime() + t.ttlMs).toISOString(),
        nonce: randomBytes(16).toString("hex"),
      };
      const envelopeHash = hashEnvelope(envelope);
      const card = renderCard(
        envelope,
        envelopeHash,
        "text",
        t.action.people ? { people: t.action.people.names } : {},
      ).text;
      const action: RegisteredAction = { ...t.action, envelopeHash, threadId, envelope, card };
      const sa = sealAction(key, action);
      const st = sealThread(key, {
        threadId,
        request: t.request,
        requestedBy,
        scope: t.scope,
        createdAt: envelope.createdAt,
      });
      th.id.push(threadId);
      th.json.push(st.json);
      th.mac.push(st.mac);
      th.at.push(envelope.createdAt);
      ac.hash.push(envelopeHash);
      ac.thread.push(threadId);
      ac.json.push(sa.json);
      ac.mac.push(sa.mac);
      ac.at.push(envelope.createdAt);
      ac.due.push(dueOnRegister(action)!.at);
    }
    sealMs += performance.now() - s0;
    const c = await db.connect();
    try {
      await c.query("BEGIN");
      await c.query(
        `INSERT INTO ${s}.threads (thread_id, record_json, mac, created_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`,
        [th.id, th.json, th.mac, th.at],
      );
      await c.query(
        `INSERT INTO ${s}.actions (envelope_hash, thread_id, revision, registered_json, mac, phase, progress_json, registered_at, due_at, due_reason)
         SELECT h, t, 1, j, m, 'registered', $5, a, d, 'expiry' FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::text[], $7::bigint[]) AS x(h, t, j, m, a, d)`,
        [ac.hash, ac.thread, ac.json, ac.mac, JSON.stringify(emptyProgress()), ac.at, ac.due],
      );
      await c.query("COMMIT");
    } catch (e) {
      await c.query("ROLLBACK").catch(() => {});
      throw e;
    } finally {
      c.release();
    }
    if ((start + n) % 10_000 === 0)
      console.log(
        `  ${start + n} replicas (${round((start + n) / ((performance.now() - t0) / 1000))} rows/s)`,
      );
  }
  return { seconds: round((performance.now() - t0) / 1000), sealSeconds: round(sealMs / 1000) };
}
