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
import type { ThreadView } from "../app/view-thread.js";
import type { PendingApproval } from "../app/pending.js";
import { esc, escapeForTerminal, escapeRendered, stringifyJsonSafe } from "../text/escape.js";
import { objectNamed, operationSpec } from "../envelope/operations.js";
import { requesterVerificationText } from "../envelope/envelope.js";

type Style = Parameters<typeof styleText>[0];

/** Select Graphic Rendition (colour, bold): the only escape sequences `paint` writes (captured, for split). */
const SGR = /(\x1b\[[0-9;]*m)/;

/**
 * The last guard before the stream: marks every character that must not reach a terminal, keeping
 * line breaks, and, when `keepColour`, the colour sequences `paint` produced.
 */
export function guardLine(text: string, keepColour: boolean): string {
  if (!keepColour) return escapeRendered(text);
  // Split on a captured pattern: the text between sequences at even indexes, the sequences at odd ones.
  return text
    .split(SGR)
    .map((part, i) => (i % 2 ? part : escapeRendered(part)))
    .join("");
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
        const msg = update.messages?.at(-1) as
          { tool_calls?: Array<{ name: string; args: unknown }>; content?: unknown } | undefined;
        for (const call of msg?.tool_calls ?? [])
          this.step("model", esc`calls ${call.name} ${JSON.stringify(call.args)}`);
        // An undo is proposed by code (with its proposal in the same update): not shown as the model's words.
        if (!msg?.tool_calls?.length && msg?.content) {
          const said = typeof msg.content === "string" ? msg.content : JSON.stringify(msg.content);
          this.step(update.proposal ? "undo" : "model", update.proposal ? esc`${said}` : esc`says: ${said}`);
        }
        return;
      }
      case "read_tools":
        for (const m of (update.messages ?? []) as Array<{
          name?: string;
          content?: unknown;
          status?: string;
        }>) {
          const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
          this.step(
            "read",
            esc`${m.name ?? "tool"}` + ` → ${m.status === "error" ? "error: " : ""}${text.length} bytes`,
          );
        }
        return;
      case "propose":
        if (update.proposal) {
          const p = update.proposal;
          const what =
            p.actions && p.actions.length > 1
              ? `change set of ${p.actions.length} actions: ${p.actions.map((a) => `${a.operation} ${objectNamed(a.operation, a.taskId)} ${JSON.stringify(a.fields)}`).join("; ")}`
              : p.operation === "add_task"
                ? `a new task (add_task): ${JSON.stringify(p.fields)}`
                : `${objectLabel(p.operation)} ${p.taskId}${p.operation && p.operation !== "update_task" ? ` (${p.operation})` : ""}: ${JSON.stringify(p.fields)}`;
          // The rationale is the model's text: labelled so, as the inbox does, never read as a status.
          this.step("proposal", esc`${what} — the model's reason: ${p.rationale}`);
        } else if (update.outcome) this.step("proposal", esc`${update.reasonCode}: ${update.reason}`);
        else this.step("proposal", "refused, sent back to the model");
        return;
      case "build_envelope":
        if (update.envelopeHash)
          this.step("envelope", esc`revision ${update.envelope?.revision} frozen, ${update.envelopeHash}`);
        else this.step("policy", esc`${update.reasonCode}: ${update.reason}`);
        return;
      case "check_decision":
        if (update.refusals?.length) {
          const r = update.refusals.at(-1)!;
          this.step("decision", this.paint("red", esc`refused ${r.code}: ${r.reason}`));
        } else if (update.decision) {
          this.step(
            "decision",
            esc`accepted ${update.decision.type} by ${update.decision.approverId} (${update.decision.verifiedBy})`,
          );
        }
        // An approval goes on into the executor in the same step.
        if (update.decision?.type === "approve") this.executed(update);
        return;
      case "carry_out":
        this.executed(update);
        return;
    }
  };

  /** The executor's phases, as it recorded them (it also streams each one as a custom event). */
  private executed(update: Partial<State>): void {
    if (update.preRead) this.step("pre-read", esc`${update.preRead.verdict} — ${update.preRead.reason}`);
    if (update.invocation)
      this.step(
        "write sent",
        esc`${update.invocation.tool} ${JSON.stringify(update.invocation.args)} (key ${update.invocation.idempotencyKey})`,
      );
    if (update.acknowledgement) {
      const a = update.acknowledgement;
      this.step(
        "acknowledgement",
        esc`${a.status}` +
          (a.error ? esc` — ${a.error.code ?? a.error.kind}: ${a.error.description}` : "") +
          (a.reason ? esc` — ${a.reason}` : ""),
      );
    }
    if (update.verification)
      this.step("verification", esc`${update.verification.verdict} — ${update.verification.reason}`);
    if (update.outcome) this.step("outcome", esc`${update.reasonCode}: ${update.reason}`);
  }

  card(view: ThreadView): void {
    const a = view.approval;
    if (!a) return;
    this.line();
    this.line(
      this.paint(
        "bold",
        a.changeSet
          ? `──────── approval card: change set of ${a.changeSet.actions.length} actions ────────`
          : "──────── approval card ────────",
      ),
    );
    // The card was escaped line by line when it was rendered; printed again, nothing in it may act on the terminal.
    this.line(escapeRendered(fullCard(view)));
    for (const l of revisionLines(view.revisionHistory)) this.line(l);
    if (a.lastRefusal)
      this.line(
        this.paint("red", esc`Last decision refused: ${a.lastRefusal.code} — ${a.lastRefusal.reason}`),
      );
    this.line(this.paint("bold", "───────────────────────────────"));
  }

  /** A decision just refused: the refusal, that nothing was applied, and where the unchanged card is. */
  refusal(view: ThreadView): void {
    const a = view.approval!;
    const r = a.lastRefusal!;
    this.line(this.paint(["bold", "red"], esc`REFUSED ${r.code}: ${r.reason}`));
    this.line(
      esc`Nothing was applied. The approval still waits, unchanged (revision ${a.revision}); see its card with: npm run cli -- show ${view.threadId}`,
    );
  }

  /** The commands that decide the waiting approval; `suffix` is appended to each (e.g. ` --api URL`). */
  howToDecide(view: ThreadView, suffix = ""): void {
    const a = view.approval;
    if (!a) return;
    const cs = a.changeSet;
    if (!cs) {
      this.line(`Waiting for approval. Approve exactly this envelope with:`);
      this.line(esc`  npm run cli -- approve ${view.threadId} --hash ${a.envelopeHash}` + suffix);
      return;
    }
    const ids = cs.actions.map((x) => x.actionId);
    this.line(
      esc`Waiting for approval of a change set of ${ids.length} actions (${ids.join(", ")}), bound to its set hash. Approve the whole set with:`,
    );
    this.line(esc`  npm run cli -- approve ${view.threadId} --hash ${cs.setHash}` + suffix);
    this.line(
      `or decide each action, naming every action once (--approve / --reject [--reason TEXT] / --edit aK --set aK.FIELD=VALUE), e.g.:`,
    );
    this.line(
      esc`  npm run cli -- decide ${view.threadId} --hash ${cs.setHash} --approve ${ids.slice(0, -1).join(",")} --reject ${ids.at(-1)}` +
        suffix,
    );
  }
  question(view: ThreadView): void {
    const q = view.input;
    if (!q) return;
    this.line();
    this.line(this.paint("bold", "──────── question (the model's words) ────────"));
    this.line(escapeForTerminal(q.question));
    const fields = answerFields(q);
    for (const [name, p] of fields) {
      const kind = p.enum ? `one of: ${p.enum.map(escapeForTerminal).join(", ")}` : escapeForTerminal(p.type);
      this.line(esc`  ${name} (` + kind + `)` + (p.description ? esc` — ${p.description}` : ""));
    }
    if (q.lastRefusal) this.line(this.paint("red", esc`Last answer refused: ${q.lastRefusal.reason}`));
    this.line(
      esc`Answer with: npm run cli -- answer ${view.threadId} ` +
        fields.map(([n]) => esc`--set ${n}=<value>`).join(" "),
    );
  }

  outcome(view: ThreadView): void {
    const s = view.state;
    if (!s?.outcome) return;
    const colour: Style =
      s.outcome === "VERIFIED" ? "green" : s.outcome === "NOT_EXECUTED" ? "yellow" : "red";
    this.line();
    this.line(`${this.paint(["bold", colour], esc`OUTCOME ${s.outcome}`)}` + esc` (${s.reasonCode})`);
    this.line(esc`  reason: ${s.reason}`);
    const w = view.withheld ?? {};
    if (s.preRead) this.line(esc`  pre-read: ${s.preRead.verdict} at ${s.preRead.at}`);
    else this.withheldNote("pre-read", w.preRead);
    if (s.invocation)
      this.line(
        esc`  invocation: ${s.invocation.tool} ${JSON.stringify(s.invocation.args)} at ${s.invocation.sentAt}`,
      );
    else this.withheldNote("invocation", w.invocation);
    if (s.acknowledgement)
      this.line(esc`  acknowledgement: ${s.acknowledgement.status} at ${s.acknowledgement.at}`);
    else this.withheldNote("acknowledgement", w.acknowledgement);
    if (!s.verification) this.withheldNote("verification", w.verification);
    else {
      this.line(esc`  verification: ${s.verification.verdict} at ${s.verification.at}`);
      for (const f of s.verification.fields)
        this.line(
          esc`    ${f.field}: ${f.status} (expected ${JSON.stringify(f.expected)}, actual ${JSON.stringify(f.actual)})`,
        );
    }
    // A partial approval of a change set ran without being shown again: say what was decided.
    if (s.decision?.type === "approve" && s.decision.message)
      this.line(esc`  decision: approve by ${s.decision.approverId} — ${s.decision.message}`);
    else if (!s.decision) this.withheldNote("decision", w.decision);
    const cs = view.changeSetOutcome;
    if (cs) {
      const at = cs.actions.find(
        (x) => x.envelopeHash !== undefined && x.envelopeHash === s.envelopeHash,
      )?.actionId;
      this.line(
        esc`  change set ${cs.setHash ?? ""}`.replace(/ +$/, "") +
          `, action by action` +
          (at ? esc` (pre-read, write and verification above are ${at}'s)` : "") +
          `:`,
      );
      for (const row of outcomeTableLines(cs.actions)) this.line(`    ${row}`);
      for (const x of cs.actions)
        if (x.outcome !== "VERIFIED" && x.reason) this.line(esc`    ${x.actionId}: ${x.reason}`);
    }
  }

  /** The note printed in place of an evidence part the view withholds (src/hitl/thread-view.ts); nothing when it does not. */
  withheldNote(part: string, why: string | undefined): void {
    if (why) this.line(this.paint("red", esc`  ${part}: withheld — ${why}`));
  }

  /** Every part the view withholds, with why: for a view that prints no evidence of its own (a stopped run). */
  withheldNotes(view: ThreadView): void {
    for (const [part, why] of Object.entries(view.withheld ?? {}))
      this.withheldNote(PART_LABELS[part] ?? part, why);
  }

  /** Machine output: valid JSON, the data unchanged; characters a terminal would act on are \uXXXX escapes. */
  emitJson(value: unknown): void {
    this.out.write(`${stringifyJsonSafe(value)}\n`);
  }

  /** Raw text as given: a JSON document written in parts, each part already made by `stringifyJsonSafe`. */
  write(text: string): void {
    this.out.write(text);
  }
}

/** How the text output names each evidence part. */
const PART_LABELS: Record<string, string> = {
  decision: "decision",
  preRead: "pre-read",
  invocation: "invocation",
  acknowledgement: "acknowledgement",
  verification: "verification",
};

/** One field of a question's answer schema. */
type AnswerField = { type?: string; enum?: string[]; description?: string };

/** The fields a question asks for, as its answer schema lists them. */
export function answerFields(q: NonNullable<ThreadView["input"]>): Array<[name: string, field: AnswerField]> {
  return Object.entries((q.answerSchema["properties"] ?? {}) as Record<string, AnswerField>);
}

/**
 * The whole card of a waiting approval. For a change set the first action request's description is
 * the set's full card (header and every action's section); should a client's payload carry only the
 * first section there, the other actions' descriptions are added, so no action is left out.
 */
export function fullCard(view: ThreadView): string {
  const a = view.approval!;
  const first = a.actionRequests[0].description;
  const n = a.changeSet?.actions.length ?? 1;
  if (
    n <= 1 ||
    a.changeSet!.actions.every((x, i) => first.includes(`ACTION ${i + 1} of ${n}: ${x.actionId}`))
  )
    return first;
  return [first, ...a.actionRequests.slice(1).map((r) => r.description)].join("\n\n");
}

/**
 * What a waiting revision replaced (the projection's RevisionHistory, as the inbox shows it): the previous
 * revision's decision and feedback, then each field asked for differently, previous → now.
 */
export function revisionLines(h: ThreadView["revisionHistory"]): string[] {
  if (!h) return [];
  const d = h.decision;
  const what = d
    ? (({ reject: "rejected", edit: "edited", expire: "expired" } as Record<string, string>)[d.type] ??
      `${d.type}d`)
    : "";
  const shown = (v: unknown) => escapeForTerminal(JSON.stringify(v) ?? "");
  const change = (c: (typeof h.changes)[number]) =>
    esc`    ${c.field}: ` +
    `${"was" in c ? shown(c.was) : "(not changed by it)"} → ${"now" in c ? shown(c.now) : "(no longer changed)"}`;
  return [
    "",
    esc`Revision ${h.revision} replaces revision ${h.previousRevision} (${h.previousEnvelopeHash})` +
      (d ? esc`, which was ${what} by ${d.by}` : ""),
    ...(d?.message ? [esc`  Feedback: ${d.message}`] : []),
    ...(h.changes.length
      ? [esc`  Changed since revision ${h.previousRevision}:`, ...h.changes.map(change)]
      : [esc`  The requested values are the same as revision ${h.previousRevision}'s.`]),
  ];
}

/** The per-action outcome table of a finished change set, one line per action (columns as the chat report's). */
export function outcomeTableLines(actions: NonNullable<ThreadView["changeSetOutcome"]>["actions"]): string[] {
  const rows = actions.map((o) =>
    [
      o.actionId,
      o.operation,
      listedObject(o.operation, undefined, o.taskId),
      o.outcome,
      o.reasonCode,
      o.sent ? "sent" : "not sent",
    ].map((c) => escapeForTerminal(c)),
  );
  const head = ["action", "operation", "object", "outcome", "reason", "write"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)];
}

/**
 * One waiting approval as `pending` lists it (local and `--api`): a change set is one line, with its
 * actions in order and the set hash a decision names.
 */
export function pendingLine(r: PendingApproval): string {
  const cs = r.changeSet;
  // The object's kind from the listing, else from the operation; a single update_task keeps its short form ("task 4 TITLE").
  const what = cs
    ? esc`change set of ${cs.actions.length} actions: ` +
      cs.actions
        .map(
          (x) =>
            esc`${x.actionId} ${x.operation} ${listedObject(x.operation, x.object?.type, x.taskId)} ${x.fields.join(",")}`,
        )
        .join("; ")
    : (r.operation && r.operation !== "update_task" ? esc`${r.operation} ` : "") +
      esc`${listedObject(r.operation, r.object?.type, r.taskId)} ${(r.fields ?? []).join(",")}`;
  return (
    esc`${r.threadId}  rev ${r.revision}  ` +
    what +
    esc`  ${r.risk ?? ""}  by ${r.requestedBy} (${requesterVerificationText(r.requesterVerifiedBy)})  created ${r.createdAt}  expires ${r.expiresAt}` +
    `${r.expired ? " (EXPIRED)" : ""}${r.escalatedTo ? esc`  escalated to ${r.escalatedTo}` : ""}  ` +
    (cs ? esc`set hash ${r.envelopeHash}` : esc`${r.envelopeHash}`)
  );
}

/** The `--json` shape of a thread, per the CLI contract. */
export function threadJson(view: ThreadView): Record<string, unknown> {
  const s = view.state;
  if (view.status === "awaiting_input" && view.input) {
    return {
      threadId: view.threadId,
      status: "awaiting_input",
      question: view.input.question,
      answerSchema: view.input.answerSchema,
      ...(view.input.lastRefusal ? { refused: view.input.lastRefusal } : {}),
    };
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
      card: fullCard(view),
      // A change set: the sealed set and every action's envelope (the hash and nonce above are the set's).
      ...(view.approval.changeSet ? { changeSet: view.approval.changeSet } : {}),
      // Revision 2 or later of a single action: what it replaced (decision, feedback, per-field changes).
      ...(view.revisionHistory ? { revisionHistory: view.revisionHistory } : {}),
      // A change set's refusals are recorded on the row of the action it is at, so any of its actions' hashes is this approval's.
      ...(last &&
      (last.envelopeHash === view.approval.envelopeHash ||
        view.approval.changeSet?.actions.some((x) => x.envelopeHash === last.envelopeHash))
        ? { refused: { code: last.code, reason: last.reason } }
        : {}),
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
    // Parts the journal holds whose seal does not hold (or that no checked seal covers yet): left out above, and why.
    ...(view.withheld ? { withheld: view.withheld } : {}),
    // A finished change set: how each action ended, in the set's order.
    ...(view.changeSetOutcome ? { changeSet: view.changeSetOutcome } : {}),
    ...(view.next ? { next: view.next } : {}),
  };
}

/**
 * The object of a listed action: "task 4" / "deal 3" (the listing's kind, else the operation's), or
 * "a new task" for a create, whose id (0) names nothing yet; "task ?" when the listing knows no id.
 */
function listedObject(
  operation: string | undefined,
  type: string | undefined,
  id: number | undefined,
): string {
  if (operationSpec(operation ?? "update_task")?.effect === "create") return objectNamed(operation!, id ?? 0);
  return `${type ?? objectLabel(operation)} ${id ?? "?"}`;
}

/** "task" or "deal": what an operation's object id names (src/envelope/operations.ts). */
function objectLabel(operation: string | undefined): string {
  return operationSpec(operation ?? "update_task")?.target ?? "task";
}
