/**
 * `audit …` commands: verify the hash chain, list audited runs, show one run's evidence, export it
 * as a bundle a third party can check with `sha256sum -c`. They read the data directory, or with
 * `--api URL` (or LANGGRAPH_API_URL) the API server's read-only /audit routes (src/api/audit-routes.ts),
 * which compute the same answers from the server's audit log and checkpoints; output is identical.
 * Exit codes: 0 done (and the chain intact), 1 usage error, 2 the chain is broken or the server refused.
 */
import { Command } from "commander";
import type { CaseRecord } from "../evidence/bundle.js";
import type { EvidenceObject } from "../evidence/evidence-objects.js";
import { caseOf } from "../evidence/case-source.js";
import { exportBundle } from "../evidence/export.js";
import { renderCase } from "../evidence/render.js";
import { UsageError } from "../errors.js";
import {
  AuditLogError,
  threadPages,
  type AuditThreadSummary,
  type ChainVerification,
} from "../store/audit.js";
import { apiOf } from "./api-option.js";
import { withInspectSession } from "./app-session.js";
import { cap, LIMITS } from "./limits.js";
import { requesterVerificationText } from "../envelope/envelope.js";
import { esc, escapeForTerminal, escapeRendered, stringifyJsonSafe } from "../text/escape.js";

const EXIT_OK = 0;
const EXIT_BROKEN = 2;

/**
 * Human output. Data is escaped where it is put into a line (`esc`); what still carries a character
 * that must not reach a terminal is marked here, line breaks kept.
 */
const stdout = (text: string): void => void process.stdout.write(text);
const write = (text: string, out = stdout) => {
  const safe = escapeRendered(text);
  out(safe.endsWith("\n") ? safe : `${safe}\n`);
};
/** Machine output: the same data, valid JSON; controls and bidi characters as \uXXXX escapes. */
const writeJson = (value: unknown) => process.stdout.write(`${stringifyJsonSafe(value)}\n`);

/**
 * The exit code of `fn` run on the audit log `--api` names, else the local one. A record that no longer
 * parses is damage to the log, reported like a broken chain, not as a crash.
 */
async function withReader(
  apiFlag: string | undefined,
  fn: (r: AuditReader) => Promise<number>,
): Promise<number> {
  try {
    return await readerOf(apiFlag, fn);
  } catch (e) {
    if ((e as Error).name === "AuditApiError") {
      // 401 (token), 403 (not yours, or the role), or the server's error (a damaged record): as the server said it.
      const status = (e as Error & { status?: number }).status ?? 0;
      process.stderr.write(
        `${status >= 500 ? "server error" : "refused"}: ${escapeForTerminal((e as Error).message)}\n`,
      );
      return EXIT_BROKEN;
    }
    if (!(e instanceof AuditLogError)) throw e;
    process.stderr.write(`audit log damaged: ${escapeForTerminal(e.message)}\n`);
    return EXIT_BROKEN;
  }
}

/** What the commands read: the local audit log and checkpoints, or the same answers from an API server. */
interface AuditReader {
  verify(head?: string): Promise<ChainVerification>;
  /** Every thread, oldest first, a page at a time (AuditLog.threadPage, or GET /audit/threads). */
  threadPages(): AsyncIterable<AuditThreadSummary[]>;
  caseOf(threadId: string): Promise<{ intact: boolean; caseRecord: CaseRecord; evidence: EvidenceObject[] }>;
}

const API_OPTION = [
  "--api <url>",
  "read the audit of this LangGraph API server instead of the local stores (or LANGGRAPH_API_URL; token: LANGGRAPH_API_TOKEN)",
] as const;

async function readerOf(
  apiFlag: string | undefined,
  fn: (r: AuditReader) => Promise<number>,
): Promise<number> {
  const target = await apiOf(apiFlag);
  if (target) {
    const { apiAudit } = await import("../api/audit-client.js");
    return fn({
      verify: (head) => apiAudit.verify(target, head),
      threadPages: () => apiAudit.threadPages(target),
      caseOf: async (threadId) => {
        const found = await apiAudit.caseOf(target, threadId);
        return { intact: found.caseRecord.auditChain.intact, ...found };
      },
    });
  }
  return withInspectSession((s) =>
    fn({
      verify: (head) => s.audit.verify(head !== undefined ? { head } : {}),
      threadPages: () => threadPages(s.audit),
      caseOf: async (threadId) => {
        const found = await caseOf(s, threadId);
        if (!found)
          throw new UsageError(
            `no audit records and no checkpoints for thread ${threadId} in ${s.config.dataDir}; see "audit list"`,
          );
        return { intact: found.chain.intact, caseRecord: found.caseRecord, evidence: found.evidence };
      },
    }),
  );
}

/**
 * `audit list`: writes each page of threads as it arrives, so what is held is one page however many
 * threads the log has. With `json`, one JSON document `{"threads": [...]}`, byte for byte what
 * stringifyJsonSafe writes for the whole list. A page that cannot be read (a damaged record) ends the
 * listing where it is, after the threads already written.
 */
export async function listThreads(
  pages: AsyncIterable<AuditThreadSummary[]>,
  json: boolean,
  out: (text: string) => void = stdout,
): Promise<void> {
  let listed = 0;
  for await (const page of pages)
    for (const t of page) {
      // An element of the document's array: its own JSON indented two levels (JSON has no raw "\n" in strings).
      if (json)
        out(
          `${listed === 0 ? '{\n  "threads": [\n' : ",\n"}    ${stringifyJsonSafe(t).split("\n").join("\n    ")}`,
        );
      else
        write(
          esc`${t.threadId}  by ${t.requestedBy}${t.requesterVerifiedBy ? ` (${requesterVerificationText(t.requesterVerifiedBy)})` : ""}  ${t.records} records  ${t.firstAt} → ${t.lastAt}  last ${t.lastEvent}` +
            `  ${t.outcome ? esc`${t.outcome}/${t.reasonCode}` : "(not ended)"}${t.overrides ? esc`  OVERRIDES ${t.overrides}` : ""}` +
            // A server of an earlier version sends no count.
            (t.refusedRequests
              ? esc`  ${t.refusedRequests} refused request${t.refusedRequests === 1 ? "" : "s"}`
              : ""),
          out,
        );
      listed += 1;
    }
  if (json) out(listed === 0 ? `${stringifyJsonSafe({ threads: [] })}\n` : "\n  ]\n}\n");
  else if (listed === 0) write("The audit log has no records yet.", out);
}

export function auditCommand(): Command {
  const audit = new Command("audit")
    .description("Tamper-evident audit log and per-run evidence bundles")
    .showHelpAfterError()
    .exitOverride();

  audit
    .command("verify")
    .description(
      "Recompute the hash chain; exit 0 only when it is intact, else 2 naming the first bad record",
    )
    .option(
      "--head <hash>",
      "a head hash recorded earlier; fails if no record has it (catches a rewritten or truncated tail)",
      cap("--head", LIMITS.hash),
    )
    .option("--json", "print JSON")
    .option(...API_OPTION)
    .action(async (opts: { head?: string; json?: boolean; api?: string }) => {
      process.exitCode = await withReader(opts.api, async (r) => {
        const result = await r.verify(opts.head);
        if (opts.json) writeJson(result);
        else if (result.intact) {
          write(
            `audit chain intact: ${result.records} record${result.records === 1 ? "" : "s"}` +
              (result.head ? esc`; head seq ${result.head.seq} ${result.head.hash}` : ""),
          );
          if (result.head)
            write("keep the head hash elsewhere and check it later with: audit verify --head <hash>");
        } else {
          const p = result.problem;
          write(
            esc`AUDIT CHAIN BROKEN: record seq ${p.seq} ${p.kind}` +
              (p.threadId ? esc` (thread ${p.threadId}, ${p.event})` : ""),
          );
          write(esc`  ${p.detail}`);
        }
        return result.intact ? EXIT_OK : EXIT_BROKEN;
      });
    });

  audit
    .command("list")
    .description("Audited runs, oldest first: requester, records, last event, outcome, overrides")
    .option("--json", "print JSON")
    .option(...API_OPTION)
    .action(async (opts: { json?: boolean; api?: string }) => {
      process.exitCode = await withReader(opts.api, async (r) => {
        await listThreads(r.threadPages(), opts.json === true);
        return EXIT_OK;
      });
    });

  audit
    .command("show")
    .description(
      "The whole chain of evidence for one run: first page (overrides on top), evidence objects, audit records",
    )
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .option("--json", "print the case record and evidence objects as JSON")
    .option(...API_OPTION)
    .action(async (thread: string, opts: { json?: boolean; api?: string }) => {
      process.exitCode = await withReader(opts.api, async (r) => {
        const { intact, caseRecord, evidence } = await r.caseOf(thread);
        if (opts.json) writeJson({ caseRecord, evidence });
        else write(renderCase(caseRecord, evidence));
        return intact ? EXIT_OK : EXIT_BROKEN;
      });
    });

  audit
    .command("export")
    .description(
      "Write the run's case record, evidence objects and SHA256SUMS (checked with sha256sum -c) to a new directory",
    )
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption(
      "--out <dir>",
      "a directory that does not exist yet or is empty",
      cap("--out", LIMITS.path),
    )
    .option(...API_OPTION)
    .action(async (thread: string, opts: { out: string; api?: string }) => {
      process.exitCode = await withReader(opts.api, async (r) => {
        const { intact, caseRecord, evidence } = await r.caseOf(thread);
        const written = exportBundle(opts.out, caseRecord, evidence);
        write(esc`wrote ${written.files.length} files to ${written.dir}`);
        write(esc`check them with: (cd ${written.dir} && sha256sum -c SHA256SUMS)`);
        // The sums check the files against each other only; the log they came from anchors them.
        write(
          esc`and against the audit log they came from: action-envelope audit check ${written.dir}${opts.api ? ` --api ${opts.api}` : ""}`,
        );
        if (!intact)
          write(
            esc`WARNING: the audit chain is broken (${caseRecord.auditChain.problem}); the case record says so`,
          );
        return intact ? EXIT_OK : EXIT_BROKEN;
      });
    });

  audit
    .command("check")
    .description(
      "Check an exported bundle against the audit log: its records' hashes, the thread's records in an intact chain, everything else recomputed from them; exit 0 only when it all holds",
    )
    .argument("<dir>", "the bundle's directory", cap("dir", LIMITS.path))
    .option("--json", "print JSON")
    .option(...API_OPTION)
    .action(async (dir: string, opts: { json?: boolean; api?: string }) => {
      process.exitCode = await withReader(opts.api, async (r) => {
        const { checkBundle, readBundleCase } = await import("../evidence/check-bundle.js");
        let bundle: CaseRecord;
        try {
          bundle = readBundleCase(dir);
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
        const threadId = bundle.firstPage?.threadId;
        if (typeof threadId !== "string")
          throw new UsageError(`expected firstPage.threadId in the bundle's case record, found none`);
        const live = await r.caseOf(threadId);
        const a = live.caseRecord.auditChain;
        const source = opts.api ? `the audit log of ${opts.api}` : "the local audit log";
        const result = checkBundle(
          dir,
          bundle,
          {
            records: live.caseRecord.auditRecords,
            intact: a.intact,
            problem: a.problem,
            checkedFrom: a.checkedFrom,
          },
          source,
        );
        if (opts.json) writeJson(result);
        else {
          write(
            result.confirmed
              ? esc`BUNDLE CONFIRMED: thread ${threadId}, ${result.records} audit records, against ${source}`
              : esc`BUNDLE NOT CONFIRMED: thread ${threadId}, against ${source}`,
          );
          for (const p of result.problems) write(esc`  ! ${p}`);
          for (const c of result.checked) write(esc`  checked: ${c}`);
          for (const n of result.notChecked) write(esc`  not checked: ${n}`);
        }
        return result.confirmed ? EXIT_OK : EXIT_BROKEN;
      });
    });

  return audit;
}
