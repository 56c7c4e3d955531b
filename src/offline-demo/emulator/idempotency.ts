/**
 * Idempotent writes as Bitrix24 REST 3.0 documents them: a write sent with an `Idempotency-Key` header
 * has its first successful answer kept for 24 hours; the same key with the same body gets that answer
 * again (header `Idempotent-Replayed: true`) without the call being carried out again, and the same
 * key with a different body is refused with HTTP 422. Kept in the portal's state file (like a real
 * portal, the keys outlive a restart), and written in the same transaction as the change it answers,
 * so there is no moment where the change is applied but its answer not yet kept.
 */
import { createHash } from "node:crypto";
import type { KeptAnswer, Store } from "./store.js";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export type Kept = KeptAnswer;

export class IdempotencyKeys {
  constructor(
    private readonly store: Pick<Store, "getIdempotent" | "keepIdempotent" | "dropIdempotent">,
    private readonly now: () => number = Date.now,
  ) {}

  static bodyHash(method: string, params: unknown): string {
    return createHash("sha256")
      .update(`${method}\n${JSON.stringify(params)}`)
      .digest("hex");
  }

  /** The kept answer for `key`, or "conflict" when it was used with another method or body. */
  lookup(key: string, method: string, bodySha256: string): Kept | "conflict" | undefined {
    const k = this.store.getIdempotent(key);
    if (!k) return undefined;
    if (this.now() - k.at > IDEMPOTENCY_TTL_MS) {
      this.store.dropIdempotent(key);
      return undefined;
    }
    return k.method === method && k.bodySha256 === bodySha256 ? k : "conflict";
  }

  /** Keeps the first successful answer only. */
  keep(
    key: string,
    method: string,
    bodySha256: string,
    status: number,
    body: string,
    contentType: string,
  ): void {
    if (status < 200 || status >= 300) return;
    this.store.keepIdempotent(key, { method, bodySha256, status, body, contentType, at: this.now() });
  }
}
