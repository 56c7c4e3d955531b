/**
 * Idempotent writes as Bitrix24 REST 3.0 documents them: a write sent with an `Idempotency-Key` header
 * has its first successful answer kept for 24 hours; the same key with the same body gets that answer
 * again (header `Idempotent-Replayed: true`) without the call being carried out again, and the same
 * key with a different body is refused with HTTP 422. Kept in this emulator process only.
 */
import { createHash } from "node:crypto";

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

interface Kept {
  method: string;
  bodySha256: string;
  status: number;
  body: string;
  contentType: string;
  at: number;
}

export class IdempotencyKeys {
  private readonly kept = new Map<string, Kept>();

  constructor(private readonly now: () => number = Date.now) {}

  static bodyHash(method: string, params: unknown): string {
    return createHash("sha256").update(`${method}\n${JSON.stringify(params)}`).digest("hex");
  }

  /** The kept answer for `key`, or "conflict" when it was used with another method or body. */
  lookup(key: string, method: string, bodySha256: string): Kept | "conflict" | undefined {
    const k = this.kept.get(key);
    if (!k) return undefined;
    if (this.now() - k.at > IDEMPOTENCY_TTL_MS) {
      this.kept.delete(key);
      return undefined;
    }
    return k.method === method && k.bodySha256 === bodySha256 ? k : "conflict";
  }

  /** Keeps the first successful answer only. */
  keep(key: string, method: string, bodySha256: string, status: number, body: string, contentType: string): void {
    if (this.kept.has(key) || status < 200 || status >= 300) return;
    this.kept.set(key, { method, bodySha256, status, body, contentType, at: this.now() });
  }
}
