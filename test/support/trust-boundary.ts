/**
 * Shared pieces of the trust-boundary tests (issue 12): forged envelopes an attacker would put into
 * graph state, signed decisions, a policy file, approver keys, the audit log read straight from its
 * table (SQLite file or PostgreSQL schema, never through the code under test) and writes counted from
 * the emulator's own call log.
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import {
  createEnvelope,
  generateApproverKeyPair,
  hashEnvelope,
  parseEnvelope,
  parsePolicy,
  signDecision,
  signedPayloadOf,
  DecisionSchema,
  type Envelope,
  type RiskLevel,
} from "../../src/envelope/index.js";
import { ROOT, selfDeclaredRequestersPolicy, tempDir, type Portal } from "./harness.js";
import { adminQuery, schemaFor, usingPostgres } from "./postgres.js";

export const DEFAULT_POLICY_FILE = path.join(ROOT, "policy/default.json");

/**
 * The repository's default policy with some keys replaced, written to a file of its own; its requester
 * rule is off unless `change` sets it (see selfDeclaredRequestersPolicy).
 */
export function writePolicy(change: (p: any) => void = () => {}): string {
  return selfDeclaredRequestersPolicy(change);
}

export function loadPolicyJson(file = DEFAULT_POLICY_FILE) {
  return parsePolicy(JSON.parse(fs.readFileSync(file, "utf8")));
}

/** Key pairs for these approver ids: the public lines in `<dir>/<id>.pub`, the private PEMs returned. */
export function makeKeys(ids: string[]): { dir: string; pem: Record<string, string> } {
  const dir = tempDir("ae-tb-keys-");
  const pem: Record<string, string> = {};
  for (const id of ids) {
    const pair = generateApproverKeyPair(id);
    fs.writeFileSync(path.join(dir, `${id}.pub`), `${pair.publicKeyLine}\n`);
    pem[id] = pair.privateKeyPem;
  }
  return { dir, pem };
}

export interface Bound {
  envelopeHash: string;
  nonce: string;
  threadId: string;
}

/**
 * One approve decision for `bound`, as a resume value. Signed with `pem` when given (over exactly
 * what the runtime verifies); `decidedAt` defaults to now.
 */
export function approveValue(
  bound: Bound,
  approverId: string,
  opts: { pem?: string; decidedAt?: string; type?: "approve" | "reject"; message?: string } = {},
) {
  const item: Record<string, unknown> = {
    type: opts.type ?? "approve",
    envelopeHash: bound.envelopeHash,
    nonce: bound.nonce,
    approver: { id: approverId },
    decidedAt: opts.decidedAt ?? new Date().toISOString(),
    ...(opts.message !== undefined ? { message: opts.message } : {}),
  };
  if (opts.pem) {
    const parsed = DecisionSchema.parse(item);
    item["signature"] = signDecision(signedPayloadOf(parsed, bound.threadId), opts.pem);
  }
  return { decisions: [item] };
}

/**
 * An envelope an attacker builds: a valid envelope (so validation, pre-read and verification pass)
 * for `taskId` with `params`, carrying the original's thread, nonce, revision and ids, optionally with
 * a lower risk class and a later expiry. Its baseline is read from the portal now, so a pre-read of
 * the target matches it.
 */
export async function forgeEnvelope(
  portal: Portal,
  original: Envelope,
  change: { taskId?: number; params: Record<string, unknown>; riskLevel?: RiskLevel; expiresInMs?: number },
): Promise<{ envelope: Envelope; envelopeHash: string }> {
  const taskId = change.taskId ?? original.object.id;
  const task = await portal.task(taskId);
  const built = createEnvelope({
    portal: original.portal,
    taskId,
    params: change.params,
    task,
    requestedBy: original.requestedBy,
    // A forger claims whatever passes: a verified requester, so any risk level can be built.
    requesterVerifiedBy: "authentication",
    runContext: original.runContext,
    policy: loadPolicyJson(),
    now: new Date(original.createdAt),
    revision: original.revision,
    envelopeId: original.envelopeId,
    nonce: original.nonce,
    ...(original.previousEnvelopeHash ? { previousEnvelopeHash: original.previousEnvelopeHash } : {}),
  });
  const envelope = parseEnvelope({
    ...built,
    ...(change.riskLevel ? { risk: { ...built.risk, level: change.riskLevel } } : {}),
    ...(change.expiresInMs !== undefined
      ? { expiresAt: new Date(Date.now() + change.expiresInMs).toISOString() }
      : {}),
  });
  return { envelope, envelopeHash: hashEnvelope(envelope) };
}

export interface AuditRecordJson {
  seq: number;
  threadId: string;
  event: string;
  revision: number;
  refusal: { code: string; reason: string } | null;
  outcome: { outcome: string; reasonCode: string; flags: Record<string, boolean> } | null;
  what: { envelopeHash: string | null; taskId: number | null; params: Record<string, unknown> | null } | null;
  [key: string]: unknown;
}

/**
 * The audit records of one thread, read from the table itself: the audit table of `<dataDir>/journal.sqlite` opened
 * read-only, or the data directory's PostgreSQL schema when the suite runs on PostgreSQL.
 */
export async function readAudit(dataDir: string, threadId: string): Promise<AuditRecordJson[]> {
  if (usingPostgres) {
    const rows = await adminQuery<{ record_json: string }>(
      `SELECT record_json FROM ${schemaFor(dataDir)}.audit_records WHERE thread_id = $1 ORDER BY seq`,
      [threadId],
    ).catch((e: Error) => {
      if (/does not exist/.test(e.message)) return [];
      throw e;
    });
    return rows.map((r) => JSON.parse(r.record_json) as AuditRecordJson);
  }
  const file = path.join(dataDir, "journal.sqlite");
  if (!fs.existsSync(file)) return [];
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare("SELECT record_json FROM audit_records WHERE thread_id = ? ORDER BY seq")
      .all(threadId) as Array<{ record_json: string }>;
    return rows.map((r) => JSON.parse(r.record_json) as AuditRecordJson);
  } finally {
    db.close();
  }
}

export const events = (records: AuditRecordJson[], event: string) => records.filter((r) => r.event === event);
/** The closing records (run_ended, or execution_outcome for a run that sent a write). */
export const closings = (records: AuditRecordJson[]) =>
  records.filter((r) => r.outcome !== null && r.outcome !== undefined);

/** A position in the emulator's call log; writes after it are what the code under test sent. */
export async function writeMark(portal: Portal): Promise<number> {
  return (await portal.writes()).length;
}

export async function writesSince(portal: Portal, mark: number) {
  return (await portal.writes()).slice(mark);
}
