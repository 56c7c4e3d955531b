import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { createJournal } from "../src/store/backends.js";
import { checkWriteAnchor, WriteAnchor, writeAnchorOf } from "../src/store/write-anchor.js";

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
  it("sees lines another process appended since its last check, and only whole lines", async () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    expect(anchor.has(h(1))).toBe(false);
    await anchor.record(h(1), "2026-12-02T10:00:00.000Z");
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

  it("reads the file again when it is replaced, truncated or rewritten in place", async () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    await anchor.record(h(1), "2026-12-02T10:00:00.000Z");
    await anchor.record(h(2), "2026-12-02T10:00:00.000Z");
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

  it("records an envelope once, however often its write is re-sent", async () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    await anchor.record(h(7), "2026-12-02T10:00:00.000Z");
    await anchor.record(h(7), "2026-12-02T10:00:00.000Z");
    expect(fs.readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
    expect(() => anchor.record("not-a-hash", "x")).toThrow(/not an envelope hash/);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
  });

  it("keeps a close with nothing sent apart from a write: neither is taken for the other, each recorded once", async () => {
    const file = anchorFile();
    const anchor = new WriteAnchor(file);
    await anchor.recordClosedUnsent(h(1), "2026-12-02T10:00:00.000Z");
    await anchor.recordClosedUnsent(h(1), "2026-12-02T10:00:05.000Z");
    await anchor.record(h(2), "2026-12-02T10:00:01.000Z");
    expect(anchor.has(h(1))).toBe(false);
    expect(anchor.closedUnsent(h(1))).toBe("2026-12-02T10:00:00.000Z");
    expect(anchor.has(h(2))).toBe(true);
    expect(anchor.closedUnsent(h(2))).toBeUndefined();
    // A fresh reader (another process) reads both kinds from the file.
    const fresh = new WriteAnchor(file);
    fs.appendFileSync(file, `${h(3)} closed-unsent 2026-12-02T10:00:02.000Z\n`);
    expect([fresh.has(h(3)), fresh.closedUnsent(h(3))]).toEqual([false, "2026-12-02T10:00:02.000Z"]);
    expect(fs.readFileSync(file, "utf8").trim().split("\n")).toHaveLength(3);
  });

  it("is refused inside the data directory", () => {
    expect(() => writeAnchorOf({ dataDir: "/srv/ae", writeAnchorPath: "/srv/ae/anchor" })).toThrow(
      /inside the data directory/,
    );
    expect(writeAnchorOf({ dataDir: "/srv/ae", writeAnchorPath: "/srv/keys/anchor" }).file).toBe(
      "/srv/keys/anchor",
    );
  });

  it("two processes appending at once: no line lost or torn, each always sees its own lines, and a fresh reader sees all", async () => {
    const file = anchorFile();
    const go = `${file}.go`;
    const COUNT = 400;
    type Report = {
      recorded: number;
      missedOwn: number;
      sawOther: number;
      startedAt: number;
      endedAt: number;
    };
    const ready: Array<Promise<void>> = [];
    const writer = (id: string) =>
      new Promise<Report>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          ["--import", "tsx", path.join("test", "support", "anchor-writer.ts"), file, go, id, String(COUNT)],
          { stdio: ["ignore", "pipe", "pipe"] },
        );
        let out = "";
        let err = "";
        child.stdout.on("data", (d: Buffer) => (out += d.toString()));
        ready.push(new Promise((r) => child.stdout.on("data", () => out.startsWith("ready\n") && r())));
        child.stderr.on("data", (d: Buffer) => (err += d.toString()));
        child.on("exit", (code) =>
          code === 0
            ? resolve(JSON.parse(out.slice("ready\n".length).trim()) as Report)
            : reject(new Error(`writer ${id} exited ${code}: ${err}`)),
        );
      });
    const both = Promise.all([writer("1"), writer("2")]);
    // Both children are up and spinning on the go file: then both append at once.
    await Promise.all(ready);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(go, "");
    const [a, b] = await both;
    expect(a).toMatchObject({ recorded: COUNT, missedOwn: 0, sawOther: expect.any(Number) });
    expect(b).toMatchObject({ recorded: COUNT, missedOwn: 0 });
    // The two appending loops overlapped in time.
    expect(Math.max(a.startedAt, b.startedAt)).toBeLessThan(Math.min(a.endedAt, b.endedAt));
    // Whichever finished last saw every line of the other.
    expect(Math.max(a.sawOther, b.sawOther)).toBe(COUNT);
    const lines = fs.readFileSync(file, "utf8").split("\n");
    expect(lines.pop()).toBe("");
    expect(lines).toHaveLength(2 * COUNT);
    for (const line of lines) expect(line).toMatch(/^sha256:[0-9a-f]{64} \d{4}-\d\d-\d\dT[\d:.]+Z$/);
    expect(new Set(lines.map((l) => l.split(" ")[0])).size).toBe(2 * COUNT);
    const fresh = new WriteAnchor(file);
    for (const l of lines) expect(fresh.has(l.split(" ")[0]!)).toBe(true);
  }, 60_000);

  it("an anchor file others may write is refused at start, with the chmod that fixes it; 0600 and a missing file are fine", async () => {
    const file = anchorFile();
    const dataDir = path.join(path.dirname(path.dirname(file)), "data");
    const config = { dataDir, writeAnchorPath: file };
    expect(() => checkWriteAnchor(config)).not.toThrow();
    await new WriteAnchor(file).record(h(1), "2026-12-02T10:00:00.000Z");
    expect(() => checkWriteAnchor(config)).not.toThrow();
    fs.chmodSync(file, 0o620);
    expect(() => checkWriteAnchor(config)).toThrow(
      new RegExp(
        `ACTION_ENVELOPE_WRITE_ANCHOR_FILE.*${file} is writable by other users \\(mode 0620\\): whoever can rewrite the write anchor .*; fix: chmod 600 ${file}`,
      ),
    );
    // At start: opening the journal (every command and the server do) stops there, before anything is read or sent.
    const env = {
      ACTION_ENVELOPE_DATA_DIR: dataDir,
      ACTION_ENVELOPE_JOURNAL_KEY_FILE: path.join(path.dirname(file), "journal.key"),
      ACTION_ENVELOPE_WRITE_ANCHOR_FILE: file,
    };
    await expect(createJournal(loadConfig(env, process.cwd()))).rejects.toThrow(
      /writable by other users .*fix: chmod 600/,
    );
    fs.chmodSync(file, 0o600);
    const journal = await createJournal(loadConfig(env, process.cwd()));
    await journal.close();
  });
});
