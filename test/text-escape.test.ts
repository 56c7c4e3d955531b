/**
 * Terminal escaping shared by the card and the CLI (src/text/escape.ts): nothing it prints can act on
 * a terminal, hide or reorder text, or start a line; distinct inputs stay distinct; the card renderer
 * and re-escaping of its output are unchanged; --json output is the same data, spelled safely.
 */
import { styleText } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeDisplay } from "../src/envelope/index.js";
import {
  classify,
  esc,
  escapeForTerminal,
  escapeLines,
  escapeRendered,
  stringifyJsonSafe,
} from "../src/text/escape.js";
import { guardLine } from "../src/cli/render.js";
import { capped, LIMITS } from "../src/cli/limits.js";
import { UsageError } from "../src/errors.js";

/** What a terminal acts on or hides: C0/C1 controls, DEL, bidi controls, zero-width and other format characters. */
const DANGEROUS = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;
const DANGEROUS_EXCEPT_LF =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;

const ATTACKS = [
  "\u001b[2J", // clear screen (CSI)
  "\u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007", // OSC 8 hyperlink
  "\u001b]0;title\u0007", // OSC window title
  "\u0007", // BEL
  "\u202e", // RIGHT-TO-LEFT OVERRIDE
  "\u2066",
  "\u2069",
  "\u200e",
  "\u200f",
  "\u061c",
  "\r",
  "\b",
  "\u007f",
  "\u009b",
  "\u0085",
  "\n",
  "\t",
  "\u0000",
  "\u200b",
  "\ufeff",
  "\u2028",
  "\u2029",
  "\u00a0",
  "⟨",
  "⟨U+001B⟩",
  "\ud800",
  "\udfff",
];

/** Strings mixing attack sequences with any code point, lone surrogates included. */
const hostile = fc
  .array(
    fc.oneof(
      fc.constantFrom(...ATTACKS),
      fc.integer({ min: 0, max: 0x10ffff }).map((cp) => String.fromCodePoint(cp)),
      fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u)),
      fc.string({ maxLength: 4 }),
    ),
    { maxLength: 24 },
  )
  .map((parts) => parts.join(""));

function flagged(text: string, keepLineFeed: boolean): string[] {
  const out: string[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (keepLineFeed && cp === 0x0a) continue;
    if (classify(cp, ch) !== undefined || cp === 0x0a) out.push(`U+${cp.toString(16)}`);
  }
  return out;
}

describe("escapeForTerminal (single-line fields)", () => {
  it("shows each attack as markers", () => {
    expect(escapeForTerminal("a\u001b[2Jb")).toBe("a⟨U+001B⟩[2Jb");
    expect(escapeForTerminal("x\u202eexe.txt")).toBe("x⟨U+202E⟩exe.txt");
    expect(escapeForTerminal("ok\nFAKE: VERIFIED")).toBe("ok⟨U+000A⟩FAKE: VERIFIED");
    expect(escapeForTerminal("\u0007\r\b\u007f\u009b")).toBe("⟨U+0007⟩⟨U+000D⟩⟨U+0008⟩⟨U+007F⟩⟨U+009B⟩");
    expect(escapeForTerminal("⟨U+001B⟩")).toBe("⟨U+27E8⟩U+001B⟩");
    expect(escapeForTerminal(42)).toBe("42");
    expect(escapeForTerminal("Задача ✓ 任务")).toBe("Задача ✓ 任务");
  });

  it("never outputs a control, bidi, invisible or line-break character (property)", () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const out = escapeForTerminal(s);
        expect(flagged(out, false)).toEqual([]);
        expect(DANGEROUS.test(out)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("is reversible, so distinct inputs stay distinguishable (property)", () => {
    fc.assert(
      fc.property(hostile, (s) => {
        expect(decodeDisplay(escapeForTerminal(s))).toBe(s);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(hostile, hostile, (a, b) => {
        fc.pre(a !== b);
        expect(escapeForTerminal(a)).not.toBe(escapeForTerminal(b));
      }),
      { numRuns: 2000 },
    );
    // The classic confusions: a literal marker, a real control, and a look-alike are three outputs.
    const outs = new Set(["\u001b", "⟨U+001B⟩", "⟨U+001B⟩".replace("⟨", "<")].map(escapeForTerminal));
    expect(outs.size).toBe(3);
  });

  it("the esc tag escapes the values only", () => {
    const id = "t\u001b[31m1\nx";
    expect(esc`thread ${id}: ${"\u202e"} (${3})`).toBe("thread t⟨U+001B⟩[31m1⟨U+000A⟩x: ⟨U+202E⟩ (3)");
  });
});

describe("escapeLines and escapeRendered (multi-line text)", () => {
  it("escapeLines keeps the line breaks and nothing else (property)", () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const out = escapeLines(s);
        expect(DANGEROUS_EXCEPT_LF.test(out)).toBe(false);
        expect(out.split("\n").length).toBe(s.split("\n").length);
        expect(out.split("\n").map(decodeDisplay)).toEqual(s.split("\n"));
      }),
      { numRuns: 1000 },
    );
  });

  it("escapeRendered changes nothing in already escaped text and marks whatever else (property)", () => {
    fc.assert(
      fc.property(hostile, (s) => {
        const rendered = escapeLines(s);
        expect(escapeRendered(rendered)).toBe(rendered);
        expect(DANGEROUS_EXCEPT_LF.test(escapeRendered(s))).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("guardLine (the printer's last check)", () => {
  it("keeps our own colour codes on a terminal and marks every other escape", () => {
    const painted = `${styleText("red", "refused")} x\u001b]8;;http://e\u0007y\u202e`;
    const guarded = guardLine(painted, true);
    expect(guarded).toContain(styleText("red", "refused"));
    expect(guarded).toContain("x⟨U+001B⟩]8;;http://e⟨U+0007⟩y⟨U+202E⟩");
    expect(guardLine(painted, false)).not.toContain("\u001b");
  });
});

describe("stringifyJsonSafe (--json output)", () => {
  it("is valid JSON of exactly the same data, with no raw control or bidi character (property)", () => {
    const value = fc
      .jsonValue()
      .chain((v) => fc.tuple(fc.constant(v), hostile))
      .map(([v, s]) => ({ v, s, [s]: [s, { s }] }));
    fc.assert(
      fc.property(value, (v) => {
        const out = stringifyJsonSafe(v);
        expect(JSON.parse(out)).toEqual(JSON.parse(JSON.stringify(v)));
        expect(DANGEROUS_EXCEPT_LF.test(out)).toBe(false);
      }),
      { numRuns: 1000 },
    );
    expect(stringifyJsonSafe({ a: "x\u202ey\u009b" }, 0)).toBe('{"a":"x\\u202ey\\u009b"}');
    // Found by this property (seed 1392881291): U+2065 is unassigned, in the block of invisible operators.
    expect(stringifyJsonSafe({ s: "\u2065" }, 0)).toBe('{"s":"\\u2065"}');
  });
});

describe("size caps", () => {
  it("refuses an over-long argument naming it, the cap and the length received, without echoing it", () => {
    expect(capped("--as", "a".repeat(LIMITS.id), LIMITS.id)).toHaveLength(LIMITS.id);
    // Code points, not UTF-16 units: 128 emoji are 256 units but within the cap.
    expect(capped("--as", "😀".repeat(LIMITS.id), LIMITS.id)).toHaveLength(2 * LIMITS.id);
    const attempt = () => capped("request", "\u001b".repeat(5_000), LIMITS.request);
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow("request is too long: 5,000 characters received, the limit is 4,000");
  });
});
