/**
 * The audit log's hash chain: each record's hash, and the check of a chain that tells an edited record
 * from a removed, reordered or inserted one.
 */
import {
  AuditLogError,
  GENESIS_HASH,
  type AppendResult,
  type AuditEntry,
  type AuditLog,
  type AuditRecord,
  type AuditRow,
  type AuditThreadSummary,
  type ChainProblem,
  type ChainVerification,
  type VerifyOptions,
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

/**
 * The record an append writes after the chain's head `last` (none: the genesis): its seq, stored text
 * and hashes, and `values`, the row in the column order both backends insert it in.
 */
export function nextLink(
  entry: AuditEntry,
  last: { seq: number | string; record_hash: string } | undefined,
  now: Date,
) {
  const seq = (last ? Number(last.seq) : 0) + 1;
  const prevHash = last?.record_hash ?? GENESIS_HASH;
  const recordedAt = now.toISOString();
  const text = canonicalJson({ ...entry, seq, recordedAt });
  const hash = recordHashOfText(text, prevHash);
  const { threadId, revision, event, discriminator } = entry;
  const values = [seq, threadId, revision, event, discriminator, recordedAt, text, prevHash, hash];
  return { seq, recordedAt, text, prevHash, hash, values };
}

/** What an append that wrote `link` answers. */
export function appended(link: ReturnType<typeof nextLink>): AppendResult {
  const body = JSON.parse(link.text) as AuditEntry & { seq: number; recordedAt: string };
  return { appended: true, record: { ...body, prevHash: link.prevHash, hash: link.hash } };
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
    // The stored text is what the append hashed (the record's canonical JSON), so hashing it as stored
    // is the check, and a match means these are the bytes that were hashed; only a text stored in
    // another form of the same content (an older writer) is canonicalised again.
    contentOk =
      recordHashOfText(row.record_json, row.prev_hash) === row.record_hash ||
      recordHash(parsed!, row.prev_hash) === row.record_hash;
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

/** The rows `verify` reads per query: its memory is one page and a few records, however long the chain. */
export const VERIFY_PAGE_SIZE = 1000;

function writtenSeqOf(row: AuditRow): number | undefined {
  try {
    const parsed = JSON.parse(row.record_json) as { seq?: unknown } | null;
    return typeof parsed?.seq === "number" ? parsed.seq : undefined;
  } catch {
    return undefined;
  }
}

const about = (c: Checked) => ({ threadId: c.row.thread_id, event: c.row.event });

/**
 * Checks a chain fed to it in table order, any number of rows at a time, and explains the first break;
 * it keeps only the records next to the one it judges, so the answer is the same however the chain is
 * cut into pages. The questions, in order: does the record's hash still match its content; does it sit
 * where it was written (its hashed seq); does it link to the record before it. A record whose successor
 * links past it was inserted; a record out of place whose expected predecessor appears later was
 * reordered; a gap nobody fills was removed. With `head` (a hash kept elsewhere), an intact chain with
 * no record of that hash was cut off after it.
 *
 * With `after` (a stored record), the chain is checked from the record after it on: `after` is taken as
 * it stands, unchecked, so the first record fed must sit at its next seq and link to its stored hash.
 * What is found from there on is what checking the whole chain finds, whenever the whole chain's first
 * problem lies at or after the first record fed (its records before were then judged intact, which is
 * the state `after` starts from).
 */
export class ChainVerifier {
  private records = 0;
  private last: AuditRow | undefined;
  private headSeen = false;
  /** Records judged intact so far: the next one is the (passed + 1)-th written. */
  private passed = 0;
  /** The last record judged intact, and the hash the one before it has (the genesis hash for none). */
  private before: Checked | undefined;
  private beforeThatHash = GENESIS_HASH;
  /** The record not judged yet: an unreadable one is told apart by its successor's link. */
  private held: Checked | undefined;
  private problem: ChainProblem | undefined;
  /** A record out of place: reordered if the record written at its place comes later, else `otherwise`. */
  private seeking:
    { seq: number; found: (at: AuditRow) => ChainProblem; otherwise: ChainProblem } | undefined;

  /** The first seq checked when the check starts after a record taken as it stands. */
  private readonly from: number | undefined;

  constructor(
    private readonly head?: string,
    after?: AuditRow,
  ) {
    if (after) {
      this.from = after.seq + 1;
      this.passed = after.seq;
      this.before = { row: after, writtenSeq: after.seq, contentOk: true };
      this.beforeThatHash = after.prev_hash;
      this.last = after;
    }
  }

  /** The next rows of the chain, in seq order. */
  add(rows: readonly AuditRow[]): this {
    for (const row of rows) {
      this.records += 1;
      this.last = row;
      if (row.record_hash === this.head) this.headSeen = true;
      if (this.problem) continue;
      if (this.seeking) {
        this.seek(row, writtenSeqOf(row));
        continue;
      }
      const c = check(row);
      const held = this.held;
      this.held = c;
      if (held) this.judge(held, c);
      this.seek(row, c.writtenSeq);
    }
    return this;
  }

  /** The answer for the rows fed so far, taken as the whole chain. */
  finish(): ChainVerification {
    const held = this.held;
    this.held = undefined;
    if (held && !this.problem && !this.seeking) this.judge(held, undefined);
    const problem = this.problem ?? this.seeking?.otherwise;
    const last = this.last;
    const from = this.from === undefined ? {} : { from: this.from };
    if (problem) return { intact: false, records: this.records, ...from, problem };
    if (this.head !== undefined && !this.headSeen) {
      return {
        intact: false,
        records: this.records,
        ...from,
        problem: {
          kind: "removed",
          seq: (last?.seq ?? 0) + 1,
          detail: `no record has the anchored head hash ${this.head}; the chain was truncated or rewritten after it (current head: ${last ? `seq ${last.seq} ${last.record_hash}` : "empty"})`,
        },
      };
    }
    return {
      intact: true,
      records: this.records,
      ...from,
      head: last ? { seq: last.seq, hash: last.record_hash } : null,
    };
  }

  /** While seeking: a later record written at the place of the one out of place. */
  private seek(row: AuditRow, writtenSeq: number | undefined): void {
    if (this.seeking && writtenSeq === this.seeking.seq) this.settle(this.seeking.found(row));
  }

  private settle(problem: ChainProblem): void {
    this.problem = problem;
    this.seeking = undefined;
  }

  /** Judges the record after the last intact one, given the record after it (none at the chain's end). */
  private judge(c: Checked, next: Checked | undefined): void {
    const expectedSeq = this.passed + 1;
    const prev = this.before;
    const expectedPrev = prev?.row.record_hash ?? GENESIS_HASH;

    if (!c.contentOk) {
      if (next && next.contentOk && next.row.prev_hash === expectedPrev) {
        return this.settle({
          kind: "inserted",
          seq: c.row.seq,
          ...about(c),
          detail: `record at seq ${c.row.seq} does not match its hash and the next record links past it to seq ${c.row.seq - 1}; it was not written by the log`,
        });
      }
      return this.settle({
        kind: "edited",
        seq: c.row.seq,
        ...about(c),
        detail: `record seq ${c.row.seq} (${c.row.event}, thread ${c.row.thread_id}) no longer matches its hash: its content, previous hash or stored hash was changed`,
      });
    }

    const writtenSeq = c.writtenSeq!;
    if (writtenSeq === expectedSeq && c.row.prev_hash === expectedPrev) {
      if (c.row.seq !== writtenSeq) {
        return this.settle({
          kind: "reordered",
          seq: c.row.seq,
          ...about(c),
          detail: `record written as seq ${writtenSeq} is stored at seq ${c.row.seq}`,
        });
      }
      this.passed += 1;
      this.beforeThatHash = expectedPrev;
      this.before = c;
      return;
    }

    // The previous record was slipped in: this one links to the record before it.
    if (prev && c.row.prev_hash === this.beforeThatHash && writtenSeq === expectedSeq - 1) {
      return this.settle({
        kind: "inserted",
        seq: prev.row.seq,
        ...about(prev),
        detail: `record at seq ${prev.row.seq} was not written by the log: the record after it (written as seq ${writtenSeq}) links directly to the one before it`,
      });
    }
    if (writtenSeq === expectedSeq) {
      // In place, but the predecessor's hash changed: the predecessor was edited and re-hashed.
      return this.settle(
        prev
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
            },
      );
    }
    const range =
      writtenSeq - 1 === expectedSeq ? `seq ${expectedSeq} is` : `seq ${expectedSeq}..${writtenSeq - 1} are`;
    this.seeking = {
      seq: expectedSeq,
      found: (at) => ({
        kind: "reordered",
        seq: c.row.seq,
        ...about(c),
        detail: `record written as seq ${writtenSeq} stands where seq ${expectedSeq} belongs; seq ${expectedSeq} appears later, at position seq ${at.seq}`,
      }),
      otherwise:
        writtenSeq > expectedSeq
          ? {
              kind: "removed",
              seq: expectedSeq,
              ...about(c),
              detail: `record ${range} missing: record seq ${writtenSeq} links to ${c.row.prev_hash}, which no remaining record has`,
            }
          : {
              kind: "inserted",
              seq: c.row.seq,
              ...about(c),
              detail: `record at seq ${c.row.seq} is a copy of record seq ${writtenSeq}, which the chain already passed`,
            },
    };
  }
}

/**
 * Verifies the chain `read` gives a page at a time: the rows after seq `after` (from the first when
 * undefined), in seq order, at most `limit`; with `from`, the rows from that seq on, after the record
 * before it (`read.before`: the row with the greatest seq below it) taken as it stands (ChainVerifier).
 * Appends only add records after the head, in seq order, so pages read at different moments are still
 * one chain's prefix. The pages after a problem are read too, for the count of records.
 */
export async function verifyInPages(
  read: ((after: number | undefined, limit: number) => Promise<AuditRow[]>) & {
    before(seq: number): Promise<AuditRow | undefined>;
  },
  { head, pageSize = VERIFY_PAGE_SIZE, from }: VerifyOptions = {},
): Promise<ChainVerification> {
  if (!Number.isInteger(pageSize) || pageSize < 1)
    throw new RangeError(`verify reads pages of a positive whole number of records, not ${pageSize}`);
  if (from !== undefined && (!Number.isInteger(from) || from < 1))
    throw new RangeError(`verify starts at a positive whole seq, not ${from}`);
  if (from !== undefined && head !== undefined)
    throw new RangeError(
      "an anchored head is checked against the whole chain; verify takes it without `from`",
    );
  // Without a record before `from`, every record is at or after it: the whole chain is checked.
  const start = from !== undefined && from > 1 ? await read.before(from) : undefined;
  const verifier = new ChainVerifier(head, start);
  for (let after = start?.seq; ;) {
    const page = await read(after, pageSize);
    verifier.add(page);
    if (page.length < pageSize) return verifier.finish();
    after = page.at(-1)!.seq;
  }
}

/** Threads per threadPage `audit list` reads: what it holds at once, however many threads the log has. */
export const LIST_PAGE_SIZE = 100;

/**
 * Every thread's summary in the order of its first record (oldest first), one threadPage at a time:
 * each page is read when the one before has been consumed, by the keyset cursor the page before gave.
 */
export async function* threadPages(
  log: Pick<AuditLog, "threadPage">,
  pageSize = LIST_PAGE_SIZE,
): AsyncGenerator<AuditThreadSummary[]> {
  for (let after = 0; ;) {
    const page = await log.threadPage({ after, limit: pageSize });
    yield page.threads;
    if (page.next === null) return;
    after = page.next;
  }
}

/** Records a threadPage reads per statement: what it holds at once, however many records a thread has. */
export const SUMMARY_READ_SIZE = 1000;

/**
 * What a thread's summary takes from one record: the columns `seq`, `thread_id` and `event`, and the
 * record's requester, requester verification, time, outcome and reason code, and whether it carries an
 * outcome and an override. Both stores select them from the record's JSON in the statement
 * (src/store/audit.ts, src/store/pg-audit.ts), so the listing never moves or parses a record's evidence.
 */
export interface SummaryRow {
  seq: number;
  thread_id: string;
  event: string;
  requested_by: string | null;
  requester_verified_by: string | null;
  at: string | null;
  has_outcome: boolean | number;
  outcome: string | null;
  reason_code: string | null;
  has_override: boolean | number;
}

/**
 * A page's SummaryRows as `summary` selects them from the records' JSON. When the store could not read
 * a record as JSON (`unreadable` says so of the failure), the same rows are read whole and toRecord
 * names the damaged one (AuditLogError); any other failure, or none named, is the statement's own.
 */
export async function summaryRowsNamingDamage(
  summary: () => Promise<SummaryRow[]>,
  whole: () => Promise<AuditRow[]>,
  unreadable: (e: unknown) => boolean,
): Promise<SummaryRow[]> {
  try {
    return await summary();
  } catch (e) {
    if (!unreadable(e)) throw e;
    for (const row of await whole()) toRecord(row);
    throw e;
  }
}

/**
 * The summaries of threads `ids`, in that order, folded from their records read at most `readSize` at a
 * time (`read.many` orders them by thread, then seq; `read.one` is one thread's records after a seq). A
 * full read stops inside its last thread: that thread is read on by itself, then the threads the read
 * did not reach are read from their start. Shared by every AuditLog implementation.
 */
export async function summariseThreads(
  ids: string[],
  read: {
    many(threadIds: string[], limit: number): Promise<SummaryRow[]>;
    one(threadId: string, after: number, limit: number): Promise<SummaryRow[]>;
  },
  readSize = SUMMARY_READ_SIZE,
): Promise<AuditThreadSummary[]> {
  if (!Number.isInteger(readSize) || readSize < 1)
    throw new RangeError(
      `threads are summed up from reads of a positive whole number of records, not ${readSize}`,
    );
  const byThread = new Map<string, AuditThreadSummary>();
  const fold = (rows: SummaryRow[]) => {
    for (const row of rows) summarise(byThread, row);
    return rows;
  };
  for (let pending = ids; pending.length > 0;) {
    const rows = fold(await read.many(pending, readSize));
    if (rows.length < readSize) break;
    const threadId = rows.at(-1)!.thread_id;
    for (let more = rows; more.length === readSize;)
      more = fold(await read.one(threadId, more.at(-1)!.seq, readSize));
    pending = pending.filter((id) => !byThread.has(id));
  }
  return ids.flatMap((id) => byThread.get(id) ?? []);
}

/** Adds a record to its thread's summary; a thread's records come in chain order. */
function summarise(byThread: Map<string, AuditThreadSummary>, r: SummaryRow): void {
  const s = byThread.get(r.thread_id) ?? {
    threadId: r.thread_id,
    requestedBy: "",
    requesterVerifiedBy: null,
    records: 0,
    firstAt: r.at as string,
    lastAt: r.at as string,
    lastEvent: r.event as AuditThreadSummary["lastEvent"],
    outcome: null,
    reasonCode: null,
    overrides: 0,
    refusedRequests: 0,
  };
  // A request_refused record is appended under whatever thread a refused request's path names
  // (src/auth/routes.ts), at any time, also after the run ended: it names no requester and is not the
  // run's last event; it is counted apart.
  const refused = r.event === "request_refused";
  s.records += 1;
  if (refused) s.refusedRequests += 1;
  if (!refused || s.records === s.refusedRequests) {
    s.lastAt = r.at as string;
    s.lastEvent = r.event as AuditThreadSummary["lastEvent"];
  }
  if (s.requestedBy === "" && !refused) s.requestedBy = r.requested_by ?? "";
  if (r.requester_verified_by)
    s.requesterVerifiedBy = r.requester_verified_by as AuditThreadSummary["requesterVerifiedBy"];
  if (r.has_outcome) {
    s.outcome = r.outcome;
    s.reasonCode = r.reason_code;
  }
  // The closing record repeats the settling decision's override; count each override once.
  if (r.has_override && r.event === "decision_accepted") s.overrides += 1;
  byThread.set(r.thread_id, s);
}
