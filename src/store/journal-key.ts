/**
 * The journal's MAC key. It lives outside the data directory so that someone who can edit the
 * journal's files cannot also re-seal an edited row. Created on first use (32 random bytes, mode
 * 0600) with a message saying where, because losing it makes every registered row refuse to verify.
 */
import fs from "node:fs";
import path from "node:path";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { AppConfig } from "../config/env.js";
import { canonicalJson } from "../envelope/canonical.js";
import { ConfigError } from "../errors.js";
import { PRIVATE, isInside, refuseLooseMode } from "../config/file-mode.js";

export function loadJournalKey(
  config: Pick<AppConfig, "journalKey" | "dataDir">,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Buffer {
  const k = config.journalKey;
  if (k.source === "env") return k.key;
  const file = k.path;
  if (isInside(file, config.dataDir)) {
    throw new ConfigError(
      "ACTION_ENVELOPE_JOURNAL_KEY_FILE",
      `points to ${file}, inside the data directory ${config.dataDir}; keep the key where a writer of the data directory cannot reach it`,
    );
  }
  try {
    return readKey(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    // "wx": when several processes start at once, one creates the key and the others read it.
    fs.writeFileSync(file, `${randomBytes(32).toString("base64")}\n`, { flag: "wx", mode: 0o600 });
    log(
      `action-envelope: created the journal key ${file} (it seals registered approvals; keep it, and keep it out of the data directory)`,
    );
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST")
      throw new ConfigError(
        "ACTION_ENVELOPE_JOURNAL_KEY_FILE",
        `cannot create ${file}: ${(e as Error).message}`,
      );
  }
  return readKey(file);
}

/**
 * The journal key where it already exists, for a process that only reads (`audit show`): never
 * created. Undefined without one, and for one a writer of the data directory could have used to re-seal
 * (inside the data directory, or readable or writable by others).
 */
export function existingJournalKey(config: Pick<AppConfig, "journalKey" | "dataDir">): Buffer | undefined {
  const k = config.journalKey;
  if (k.source === "env") return k.key;
  if (isInside(k.path, config.dataDir) || !fs.existsSync(k.path)) return undefined;
  try {
    return readKey(k.path);
  } catch (e) {
    if (e instanceof ConfigError) return undefined;
    throw e;
  }
}

function readKey(file: string): Buffer {
  const key = readKeyText(file);
  refuseLooseMode(
    "ACTION_ENVELOPE_JOURNAL_KEY_FILE",
    file,
    PRIVATE,
    "whoever can read the journal key can re-seal an edited journal row",
  );
  return key;
}

function readKeyText(file: string): Buffer {
  const text = fs.readFileSync(file, "utf8").trim();
  const key = Buffer.from(text, "base64");
  if (key.length < 32) {
    // A file being written by another process at this moment reads empty; wait for it once.
    if (text === "") {
      const deadline = Date.now() + 2000;
      while (Date.now() < deadline) {
        const again = fs.readFileSync(file, "utf8").trim();
        if (again) return readKeyText(file);
      }
    }
    throw new ConfigError(
      "ACTION_ENVELOPE_JOURNAL_KEY_FILE",
      `${file} does not hold a base64 key of at least 32 bytes`,
    );
  }
  return key;
}

/** HMAC-SHA256 over the canonical JSON of a row's sealed content, hex. */
export function sealOf(key: Buffer, content: unknown): string {
  return createHmac("sha256", key).update(canonicalJson(content), "utf8").digest("hex");
}

export function sealHolds(key: Buffer, content: unknown, mac: string | null): boolean {
  if (!mac) return false;
  let expected: string;
  try {
    expected = sealOf(key, content);
  } catch {
    return false;
  }
  const a = Buffer.from(expected, "utf8");
  const b = Buffer.from(mac, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}
