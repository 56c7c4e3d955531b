/**
 * The audit log's hash chain: each record's hash, and the check of a chain that tells an edited record
 * from a removed, reordered or inserted one.
 */
import {
  AuditLogError,
  GENESIS_HASH,
  type AuditEntry,
  type AuditRecord,
  type AuditRow,
  type AuditThreadSummary,
  type ChainProblem,
  type ChainVerification,
} from "./audit-entry.js";
import { hash } from "node:crypto";
import { canonicalJson, sha256Json } from "../envelope/index.js";

/** The hashed form: the record (with its own seq and recordedAt) and the hash it links to. */
export function recordHash(record: Omit<AuditRecord, "prevHash" | "hash">, prevHash: string): string {
  return sha256Json({ prevHash, record });
}

/**
 * recordHash over a record whose canonical text is already at hand: RFC 8785 orders "prevHash" before
 * "record" and writes a nested object as its own canonical text, so this is byte-for-byte the text
 * recordHash hashes, without canonicalising the record a second time (the property test in
 * test/audit-log.test.ts holds the two equal).
 */
export function recordHashOfText(recordText: string, prevHash: string): string {
  return `sha256:${hash("sha256", `{"prevHash":${canonicalJson(prevHash)},"record":${recordText}}`, "hex")}`;
}

export function toRecord(row: AuditRow): AuditRecord {
  let body: AuditEntry & { seq: number; recordedAt: string };
  try {
    body = JSON.parse(row.record_json) as typeof body;
  } catch {
    throw new AuditLogError(`audit record seq ${row.seq} is not valid JSON; run "audit verify"`);
  }
  return { ...body, prevHash: row.prev_hash, hash: row.record_hash };
}

interface Checked {
  row: AuditRow;
  /** The sequence number the record was written with (from the hashed content), when readable. */
  writtenSeq: number | undefined;
  /** The stored hash recomputes from the stored content and previous hash. */
  contentOk: boolean;
}

function check(row: AuditRow): Checked {
  let parsed: (Omit<AuditRecord, "prevHash" | "hash"> & Record<string, unknown>) | undefined;
  try {
    parsed = JSON.parse(row.record_json) as typeof parsed;
  } catch {
    return { row, writtenSeq: undefined, contentOk: false };
  }
  const writtenSeq = typeof parsed?.seq === "number" ? parsed.seq : undefined;
  let contentOk = false;
  try {
    contentOk = recordHash(parsed!, row.prev_hash) === row.record_hash;
  } catch {
    contentOk = false;
  }
  // The indexed columns must say what the hashed content says, or queries by thread would mislead.
  if (
    contentOk &&
    (parsed!.threadId !== row.thread_id ||
      parsed!.revision !== row.revision ||
      parsed!.event !== row.event ||
      parsed!.discriminator !== row.discriminator)
  ) {
    contentOk = false;
  }
  return { row, writtenSeq, contentOk };
}

/**
 * Walks the chain in table order and explains the first break. The questions, in order: does the
 * record's hash still match its content; does it sit where it was written (its hashed seq); does it
 * link to the record before it. A record whose successor links past it was inserted; a record out of
 * place whose expected predecessor appears later was reordered; a gap nobody fills was removed.
 */
export function findFirstProblem(rows: AuditRow[]): ChainProblem | undefined {
  const checked = rows.map(check);
  const about = (c: Checked) => ({ threadId: c.row.thread_id, event: c.row.event });
  const hashAt = (i: number) => (i < 0 ? GENESIS_HASH : checked[i]!.row.record_hash);

  for (let i = 0; i < checked.length; i++) {
    const c = checked[i]!;
    // Every record before this one passed, so the next is the (i + 1)-th written.
    const expectedSeq = i + 1;
    const expectedPrev = hashAt(i - 1);
    const next = checked[i + 1];

    if (!c.contentOk) {
      if (next && next.contentOk && next.row.prev_hash === expectedPrev) {
        return {
          kind: "inserted",
          seq: c.row.seq,
          ...about(c),
          detail: `record at seq ${c.row.seq} does not match its hash and the next record links past it to seq ${c.row.seq - 1}; it was not written by the log`,
        };
      }
      return {
        kind: "edited",
        seq: c.row.seq,
        ...about(c),
        detail: `record seq ${c.row.seq} (${c.row.event}, thread ${c.row.thread_id}) no longer matches its hash: its content, previous hash or stored hash was changed`,
      };
    }

    const writtenSeq = c.writtenSeq!;
    if (writtenSeq === expectedSeq && c.row.prev_hash === expectedPrev) {
      if (c.row.seq !== writtenSeq) {
        return {
          kind: "reordered",
          seq: c.row.seq,
          ...about(c),
          detail: `record written as seq ${writtenSeq} is stored at seq ${c.row.seq}`,
        };
      }
      continue;
    }

    // The previous record was slipped in: this one links to the record before it.
    if (i >= 1 && c.row.prev_hash === hashAt(i - 2) && writtenSeq === expectedSeq - 1) {
      const prev = checked[i - 1]!;
      return {
        kind: "inserted",
        seq: prev.row.seq,
        ...about(prev),
        detail: `record at seq ${prev.row.seq} was not written by the log: the record after it (written as seq ${writtenSeq}) links directly to the one before it`,
      };
    }
    if (writtenSeq === expectedSeq) {
      // In place, but the predecessor's hash changed: the predecessor was edited and re-hashed.
      const prev = checked[i - 1];
      return prev
        ? {
            kind: "edited",
            seq: prev.row.seq,
            ...about(prev),
            detail: `record seq ${prev.row.seq} was changed and re-hashed: record seq ${c.row.seq} links to ${c.row.prev_hash}, but seq ${prev.row.seq} now hashes to ${prev.row.record_hash}`,
          }
        : {
            kind: "edited",
            seq: c.row.seq,
            ...about(c),
            detail: `the first record links to ${c.row.prev_hash} instead of the genesis hash`,
          };
    }
    const missingLater = checked.slice(i + 1).find((o) => o.writtenSeq === expectedSeq);
    if (missingLater) {
      return {
        kind: "reordered",
        seq: c.row.seq,
        ...about(c),
        detail: `record written as seq ${writtenSeq} stands where seq ${expectedSeq} belongs; seq ${expectedSeq} appears later, at position seq ${missingLater.row.seq}`,
      };
    }
    if (writtenSeq > expectedSeq) {
      const range =
        writtenSeq - 1 === expectedSeq
          ? `seq ${expectedSeq} is`
          : `seq ${expectedSeq}..${writtenSeq - 1} are`;
      return {
        kind: "removed",
        seq: expectedSeq,
        ...about(c),
        detail: `record ${range} missing: record seq ${writtenSeq} links to ${c.row.prev_hash}, which no remaining record has`,
      };
    }
    return {
      kind: "inserted",
      seq: c.row.seq,
      ...about(c),
      detail: `record at seq ${c.row.seq} is a copy of record seq ${writtenSeq}, which the chain already passed`,
    };
  }
  return undefined;
}

/** Per-thread summary of records in chain order; shared by every AuditLog implementation. */
export function summariseThreads(records: AuditRecord[]): AuditThreadSummary[] {
  const byThread = new Map<string, AuditThreadSummary>();
  for (const r of records) {
    const s = byThread.get(r.threadId) ?? {
      threadId: r.threadId,
      requestedBy: r.requestedBy,
      requesterVerifiedBy: null,
      records: 0,
      firstAt: r.at,
      lastAt: r.at,
      lastEvent: r.event,
      outcome: null,
      reasonCode: null,
      overrides: 0,
    };
    s.records += 1;
    s.lastAt = r.at;
    if (r.requesterVerifiedBy) s.requesterVerifiedBy = r.requesterVerifiedBy;
    s.lastEvent = r.event;
    if (r.outcome) {
      s.outcome = r.outcome.outcome;
      s.reasonCode = r.outcome.reasonCode;
    }
    // The closing record repeats the settling decision's override; count each override once.
    if (r.override && r.event === "decision_accepted") s.overrides += 1;
    byThread.set(r.threadId, s);
  }
  return [...byThread.values()];
}

/** Chain verification over rows in seq order, optionally against a head hash kept elsewhere. */
export function verifyRows(rows: AuditRow[], head?: string): ChainVerification {
  const problem = findFirstProblem(rows);
  if (problem) return { intact: false, records: rows.length, problem };
  const last = rows.at(-1);
  if (head !== undefined && !rows.some((r) => r.record_hash === head)) {
    return {
      intact: false,
      records: rows.length,
      problem: {
        kind: "removed",
        seq: (last?.seq ?? 0) + 1,
        detail: `no record has the anchored head hash ${head}; the chain was truncated or rewritten after it (current head: ${last ? `seq ${last.seq} ${last.record_hash}` : "empty"})`,
      },
    };
  }
  return {
    intact: true,
    records: rows.length,
    head: last ? { seq: last.seq, hash: last.record_hash } : null,
  };
}
