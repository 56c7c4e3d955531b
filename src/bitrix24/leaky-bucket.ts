/**
 * Client-side twin of the portal's leaky bucket (each request adds 1, the level drains by `rate` per
 * second, the portal answers 503 QUERY_LIMIT_EXCEEDED above `burst`). Pacing ourselves to the same
 * rule means a well-behaved client never sees that 503.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface LeakyBucketOptions {
  /** Drain rate in requests per second; 0 or less disables pacing. */
  rate: number;
  /** Bucket size of the portal. */
  burst: number;
  /**
   * Requests kept free below `burst`: our send time and the portal's arrival time differ by network
   * jitter, so sends spaced exactly at the limit can arrive bunched up.
   */
  headroom?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export class LeakyBucket {
  readonly rate: number;
  readonly capacity: number;
  private level = 0;
  private last: number;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(opts: LeakyBucketOptions) {
    if (!Number.isFinite(opts.rate)) throw new Error(`LeakyBucket: expected a finite rate, got ${opts.rate}`);
    if (opts.rate > 0 && !(Number.isFinite(opts.burst) && opts.burst >= 1)) {
      throw new Error(`LeakyBucket: expected burst >= 1, got ${opts.burst}`);
    }
    this.rate = opts.rate;
    const headroom = opts.headroom ?? defaultHeadroom(opts.burst);
    this.capacity = Math.max(1, opts.burst - headroom);
    this.now = opts.now ?? (() => performance.now());
    this.sleep = opts.sleep ?? ((ms) => sleep(ms));
    this.last = this.now();
  }

  get enabled(): boolean {
    return this.rate > 0;
  }

  /**
   * Reserves the next slot and returns how long to wait before sending. The reservation is taken at
   * once, so concurrent callers queue up one drain interval apart instead of racing for the same slot.
   */
  reserve(): number {
    if (!this.enabled) return 0;
    this.drain();
    const waitMs = Math.max(0, ((this.level + 1 - this.capacity) / this.rate) * 1000);
    this.level += 1;
    return waitMs;
  }

  /**
   * Like take, but gives the slot back and returns false when it would wait longer than maxWaitMs:
   * a write that cannot leave soon must fail as "not sent" rather than leave after its caller gave up.
   */
  async tryTake(maxWaitMs: number): Promise<boolean> {
    const waitMs = this.reserve();
    if (waitMs > maxWaitMs) {
      this.level = Math.max(0, this.level - 1);
      return false;
    }
    if (waitMs > 0) await this.sleep(waitMs);
    return true;
  }

  async take(): Promise<void> {
    await this.tryTake(Infinity);
  }

  /** The portal said we are over its limit: treat our bucket as full so the next sends wait. */
  markFull(): void {
    if (!this.enabled) return;
    this.drain();
    this.level = Math.max(this.level, this.capacity);
  }

  private drain(): void {
    const now = this.now();
    this.level = Math.max(0, this.level - ((now - this.last) / 1000) * this.rate);
    this.last = now;
  }
}

function defaultHeadroom(burst: number): number {
  if (burst <= 2) return 0;
  return Math.max(1, Math.floor(burst * 0.1));
}
