/**
 * The check of an exported bundle against an audit log (`audit check DIR`). `sha256sum -c SHA256SUMS`
 * proves only that the files are the ones SHA256SUMS lists: whoever edits a file can write its new sum
 * too. What anchors a bundle is the audit log it came from: each of its audit records must hash to the
 * hash it states, and those hashes must be, in order, the thread's records in a log whose chain is
 * intact; the case record and every evidence object must be what those records give, recomputed here
 * (with records, nothing in them comes from graph state: src/evidence/case-input.ts); and the files
 * must be exactly the ones that gives, as SHA256SUMS lists them.
 */
import fs from "node:fs";
import path from "node:path";
import { canonicalJson } from "../envelope/index.js";
import { recordHash, type AuditRecord } from "../store/audit.js";
import { buildCase, CASE_RECORD_SCHEMA, type CaseRecord } from "./bundle.js";
import { CASE_RECORD_FILE, CHECKSUM_FILE, bundleFiles, sha256 } from "./export.js";

/** The thread's records as the audit log holds them now, and whether its chain checked intact. */
export interface LiveThread {
  records: readonly AuditRecord[];
  intact: boolean;
  problem: string | null;
  checkedFrom: number;
}

export interface BundleCheck {
  confirmed: boolean;
  threadId: string | null;
  records: number;
  /** What was found wrong, each naming what was expected and what the bundle holds. */
  problems: string[];
  /** What was checked, in order, for a reader who must know what the verdict rests on. */
  checked: string[];
  /** What the bundle says that this check cannot confirm. */
  notChecked: string[];
}

/** The bundle's case record, read for its thread id before the live records are fetched. */
export function readBundleCase(dir: string): CaseRecord {
  const file = path.join(dir, CASE_RECORD_FILE);
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as CaseRecord;
  } catch (e) {
    throw new Error(`expected an exported bundle with ${file}; ${(e as Error).message}`, { cause: e });
  }
}

/** Checks the bundle in `dir`, whose case record is `c`, against the thread's records in the log. */
export function checkBundle(dir: string, c: CaseRecord, live: LiveThread, source: string): BundleCheck {
  const problems: string[] = [];
  const checked: string[] = [];
  const threadId = typeof c.firstPage?.threadId === "string" ? c.firstPage.threadId : null;
  const records = Array.isArray(c.auditRecords) ? c.auditRecords : [];
  const result = (): BundleCheck => ({
    confirmed: problems.length === 0,
    threadId,
    records: records.length,
    problems,
    checked,
    notChecked: [
      `the chain's state recorded at export (auditChain.intact, auditChain.head): compare that head with "audit verify --head"`,
      `the run's status (firstPage.status), which came from graph state at export`,
    ],
  });
  if (threadId === null) {
    problems.push(`expected firstPage.threadId in ${CASE_RECORD_FILE}, found none`);
    return result();
  }
  if (c.schema !== CASE_RECORD_SCHEMA) {
    problems.push(
      `expected a case record of schema ${CASE_RECORD_SCHEMA}, the bundle's is ${JSON.stringify(c.schema)}: check it with the version that exported it`,
    );
    return result();
  }
  if (records.length === 0) {
    problems.push(
      `the bundle holds no audit record of thread ${threadId}: nothing in it is hash-chained, so nothing anchors it`,
    );
    return result();
  }

  // 1. Each record hashes to its stated hash and belongs to the thread.
  records.forEach((r, i) => {
    const { prevHash, hash, ...body } = r;
    let recomputed: string | undefined;
    try {
      recomputed = recordHash(body, prevHash);
    } catch {
      recomputed = undefined;
    }
    if (recomputed !== hash)
      problems.push(
        `audit record ${i + 1} (seq ${r.seq}, ${r.event}) states hash ${hash} but its content hashes to ${recomputed ?? "nothing (not canonical JSON)"}`,
      );
    if (r.threadId !== threadId)
      problems.push(`audit record ${i + 1} (seq ${r.seq}) is of thread ${r.threadId}, not ${threadId}`);
  });
  checked.push(`each of the ${records.length} audit records against the hash it states`);

  // 2. Those hashes are, in order, the thread's records in the log, whose chain is intact.
  const liveHashes = live.records.map((r) => r.hash);
  const bundleHashes = records.map((r) => r.hash);
  const mismatch = bundleHashes.findIndex((h, i) => liveHashes[i] !== h);
  if (mismatch !== -1)
    problems.push(
      `audit record ${mismatch + 1} of the bundle (seq ${records[mismatch]!.seq}) has hash ${bundleHashes[mismatch]}; the log's record ${mismatch + 1} of thread ${threadId} has ${liveHashes[mismatch] ?? "none (the log has fewer)"}`,
    );
  if (!live.intact)
    problems.push(`the audit chain of ${source} is broken (${live.problem}); it anchors nothing`);
  checked.push(
    `their hashes, in order, against the ${live.records.length} records of thread ${threadId} in ${source} (its chain checked from seq ${live.checkedFrom} to its head: ${live.intact ? "intact" : "BROKEN"})`,
  );
  // A bundle cut short (or exported before the run went on) is not the thread's whole evidence.
  if (mismatch === -1 && liveHashes.length > bundleHashes.length)
    problems.push(
      `the bundle ends at the thread's record ${bundleHashes.length} (seq ${records.at(-1)!.seq}); the log has ${liveHashes.length - bundleHashes.length} later records of thread ${threadId}: export it again for the whole run`,
    );

  // 3. The case record and evidence are what the records give; the files are exactly those, as listed.
  const chain = c.auditChain;
  const rebuilt = buildCase({
    threadId,
    status: c.firstPage.status,
    state: undefined,
    records,
    chain:
      chain?.intact === true
        ? {
            intact: true,
            records: chain.recordsChecked,
            from: chain.checkedFrom,
            head: chain.head,
          }
        : {
            intact: false,
            records: chain?.recordsChecked ?? 0,
            from: chain?.checkedFrom ?? 1,
            problem: { kind: "edited", seq: 0, detail: "" },
          },
  });
  // The chain's state at export is the log's word then; the rest is recomputed.
  rebuilt.caseRecord.auditChain = {
    intact: chain?.intact,
    problem: chain?.problem,
    checkedFrom: chain?.checkedFrom,
    recordsChecked: chain?.recordsChecked,
    head: chain?.head,
    threadRecords: rebuilt.caseRecord.auditChain.threadRecords,
  };
  const expected = bundleFiles(rebuilt.caseRecord, rebuilt.evidence);
  const present = fs.readdirSync(dir).filter((f) => f !== CHECKSUM_FILE);
  for (const name of present)
    if (!expected.has(name)) problems.push(`${name} is not a file the audit records give`);
  for (const [name, text] of expected) {
    const file = path.join(dir, name);
    if (!fs.existsSync(file)) {
      problems.push(`expected ${name}, which the audit records give; the bundle has no such file`);
      continue;
    }
    const actual = fs.readFileSync(file, "utf8");
    const same = name.endsWith(".json") ? sameJson(actual, text) : actual === text;
    if (!same) problems.push(`${name} is not what the audit records give`);
  }
  checked.push(
    `the case record and ${rebuilt.evidence.length} evidence objects, recomputed from those records, against the bundle's ${present.length} files`,
  );

  let sums = "";
  try {
    sums = fs.readFileSync(path.join(dir, CHECKSUM_FILE), "utf8");
  } catch {
    problems.push(`expected ${CHECKSUM_FILE} in the bundle, found none`);
  }
  const listed = new Map(
    sums
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => [l.slice(66), l.slice(0, 64)] as const),
  );
  for (const name of present) {
    const sum = sha256(fs.readFileSync(path.join(dir, name), "utf8"));
    if (listed.get(name) !== sum)
      problems.push(`${CHECKSUM_FILE} lists ${listed.get(name) ?? "no sum"} for ${name}; it has ${sum}`);
  }
  for (const name of listed.keys())
    if (!present.includes(name)) problems.push(`${CHECKSUM_FILE} lists ${name}, which the bundle lacks`);
  checked.push(`the files against ${CHECKSUM_FILE}`);
  return result();
}

/** JSON files compare by content: the same values, whatever the spacing. */
function sameJson(actual: string, expected: string): boolean {
  try {
    return canonicalJson(JSON.parse(actual)) === canonicalJson(JSON.parse(expected));
  } catch {
    return false;
  }
}
