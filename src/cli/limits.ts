/**
 * Size caps for what the command line accepts. An argument over its cap is refused before anything
 * is opened or sent, with a message naming the argument, the cap and the length received (never the
 * value itself, which may be megabytes or carry terminal control sequences). Exit code 1.
 */
import { UsageError } from "../errors.js";

/** Caps in characters (Unicode code points). */
export const LIMITS = {
  /** The request a person types: a sentence or a short paragraph. */
  request: 4_000,
  /** Thread ids (UUIDs are 36), requester and approver ids, gate names, field names. */
  id: 128,
  /** "sha256:" + 64 hex digits is 71; a little room for a mistyped one to be refused by the hash check. */
  hash: 100,
  /** One --set FIELD=VALUE: a task title or a description paragraph. */
  setValue: 10_000,
  /** --reason of reject/cancel, --override gate=reason. */
  reason: 4_000,
  /** File and directory paths (PATH_MAX on Linux). */
  path: 4_096,
} as const;

/** Length in characters (code points), the unit the refusal reports. */
export function characters(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/** Returns the value, or throws a UsageError naming `name`, the cap and the length received. */
export function capped(name: string, value: string, cap: number): string {
  // UTF-16 length is at least the code-point count, so short values skip the count.
  if (value.length > cap) {
    const length = characters(value);
    if (length > cap)
      throw new UsageError(
        `${name} is too long: ${length.toLocaleString("en")} characters received, the limit is ${cap.toLocaleString("en")}`,
      );
  }
  return value;
}

/** A commander argument/option parser that enforces the cap (`.option("--as <id>", "…", cap("--as", LIMITS.id))`). */
export function cap(name: string, limit: number): (value: string) => string {
  return (value) => capped(name, value, limit);
}

/** The same for a repeatable option: each occurrence is capped, all are collected. */
export function capEach(name: string, limit: number): (value: string, previous?: string[]) => string[] {
  return (value, previous = []) => [...previous, capped(name, value, limit)];
}

/** The same check as a prompt validator: true, or the refusal to show before asking again. */
export function withinCap(name: string, limit: number): (value: string) => true | string {
  return (value) => {
    try {
      capped(name, value, limit);
      return true;
    } catch (e) {
      return (e as Error).message;
    }
  };
}
