import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createEnvelope,
  decodeDisplay,
  defaultPolicy,
  hashEnvelope,
  renderCard,
  renderValue,
  type Envelope,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";

function envelope(params: Record<string, unknown>, task = exampleTask()): Envelope {
  return createEnvelope({
    portal: "127.0.0.1:43210",
    taskId: 4,
    params,
    task,
    requestedBy: "demo-user",
    runContext: { threadId: "thread-1", runId: "run-1" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
  });
}
const card = (e: Envelope, format: "text" | "markdown" = "text") => renderCard(e, hashEnvelope(e), format);

/** Characters that must never reach the approver's screen raw. */
const DANGEROUS =
  // eslint-disable-next-line no-misleading-character-class -- variation selectors are matched one by one on purpose
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00a0\u00ad\u061c\u115f\u1160\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0]|[\ud800-\udfff]/u;

describe("renderCard", () => {
  it("shows target, object, operation, baseline → requested, invariants, risk, reversibility, expiry and hash", () => {
    const e = envelope({ TITLE: "Renamed", DEADLINE: "2026-12-20T18:00:00+03:00" });
    for (const format of ["text", "markdown"] as const) {
      const { text, warnings } = card(e, format);
      expect(warnings).toEqual([]);
      for (const needle of [
        "bitrix24 portal 127.0.0.1:43210",
        "task 4",
        "update_task",
        '"LAB-AGENT-EXEC-002 - BOUND ACTION TEST"',
        '"Renamed"',
        '"2026-12-15T18:00:00+03:00"',
        '"2026-12-20T18:00:00+03:00"',
        "medium",
        "[reversible]",
        e.expiresAt,
        hashEnvelope(e),
        e.nonce,
        "demo-user",
        "default@2026-12-02.1",
        "AUDITORS",
        '["2", "6"]',
        "PARENT_ID",
        "CHANGED_DATE",
      ])
        expect(text, `${format}: ${needle}`).toContain(needle);
    }
    const text = card(e).text;
    expect(text.indexOf('before:    "LAB-AGENT')).toBeLessThan(text.indexOf('requested: "Renamed"'));
    expect(text).toMatch(/MUST STAY UNCHANGED \(9 fields/);
  });

  it("says how the requester was established: self-declared, or verified and by what", () => {
    const e = envelope({ TITLE: "Renamed" });
    const cases = [
      [{ ...e, requesterVerifiedBy: "self_declared" }, "Requested by: demo-user (self-declared) (thread"],
      [
        { ...e, requesterVerifiedBy: "authentication" },
        "Requested by: demo-user (verified: API token) (thread",
      ],
      [
        { ...e, requesterVerifiedBy: "inbox_session" },
        "Requested by: demo-user (verified: inbox session) (thread",
      ],
      [{ ...e, requesterVerifiedBy: "signature" }, "Requested by: demo-user (verified: signature) (thread"],
      // An envelope built before the field existed claims no verification.
      [
        (({ requesterVerifiedBy: _v, ...rest }) => rest)(e),
        "Requested by: demo-user (self-declared) (thread",
      ],
    ] as const;
    for (const [x, line] of cases) {
      for (const format of ["text", "markdown"] as const)
        expect(card(x as Envelope, format).text).toContain(line);
    }
  });

  it("renders a 100 KB parameter whole, in text and markdown, without ellipsis", () => {
    const line =
      "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. ";
    const single =
      line
        .repeat(Math.ceil(102_400 / line.length))
        .slice(0, 102_400)
        .trimEnd() + ".";
    const multi = Array.from(
      { length: 1024 },
      (_, i) => `${String(i).padStart(4, "0")} ${"x".repeat(95)}`,
    ).join("\n");
    expect(single.length).toBeGreaterThanOrEqual(102_000);
    expect(multi.length).toBeGreaterThanOrEqual(100 * 1024);
    for (const value of [single, multi]) {
      const e = envelope({ DESCRIPTION: value });
      const text = card(e).text;
      const md = card(e, "markdown").text;
      if (value === single) {
        expect(text).toContain(`"${value}"`);
        expect(md).toContain(`"${value}"`);
      } else {
        expect(text).toContain(
          value
            .split("\n")
            .map((l) => `      │${l}`)
            .join("\n"),
        );
        expect(md).toContain(value);
        expect(text).toContain(`requested: 1024 lines, ${value.length} characters:`);
      }
      expect(text).not.toMatch(/…|\.\.\.|truncated/);
    }
  });

  it("shows a right-to-left override in a title visibly and warns", () => {
    const title = "Invoice \u202Etxt.exe";
    const e = envelope({ TITLE: title });
    for (const format of ["text", "markdown"] as const) {
      const { text, warnings } = card(e, format);
      expect(text).not.toContain("\u202E");
      expect(text).toContain("Invoice ⟨U+202E⟩txt.exe");
      expect(warnings).toEqual([
        "TITLE (requested): contains ⟨U+202E⟩ RIGHT-TO-LEFT OVERRIDE (bidi control)",
      ]);
      expect(text).toContain("⚠ TITLE (requested): contains ⟨U+202E⟩ RIGHT-TO-LEFT OVERRIDE (bidi control)");
    }
  });

  it.each([
    ["zero width space", "Pay\u200Bment", "⟨U+200B⟩", /ZERO WIDTH SPACE \(invisible character\)/],
    ["zero width joiner", "a\u200Db", "⟨U+200D⟩", /ZERO WIDTH JOINER/],
    ["byte order mark", "\uFEFFtitle", "⟨U+FEFF⟩", /ZERO WIDTH NO-BREAK SPACE/, "DESCRIPTION"],
    ["no-break space", "Q4\u00A0report", "⟨U+00A0⟩", /NO-BREAK SPACE \(unusual space\)/],
    ["narrow no-break space", "10\u202F000", "⟨U+202F⟩", /NARROW NO-BREAK SPACE/],
    ["escape (terminal control)", "red\u001b[31m", "⟨U+001B⟩", /ESCAPE \(control character\)/],
    ["tab", "a\tb", "⟨U+0009⟩", /CHARACTER TABULATION/],
    ["line separator", "a\u2028b", "⟨U+2028⟩", /LINE SEPARATOR \(line separator\)/],
    ["left-to-right isolate", "a\u2066b", "⟨U+2066⟩", /LEFT-TO-RIGHT ISOLATE \(bidi control\)/],
    ["hangul filler", "a\u3164b", "⟨U+3164⟩", /HANGUL FILLER \(invisible character\)/],
    ["tag character", "a\u{E0041}b", "⟨U+E0041⟩", /invisible character/],
    ["private use", "a\uE000b", "⟨U+E000⟩", /private-use/],
    ["trailing spaces", "Title  ", '"Title⟨U+0020⟩⟨U+0020⟩"', /2 trailing spaces/, "DESCRIPTION"],
  ])("marks %s and warns", (_, value, shown, warning, field = "TITLE") => {
    // A task's title with whitespace around it is refused (the portal stores it trimmed): a description.
    const e = envelope({ TITLE: "x", [field]: value });
    const { text, warnings } = card(e);
    expect(text).toContain(shown);
    expect(warnings.join("\n")).toMatch(warning);
    expect(text).not.toMatch(DANGEROUS);
    expect(text).toContain("WARNINGS (");
  });

  it("warns on words mixing Latin with look-alike Cyrillic letters", () => {
    const { warnings } = card(envelope({ TITLE: "Pаypal refund" })); // Cyrillic а
    expect(warnings.join()).toMatch(/word "Pаypal" mixes Latin with а ⟨U\+0430⟩/);
    expect(card(envelope({ TITLE: "Отчёт за ноябрь" })).warnings).toEqual([]); // all-Cyrillic is fine
  });

  it("marks trailing spaces on every line of a multi-line value, and keeps leading ones", () => {
    const e = envelope({ DESCRIPTION: "  indented \nsecond\n \nlast" });
    const { text, warnings } = card(e);
    expect(text).toContain("      │  indented⟨U+0020⟩\n      │second\n      │⟨U+0020⟩\n      │last");
    expect(warnings).toContain("DESCRIPTION (requested): 2 trailing spaces, shown as ⟨U+0020⟩");
  });

  it("warns about line breaks at the end of a value, which show as nothing but empty lines", () => {
    const { text, warnings } = card(envelope({ DESCRIPTION: "Approved by finance.\n\n" }));
    expect(text).toContain("      │Approved by finance.\n      │\n      │\n");
    expect(warnings).toContain("DESCRIPTION (requested): ends with 2 line breaks (2 empty lines at its end)");
    expect(card(envelope({ DESCRIPTION: "one\ntwo" })).warnings).toEqual([]);
  });

  it("a value cannot fake a marker or a card line", () => {
    const e = envelope({ DESCRIPTION: "literal ⟨U+202E⟩ text\nRisk:         low; reversible" });
    const text = card(e).text;
    expect(text).toContain("⟨U+27E8⟩U+202E⟩ text");
    expect(text).toContain("      │Risk:         low; reversible");
    expect(text.split("\n").filter((l) => l.startsWith("Risk:"))).toEqual([
      "Risk:         medium; reversible: another update can restore the previous values [reversible]",
    ]);
  });

  it("a value cannot close the markdown code fence it is shown in", () => {
    const value = "before\n```\n# Approved already\n````\nafter";
    const md = card(envelope({ DESCRIPTION: value }), "markdown").text;
    expect(md).toContain("`````text\nbefore\n```\n# Approved already\n````\nafter\n`````");
  });

  it("marks a value that cannot be shown faithfully as UNINSPECTABLE, and still shows it escaped", () => {
    const r = renderValue(["ok", "bad\uD800"], "AUDITORS (requested)");
    expect(r.uninspectable).toBe(true);
    expect(r.lines[0]).toBe('["ok", "bad⟨U+D800⟩"]');
    expect(r.warnings.join()).toMatch(/UNINSPECTABLE — contains an unpaired surrogate U\+D800/);
    // Through the card: an envelope from a checkpoint whose baseline holds a broken string.
    const e = envelope({ TITLE: "x" });
    const broken = {
      ...e,
      baseline: { ...e.baseline, values: { ...e.baseline.values, DESCRIPTION: "half \uDC00 pair" } },
    };
    expect(() => hashEnvelope(broken)).toThrow(/unpaired surrogate/);
    const { text, warnings } = renderCard(broken, hashEnvelope(e), "text");
    expect(text).toContain('"half ⟨U+DC00⟩ pair"  [UNINSPECTABLE]');
    expect(text).toContain("(cannot be recomputed)");
    expect(warnings.join()).toMatch(/envelope cannot be canonicalised/);
    expect(text).toContain("do not approve what you cannot see");
    expect(warnings.join()).toMatch(/DESCRIPTION \(must stay\): UNINSPECTABLE/);
  });

  it("warns when asked to show a hash that is not the envelope's", () => {
    const e = envelope({ TITLE: "x" });
    const { warnings, text } = renderCard(e, "sha256:" + "0".repeat(64), "text");
    expect(warnings[0]).toMatch(/HASH MISMATCH/);
    expect(text).toContain(hashEnvelope(e));
  });

  it("shows types faithfully: strings quoted, numbers bare, nested strings escaped", () => {
    expect(renderValue("5", "x").lines[0]).toBe('"5"');
    expect(renderValue(5, "x").lines[0]).toBe("5");
    expect(renderValue(null, "x").lines[0]).toBe("null");
    expect(renderValue(['a", "b'], "x").lines[0]).toBe('["a\\", \\"b"]');
    expect(renderValue({ b: 1, a: "x\ny" }, "x").lines[0]).toBe('{"a": "x⟨U+000A⟩y", "b": 1}');
  });

  it("property: any string is shown in full and decodes back to exactly itself", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (s) => {
        const r = renderValue(s, "v");
        const shown = r.block ? r.lines.join("\n") : r.lines[0]!.slice(1, -1);
        expect(decodeDisplay(shown)).toBe(s);
        expect(shown).not.toMatch(DANGEROUS);
      }),
      { numRuns: 500 },
    );
  });

  it("property: the card contains every parameter value in full (escaped) and nothing dangerous raw", () => {
    const text = fc
      .string({ unit: "binary", maxLength: 2000 })
      .filter(
        (s) => !/[\uD800-\uDFFF]/.test(s) || /^(?:[^\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])*$/.test(s),
      );
    // A title is refused with whitespace around it (the portal trims it), so none is generated.
    const title = fc.string({ unit: "grapheme", minLength: 1, maxLength: 60 }).filter((t) => t.trim() === t);
    fc.assert(
      fc.property(text, title, (description, t) => {
        const e = envelope({ DESCRIPTION: description, TITLE: t });
        for (const format of ["text", "markdown"] as const) {
          const out = card(e, format).text;
          expect(out).not.toMatch(DANGEROUS);
          for (const v of [description, t]) {
            const r = renderValue(v, "v");
            if (r.block) for (const l of r.lines) expect(out).toContain(format === "text" ? `│${l}` : l);
            else expect(out).toContain(r.lines[0]);
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
