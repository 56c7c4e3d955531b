/**
 * Builds resume values from CLI flags. An approval's hash comes from the person (what they saw on the
 * card); the CLI never fills it in from the thread, or the binding would prove nothing.
 */
import fs from "node:fs";
import { DecisionSchema, signDecision, signedPayloadOf } from "../envelope/index.js";
import type { ResumeValue } from "../hitl/contract.js";
import type { ThreadView } from "../app/threads.js";
import { UsageError } from "../errors.js";
import { ENUM_LABELS, enumCodeOf } from "../envelope/fields.js";
import { esc } from "../text/escape.js";

interface Common {
  as: string;
  key?: string;
}

function signed(view: ThreadView, decision: Record<string, unknown> & { type: string; envelopeHash: string; nonce: string }, opts: Common): ResumeValue {
  const decidedAt = new Date().toISOString();
  const item: Record<string, unknown> = { ...decision, approver: { id: opts.as }, decidedAt };
  if (opts.key) {
    let pem: string;
    try {
      pem = fs.readFileSync(opts.key, "utf8");
    } catch {
      throw new UsageError(`cannot read the private key file ${opts.key}`);
    }
    // Sign exactly what the runtime will verify: the parsed decision's canonical signed payload.
    const parsed = DecisionSchema.safeParse(item);
    if (!parsed.success) throw new UsageError(`cannot sign a malformed decision: ${parsed.error.issues[0]?.message}`);
    item["signature"] = signDecision(signedPayloadOf(parsed.data, view.threadId), pem);
  }
  return { decisions: [item] };
}

export function approveDecision(view: ThreadView, opts: Common & { hash: string; override?: string }): ResumeValue {
  const a = view.approval!;
  let override: { gate: string; reason: string } | undefined;
  if (opts.override) {
    const [gate, ...rest] = opts.override.split("=");
    if (!gate || rest.join("=").trim() === "") throw new UsageError(`--override must be gate=reason, got "${opts.override}"`);
    override = { gate, reason: rest.join("=") };
  }
  return signed(view, { type: "approve", envelopeHash: opts.hash, nonce: a.nonce, ...(override ? { override } : {}) }, opts);
}

export function rejectDecision(view: ThreadView, opts: Common & { reason: string }): ResumeValue {
  const a = view.approval!;
  return signed(view, { type: "reject", envelopeHash: a.envelopeHash, nonce: a.nonce, message: opts.reason }, opts);
}

export function editDecision(view: ThreadView, opts: Common & { set: string[] }): ResumeValue {
  const a = view.approval!;
  const fields: Record<string, unknown> = { ...a.envelope.params };
  for (const pair of opts.set) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set must be FIELD=VALUE, got "${pair}"`);
    const field = pair.slice(0, eq).trim().toUpperCase();
    const given = pair.slice(eq + 1);
    // PRIORITY=high, STATUS="in progress": a documented name becomes the exact code before signing.
    fields[field] = ENUM_LABELS[field] ? (enumCodeOf(field, given) ?? given) : given;
  }
  return signed(
    view,
    {
      type: "edit",
      envelopeHash: a.envelopeHash,
      nonce: a.nonce,
      editedAction: { name: a.envelope.operation, args: { taskId: a.envelope.object.id, fields } },
    },
    opts,
  );
}
