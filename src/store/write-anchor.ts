/**
 * The write anchor: an append-only list, kept beside the journal key and like it outside the data
 * directory, of every envelope whose write-ahead entry was recorded, written and fsynced after the
 * journal's entry and before the request leaves. The journal (SQLite files or PostgreSQL) can be put
 * back to an older copy, or lose a write-ahead row, by whoever can write the data directory or the
 * database; the anchor cannot. An envelope the anchor names but whose write-ahead entry the journal
 * does not hold means the journal is behind its anchor: that write already went out, and nothing is
 * sent for it again (ROLLBACK_DETECTED).
 *
 * It also names every approved action closed with nothing sent (a pre-read that no longer matched, an
 * expiry, a busy object, a change set stopped before it), recorded before the close: the journal's
 * phase is not sealed, so such an action put back at `decided` or `pre_read` would otherwise be
 * pre-read and written after its close was reported (ROLLBACK_DETECTED, nothing sent).
 *
 * One line per envelope hash and kind (`HASH SENT_AT` for a write-ahead entry, `HASH closed-unsent AT`
 * for such a close). Appends are single small O_APPEND writes, so processes sharing a journal (and its
 * key) may append at once without a lock; envelope hashes are unique, so journals sharing a key never
 * mistake each other's lines. A new key starts a new anchor beside it.
 */
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { AppConfig } from "../config/env.js";
import type { Journal } from "./journal/api.js";
import type { Phase } from "./action-machine.js";
import { ConfigError } from "../errors.js";
import { OTHERS_WRITABLE, isInside, refuseLooseMode } from "../config/file-mode.js";

const HASH = /^(?:[a-z0-9]+:)?[0-9a-f]{16,128}$/;

/** What one process has read of an anchor file: the hashes named up to `offset` (a line boundary). */
interface AnchorRead {
  ino: number;
  size: number;
  mtimeMs: number;
  offset: number;
  hashes: Set<string>;
  /** Approved actions closed with nothing sent, and when. */
  unsent: Map<string, string>;
}

const CLOSED_UNSENT = "closed-unsent";

/**
 * Reads per file, shared by every WriteAnchor of the process. Appends only grow the file, so a check
 * reads just the bytes added since the last one; a file that shrank, was replaced or was rewritten in
 * place (same size, new mtime) is read again from the start.
 */
const reads = new Map<string, AnchorRead>();

export class WriteAnchor {
  constructor(readonly file: string) {}

  /** Whether the anchor records a write-ahead entry for this envelope. */
  has(envelopeHash: string): boolean {
    return this.lines().hashes.has(envelopeHash);
  }

  /** When the anchor recorded this approved action closed with nothing sent; undefined if it did not. */
  closedUnsent(envelopeHash: string): string | undefined {
    return this.lines().unsent.get(envelopeHash);
  }

  /** Both of the above from one read of the file. */
  entriesOf(envelopeHash: string): { written: boolean; closedUnsentAt: string | undefined } {
    const lines = this.lines();
    return { written: lines.hashes.has(envelopeHash), closedUnsentAt: lines.unsent.get(envelopeHash) };
  }

  private lines(): Pick<AnchorRead, "hashes" | "unsent"> {
    let fd: number;
    try {
      fd = fs.openSync(this.file, "r");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") {
        reads.delete(this.file);
        return { hashes: new Set(), unsent: new Map() };
      }
      throw this.unreadable(e);
    }
    try {
      const st = fs.fstatSync(fd);
      let read = reads.get(this.file);
      const appendedOnly =
        read &&
        read.ino === st.ino &&
        st.size >= read.size &&
        (st.size > read.size || st.mtimeMs === read.mtimeMs);
      if (!read || !appendedOnly)
        read = { ino: st.ino, size: 0, mtimeMs: 0, offset: 0, hashes: new Set(), unsent: new Map() };
      if (st.size > read.offset) {
        const buf = Buffer.alloc(st.size - read.offset);
        const n = fs.readSync(fd, buf, 0, buf.length, read.offset);
        const text = buf.subarray(0, n).toString("utf8");
        // Only whole lines count: a line being appended right now is read on the next check.
        const end = text.lastIndexOf("\n") + 1;
        for (const line of text.slice(0, end).split("\n")) {
          const [hash, kind, at] = line.split(" ");
          if (!hash) continue;
          if (kind === CLOSED_UNSENT) read.unsent.set(hash, at ?? "");
          else read.hashes.add(hash);
        }
        read.offset += Buffer.byteLength(text.slice(0, end));
      }
      read.size = st.size;
      read.mtimeMs = st.mtimeMs;
      reads.set(this.file, read);
      return read;
    } catch (e) {
      throw this.unreadable(e);
    } finally {
      fs.closeSync(fd);
    }
  }

  private unreadable(e: unknown): ConfigError {
    return new ConfigError(
      "ACTION_ENVELOPE_WRITE_ANCHOR_FILE",
      `cannot read the write anchor ${this.file}: ${(e as Error).message}; nothing is sent without it`,
    );
  }

  /**
   * Records, durably, that the write-ahead entry for this envelope is in the journal: the line is
   * appended at once and the promise settles once it is fsynced (on libuv's thread pool, so other
   * threads' steps go on meanwhile). Throws or rejects when it cannot: the write is then not sent.
   */
  record(envelopeHash: string, sentAt: string): Promise<void> {
    // A re-send of a recorded write adds no second line: the first one already names the envelope.
    if (this.has(envelopeHash)) return Promise.resolve();
    return this.append(envelopeHash, sentAt);
  }

  /**
   * Records, durably, that this approved action is being closed with nothing sent (before the close is
   * recorded: a process that stops in between leaves the action refused, never written).
   */
  recordClosedUnsent(envelopeHash: string, at: string): Promise<void> {
    if (this.closedUnsent(envelopeHash) !== undefined) return Promise.resolve();
    return this.append(envelopeHash, `${CLOSED_UNSENT} ${at}`);
  }

  private append(envelopeHash: string, rest: string): Promise<void> {
    if (!HASH.test(envelopeHash)) throw new Error(`not an envelope hash: ${JSON.stringify(envelopeHash)}`);
    const dir = path.dirname(this.file);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const created = !fs.existsSync(this.file);
    const fd = fs.openSync(this.file, "a", 0o600);
    try {
      fs.writeSync(fd, `${envelopeHash} ${rest}\n`);
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
    return promisify(fs.fsync)(fd)
      .finally(() => fs.closeSync(fd))
      .then(() => {
        if (created) syncDir(dir);
      });
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
  if (isInside(file, config.dataDir)) {
    throw new ConfigError(
      "ACTION_ENVELOPE_WRITE_ANCHOR_FILE",
      `points to ${file}, inside the data directory ${config.dataDir}; keep the anchor beside the journal key, where a writer of the data directory cannot reach it`,
    );
  }
  return new WriteAnchor(file);
}

/**
 * Checked at start, like the journal key: the anchor refused inside the data directory, and an anchor
 * file others may write refused with the chmod that fixes it (whoever can rewrite it can remove the line
 * that stops a second send). A missing file is fine: the first write creates it 0600.
 */
export function checkWriteAnchor(config: Pick<AppConfig, "writeAnchorPath" | "dataDir">): void {
  const anchor = writeAnchorOf(config);
  refuseLooseMode(
    "ACTION_ENVELOPE_WRITE_ANCHOR_FILE",
    anchor.file,
    OTHERS_WRITABLE,
    "whoever can rewrite the write anchor can remove the line that stops a write being sent twice",
  );
}

/** Phases from which no write can have gone out for an action (the write-ahead entry moves it to intent). */
const UNSENT_PHASES: ReadonlySet<Phase> = new Set<Phase>(["registered", "decided", "pre_read"]);

/**
 * Has every close of an approved action with nothing sent recorded in the anchor first: the journal's
 * two closing moves (an action moved to closed, a thread closed with its action) look at the action as
 * the journal holds it and, when its decision is an approval, no write-ahead entry exists and the anchor
 * names no write for it, append its `closed-unsent` line before the close. The write step and the
 * pre-read refuse an action the anchor names so (src/executor/write.ts, rollbackOf).
 */
export function anchorUnsentCloses(journal: Journal, anchor: WriteAnchor, clock: () => Date): void {
  const moveAction = journal.moveAction;
  const closeThread = journal.closeThread;
  const before = async (envelopeHash: string) => {
    const { written, closedUnsentAt } = anchor.entriesOf(envelopeHash);
    if (written || closedUnsentAt !== undefined) return;
    const row = await journal.getAction(envelopeHash);
    if (!row || row.progress.closed || row.progress.decision?.type !== "approve") return;
    if (!UNSENT_PHASES.has(row.phase) || (await journal.findExecution(envelopeHash))) return;
    await anchor.recordClosedUnsent(envelopeHash, clock().toISOString());
  };
  journal.moveAction = async (envelopeHash, to, ...rest) => {
    if (to === "closed") await before(envelopeHash);
    return moveAction(envelopeHash, to, ...rest);
  };
  journal.closeThread = async (threadId, closed, run) => {
    if (run?.action) await before(run.action);
    return closeThread(threadId, closed, run);
  };
}
