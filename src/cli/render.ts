/**
 * Human and JSON output for the CLI. Colour only on a terminal; the card is printed whole, never cut.
 *
 * Every value that comes from data (model text, ids, reasons, tool arguments, the card) is escaped
 * where it is put into a line (`esc`, src/text/escape.ts): controls, escape sequences and bidi or
 * invisible characters are shown as ⟨U+XXXX⟩ and a single-line field cannot start a new line. As a
 * second guard, `line()` marks any such character that still reaches it (keeping line breaks and, on
 * a terminal, our own colour codes). `--json` output goes through `stringifyJsonSafe`: the same data,
 * with those characters written as \uXXXX escapes.
 */
import { styleText } from "node:util";
import type { State } from "../graph/state.js";
import type { ThreadView } from "../app/threads.js";
import { esc, escapeForTerminal, escapeRendered, stringifyJsonSafe } from "../text/escape.js";

type Style = Parameters<typeof styleText>[0];

/** Select Graphic Rendition (colour, bold): the only escape sequences `paint` writes. */
const SGR = /\x1b\[[0-9;]*m/g;

/**
 * The last guard before the stream: marks every character that must not reach a terminal, keeping
 * line breaks, and, when `keepColour`, the colour sequences `paint` produced.
 */
export function guardLine(text: string, keepColour: boolean): string {
  if (!keepColour) return escapeRendered(text);
  let out = "";
  let last = 0;
  for (const m of text.matchAll(SGR)) {
    out += escapeRendered(text.slice(last, m.index)) + m[0];
    last = m.index + m[0].length;
  }
  return out + escapeRendered(text.slice(last));
}

export class Printer {
  constructor(
    private readonly out: NodeJS.WriteStream = process.stdout,
    readonly json = false,
  ) {}

  get tty(): boolean {
    return Boolean(this.out.isTTY) && !process.env["NO_COLOR"];
  }

  paint(style: Style, text: string): string {
    return this.tty ? styleText(style, text) : text;
  }

  /** One line (or the lines of a block) of human output; data in `text` is already escaped by the caller. */
  line(text = ""): void {
    if (!this.json) this.out.write(`${guardLine(text, this.tty)}\n`);
  }

  step(label: string, text: string): void {
    this.line(`${this.paint("cyan", `▸ ${label}`)} ${text}`);
  }

  /** One progress line per node update, as it happens. */
  onStep = (node: string, update: Partial<State>): void => {
    if (this.json) return;
    switch (node) {
      case "agent": {
        if (update.outcome) return this.step("agent", esc`${update.reasonCode}: ${update.reason}`);
        const msg = update.messages?.at(-1) as { tool_calls?: Array<{ name: string; args: unknown }>; content?: unknown } | undefined;
        for (const call of msg?.tool_calls ?? []) this.step("model", esc`calls ${call.name} ${JSON.stringify(call.args)}`);
        if (!msg?.tool_calls?.length && msg?.content) this.step("model", esc`says: ${typeof msg.content === "string" ? msg.content : JSON.stringify(msg.content)}`);
        return;
      }
      case "read_tools":
        for (const m of (update.messages ?? []) as Array<{ name?: string; content?: unknown; status?: string }>) {
          const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
          this.step("read", esc`${m.name ?? "tool"}` + ` → ${m.status === "error" ? "error: " : ""}${text.length} bytes`);
        }
        return;
      case "propose":
        if (update.proposal) this.step("proposal", esc`task ${update.proposal.taskId}: ${JSON.stringify(update.proposal.fields)} — ${update.proposal.rationale}`);
        else if (update.outcome) this.step("proposal", esc`${update.reasonCode}: ${update.reason}`);
        else this.step("proposal", "refused, sent back to the model");
        return;
      case "build_envelope":
        if (update.envelopeHash) this.step("envelope", esc`revision ${update.envelope?.revision} frozen, ${update.envelopeHash}`);
        else this.step("policy", esc`${update.reasonCode}: ${update.reason}`);
        return;
      case "check_decision":
        if (update.refusals?.length) {
          const r = update.refusals.at(-1)!;
          this.step("decision", this.paint("red", esc`refused ${r.code}: ${r.reason}`));
        } else if (update.decision) {
          this.step("decision", esc`accepted ${update.decision.type} by ${update.decision.approverId} (${update.decision.verifiedBy})`);
        }
        return;
      case "pre_read":
        if (update.preRead) this.step("pre-read", esc`${update.preRead.verdict} — ${update.preRead.reason}`);
        if (update.outcome) this.step("pre-read", esc`${update.reasonCode}: ${update.reason}`);
        return;
      case "execute":
        if (update.invocation) this.step("write sent", esc`${update.invocation.tool} ${JSON.stringify(update.invocation.args)} (key ${update.invocation.idempotencyKey})`);
        if (update.acknowledgement) {
          const a = update.acknowledgement;
          this.step("acknowledgement", esc`${a.status}` + (a.error ? esc` — ${a.error.code ?? a.error.kind}: ${a.error.description}` : "") + (a.reason ? esc` — ${a.reason}` : ""));
        }
        if (update.outcome) this.step("execute", esc`${update.reasonCode}: ${update.reason}`);
        return;
      case "verify":
        if (update.verification) this.step("verification", esc`${update.verification.verdict} — ${update.verification.reason}`);
        return;
      case "finish":
        return;
      default:
        return;
    }
  };

  card(view: ThreadView): void {
    const a = view.approval;
    if (!a) return;
    this.line();
    this.line(this.paint("bold", "──────── approval card ────────"));
    // The card was escaped line by line when it was rendered; printed again, nothing in it may act on the terminal.
    this.line(escapeRendered(a.actionRequests[0].description));
    if (a.lastRefusal) this.line(this.paint("red", esc`Last decision refused: ${a.lastRefusal.code} — ${a.lastRefusal.reason}`));
    this.line(this.paint("bold", "───────────────────────────────"));
  }

  question(view: ThreadView): void {
    const q = view.input;
    if (!q) return;
    this.line();
    this.line(this.paint("bold", "──────── question ────────"));
    this.line(escapeForTerminal(q.question));
    const props = (q.answerSchema["properties"] ?? {}) as Record<string, { type?: string; enum?: string[]; description?: string }>;
    for (const [name, p] of Object.entries(props)) {
      const kind = p.enum ? `one of: ${p.enum.map(escapeForTerminal).join(", ")}` : escapeForTerminal(p.type);
      this.line(esc`  ${name} (` + kind + `)` + (p.description ? esc` — ${p.description}` : ""));
    }
    if (q.lastRefusal) this.line(this.paint("red", esc`Last answer refused: ${q.lastRefusal.reason}`));
    this.line(esc`Answer with: npm run cli -- answer ${view.threadId} ` + Object.keys(props).map((n) => esc`--set ${n}=<value>`).join(" "));
  }

  outcome(view: ThreadView): void {
    const s = view.state;
    if (!s?.outcome) return;
    const colour: Style = s.outcome === "VERIFIED" ? "green" : s.outcome === "NOT_EXECUTED" ? "yellow" : "red";
    this.line();
    this.line(`${this.paint(["bold", colour], esc`OUTCOME ${s.outcome}`)}` + esc` (${s.reasonCode})`);
    this.line(esc`  reason: ${s.reason}`);
    if (s.preRead) this.line(esc`  pre-read: ${s.preRead.verdict} at ${s.preRead.at}`);
    if (s.invocation) this.line(esc`  invocation: ${s.invocation.tool} ${JSON.stringify(s.invocation.args)} at ${s.invocation.sentAt}`);
    if (s.acknowledgement) this.line(esc`  acknowledgement: ${s.acknowledgement.status} at ${s.acknowledgement.at}`);
    if (s.verification) {
      this.line(esc`  verification: ${s.verification.verdict} at ${s.verification.at}`);
      for (const f of s.verification.fields) this.line(esc`    ${f.field}: ${f.status} (expected ${JSON.stringify(f.expected)}, actual ${JSON.stringify(f.actual)})`);
    }
  }

  /** Machine output: valid JSON, the data unchanged; characters a terminal would act on are \uXXXX escapes. */
  emitJson(value: unknown): void {
    this.out.write(`${stringifyJsonSafe(value)}\n`);
  }
}

/** The `--json` shape of a thread, per the CLI contract. */
export function threadJson(view: ThreadView): Record<string, unknown> {
  const s = view.state;
  if (view.status === "awaiting_input" && view.input) {
    return { threadId: view.threadId, status: "awaiting_input", question: view.input.question, answerSchema: view.input.answerSchema, ...(view.input.lastRefusal ? { refused: view.input.lastRefusal } : {}) };
  }
  if (view.status === "awaiting_approval" && view.approval) {
    const last = s?.refusals.at(-1);
    return {
      threadId: view.threadId,
      status: "awaiting_approval",
      envelopeHash: view.approval.envelopeHash,
      nonce: view.approval.nonce,
      revision: view.approval.revision,
      expiresAt: view.approval.expiresAt,
      envelope: view.approval.envelope,
      card: view.approval.actionRequests[0].description,
      ...(last && last.envelopeHash === view.approval.envelopeHash ? { refused: { code: last.code, reason: last.reason } } : {}),
    };
  }
  return {
    threadId: view.threadId,
    status: view.status,
    outcome: s?.outcome ?? null,
    reasonCode: s?.reasonCode ?? null,
    reason: s?.reason ?? null,
    envelopeHash: s?.envelopeHash ?? null,
    decision: s?.decision ? { ...s.decision, raw: undefined } : null,
    refusals: s?.refusals.map((r) => ({ code: r.code, reason: r.reason, at: r.at })) ?? [],
    preRead: s?.preRead ?? null,
    invocation: s?.invocation ?? null,
    acknowledgement: s?.acknowledgement ?? null,
    verification: s?.verification ?? null,
    ...(view.next ? { next: view.next } : {}),
  };
}
