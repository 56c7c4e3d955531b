/**
 * `audit …` commands: verify the hash chain, list audited runs, show one run's evidence, export it
 * as a bundle a third party can check with `sha256sum -c`. They read the data directory only.
 * Exit codes: 0 done (and the chain intact), 1 usage error, 2 the chain is broken.
 */
import { Command } from "commander";
import { buildCase } from "../evidence/bundle.js";
import { exportBundle } from "../evidence/export.js";
import { renderCase } from "../evidence/render.js";
import { UsageError } from "../errors.js";
import { AuditLogError } from "../store/audit.js";
import { withInspectSession, type InspectSession } from "./app-session.js";
import { cap, LIMITS } from "./limits.js";
import { esc, escapeForTerminal, escapeRendered, stringifyJsonSafe } from "../text/escape.js";

const EXIT_OK = 0;
const EXIT_BROKEN = 2;

/**
 * Human output. Data is escaped where it is put into a line (`esc`); what still carries a character
 * that must not reach a terminal is marked here, line breaks kept.
 */
const write = (text: string) => {
  const safe = escapeRendered(text);
  process.stdout.write(safe.endsWith("\n") ? safe : `${safe}\n`);
};
/** Machine output: the same data, valid JSON; controls and bidi characters as \uXXXX escapes. */
const writeJson = (value: unknown) => process.stdout.write(`${stringifyJsonSafe(value)}\n`);

/** A record that no longer parses is damage to the log, reported like a broken chain, not as a crash. */
async function reportingDamage(fn: () => Promise<number>): Promise<number> {
  try {
    return await fn();
  } catch (e) {
    if (!(e instanceof AuditLogError)) throw e;
    process.stderr.write(`audit log damaged: ${escapeForTerminal(e.message)}\n`);
    return EXIT_BROKEN;
  }
}

async function loadCase(s: InspectSession, threadId: string) {
  const [records, chain, thread] = await Promise.all([s.audit.records({ threadId }), s.audit.verify(), s.thread(threadId)]);
  if (records.length === 0 && thread.status === "not_found") {
    throw new UsageError(`no audit records and no checkpoints for thread ${threadId} in ${s.config.dataDir}; see "audit list"`);
  }
  return { chain, ...buildCase({ threadId, status: thread.status, state: thread.state, records, chain }) };
}

export function auditCommand(): Command {
  const audit = new Command("audit")
    .description("Tamper-evident audit log and per-run evidence bundles")
    .showHelpAfterError()
    .exitOverride();

  audit
    .command("verify")
    .description("Recompute the hash chain; exit 0 only when it is intact, else 2 naming the first bad record")
    .option("--head <hash>", "a head hash recorded earlier; fails if no record has it (catches a rewritten or truncated tail)", cap("--head", LIMITS.hash))
    .option("--json", "print JSON")
    .action(async (opts: { head?: string; json?: boolean }) => {
      process.exitCode = await withInspectSession(async (s) => {
        const result = await s.audit.verify(opts.head !== undefined ? { head: opts.head } : {});
        if (opts.json) writeJson(result);
        else if (result.intact) {
          write(`audit chain intact: ${result.records} record${result.records === 1 ? "" : "s"}` + (result.head ? esc`; head seq ${result.head.seq} ${result.head.hash}` : ""));
          if (result.head) write("keep the head hash elsewhere and check it later with: audit verify --head <hash>");
        } else {
          const p = result.problem;
          write(esc`AUDIT CHAIN BROKEN: record seq ${p.seq} ${p.kind}` + (p.threadId ? esc` (thread ${p.threadId}, ${p.event})` : ""));
          write(esc`  ${p.detail}`);
        }
        return result.intact ? EXIT_OK : EXIT_BROKEN;
      });
    });

  audit
    .command("list")
    .description("Audited runs, oldest first: requester, records, last event, outcome, overrides")
    .option("--json", "print JSON")
    .action(async (opts: { json?: boolean }) => {
      process.exitCode = await reportingDamage(() =>
        withInspectSession(async (s) => {
          const threads = await s.audit.threads();
          if (opts.json) writeJson({ threads });
          else if (threads.length === 0) write("The audit log has no records yet.");
          else for (const t of threads) {
            write(
              esc`${t.threadId}  by ${t.requestedBy}  ${t.records} records  ${t.firstAt} → ${t.lastAt}  last ${t.lastEvent}` +
                `  ${t.outcome ? esc`${t.outcome}/${t.reasonCode}` : "(not ended)"}${t.overrides ? esc`  OVERRIDES ${t.overrides}` : ""}`,
            );
          }
          return EXIT_OK;
        }),
      );
    });

  audit
    .command("show")
    .description("The whole chain of evidence for one run: first page (overrides on top), evidence objects, audit records")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .option("--json", "print the case record and evidence objects as JSON")
    .action(async (thread: string, opts: { json?: boolean }) => {
      process.exitCode = await reportingDamage(() =>
        withInspectSession(async (s) => {
          const { chain, caseRecord, evidence } = await loadCase(s, thread);
          if (opts.json) writeJson({ caseRecord, evidence });
          else write(renderCase(caseRecord, evidence));
          return chain.intact ? EXIT_OK : EXIT_BROKEN;
        }),
      );
    });

  audit
    .command("export")
    .description("Write the run's case record, evidence objects and SHA256SUMS (checked with sha256sum -c) to a new directory")
    .argument("<thread>", "thread id", cap("thread", LIMITS.id))
    .requiredOption("--out <dir>", "a directory that does not exist yet or is empty", cap("--out", LIMITS.path))
    .action(async (thread: string, opts: { out: string }) => {
      process.exitCode = await reportingDamage(() =>
        withInspectSession(async (s) => {
          const { chain, caseRecord, evidence } = await loadCase(s, thread);
          const written = exportBundle(opts.out, caseRecord, evidence);
          write(esc`wrote ${written.files.length} files to ${written.dir}`);
          write(esc`check them with: (cd ${written.dir} && sha256sum -c SHA256SUMS)`);
          if (!chain.intact) write(esc`WARNING: the audit chain is broken (${caseRecord.auditChain.problem}); the case record says so`);
          return chain.intact ? EXIT_OK : EXIT_BROKEN;
        }),
      );
    });

  return audit;
}
