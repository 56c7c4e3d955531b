/**
 * Secrets and trust anchors kept in files must not be open to other local users: a journal key others
 * can read lets them re-seal edited rows, an approver key file others can write lets them swap a key,
 * a token file others can write lets them add a token. Checked when the file is read, so the server
 * (and the CLI) stop at start with the fix in the message. POSIX modes only; skipped on Windows.
 */
import fs from "node:fs";
import path from "node:path";
import { ConfigError } from "../errors.js";

/** Whether `file` is `dir` itself or lies under it (where a writer of `dir` can reach it). */
export function isInside(file: string, dir: string): boolean {
  const rel = path.relative(dir, file);
  // Outside is ".." or a path through it; a folder whose name merely starts with ".." is inside.
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/** Group or world may read or write (or run) it: for keys. */
export const PRIVATE = 0o077;
/** Anyone may write it: for files that may be read by anyone (they hold hashes or public keys). */
export const WORLD_WRITABLE = 0o002;
/** Group or world may write it: for files only this program appends to (the write anchor). */
export const OTHERS_WRITABLE = 0o022;

/** Throws a ConfigError naming `variable` when `file`'s mode has any bit of `mask`. */
export function refuseLooseMode(variable: string, file: string, mask: number, what: string): void {
  if (process.platform === "win32") return;
  let mode: number;
  try {
    mode = fs.statSync(file).mode & 0o777;
  } catch {
    return; // a missing or unreadable file is reported by whoever reads it
  }
  if ((mode & mask) === 0) return;
  const by =
    mask === PRIVATE
      ? "readable or writable by other users"
      : mask === OTHERS_WRITABLE
        ? "writable by other users"
        : "writable by every user";
  const fix = mask === WORLD_WRITABLE ? "644" : "600";
  throw new ConfigError(
    variable,
    `${file} is ${by} (mode ${mode.toString(8).padStart(4, "0")}): ${what}; fix: chmod ${fix} ${file}`,
  );
}
