/**
 * The write anchor: an append-only list, kept beside the journal key and like it outside the data
 * directory, of every envelope whose write-ahead entry was recorded, written and fsynced after the
 * journal's entry and before the request leaves. The journal (SQLite files or PostgreSQL) can be put
 * back to an older copy, or lose a write-ahead row, by whoever can write the data directory or the
 * database; the anchor cannot. An envelope the anchor names but whose write-ahead entry the journal
 * does not hold means the journal is behind its anchor: that write already went out, and nothing is
 * sent for it again (ROLLBACK_DETECTED).
 *
 * One line per envelope hash. Appends are single small O_APPEND writes, so processes sharing a
 * journal (and its key) may append at once without a lock; envelope hashes are unique, so journals
 * sharing a key never mistake each other's lines. A new key starts a new anchor beside it.
 */
import fs from "node:fs";
import path from "node:path";
import type { AppConfig } from "../config/env.js";
import { ConfigError } from "../errors.js";

const HASH = /^(?:[a-z0-9]+:)?[0-9a-f]{16,128}$/;

export class WriteAnchor {
  constructor(readonly file: string) {}

  /** Whether the anchor records a write-ahead entry for this envelope. */
  has(envelopeHash: string): boolean {
    let text: string;
    try {
      text = fs.readFileSync(this.file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw new ConfigError("ACTION_ENVELOPE_WRITE_ANCHOR_FILE", `cannot read the write anchor ${this.file}: ${(e as Error).message}; nothing is sent without it`);
    }
    for (const line of text.split("\n")) if (line.split(" ", 1)[0] === envelopeHash) return true;
    return false;
  }

  /** Records, durably, that the write-ahead entry for this envelope is in the journal. Throws when it cannot: the write is then not sent. */
  record(envelopeHash: string, sentAt: string): void {
    if (!HASH.test(envelopeHash)) throw new Error(`not an envelope hash: ${JSON.stringify(envelopeHash)}`);
    const dir = path.dirname(this.file);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const created = !fs.existsSync(this.file);
    const fd = fs.openSync(this.file, "a", 0o600);
    try {
      fs.writeSync(fd, `${envelopeHash} ${sentAt}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (created) syncDir(dir);
  }
}

function syncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, "r");
    fs.fsyncSync(fd);
  } catch {
    // Some file systems refuse fsync on a directory; the file's own fsync stands.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** The anchor of a configuration; refused inside the data directory, where a writer of the journal could edit it too. */
export function writeAnchorOf(config: Pick<AppConfig, "writeAnchorPath" | "dataDir">): WriteAnchor {
  const file = config.writeAnchorPath;
  const rel = path.relative(config.dataDir, file);
  if (!rel.startsWith("..") && !path.isAbsolute(rel)) {
    throw new ConfigError("ACTION_ENVELOPE_WRITE_ANCHOR_FILE", `points to ${file}, inside the data directory ${config.dataDir}; keep the anchor beside the journal key, where a writer of the data directory cannot reach it`);
  }
  return new WriteAnchor(file);
}
