/**
 * Bounds on values that arrive from outside (resume values, answers) before anything else touches
 * them. Pure. The walk is iterative, so a value nested thousands deep is measured, not followed
 * down the stack.
 */
import { createHash } from "node:crypto";

export const RESUME_LIMITS = { maxBytes: 64 * 1024, maxDepth: 32, maxNodes: 10_000 } as const;

export type BoundsCheck = { ok: true } | { ok: false; reason: string };

export function checkBounds(value: unknown): BoundsCheck {
  const limits = RESUME_LIMITS;
  const over = (what: string, limit: number): BoundsCheck => ({
    ok: false,
    reason: `it ${what}; at most ${limit} are accepted`,
  });
  const stack: Array<[unknown, number]> = [[value, 0]];
  let nodes = 0;
  let bytes = 0;
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    nodes += 1;
    if (nodes > limits.maxNodes) return over(`has more than ${limits.maxNodes} values`, limits.maxNodes);
    if (depth > limits.maxDepth)
      return over(`is nested more than ${limits.maxDepth} levels deep`, limits.maxDepth);
    if (typeof v === "string") bytes += Buffer.byteLength(v, "utf8") + 2;
    else if (v === null || typeof v !== "object") bytes += 8;
    else if (Array.isArray(v)) {
      bytes += 2;
      for (const x of v) stack.push([x, depth + 1]);
    } else {
      bytes += 2;
      for (const [k, x] of Object.entries(v)) {
        bytes += Buffer.byteLength(k, "utf8") + 3;
        stack.push([x, depth + 1]);
      }
    }
    if (bytes > limits.maxBytes)
      return over(`is larger than ${limits.maxBytes} bytes as JSON`, limits.maxBytes);
  }
  return { ok: true };
}

/**
 * What evidence keeps of a value that broke the bounds: its first bytes and its hash, so the record
 * says what arrived without carrying it.
 */
export function boundedForEvidence(value: unknown, check: BoundsCheck = checkBounds(value)): unknown {
  if (check.ok) return value;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch (e) {
    text = `[not serialisable: ${(e as Error).message}]`;
  }
  return {
    truncated: true,
    why: check.reason,
    bytes: Buffer.byteLength(text, "utf8"),
    sha256: createHash("sha256").update(text, "utf8").digest("hex"),
    first: text.slice(0, 512),
  };
}

/** Marks a resume value that broke the bounds; only its evidence summary goes into graph state. */
export interface OutOfBounds {
  outOfBounds: string;
  evidence: unknown;
}

/**
 * What a pause node keeps of the value it was resumed with: the value itself when within bounds,
 * otherwise a summary, so no oversized or deeply nested value ever reaches a checkpoint channel or a
 * stream (where serialisers recurse and would fail, leaving the thread unreadable).
 */
export function admitResume(value: unknown): unknown {
  const check = checkBounds(value);
  if (check.ok) return value;
  return { outOfBounds: check.reason, evidence: boundedForEvidence(value, check) } satisfies OutOfBounds;
}

export function isOutOfBounds(value: unknown): value is OutOfBounds {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as OutOfBounds).outOfBounds === "string" &&
    "evidence" in value &&
    Object.keys(value).length === 2
  );
}
