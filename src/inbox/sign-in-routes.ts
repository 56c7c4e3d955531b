/**
 * The inbox's sign-in: password and one-time link, the session and CSRF check, sign-out, and their audit records.
 */
import { randomUUID } from "node:crypto";
import { Hono, type Context } from "hono";
import { getCookie, setCookie, deleteCookie } from "hono/cookie";
import { signInPage } from "./pages.js";
import {
  LOGIN_COOKIE,
  SESSION_COOKIE,
  SignInLimiter,
  isLoopbackAddress,
  sameToken,
  token,
} from "./security.js";
import type { AuditEntry } from "../store/audit.js";
import { sha256Hex } from "../auth/tokens.js";
import type { Env, RouteContext, SignInEvent } from "./routes-context.js";

/** Sign-in by password or one-time link, the session check every later route relies on, and sign-out. */
export function signInRoutes(web: Hono<Env>, ctx: RouteContext): void {
  const { app, opts, base, sessions, crossSite } = ctx;
  const { users } = opts;
  const perUser = new SignInLimiter(5);
  const perAddress = new SignInLimiter(20);

  /**
   * The posted form, or the refusal of one that comes from another site or whose body cannot be read
   * as a form (a malformed multipart body, say).
   */
  const postedForm = async (c: Context<Env>) => {
    const bad = crossSite(c);
    if (bad) return c.text(`refused: ${bad}`, 403);
    return (await c.req.parseBody().catch(() => undefined)) ?? c.text(UNREADABLE_FORM, 400);
  };
  const loginForm = (c: Context<Env>, status: 200 | 401 | 403 | 429 = 200, message?: string) => {
    const t = token();
    setCookie(c, LOGIN_COOKIE, t, {
      httpOnly: true,
      secure: true,
      sameSite: "Strict",
      path: "/",
      maxAge: 3600,
    });
    return c.html(signInPage(t, message, base), status);
  };
  web.get("/login", (c) => loginForm(c));
  web.post("/login", async (c) => {
    const form = await postedForm(c);
    if (form instanceof Response) return form;
    if (!sameToken(typeof form["csrf"] === "string" ? form["csrf"] : undefined, getCookie(c, LOGIN_COOKIE))) {
      return loginForm(c, 403, "The sign-in form expired or came from elsewhere; please sign in again.");
    }
    const user = typeof form["user"] === "string" ? form["user"].slice(0, 128) : "";
    const password = typeof form["password"] === "string" ? form["password"] : "";
    const address = c.env?.incoming?.socket?.remoteAddress ?? "unknown";
    const tooMany = (wait: number) => {
      c.header("Retry-After", String(wait));
      return loginForm(c, 429, `Too many failed sign-ins; try again in ${Math.ceil(wait / 60)} minute(s).`);
    };
    // One account's limit: past 5 failures the account is refused before its password is tried, so
    // guessing any one password stops there, from however many addresses.
    const userWait = perUser.retryAfter(user);
    if (userWait > 0) return tooMany(userWait);
    // The address's limit applies to failures only: behind loopback or a TLS proxy every approver
    // shares one address, and refusing a right password there would let anyone lock everyone out by
    // typing wrong ones. So the password is checked first (constant time, as for an unknown id), and
    // only a wrong one from an address past its limit is refused with 429, counted all the same.
    const addressWait = perAddress.retryAfter(address);
    const who = await users.verify(user, password);
    if (!who) {
      perUser.fail(user);
      perAddress.fail(address);
      if (addressWait > 0) return tooMany(Math.max(addressWait, perAddress.retryAfter(address)));
      // Audited only below the address's limit, so guessing cannot flood the log; the refusal stands if the log fails.
      await app.deps.audit
        .append(signInEntry(null, user, "password", address, app.deps.clock().toISOString()))
        .catch(() => undefined);
      return loginForm(c, 401, "Unknown approver id or wrong password.");
    }
    perUser.succeed(user);
    return signIn(c, who, "password", address);
  });

  /** A new session for this approver (a fresh id, the old one ended: no fixation), told to onSignIn. */
  const signIn = async (c: Context<Env>, who: string, how: SignInEvent["how"], address: string) => {
    // Audited before the session exists: a sign-in the audit log cannot record does not happen.
    await app.deps.audit.append(signInEntry(who, who, how, address, app.deps.clock().toISOString()));
    sessions.end(getCookie(c, SESSION_COOKIE));
    const s = sessions.create(who);
    setCookie(c, SESSION_COOKIE, s.id, { httpOnly: true, secure: true, sameSite: "Strict", path: "/" });
    deleteCookie(c, LOGIN_COOKIE, { path: "/", secure: true });
    opts.onSignIn?.({ user: who, how, address, at: app.deps.clock().toISOString() });
    return c.redirect(`${base}/`, 303);
  };

  // A one-time link (printed by `npm start -- --inbox`): from this computer only, and once.
  web.get("/login/once/:token", async (c) => {
    const address = c.env?.incoming?.socket?.remoteAddress;
    if (!opts.signInLinks || !isLoopbackAddress(address))
      return loginForm(
        c,
        403,
        "A one-time sign-in link works only on the computer that printed it; sign in with your approver id and password.",
      );
    const bad = crossSite(c);
    if (bad) return loginForm(c, 403, `Refused: ${bad}.`);
    const who = opts.signInLinks.redeem(c.req.param("token").slice(0, 128));
    if (!who)
      return loginForm(
        c,
        401,
        "This sign-in link was used already or has expired. Each link signs in once; start the job again for a new one, or sign in with a password.",
      );
    return signIn(c, who, "one-time link", address ?? "unknown");
  });

  // ── everything else needs a session; changes need its CSRF token too ─────────────────────────────
  web.use("*", async (c, next) => {
    const s = sessions.get(getCookie(c, SESSION_COOKIE));
    if (!s) {
      if (c.req.method === "GET" && c.req.header("accept")?.includes("text/html"))
        return c.redirect(`${base}/login`, 303);
      return c.text("sign in first", 401);
    }
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      const form = await postedForm(c);
      if (form instanceof Response) return form;
      if (!sameToken(typeof form["csrf"] === "string" ? form["csrf"] : undefined, s.csrf)) {
        return c.text("refused: the form's CSRF token is missing or wrong; reload the page", 403);
      }
    }
    c.set("session", s);
    await next();
  });

  web.post("/logout", (c) => {
    sessions.end(c.var.session.id);
    deleteCookie(c, SESSION_COOKIE, { path: "/", secure: true });
    return c.redirect(`${base}/login`, 303);
  });
}

const UNREADABLE_FORM =
  "refused: the request body is not a readable form (application/x-www-form-urlencoded or multipart/form-data); nothing was changed";

/**
 * The audit record of a sign-in to the inbox: `inbox_signed_in` when `who` signed in, else
 * `inbox_sign_in_refused` for the id as typed. No thread; each record is its own (a random discriminator).
 */
export function signInEntry(
  who: string | null,
  typed: string,
  how: SignInEvent["how"],
  address: string,
  at: string,
): AuditEntry {
  const digest = sha256Hex(`${at}\n${typed}\n${address}\n${randomUUID()}`).slice(0, 16);
  return {
    threadId: "",
    revision: 0,
    event: who ? "inbox_signed_in" : "inbox_sign_in_refused",
    discriminator: `${how}:${digest}`,
    at,
    requestedBy: "",
    risk: null,
    what: { operation: "", taskId: null, params: null, envelopeHash: null, envelope: null },
    approver: who ? { id: who, verifiedBy: "authentication", decision: null, decidedAt: null } : null,
    override: null,
    policy: { id: "", version: "" },
    refusal: who ? null : { code: "SIGN_IN_REFUSED", reason: "unknown approver id or wrong password" },
    outcome: null,
    received: { method: how, address, ...(who ? {} : { user: typed }) },
  };
}
