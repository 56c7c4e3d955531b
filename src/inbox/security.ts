/**
 * Sessions, CSRF tokens and sign-in rate limiting for the web inbox. In memory: a restart signs
 * everyone out, which is the safe direction.
 *
 * - Session ids are 256-bit random, kept server-side; the cookie is HttpOnly, SameSite=Strict, Secure
 *   and `__Host-` prefixed (browsers treat http://127.0.0.1 and localhost as secure contexts).
 *   Idle timeout 30 minutes, absolute 8 hours; a new id at every sign-in (no fixation).
 * - Every state-changing request carries the session's CSRF token in a form field, compared in
 *   constant time, and must not come from another site (Origin / Sec-Fetch-Site).
 * - Sign-in: at most 5 failures per 15 minutes per user id; past that the id is refused (429) before
 *   its password is tried. Per client address, 20 failures per 15 minutes; past that a wrong password
 *   is answered 429, but a right one still signs in: behind loopback or a TLS proxy every approver
 *   shares one address, and anyone's wrong guesses must not lock everyone out. A success clears only
 *   its id's count, so one valid account cannot reset an address's budget.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { sha256Hex } from "../auth/tokens.js";

export const SESSION_COOKIE = "__Host-ae-inbox";
export const LOGIN_COOKIE = "__Host-ae-login";
const IDLE_MS = 30 * 60_000;
const ABSOLUTE_MS = 8 * 3600_000;

export interface Session {
  id: string;
  user: string;
  csrf: string;
  createdAt: number;
  seenAt: number;
}

export const token = () => randomBytes(32).toString("base64url");

export function sameToken(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class Sessions {
  private readonly byId = new Map<string, Session>();
  constructor(private readonly now: () => number = Date.now) {}

  create(user: string): Session {
    const t = this.now();
    const s: Session = { id: token(), user, csrf: token(), createdAt: t, seenAt: t };
    this.byId.set(s.id, s);
    return s;
  }

  get(id: string | undefined): Session | undefined {
    const s = this.peek(id);
    if (s) s.seenAt = this.now();
    return s;
  }

  /**
   * The session while it lasts (an ended or expired one is dropped), without counting this as
   * activity: a check that is not the person's doing (an open event stream's) must not keep an idle
   * session alive.
   */
  peek(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.byId.get(id);
    if (!s) return undefined;
    const t = this.now();
    if (t - s.seenAt > IDLE_MS || t - s.createdAt > ABSOLUTE_MS) {
      this.byId.delete(id);
      return undefined;
    }
    return s;
  }

  end(id: string | undefined): void {
    if (id) this.byId.delete(id);
  }
}

export class SignInLimiter {
  private readonly failures = new Map<string, number[]>();
  constructor(
    private readonly max = 5,
    private readonly windowMs = 15 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until another attempt is allowed for this key, or 0. */
  retryAfter(key: string): number {
    const t = this.now();
    const recent = (this.failures.get(key) ?? []).filter((at) => t - at < this.windowMs);
    this.failures.set(key, recent);
    return recent.length >= this.max ? Math.ceil((recent[0]! + this.windowMs - t) / 1000) : 0;
  }

  fail(key: string): void {
    const t = this.now();
    // Bounded memory whatever ids an attacker makes up: the oldest keys go first.
    while (this.failures.size >= 10_000) this.failures.delete(this.failures.keys().next().value!);
    // Only the last `max` failures matter (the limit is reached until the oldest of them leaves the
    // window), so failures past the limit neither grow memory nor shorten the wait.
    this.failures.set(key, [...(this.failures.get(key) ?? []), t].slice(-this.max));
  }

  succeed(key: string): void {
    this.failures.delete(key);
  }
}

/**
 * One-time sign-in links (`npm start -- --inbox` on the offline demo): a random token naming one
 * approver, good for one sign-in within its lifetime. Only the token's SHA-256 is kept, so the map
 * cannot be read back into links; a redeemed or expired token is gone.
 */
export class SignInLinks {
  private readonly byDigest = new Map<string, { user: string; expiresAt: number }>();
  constructor(
    private readonly ttlMs = 10 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  issue(user: string): { token: string; expiresAt: number } {
    const t = token();
    const expiresAt = this.now() + this.ttlMs;
    this.byDigest.set(sha256Hex(t), { user, expiresAt });
    return { token: t, expiresAt };
  }

  /** The approver the token names, once: the token is spent whether or not it has expired. */
  redeem(t: string): string | undefined {
    const key = sha256Hex(t);
    const entry = this.byDigest.get(key);
    this.byDigest.delete(key);
    return entry && this.now() <= entry.expiresAt ? entry.user : undefined;
  }
}

/** A peer address on this computer: 127.0.0.0/8, ::1, or either mapped into IPv6. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return address === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}
