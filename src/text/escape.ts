/**
 * Display escaping shared by the approval card and every line the CLI prints from data. Pure, no I/O.
 *
 * A character a person cannot see, or that a terminal would act on instead of showing (C0/C1 controls
 * such as ESC, BEL, CR, backspace and DEL; bidi controls; zero-width and other format characters;
 * unusual spaces; line separators; variation selectors; private-use and unassigned code points;
 * unpaired surrogates), is replaced by a visible marker `⟨U+XXXX⟩`. A literal "⟨" is itself shown as
 * `⟨U+27E8⟩`, so text can never fake a marker and the escaping is reversible (see `decodeDisplay` in
 * src/envelope/card.ts). Because ESC becomes a marker, no OSC or CSI sequence (colours, clearing the
 * screen, hyperlinks, window titles) can reach the terminal through escaped text.
 */

/** What kind of character `classify` found; the card turns these into warnings. */
export type FindingKind =
  | "bidi control"
  | "invisible character"
  | "control character"
  | "unusual space"
  | "line separator"
  | "variation selector"
  | "private-use or unassigned character"
  | "unpaired surrogate";

export interface Finding {
  kind: FindingKind;
  codePoint: number;
}

export const BIDI_CONTROLS: ReadonlySet<number> = new Set([
  0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
]);
/** Letters and marks that render as nothing; categories alone do not catch them. */
const INVISIBLE_OTHER = new Set([0x034f, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x2800, 0x3164, 0xffa0]);
const MARKER_OPEN = 0x27e8;
const LINE_FEED = 0x0a;

/** Why a character must not be shown as itself, or undefined when it may. */
export function classify(cp: number, ch: string): FindingKind | undefined {
  if (cp >= 0x20 && cp <= 0x7e) return undefined; // printable ASCII: the common case, no regex needed
  if (cp >= 0xd800 && cp <= 0xdfff) return "unpaired surrogate";
  if (BIDI_CONTROLS.has(cp)) return "bidi control";
  if (
    (cp >= 0xfe00 && cp <= 0xfe0f) ||
    (cp >= 0xe0100 && cp <= 0xe01ef) ||
    (cp >= 0x180b && cp <= 0x180f && cp !== 0x180e)
  )
    return "variation selector";
  if (cp === 0x2028 || cp === 0x2029) return "line separator";
  if (/\p{Cc}/u.test(ch)) return "control character";
  if (/\p{Cf}/u.test(ch) || INVISIBLE_OTHER.has(cp)) return "invisible character";
  if (/\p{Zs}/u.test(ch) && cp !== 0x20) return "unusual space";
  if (/\p{Co}|\p{Cn}/u.test(ch)) return "private-use or unassigned character";
  return undefined;
}

/** The visible stand-in for one code point: ⟨U+001B⟩. */
export function marker(cp: number): string {
  return `⟨U+${cp.toString(16).toUpperCase().padStart(4, "0")}⟩`;
}

/**
 * Escapes one line of a value (no line breaks kept: a line feed becomes a marker, as in inline values),
 * recording in `findings` what was found. A literal "⟨" and a line feed are marked without a finding.
 */
export function escapeLine(line: string, findings: Finding[] = []): string {
  let out = "";
  for (const ch of line) {
    const cp = ch.codePointAt(0)!;
    if (cp === MARKER_OPEN || cp === LINE_FEED) {
      out += marker(cp);
      continue;
    }
    const kind = classify(cp, ch);
    if (kind) {
      findings.push({ kind, codePoint: cp });
      out += marker(cp);
    } else out += ch;
  }
  return out;
}

/**
 * A single-line field from data (an id, a reason, a rationale, a path) made safe to print: nothing in
 * it can act on the terminal, hide, reorder or fake text, or start a new line.
 */
export function escapeForTerminal(value: unknown): string {
  return escapeLine(typeof value === "string" ? value : String(value));
}

/** Multi-line data: every line escaped as by `escapeForTerminal`, the line breaks kept. */
export function escapeLines(value: string): string {
  return value
    .split("\n")
    .map((l) => escapeLine(l))
    .join("\n");
}

/**
 * Text that was already rendered for display by `escapeLine` (the approval card), printed again: any
 * character that should not reach a terminal is marked, while line breaks and existing markers are
 * kept as they are. For a card the renderer produced this changes nothing; a card altered afterwards
 * (in a checkpoint, say) still cannot act on the terminal.
 */
export function escapeRendered(text: string): string {
  let out = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    out += cp !== LINE_FEED && classify(cp, ch) ? marker(cp) : ch;
  }
  return out;
}

/**
 * Template tag: the literal parts are ours and printed as written; every interpolated value is data
 * and goes through `escapeForTerminal`. `esc\`thread ${id} refused: ${reason}\``.
 */
export function esc(strings: TemplateStringsArray, ...values: unknown[]): string {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += escapeForTerminal(values[i]) + strings[i + 1]!;
  return out;
}

/**
 * Characters that JSON.stringify leaves as they are but a terminal acts on or hides. C0 controls are
 * not listed: JSON.stringify escapes them inside strings, so a raw one is a layout line break.
 */
// Unassigned (Cn) and private-use (Co) characters too, as the terminal escaper marks them: an
// unassigned code point in a block of format characters (U+2065) may render as one tomorrow.
const JSON_UNSAFE = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cn}\p{Co}]/gu;

/**
 * `JSON.stringify` for output that may land on a terminal. JSON.stringify already writes C0 controls
 * as \u00XX; this also writes DEL, the C1 controls, bidi and other format characters and the line
 * separators as \uXXXX escapes. Outside strings JSON is plain ASCII, so only string contents change,
 * and only in spelling: the parsed value is exactly the same data, byte for byte.
 */
export function stringifyJsonSafe(value: unknown, space = 2): string {
  const text = JSON.stringify(value, null, space) ?? "null";
  return text.replace(JSON_UNSAFE, (ch) => {
    let units = "";
    for (let i = 0; i < ch.length; i++) units += `\\u${ch.charCodeAt(i).toString(16).padStart(4, "0")}`;
    return units;
  });
}
