/**
 * HTML from templates with every interpolated value escaped: `html\`<p>${value}</p>\`` escapes value,
 * unless it is itself the result of `html` (or `raw`, for our own fixed markup). Text from data first
 * goes through the terminal escaping (src/text/escape.ts), so invisible, bidi and control characters
 * reach the page as visible ⟨U+XXXX⟩ markers, which are then highlighted. Any other interpolated
 * string gets the same markers (unhighlighted), so not even a form value carries such a character.
 */
import { escapeForTerminal, escapeRendered } from "../text/escape.js";

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

export const raw = (value: string) => new Html(value);

function part(v: unknown): string {
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return v.map(part).join("");
  if (v === undefined || v === null || v === false) return "";
  // Every interpolated value, form values and attributes included: no raw invisible, bidi or control
  // character reaches the page (line feeds are kept, for textareas); each becomes a visible marker.
  return escapeHtml(escapeRendered(String(v)));
}

/** A start tag whose first line feed an HTML parser drops. */
const DROPS_FIRST_LINE_FEED = /<(?:pre|textarea|listing)(?:\s[^<>]*)?>$/i;

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) {
    const value = part(values[i]);
    // A parser drops a line feed right after <pre> or <textarea>: one more keeps a value's leading line break.
    out += (value.startsWith("\n") && DROPS_FIRST_LINE_FEED.test(out) ? "\n" : "") + value + strings[i + 1]!;
  }
  return new Html(out);
}

const MARKER = /⟨U\+[0-9A-F]{4,6}⟩/g;

/** Already-escaped display text (markers in it) as HTML, each marker highlighted. */
export function markedHtml(display: string): Html {
  return new Html(
    escapeHtml(display).replace(
      MARKER,
      (m) => `<mark class="invisible" title="a character you could not see">${m}</mark>`,
    ),
  );
}

/** One-line data value: invisibles and line breaks as markers, highlighted, HTML-escaped. */
export const text = (value: unknown) => markedHtml(escapeForTerminal(value));

/** Multi-line text that is already rendered for display (the card): line breaks kept. */
export const rendered = (value: string) => markedHtml(escapeRendered(value));
