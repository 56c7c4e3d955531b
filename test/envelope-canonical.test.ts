import canonicalize from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  createEnvelope,
  defaultPolicy,
  EnvelopeError,
  EnvelopeSchema,
  hashEnvelope,
  type Envelope,
} from "../src/envelope/index.js";
import { exampleTask } from "./support/examples.js";

function envelope(params: Record<string, unknown> = { TITLE: "Renamed", PRIORITY: "2" }): Envelope {
  return createEnvelope({
    portal: "portal.example.test",
    taskId: 4,
    params,
    task: exampleTask(),
    requestedBy: "demo-user",
    // Verified: the number-spelling property needs a high-risk RESPONSIBLE_ID, which the default policy refuses a self-declared requester.
    requesterVerifiedBy: "authentication",
    runContext: { threadId: "thread-1", runId: "run-1" },
    policy: defaultPolicy(),
    now: new Date("2026-11-30T10:00:00Z"),
    envelopeId: "env-1",
    nonce: "0123456789abcdef0123456789abcdef",
  });
}

/** Rebuilds every object with its keys in a shuffled order (seeded by fast-check). */
function shuffleKeys(value: unknown, order: number[]): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, order));
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    const shuffled = keys
      .map((k, i) => ({ k, r: order[i % order.length]! + i * 0.0001 }))
      .sort((a, b) => a.r - b.r)
      .map((x) => x.k);
    const out: Record<string, unknown> = {};
    // defineProperty, not assignment: fast-check generates "__proto__" keys, which `out[k] =` would
    // turn into a prototype change and silently drop from the object.
    for (const k of shuffled) {
      Object.defineProperty(out, k, {
        value: shuffleKeys((value as Record<string, unknown>)[k], order),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/** Every leaf of a JSON value, as a path. */
function leafPaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value))
    return value.length ? value.flatMap((v, i) => leafPaths(v, [...path, i])) : [path];
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    return keys.length
      ? keys.flatMap((k) => leafPaths((value as Record<string, unknown>)[k], [...path, k]))
      : [path];
  }
  return [path];
}

function setAt(root: unknown, path: (string | number)[], v: unknown): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let node: Record<string | number, unknown> = copy;
  for (const p of path.slice(0, -1)) node = node[p] as Record<string | number, unknown>;
  node[path.at(-1)!] = v;
  return copy;
}

describe("canonicalJson (RFC 8785)", () => {
  it("matches the RFC 8785 sample (numbers, escapes, literals)", () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it("sorts properties by UTF-16 code units, as the RFC's sorting example", () => {
    const input = { "\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7 };
    // Read the order from the text: JS objects list integer-like keys first, so Object.keys would not show it.
    const text = canonicalJson(input);
    const values = [...text.matchAll(/:(\d)/g)].map((m) => Number(m[1]));
    const keys = values.map((v) => Object.entries(input).find(([, n]) => n === v)![0]);
    expect(keys).toEqual(["\r", "1", "\u0080", "\u00f6", "\u20ac", "\ud83d\ude00", "\ufb33"]);
  });

  it("refuses what is not JSON data instead of hashing something else", () => {
    expect(() => canonicalJson({ a: () => 1 })).toThrow(EnvelopeError);
    expect(() => canonicalJson({ when: new Date(0) })).toThrow(/plain object/);
    expect(() => canonicalJson([1, undefined])).toThrow(/\[1\]/);
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(/finite number/);
    expect(() => canonicalJson(10n)).toThrow(EnvelopeError);
    expect(() => canonicalJson(undefined)).toThrow(EnvelopeError);
  });

  it("leaves out properties whose value is undefined, as JSON does", () => {
    expect(canonicalJson({ b: 1, a: undefined })).toBe('{"b":1}');
  });

  it("property: writes any JSON data exactly as the canonicalize library does", () => {
    // Full Unicode strings and keys (surrogate pairs included), doubles of every magnitude, -0, and
    // null-prototype objects: the one-pass writer must agree with the library byte for byte.
    const key = fc.string({ unit: "binary", maxLength: 6 });
    const leaf = fc.oneof(
      fc.string({ unit: "binary", maxLength: 12 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    );
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: "small" }, leaf, tie("array"), tie("object"), tie("bare")),
      array: fc.array(tie("value"), { maxLength: 5 }),
      object: fc.dictionary(key, fc.option(tie("value"), { nil: undefined }), { maxKeys: 6 }),
      bare: fc
        .dictionary(key, tie("value"), { maxKeys: 4 })
        .map((d) => Object.assign(Object.create(null) as Record<string, unknown>, d)),
    })).value;
    fc.assert(
      fc.property(json, (v) => {
        expect(canonicalJson(v)).toBe(canonicalize(v));
      }),
      { numRuns: 500 },
    );
  });

  it("property: writes objects keyed by ids (array-index keys, which JavaScript lists first) as the library does", () => {
    // Bitrix24 answers key people by id ({"2": …, "10": …}); the copy-and-stringify path must hand any
    // object whose keys JavaScript would not keep in canonical order to the one-pass writer.
    const key = fc.oneof(
      fc.constantFrom(
        "0",
        "1",
        "2",
        "9",
        "10",
        "11",
        "100",
        "01",
        "-1",
        " 1",
        "",
        "__proto__",
        "a",
        "A",
        "4294967294",
        "4294967295",
        "99999999999",
      ),
      fc.nat({ max: 40 }).map(String),
      fc.string({ unit: "binary", maxLength: 3 }),
    );
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small" },
        fc.integer(),
        fc.string({ maxLength: 4 }),
        tie("array"),
        tie("object"),
      ),
      array: fc.array(tie("value"), { maxLength: 3 }),
      object: fc
        .array(fc.tuple(key, fc.option(tie("value"), { nil: undefined })), { maxLength: 6 })
        .map((entries) => {
          const o: Record<string, unknown> = {};
          for (const [k, v] of entries)
            Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
          return o;
        }),
    })).value;
    fc.assert(
      fc.property(json, (v) => {
        expect(canonicalJson(v)).toBe(canonicalize(v));
      }),
      { numRuns: 1000 },
    );
    expect(canonicalJson({ "10": 1, "9": 2, b: 3, "-1": 4 })).toBe('{"-1":4,"10":1,"9":2,"b":3}');
    expect(canonicalJson(JSON.parse('{"__proto__":{"x":1},"a":[{"2":0,"6":1}]}'))).toBe(
      '{"__proto__":{"x":1},"a":[{"2":0,"6":1}]}',
    );
  });

  it("writes a string that spells a surrogate escape (a backslash, then ud800) as the library does", () => {
    // JSON.stringify writes an unpaired surrogate as \ud800; this text has the letters, not the surrogate.
    const v = { "k\\ud800": ["\\udc00", "\\\\udbff"] };
    expect(canonicalJson(v)).toBe(canonicalize(v));
  });

  it("names the first thing that is not JSON data, with its path, whatever sits beside it", () => {
    expect(() => canonicalJson({ a: [1, { b: "\ud800" }], c: 1 })).toThrow(/at \$\.a\[1\]\.b/);
    expect(() => canonicalJson({ ok: "x", bad: { "\udc00": 1 } })).toThrow(/keys of \$\.bad/);
    expect(() => canonicalJson({ z: 1, deep: [[Number.POSITIVE_INFINITY]] })).toThrow(
      /finite number at \$\.deep\[0\]\[0\]/,
    );
  });
});

describe("envelope hash", () => {
  it('is "sha256:" + 64 hex and is not a field of the envelope', () => {
    const e = envelope();
    expect(hashEnvelope(e)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Object.keys(e)).not.toContain("envelopeHash");
    expect(Object.keys(e)).not.toContain("hash");
  });

  it("survives a JSON round trip (as through a checkpoint) and schema re-parse", () => {
    const e = envelope();
    const back = EnvelopeSchema.parse(JSON.parse(JSON.stringify(e)));
    expect(hashEnvelope(back)).toBe(hashEnvelope(e));
  });

  it("property: key order does not change the hash", () => {
    const e = envelope();
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 40 }),
        (order) => {
          expect(hashEnvelope(shuffleKeys(e, order) as Envelope)).toBe(hashEnvelope(e));
        },
      ),
    );
  });

  it("property: whitespace of the JSON text does not change the hash", () => {
    const e = envelope();
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 0, max: 10 }), fc.constantFrom("\t", " \n ", "\r\n")),
        (indent) => {
          const text = JSON.stringify(e, null, indent);
          expect(hashEnvelope(JSON.parse(text))).toBe(hashEnvelope(e));
        },
      ),
    );
  });

  it("the requester's verification is hashed content: recording it otherwise, or leaving it out, changes the hash", () => {
    const e = envelope();
    expect(e.requesterVerifiedBy).toBe("authentication");
    const hashes = new Set(
      (["authentication", "inbox_session", "signature", "self_declared"] as const).map((v) =>
        hashEnvelope(EnvelopeSchema.parse({ ...e, requesterVerifiedBy: v })),
      ),
    );
    expect(hashes.size).toBe(4);
    const { requesterVerifiedBy: _v, ...without } = e;
    expect(hashes.has(hashEnvelope(EnvelopeSchema.parse(without)))).toBe(false);
    expect(() => EnvelopeSchema.parse({ ...e, requesterVerifiedBy: "verified" })).toThrow();
  });

  it("property: number spelling (1, 1.0, 1e0, 10E-1) does not change the hash", () => {
    const e = envelope({ PRIORITY: 2, RESPONSIBLE_ID: 7 });
    const text = JSON.stringify(e);
    fc.assert(
      fc.property(
        fc.constantFrom(
          (n: number) => `${n}.0`,
          (n: number) => `${n}e0`,
          (n: number) => `${n * 10}E-1`,
          (n: number) => `${n}.000`,
          (n: number) => `${n * 100}e-2`,
        ),
        (spell) => {
          const respelled = text
            .replace('"revision":1', `"revision":${spell(1)}`)
            .replace('"id":4', `"id":${spell(4)}`)
            .replace('"PRIORITY":2', `"PRIORITY":${spell(2)}`)
            .replace('"RESPONSIBLE_ID":7', `"RESPONSIBLE_ID":${spell(7)}`);
          expect(respelled).not.toBe(text);
          expect(hashEnvelope(JSON.parse(respelled))).toBe(hashEnvelope(e));
        },
      ),
    );
  });

  it("property: any JSON value hashes the same after key shuffling and reformatting", () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 4 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 10 }),
        (v, order) => {
          const reformatted = JSON.parse(JSON.stringify(shuffleKeys(v, order), null, 2));
          expect(canonicalJson(reformatted)).toBe(canonicalJson(v));
        },
      ),
    );
  });

  it("property: changing any material field (every leaf of the envelope) changes the hash", () => {
    const e = envelope({ TITLE: "Renamed", AUDITORS: ["2", "6"], DEADLINE: "2026-12-20T18:00:00+03:00" });
    const paths = leafPaths(e);
    expect(paths.length).toBeGreaterThan(40);
    const base = hashEnvelope(e);
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.jsonValue({ maxDepth: 1 }), (path, replacement) => {
        const old = path.reduce<unknown>((n, p) => (n as Record<string | number, unknown>)[p], e);
        fc.pre(canonicalJson(old ?? null) !== canonicalJson(replacement));
        const mutated = setAt(e, path, replacement) as Envelope;
        expect(hashEnvelope(mutated)).not.toBe(base);
      }),
      { numRuns: 500 },
    );
  });

  it("every leaf path, changed by one character or digit, changes the hash", () => {
    const e = envelope({ TITLE: "Renamed", AUDITORS: ["2", "6"] });
    const base = hashEnvelope(e);
    for (const path of leafPaths(e)) {
      const old = path.reduce<unknown>((n, p) => (n as Record<string | number, unknown>)[p], e);
      const changed =
        typeof old === "string"
          ? `${old}x`
          : typeof old === "number"
            ? old + 1
            : typeof old === "boolean"
              ? !old
              : old === null
                ? 0
                : "x";
      expect(hashEnvelope(setAt(e, path, changed) as Envelope), path.join(".")).not.toBe(base);
    }
  });

  it("adding a parameter or a key anywhere changes the hash", () => {
    const e = envelope();
    const base = hashEnvelope(e);
    expect(hashEnvelope({ ...e, params: { ...e.params, STATUS: "3" } })).not.toBe(base);
    expect(hashEnvelope({ ...e, extra: true } as Envelope)).not.toBe(base);
    expect(hashEnvelope({ ...e, runContext: { threadId: "thread-1" } })).not.toBe(base);
  });
});
