/**
 * The approval card, rendered by code from the envelope itself (never from the model's narration).
 * Every value is shown in full at any length. Characters a person cannot see or can easily misread
 * (controls, zero-width and bidi characters, unusual spaces, trailing spaces) are replaced by a visible
 * marker ⟨U+XXXX⟩ and raise a warning; a literal "⟨" is itself shown as ⟨U+27E8⟩ so a marker can never
 * be faked by text. Words mixing Latin with look-alike letters and text not in Unicode NFC (shown just
 * like the precomposed text it does not equal) raise a warning. A value that cannot be shown
 * faithfully (an unpaired surrogate, which no UTF-8 channel can carry) is marked UNINSPECTABLE, and its
 * escaped form is still shown.
 */
import {
  hashEnvelope,
  requesterVerificationOf,
  requesterVerificationText,
  type Envelope,
} from "./envelope.js";
import { enumLabel } from "./fields.js";
import { TARGETS } from "./targets.js";
import { OPERATIONS } from "./operations.js";
import { personNote, type PeopleLookup } from "./people.js";
import { escapeLine, marker, type Finding } from "../text/escape.js";

export type CardFormat = "text" | "markdown";

const NAMES: Record<number, string> = {
  0x0000: "NULL",
  0x0009: "CHARACTER TABULATION",
  0x000d: "CARRIAGE RETURN",
  0x001b: "ESCAPE",
  0x007f: "DELETE",
  0x00a0: "NO-BREAK SPACE",
  0x00ad: "SOFT HYPHEN",
  0x034f: "COMBINING GRAPHEME JOINER",
  0x061c: "ARABIC LETTER MARK",
  0x115f: "HANGUL CHOSEONG FILLER",
  0x1160: "HANGUL JUNGSEONG FILLER",
  0x1680: "OGHAM SPACE MARK",
  0x180e: "MONGOLIAN VOWEL SEPARATOR",
  0x2007: "FIGURE SPACE",
  0x200b: "ZERO WIDTH SPACE",
  0x200c: "ZERO WIDTH NON-JOINER",
  0x200d: "ZERO WIDTH JOINER",
  0x200e: "LEFT-TO-RIGHT MARK",
  0x200f: "RIGHT-TO-LEFT MARK",
  0x2028: "LINE SEPARATOR",
  0x2029: "PARAGRAPH SEPARATOR",
  0x202a: "LEFT-TO-RIGHT EMBEDDING",
  0x202b: "RIGHT-TO-LEFT EMBEDDING",
  0x202c: "POP DIRECTIONAL FORMATTING",
  0x202d: "LEFT-TO-RIGHT OVERRIDE",
  0x202e: "RIGHT-TO-LEFT OVERRIDE",
  0x202f: "NARROW NO-BREAK SPACE",
  0x205f: "MEDIUM MATHEMATICAL SPACE",
  0x2060: "WORD JOINER",
  0x2066: "LEFT-TO-RIGHT ISOLATE",
  0x2067: "RIGHT-TO-LEFT ISOLATE",
  0x2068: "FIRST STRONG ISOLATE",
  0x2069: "POP DIRECTIONAL ISOLATE",
  0x2800: "BRAILLE PATTERN BLANK",
  0x3000: "IDEOGRAPHIC SPACE",
  0x3164: "HANGUL FILLER",
  0xfeff: "ZERO WIDTH NO-BREAK SPACE",
  0xffa0: "HALFWIDTH HANGUL FILLER",
};

/** Replaces the run of trailing U+0020 at the end of an (already escaped) line with markers. */
function markTrailingSpaces(line: string): { text: string; count: number } {
  const m = / +$/.exec(line);
  if (!m) return { text: line, count: 0 };
  return { text: line.slice(0, m.index) + marker(0x20).repeat(m[0].length), count: m[0].length };
}

export interface RenderedValue {
  /** One entry for an inline value, one per line for a multi-line string. */
  lines: string[];
  block: boolean;
  warnings: string[];
  uninspectable: boolean;
  /** Characters in the original string (code points), for the length note. */
  length?: number;
}

/**
 * Faithful, full-length display of one JSON value. Strings with line breaks become blocks (one display
 * line per value line); other strings are quoted inline; numbers, booleans and null are bare; arrays
 * and objects are compact JSON whose strings are escaped the same way (with \" and \\ so element
 * boundaries stay unambiguous).
 */
export function renderValue(value: unknown, label: string): RenderedValue {
  const findings: Finding[] = [];
  const warnings: string[] = [];
  let trailing = 0;
  let rendered: RenderedValue;
  if (typeof value === "string") {
    const block = value.includes("\n");
    const lines = (block ? value.split("\n") : [value]).map((l) => {
      const t = markTrailingSpaces(escapeLine(l, findings));
      trailing += t.count;
      return t.text;
    });
    rendered = {
      lines: block ? lines : [`"${lines[0]}"`],
      block,
      warnings,
      uninspectable: false,
      length: [...value].length,
    };
  } else {
    const strings: string[] = [];
    const text = renderJson(value, findings, strings);
    for (const s of strings) if (/ $/.test(s)) trailing += /( +)$/.exec(s)![1]!.length;
    rendered = { lines: [text], block: false, warnings, uninspectable: false };
  }
  for (const s of typeof value === "string" ? [value] : collectStrings(value)) {
    const mixed = mixedScriptWords(s);
    if (mixed.length)
      warnings.push(`${label}: ${mixed.join("; ")} (look-alike letters from different scripts)`);
    const decomposed = notComposed(s);
    if (decomposed !== undefined)
      warnings.push(
        `${label}: not in Unicode normal form NFC${decomposed}: it looks the same as text spelled with other characters, which it does not equal`,
      );
  }
  const counts = new Map<string, { kind: Finding["kind"]; n: number }>();
  for (const f of findings) {
    const key = `${f.kind}|${f.codePoint}`;
    counts.set(key, { kind: f.kind, n: (counts.get(key)?.n ?? 0) + 1 });
  }
  for (const [key, { kind, n }] of counts) {
    const cp = Number(key.split("|")[1]);
    const name = NAMES[cp] ? ` ${NAMES[cp]}` : "";
    if (kind === "unpaired surrogate") {
      rendered.uninspectable = true;
      warnings.push(
        `${label}: UNINSPECTABLE — contains an unpaired surrogate ${marker(cp).slice(1, -1)}${n > 1 ? ` ×${n}` : ""}, which cannot be displayed or sent as UTF-8 faithfully; shown escaped`,
      );
    } else {
      warnings.push(`${label}: contains ${marker(cp)}${name} (${kind})${n > 1 ? ` ×${n}` : ""}`);
    }
  }
  if (trailing)
    warnings.push(`${label}: ${trailing} trailing space${trailing > 1 ? "s" : ""}, shown as ${marker(0x20)}`);
  // Line breaks at the end of a text leave nothing to see but empty lines, which a page shows as none.
  const breaks = typeof value === "string" ? /\n*$/.exec(value)![0].length : 0;
  if (breaks)
    warnings.push(
      `${label}: ends with ${breaks} line break${breaks > 1 ? "s" : ""} (${breaks} empty line${breaks > 1 ? "s" : ""} at its end)`,
    );
  return rendered;
}

function renderJson(value: unknown, findings: Finding[], strings: string[]): string {
  if (value === null) return "null";
  if (typeof value === "string") {
    strings.push(value);
    const body = markTrailingSpaces(
      escapeLine(value, findings).replace(/\\/g, "\\\\").replace(/"/g, '\\"'),
    ).text;
    return `"${body}"`;
  }
  if (typeof value === "number" || typeof value === "boolean") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => renderJson(v, findings, strings)).join(", ")}]`;
  if (typeof value === "object") {
    return `{${Object.keys(value as object)
      .sort()
      .map(
        (k) =>
          `${renderJson(k, findings, strings)}: ${renderJson((value as Record<string, unknown>)[k], findings, strings)}`,
      )
      .join(", ")}}`;
  }
  return `⟨not JSON: ${typeof value}⟩`;
}

function collectStrings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(collectStrings);
  if (value && typeof value === "object")
    return Object.entries(value).flatMap(([k, v]) => [k, ...collectStrings(v)]);
  return [];
}

const LATIN = /\p{Script=Latin}/u;
const LOOKALIKE = /[\p{Script=Cyrillic}\p{Script=Greek}\p{Script=Armenian}\p{Script=Cherokee}]/u;

function mixedScriptWords(s: string): string[] {
  const out: string[] = [];
  for (const word of s.match(/[\p{L}\p{M}]+/gu) ?? []) {
    if (!LATIN.test(word) || !LOOKALIKE.test(word)) continue;
    const foreign = [...word]
      .filter((c) => LOOKALIKE.test(c))
      .map((c) => `${c} ${marker(c.codePointAt(0)!)}`);
    out.push(
      `word "${escapeLine(word, [])}" mixes Latin with ${foreign.slice(0, 5).join(", ")}${foreign.length > 5 ? ", …" : ""}`,
    );
  }
  return out;
}

/**
 * Why a string is not in Unicode NFC, or undefined when it is: "e" + U+0301 is shown exactly like "é"
 * (and U+212B ANGSTROM SIGN like "Å"), but is other bytes. Names (as markers) the combining marks NFC
 * would compose and the characters it would replace, at most five.
 */
function notComposed(s: string): string | undefined {
  if (s.normalize("NFC") === s) return undefined;
  const named = new Set<string>();
  for (const c of s) if (c.normalize("NFC") !== c) named.add(marker(c.codePointAt(0)!));
  for (const m of s.matchAll(/\P{M}\p{M}+/gu)) {
    if (m[0].normalize("NFC") === m[0]) continue;
    for (const c of [...m[0]].slice(1)) named.add(marker(c.codePointAt(0)!));
  }
  const list = [...named];
  return list.length ? ` (${list.slice(0, 5).join(", ")}${list.length > 5 ? ", …" : ""})` : "";
}

/** Inverse of the escaping for strings: turns markers back into characters (used to prove nothing is lost). */
export function decodeDisplay(text: string): string {
  return text.replace(/⟨U\+([0-9A-F]{4,6})⟩/g, (_, hex: string) => {
    const cp = parseInt(hex, 16);
    return cp >= 0xd800 && cp <= 0xdfff ? String.fromCharCode(cp) : String.fromCodePoint(cp);
  });
}

const REVERSIBILITY_TEXT: Record<Envelope["risk"]["reversibility"], string> = {
  read_only: "read only: changes nothing",
  reversible: "reversible: another update can restore the previous values",
  reversible_external:
    "reversible in Bitrix24, but effects outside it (notifications to people) cannot be taken back",
  irreversible: "irreversible: cannot be undone",
};

export interface CardOptions {
  /**
   * Names of the people whose ids the card shows, as read by code (user.get) when the envelope was
   * built and recorded with the card; shown next to the id ("5" (Bob Smith)), never instead of it.
   */
  people?: PeopleLookup["names"];
}

/**
 * Renders the card. `hash` is the hash the caller will bind approvals to; if it is not the envelope's
 * own hash the card says so in a warning, because approving it would fail or, worse, mean something else.
 */
export function renderCard(
  e: Envelope,
  hash: string,
  format: CardFormat,
  opts: CardOptions = {},
): { text: string; warnings: string[] } {
  const warnings: string[] = [];
  let actual: string;
  try {
    actual = hashEnvelope(e);
    if (actual !== hash)
      warnings.push(
        `HASH MISMATCH: the card was asked to show ${hash}, but this envelope hashes to ${actual}`,
      );
  } catch (err) {
    actual = `${hash} (cannot be recomputed)`;
    warnings.push(
      `UNINSPECTABLE — the envelope cannot be canonicalised, so its hash cannot be checked: ${(err as Error).message}`,
    );
  }
  const meta = (label: string, v: string) => {
    const r = renderValue(v, label);
    warnings.push(...r.warnings);
    // A header value is one line: a value with line breaks is shown whole, each break as its marker.
    return r.block ? r.lines.join(marker(0x0a)) : r.lines[0]!.slice(1, -1);
  };
  const ttlMin = Math.round((Date.parse(e.expiresAt) - Date.parse(e.createdAt)) / 60000);
  const header = [
    `Target:       ${e.targetSystem} portal ${meta("portal", e.portal)}`,
    `Object:       ${OPERATIONS[e.operation].effect === "create" ? `a new ${e.object.type} (made by this write; it has no id yet)` : `${e.object.type} ${e.object.id}`}`,
    `Operation:    ${e.operation} (${OPERATIONS[e.operation].label}: ${OPERATIONS[e.operation].method})`,
    `Revision:     ${e.revision}${e.previousEnvelopeHash ? ` (replaces ${e.previousEnvelopeHash})` : ""}; envelope ${meta("envelopeId", e.envelopeId)}`,
    `Requested by: ${meta("requestedBy", e.requestedBy)} (${requesterVerificationText(requesterVerificationOf(e))}) (thread ${meta("threadId", e.runContext.threadId)}${e.runContext.runId ? `, run ${meta("runId", e.runContext.runId)}` : ""})`,
    ...(e.editedBy ? [`Edited by:    ${meta("editedBy", e.editedBy)} (this revision's content)`] : []),
    `Risk:         ${e.risk.level}; ${REVERSIBILITY_TEXT[e.risk.reversibility]} [${e.risk.reversibility}]`,
    `Policy:       ${meta("policy.id", e.policy.id)}@${meta("policy.version", e.policy.version)}`,
    `Created:      ${e.createdAt}`,
    `Expires:      ${e.expiresAt} (${ttlMin} min after creation; an approval after this is refused)`,
    `Hash:         ${actual}`,
    `Nonce:        ${e.nonce}`,
  ];

  interface Item {
    label: string;
    title: string;
    value: unknown;
    field: string;
  }
  const changes = Object.entries(e.params).map(([field, value]) => ({
    field,
    before: { label: `${field} (before)`, title: "before", value: e.baseline.values[field], field } as Item,
    after: { label: `${field} (requested)`, title: "requested", value, field } as Item,
  }));
  const invariants: Item[] = e.invariantFields.map((f) => ({
    label: `${f} (must stay)`,
    title: f,
    value: e.baseline.values[f],
    field: f,
  }));
  // The documented name of an enum code (PRIORITY "2" → high) or a person's name (RESPONSIBLE_ID "5" →
  // Bob Smith) is shown next to the value, never instead of it. A person's name is portal data: escaped
  // like any value, and its invisible characters raise warnings too.
  const renderedOf = (item: Item): RenderedValue & { name?: string } => {
    const r = renderValue(item.value, item.label);
    warnings.push(...r.warnings);
    const label = enumLabel(item.field, item.value);
    if (label) return { ...r, name: label };
    const person = personNote(item.field, item.value, opts.people);
    if (person === undefined) return r;
    const n = renderValue(person, `${item.label} name`);
    warnings.push(...n.warnings);
    return { ...r, name: n.block ? n.lines.join(marker(0x0a)) : n.lines[0]!.slice(1, -1) };
  };
  // A create has no "before": the params are a new object, not new values of the task's fields.
  const effect = OPERATIONS[e.operation].effect;
  const create = effect === "create" || effect === "create_child";
  // A delete writes nothing: what it removes is shown as it is now (every value the pre-read expects).
  const deleting = effect === "delete";
  const deletedItems: Item[] = deleting
    ? [...e.comparedFields, ...e.invariantFields].map((f) => ({
        label: `${f} (now)`,
        title: f,
        value: e.baseline.values[f],
        field: f,
      }))
    : [];
  const rDeleted = deletedItems.map((i) => ({ item: i, r: renderedOf(i) }));
  const deletedWhat = deleting
    ? OPERATIONS[e.operation].deletes === "task_comment"
      ? `COMMENT ${String(e.params["COMMENT_ID"])} of task ${e.object.id}`
      : `TASK ${e.object.id}`
    : "";
  const rChanges = deleting
    ? []
    : changes.map((c) => ({
        field: c.field,
        before: create ? null : renderedOf(c.before),
        after: renderedOf(c.after),
      }));
  const rInvariants = deleting ? [] : invariants.map((i) => ({ item: i, r: renderedOf(i) }));
  const CHANGE_MARKER_FIELD = TARGETS[e.object.type].changeMarker;
  const fingerprinted = Object.keys(e.baseline.fingerprints).length;
  const footer = deleting
    ? [
        `Checked just before the delete: every value above and ${fingerprinted} other key(s) (fingerprinted) must be exactly as shown (what our run created); any difference stops it, and if it is already gone nothing is sent.`,
        `After the delete: a fresh read must show it gone. Nothing on it can be restored afterwards${OPERATIONS[e.operation].deletes === "task" ? " (its comments and history go with it)" : " (people may already have read it)"}.`,
      ]
    : effect === "create"
      ? [
          "Before the write: the tasks already carrying this title are listed, so the new one can be told apart from them.",
          "After the write: the new task is read back and must hold every value above; a second new task with this title is reported as more than was approved.",
        ]
      : [
          `Checked just before the write: ${[...e.comparedFields, ...e.invariantFields].join(", ")} (${CHANGE_MARKER_FIELD} was ${renderValue(e.baseline.values[CHANGE_MARKER_FIELD], CHANGE_MARKER_FIELD).lines[0]}); any difference stops the write.`,
          `May change by themselves: ${e.automaticFields.join(", ") || "none"}.`,
          `Other ${e.object.type} fields: ${fingerprinted} fingerprinted; any other change after the write is reported as unexpected.`,
        ];
  const uninspectable = warnings.some((w) => w.includes("UNINSPECTABLE"));

  if (format === "text") {
    const out: string[] = ["ACTION ENVELOPE — approval requested", ...header, ""];
    if (warnings.length)
      out.push(
        `WARNINGS (${warnings.length}) — look closely before approving:`,
        ...warnings.map((w) => `  ⚠ ${w}`),
        "",
      );
    if (deleting) {
      out.push(
        `DELETE ${deletedWhat} — cannot be undone (${OPERATIONS[e.operation].method}); what is deleted, as read when this envelope was made:`,
      );
      for (const { item, r } of rDeleted) out.push(`  ${item.field}`, ...textValue("now:      ", r));
    } else if (create && effect === "create") {
      out.push(
        `NEW ${e.object.type.toUpperCase()} (${changes.length} field${changes.length > 1 ? "s" : ""}, created with exactly these values; no existing object is written):`,
      );
      for (const c of rChanges) out.push(`  ${c.field}`, ...textValue("value:    ", c.after));
    } else if (create) {
      out.push(
        `NEW COMMENT on task ${e.object.id} (posted as the webhook's user; the task's own fields are not written):`,
      );
      for (const c of rChanges) out.push(`  ${c.field}`, ...textValue("text:     ", c.after));
    } else {
      out.push(
        `CHANGES (${changes.length} field${changes.length > 1 ? "s" : ""}: value read from the ${e.object.type} at envelope time → value to write):`,
      );
      for (const c of rChanges) {
        out.push(`  ${c.field}`);
        out.push(...textValue("before:   ", c.before!), ...textValue("requested:", c.after));
      }
    }
    if (!deleting) {
      out.push(
        "",
        `MUST STAY UNCHANGED (${invariants.length} field${invariants.length === 1 ? "" : "s"}, values at envelope time):`,
      );
      for (const { item, r } of rInvariants) out.push(...textValue(`${item.title}:`, r, "  "));
    }
    out.push("", ...footer);
    if (uninspectable)
      out.push("", "Some values are UNINSPECTABLE (see warnings): do not approve what you cannot see.");
    return { text: out.join("\n"), warnings };
  }

  const md: string[] = [
    `## Approval requested: ${e.operation} ${OPERATIONS[e.operation].effect === "create" ? `(a new ${e.object.type})` : `on ${e.object.type} ${e.object.id}`} (${e.targetSystem})`,
    "",
  ];
  md.push(...fence(header.join("\n")), "");
  if (warnings.length) {
    md.push(`**⚠ Warnings (${warnings.length}) — look closely before approving:**`, "");
    md.push(...fence(warnings.map((w) => `⚠ ${w}`).join("\n")), "");
  }
  if (deleting) {
    md.push(
      `### Delete ${deletedWhat.toLowerCase()} (cannot be undone)`,
      "",
      "What is deleted, as read when this envelope was made:",
      "",
    );
    for (const { item, r } of rDeleted)
      md.push(`- ${item.title}${lengthNote(r)}${nameNote(r)}:`, "", ...fence(r.lines.join("\n")), "");
  } else
    md.push(
      create
        ? effect === "create"
          ? `### New ${e.object.type}`
          : `### New comment on task ${e.object.id}`
        : `### Changes (${changes.length})`,
      "",
    );
  for (const c of rChanges) {
    if (!c.before) {
      md.push(
        `#### ${c.field}`,
        "",
        `Text${lengthNote(c.after)}:`,
        "",
        ...fence(c.after.lines.join("\n")),
        "",
      );
      continue;
    }
    md.push(
      `#### ${c.field}`,
      "",
      `Before${lengthNote(c.before)}${nameNote(c.before)}:`,
      "",
      ...fence(c.before.lines.join("\n")),
      "",
      `Requested${lengthNote(c.after)}${nameNote(c.after)}:`,
      "",
      ...fence(c.after.lines.join("\n")),
      "",
    );
  }
  if (!deleting) md.push(`### Must stay unchanged (${invariants.length})`, "");
  for (const { item, r } of rInvariants)
    md.push(`- ${item.title}${lengthNote(r)}${nameNote(r)}:`, "", ...fence(r.lines.join("\n")), "");
  md.push("### Checks", "", ...fence(footer.join("\n")));
  if (uninspectable)
    md.push("", "**Some values are UNINSPECTABLE (see warnings): do not approve what you cannot see.**");
  return { text: md.join("\n"), warnings };
}

function lengthNote(r: RenderedValue): string {
  return r.block ? ` (${r.lines.length} lines, ${r.length} characters)` : "";
}

function nameNote(r: RenderedValue & { name?: string }): string {
  return r.name ? ` (${r.name})` : "";
}

function textValue(label: string, r: RenderedValue & { name?: string }, indent = "    "): string[] {
  if (!r.block)
    return [
      `${indent}${label} ${r.lines[0]}${r.name ? ` (${r.name})` : ""}${r.uninspectable ? "  [UNINSPECTABLE]" : ""}`,
    ];
  return [
    `${indent}${label} ${r.lines.length} lines, ${r.length} characters${r.uninspectable ? "  [UNINSPECTABLE]" : ""}:`,
    ...r.lines.map((l) => `${indent}  │${l}`),
  ];
}

/** A fenced block whose fence is longer than any backtick run inside, so no value can close it early. */
function fence(content: string): string[] {
  const longest = Math.max(0, ...[...content.matchAll(/`+/g)].map((m) => m[0].length));
  const f = "`".repeat(Math.max(3, longest + 1));
  return [`${f}text`, content, f];
}
