/**
 * The readable form of a case record for `audit show`: first page (overrides on top), then every
 * evidence object in order, then the thread's audit records with their hashes. Nothing is cut except
 * raw target answers, whose size is given (the export and `--json` carry them whole).
 */
import type { FieldCheck } from "../envelope/index.js";
import type { CaseRecord, EvidenceObject } from "./bundle.js";

export function renderCase(c: CaseRecord, evidence: EvidenceObject[]): string {
  const lines: string[] = [];
  const line = (s = "") => lines.push(s);
  const p = c.firstPage;
  const rule = "─".repeat(72);

  line(`CASE RECORD  thread ${p.threadId}  (${p.status})`);
  line(rule);
  if (p.overrides.length === 0) line("OVERRIDES:     none; every policy gate held");
  else {
    line(`OVERRIDES:     ${p.overrides.length} POLICY GATE${p.overrides.length > 1 ? "S" : ""} OVERRIDDEN`);
    for (const o of p.overrides) {
      line(`  ! ${o.gate} passed by ${o.by} (${o.verifiedBy}) at ${o.at}, revision ${o.revision}`);
      line(`    reason: ${o.reason}`);
    }
  }
  line(`Requested by:  ${p.requestedBy ?? "(unknown)"}${p.request !== null ? ` — "${p.request}"` : ""}`);
  line(`Risk:          ${p.risk ? `${p.risk.level} / ${p.risk.reversibility}` : "(not classified)"}`);
  if (p.what) {
    line(`What:          ${p.what.operation} task ${p.what.taskId ?? "?"} ${JSON.stringify(p.what.params)}`);
    line(`Envelope:      ${p.what.envelopeHash ?? "(none built)"}${p.what.envelopeHash ? ` (revision ${p.what.revision})` : ""}`);
  } else line("What:          (no proposal)");
  line(
    `Decided by:    ${
      p.decidedBy
        ? `${p.decidedBy.id} — ${p.decidedBy.decision} (${p.decidedBy.verifiedBy}), decided ${p.decidedBy.decidedAt ?? "?"}, accepted ${p.decidedBy.acceptedAt}`
        : "(no accepted decision)"
    }`,
  );
  line(`Refused:       ${p.refusedDecisions} decision${p.refusedDecisions === 1 ? "" : "s"}`);
  line(`Policy:        ${p.policy ? `${p.policy.id}@${p.policy.version}` : "(unknown)"}`);
  if (p.outcome) {
    line(`Outcome:       ${p.outcome.outcome} (${p.outcome.reasonCode}) at ${p.outcome.finishedAt ?? "?"}`);
    line(`               ${p.outcome.reason}`);
  } else line("Outcome:       (not ended)");
  if (p.flags) {
    for (const [name, value] of Object.entries(p.flags)) {
      const why = p.flagReasons?.[name as keyof typeof p.flags];
      line(`  ${name.padEnd(22)} ${String(value).padEnd(5)}${why ? ` ${why}` : ""}`);
    }
  }
  const a = c.auditChain;
  line(
    `Audit chain:   ${a.intact ? "intact" : "BROKEN"}; ${a.threadRecords.length} record${a.threadRecords.length === 1 ? "" : "s"} for this thread, ${a.recordsInLog} in the log` +
      (a.head ? `; head seq ${a.head.seq} ${a.head.hash}` : ""),
  );
  if (a.problem) line(`               ${a.problem}`);

  line();
  line("EVIDENCE");
  line(rule);
  if (evidence.length === 0) line("(none)");
  for (const e of evidence) {
    line(`[${e.name}] ${e.at}`);
    line(`  ${e.summary}`);
    for (const detail of details(e)) line(`  ${detail}`);
  }

  line();
  line("AUDIT RECORDS (this thread)");
  line(rule);
  for (const r of c.auditRecords) {
    const extra = r.refusal ? ` ${r.refusal.code}` : r.outcome ? ` ${r.outcome.outcome}/${r.outcome.reasonCode}` : r.approver ? ` ${r.approver.decision} by ${r.approver.id}` : "";
    line(`#${r.seq} ${r.at} ${r.event} rev ${r.revision}${extra}${r.override ? ` OVERRIDE ${r.override.gate}` : ""}`);
    line(`    hash ${r.hash}  prev ${r.prevHash}`);
  }
  return `${lines.join("\n")}\n`;
}

function details(e: EvidenceObject): string[] {
  const d = e.data;
  switch (e.kind) {
    case "approval_request":
      return ["card as shown:", ...String(d["card"]).split("\n").map((l) => `  | ${l}`)];
    case "decision":
      return [`received: ${JSON.stringify(d["received"])}`];
    case "pre_read":
    case "post_write_read":
      return [...fieldLines(d["fields"] as FieldCheck[] | undefined), `raw answer: ${JSON.stringify(d["raw"]).length} bytes of JSON (whole in --json and the export)`];
    case "invocation":
      return [`args: ${JSON.stringify(d["args"])}`, `sent at ${String(d["sentAt"])}, idempotency key ${String(d["idempotencyKey"])}`];
    case "acknowledgement":
      return [`raw: ${JSON.stringify(d["body"] ?? d["error"] ?? d["reason"] ?? null).slice(0, 400)}`];
    case "outcome": {
      const because = d["because"] as Record<string, string> | undefined;
      return ["sideEffectAttempted", "sideEffectVerified", "causalClaimAllowed", "duplicateClaimAllowed"].map(
        (f) => `${f}=${String(d[f])}${because?.[f] ? ` — ${because[f]}` : ""}`,
      );
    }
    default: {
      const never: never = e.kind;
      return [String(never)];
    }
  }
}

function fieldLines(fields: FieldCheck[] | undefined): string[] {
  return (fields ?? []).map(
    (f) => `${f.field}: ${f.status}${f.expected !== undefined ? ` (expected ${JSON.stringify(f.expected)}` : " ("}${f.actual !== undefined ? `, actual ${JSON.stringify(f.actual)})` : ")"}`,
  );
}
