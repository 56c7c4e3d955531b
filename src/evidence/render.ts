/**
 * The readable form of a case record for `audit show`: first page (overrides on top), then every
 * evidence object in order, then the thread's audit records with their hashes. Nothing is cut except
 * raw target answers, whose size is given (the export and `--json` carry them whole).
 *
 * Every value from the record is data (ids, reasons, requests, model-built parameters, audit fields
 * someone may have edited) and is escaped for the terminal as it is put into a line (`esc`): controls,
 * escape sequences, bidi and invisible characters appear as ⟨U+XXXX⟩ and cannot start a new line.
 * The card as shown was escaped when it was rendered; its lines are only checked again.
 */
import { deleteSubjectOf } from "../envelope/delete-subjects.js";
import { objectNamed, operationSpec } from "../envelope/operations.js";
import { requesterVerificationText } from "../envelope/envelope.js";
import type { FieldCheck, MovedField, ObjectIdentity } from "../envelope/index.js";
import { esc, escapeRendered } from "../text/escape.js";
import type { CaseRecord } from "./bundle.js";
import type { EvidenceObject } from "./evidence-objects.js";
import type { WriterWindow } from "./writer-window.js";

export function renderCase(c: CaseRecord, evidence: EvidenceObject[]): string {
  const lines: string[] = [];
  const line = (s = "") => lines.push(s);
  const p = c.firstPage;
  const expected = identityNamer(p.what?.operation, p.what?.taskId ?? null);
  const rule = "─".repeat(72);

  line(esc`CASE RECORD  thread ${p.threadId}  (${p.status})`);
  line(rule);
  if (p.overrides.length === 0) line("OVERRIDES:     none; every policy gate held");
  else {
    line(`OVERRIDES:     ${p.overrides.length} POLICY GATE${p.overrides.length > 1 ? "S" : ""} OVERRIDDEN`);
    for (const o of p.overrides) {
      line(esc`  ! ${o.gate} passed by ${o.by} (${o.verifiedBy}) at ${o.at}, revision ${o.revision}`);
      line(esc`    reason: ${o.reason}`);
    }
  }
  const verified = p.requesterVerifiedBy ? ` (${requesterVerificationText(p.requesterVerifiedBy)})` : "";
  line(
    esc`Requested by:  ${p.requestedBy ?? "(unknown)"}` +
      verified +
      (p.request !== null ? esc` — "${p.request}"` : ""),
  );
  line(`Risk:          ${p.risk ? esc`${p.risk.level} / ${p.risk.reversibility}` : "(not classified)"}`);
  if (p.what) {
    line(
      esc`What:          ${p.what.operation} ${p.what.taskId !== null ? objectNamed(p.what.operation, p.what.taskId) : "(no object)"} ${JSON.stringify(p.what.params)}`,
    );
    line(
      `Envelope:      ${p.what.envelopeHash ? esc`${p.what.envelopeHash} (revision ${p.what.revision})` : "(none built)"}`,
    );
  } else line("What:          (no proposal)");
  line(
    `Decided by:    ${
      p.decidedBy
        ? esc`${p.decidedBy.id} — ${p.decidedBy.decision} (${p.decidedBy.verifiedBy}), decided ${p.decidedBy.decidedAt ?? "?"}, accepted ${p.decidedBy.acceptedAt}`
        : "(no accepted decision)"
    }`,
  );
  line(esc`Refused:       ${p.refusedDecisions} decision` + (p.refusedDecisions === 1 ? "" : "s"));
  line(`Policy:        ${p.policy ? esc`${p.policy.id}@${p.policy.version}` : "(unknown)"}`);
  if (p.outcome) {
    line(
      esc`Outcome:       ${p.outcome.outcome} (${p.outcome.reasonCode}) at ${p.outcome.finishedAt ?? "?"}`,
    );
    line(esc`               ${p.outcome.reason}`);
  } else line("Outcome:       (not ended)");
  if (p.flags) {
    for (const [name, value] of Object.entries(p.flags)) {
      const why = p.flagReasons?.[name as keyof typeof p.flags];
      line(esc`  ${name.padEnd(22)} ${String(value).padEnd(5)}` + (why ? esc` ${why}` : ""));
    }
  }
  const a = c.auditChain;
  line(
    `Audit chain:   ${a.intact ? "intact" : "BROKEN"}; ${a.threadRecords.length} record${a.threadRecords.length === 1 ? "" : "s"} for this thread, ${a.recordsChecked} checked from seq ${a.checkedFrom}` +
      (a.head ? esc`; head seq ${a.head.seq} ${a.head.hash}` : ""),
  );
  if (a.problem) line(esc`               ${a.problem}`);

  line();
  line("EVIDENCE");
  line(rule);
  if (evidence.length === 0) line("(none)");
  for (const e of evidence) {
    line(esc`[${e.name}] ${e.at}`);
    line(esc`  ${e.summary}`);
    for (const detail of details(e, expected)) line(`  ${detail}`);
  }

  line();
  line("AUDIT RECORDS (this thread)");
  line(rule);
  for (const r of c.auditRecords) {
    const extra = r.refusal
      ? esc` ${r.refusal.code}`
      : r.outcome
        ? esc` ${r.outcome.outcome}/${r.outcome.reasonCode}`
        : r.approver
          ? esc` ${r.approver.decision} by ${r.approver.id}`
          : "";
    line(
      esc`#${r.seq} ${r.at} ${r.event} rev ${r.revision}` +
        extra +
        (r.override ? esc` OVERRIDE ${r.override.gate}` : ""),
    );
    line(esc`    hash ${r.hash}  prev ${r.prevHash}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * How an identity line names what the answer was expected to be about, by the operation's effect: the
 * object ("expected task 4", "expected deal 3"); for a delete, what it removes ("expected comment 1 of
 * task 4", "expected task 9"); for a create, the task it made ("created task 9"), or "a new task" while
 * no id is known (the envelope names none: its object id is 0, never a task 0).
 */
function identityNamer(
  operation: string | undefined,
  objectId: number | null,
): (identity: ObjectIdentity) => string {
  const spec = operation ? operationSpec(operation) : undefined;
  // answered null: the answer named none (or could not be read), as ObjectIdentity says.
  const answer = (identity: ObjectIdentity) =>
    esc`answer names ${identity.answered === null ? "none" : (JSON.stringify(identity.answered) ?? "none")}`;
  if (spec?.effect === "create") {
    return (identity) =>
      identity.answered !== null && identity.answered !== undefined
        ? esc`created ${spec.target} ${String(identity.answered)}, ` + answer(identity)
        : identity.expected
          ? esc`created ${spec.target} ${identity.expected}, not read back`
          : esc`a new ${spec.target}, no created id known`;
  }
  const subject = spec ? deleteSubjectOf(spec.name) : undefined;
  if (subject) {
    return (identity) =>
      esc`expected ${objectId !== null ? subject.label(objectId, identity.expected) : `${subject.kind === "task_comment" ? "comment" : "task"} ${identity.expected}`}, ` +
      answer(identity);
  }
  const kind = spec?.target ?? "object";
  return (identity) => esc`expected ${kind} ${identity.expected}, ` + answer(identity);
}

/**
 * Display lines for one evidence object, each already escaped. `expected`: how the object an answer
 * was expected to be about is named (identityNamer).
 */
function details(e: EvidenceObject, expected: (identity: ObjectIdentity) => string): string[] {
  const d = e.data;
  switch (e.kind) {
    case "approval_request":
      // Rendered (and escaped) by the card renderer: its line breaks are real, its markers are kept.
      return [
        "card as shown:",
        ...escapeRendered(String(d["card"]))
          .split("\n")
          .map((l) => `  | ${l}`),
      ];
    case "decision":
      return [esc`received: ${JSON.stringify(d["received"])}`];
    case "boundary_event":
      return [
        esc`tool: ${String(d["tool"])}, arguments ${String(d["argumentsSha256"])}; nothing was sent to Bitrix24`,
      ];
    case "pre_read":
    case "post_write_read": {
      const identity = d["identity"] as ObjectIdentity | null | undefined;
      const window = d["concurrentWriterWindow"] as WriterWindow | null | undefined;
      return [
        ...(identity ? [esc`identity: ${identity.status} (` + expected(identity) + ")"] : []),
        ...fieldLines(d["fields"] as FieldCheck[] | undefined),
        ...movedLines(d["moved"] as MovedField[] | null | undefined),
        ...(window
          ? [
              esc`window not covered: ${window.uncoveredMs ?? "?"} ms between pre-read ${window.preReadAt ?? "?"} and write ${window.writeSentAt}; ${window.statement}`,
            ]
          : []),
        `raw answer: ${String(JSON.stringify(d["raw"])?.length ?? 0)} bytes of JSON (whole in --json and the export)`,
      ];
    }
    case "invocation":
      return [
        esc`args: ${JSON.stringify(d["args"])}`,
        esc`sent at ${String(d["sentAt"])}, idempotency key ${String(d["idempotencyKey"])}`,
      ];
    case "acknowledgement":
      return [
        esc`raw: ${(JSON.stringify(d["body"] ?? d["error"] ?? d["reason"] ?? null) ?? "null").slice(0, 400)}`,
      ];
    case "outcome": {
      const because = d["because"] as Record<string, string> | undefined;
      return ["sideEffectAttempted", "sideEffectVerified", "causalClaimAllowed", "duplicateClaimAllowed"].map(
        (f) => esc`${f}=${String(d[f])}` + (because?.[f] ? esc` — ${because[f]}` : ""),
      );
    }
    default: {
      const never: never = e.kind;
      return [String(never)];
    }
  }
}

function fieldLines(fields: FieldCheck[] | undefined): string[] {
  return (fields ?? []).map((f) => {
    const parts = [
      f.expected !== undefined
        ? esc`expected ${JSON.stringify(f.expected)}`
        : f.baselineFingerprint !== undefined
          ? esc`before: fingerprint ${f.baselineFingerprint}`
          : undefined,
      f.actual !== undefined ? esc`actual ${JSON.stringify(f.actual)}` : undefined,
      f.status === "unknown" && f.note ? esc`${f.note}` : undefined,
    ].filter((p): p is string => p !== undefined);
    return (
      esc`${f.field}: ${f.status}` +
      (parts.length ? ` (${parts.join(", ")})` : "") +
      (f.rule ? esc` rule ${f.rule.id}${f.normalised ? " (matched only under this rule)" : ""}` : "")
    );
  });
}

function movedLines(moved: MovedField[] | null | undefined): string[] {
  if (!moved || moved.length === 0) return [];
  return [
    `moved since the baseline: ${moved.length} field${moved.length === 1 ? "" : "s"}`,
    ...moved.map(
      (m) =>
        esc`  ${m.field}: before ${m.beforeFingerprint !== undefined ? `fingerprint ${m.beforeFingerprint} (value not kept)` : (JSON.stringify(m.before) ?? "(missing)")}, now ${JSON.stringify(m.now) ?? "(missing)"}`,
    ),
  ];
}
