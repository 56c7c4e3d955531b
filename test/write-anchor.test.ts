import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WriteAnchor, writeAnchorOf } from "../src/store/write-anchor.js";

const h = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;
const dirs: string[] = [];
function anchorFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ae-anchor-"));
  dirs.push(dir);
  return path.join(dir, "keys", "write-anchor");
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe("write anchor", () => {
  it("sees lines another process appended since its last check, and only whole lines", () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    expect(anchor.has(h(1))).toBe(false);
    anchor.record(h(1), "2026-12-02T10:00:00.000Z");
    expect(anchor.has(h(1))).toBe(true);
    // Another process's append, written in two parts: half a line is not yet an entry.
    const line = `${h(2)} 2026-12-02T10:00:01.000Z\n`;
    fs.appendFileSync(file, line.slice(0, 30));
    expect(anchor.has(h(2))).toBe(false);
    fs.appendFileSync(file, line.slice(30));
    expect(anchor.has(h(2))).toBe(true);
    // A second WriteAnchor on the same file (as each executor phase builds one) agrees.
    expect(new WriteAnchor(file).has(h(2))).toBe(true);
  });

  it("reads the file again when it is replaced, truncated or rewritten in place", () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    anchor.record(h(1), "2026-12-02T10:00:00.000Z");
    anchor.record(h(2), "2026-12-02T10:00:00.000Z");
    expect(anchor.has(h(2))).toBe(true);
    // Same size, other content: the mtime moves, so the whole file is read again.
    const text = fs.readFileSync(file, "utf8").replace(h(2), h(3));
    const later = new Date(Date.now() + 5_000);
    fs.writeFileSync(file, text);
    fs.utimesSync(file, later, later);
    expect(anchor.has(h(3))).toBe(true);
    expect(anchor.has(h(2))).toBe(false);
    fs.truncateSync(file, 0);
    expect(anchor.has(h(1))).toBe(false);
    fs.rmSync(file);
    expect(anchor.has(h(3))).toBe(false);
  });

  it("records an envelope once, however often its write is re-sent", () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    anchor.record(h(7), "2026-12-02T10:00:00.000Z");
    anchor.record(h(7), "2026-12-02T10:00:00.000Z");
    expect(fs.readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
    expect(() => anchor.record("not-a-hash", "x")).toThrow(/not an envelope hash/);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  });

  it("is refused inside the data directory", () => {
    expect(() => writeAnchorOf({ dataDir: "/srv/ae", writeAnchorPath: "/srv/ae/anchor" })).toThrow(/inside the data directory/);
    expect(writeAnchorOf({ dataDir: "/srv/ae", writeAnchorPath: "/srv/keys/anchor" }).file).toBe("/srv/keys/anchor");
  });
});
