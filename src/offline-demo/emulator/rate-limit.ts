export interface BucketState {
  level: number;
  /** Epoch milliseconds of the last update. */
  updated: number;
}

/**
 * Bitrix24's leaky bucket: every request adds 1, the level drains at `rate` per second, and a request that
 * would lift the level above `burst` is refused and not counted. Returns the new state and the verdict.
 */
export function leak(
  prev: BucketState | undefined,
  rate: number,
  burst: number,
  nowMs: number,
): { state: BucketState; allowed: boolean } {
  const elapsedSeconds = prev ? Math.max(0, nowMs - prev.updated) / 1000 : 0;
  const level = Math.max(0, (prev?.level ?? 0) - elapsedSeconds * rate);
  const allowed = level + 1 <= burst;
  return { state: { level: allowed ? level + 1 : level, updated: nowMs }, allowed };
}
