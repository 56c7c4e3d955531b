/**
 * The web approval inbox: a small hono server on 127.0.0.1 over the same app (journal, graph,
 * checkpoints) as the CLI. Approvers sign in; the list and cards come from the journal; decisions go
 * through the shared decision path as the signed-in, authenticated approver (src/inbox/driver.ts).
 */
import fs from "node:fs";
import { createHash, randomUUID } from "node:crypto";
import os from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve, type HttpBindings } from "@hono/node-server";
import { Hono, type Context } from "hono";
import { getCookie, setCookie, deleteCookie } from "hono/cookie";
import { streamSSE } from "hono/streaming";
import { bodyLimit } from "hono/body-limit";
import { viewThread, type App, type ThreadView } from "../app/threads.js";
import { DecisionNotAcceptedError } from "../errors.js";
import { OPERATIONS } from "../envelope/operations.js";
import { partialApprovalForecast } from "../envelope/change-set.js";
import { buildCase } from "../evidence/bundle.js";
import { exportBundle } from "../evidence/export.js";
import { cardSection, revisionSection, setOutcomeTable, setRevisionSection, setSection } from "./card-view.js";
import { membersOf } from "../hitl/journal-gate.js";
import type { ActionRow } from "../store/action-machine.js";
import { answerAsSignedIn, submitAsSignedIn, StaleCardError } from "./driver.js";
import { html, text, type Html } from "./html.js";
import { classify, marker } from "../text/escape.js";
import { lateResumeEntry } from "../api/late-resume.js";
import { inboxPage, layout, listFragment, signInPage } from "./pages.js";
import { boundOf, entitlementOf, inboxFor, type NotApprovable, mayAnswer, maySeeRun, questionsFor, versionOf, waitingAction } from "./queue.js";
import { answerJsonSchema, type InputField } from "../hitl/structured-input.js";
import { LOGIN_COOKIE, SESSION_COOKIE, Sessions, SignInLimiter, SignInLinks, isLoopbackAddress, sameToken, token, type Session } from "./security.js";
import { CLIENT_CSS, CLIENT_JS } from "./static.js";
import { tarArchive } from "./tar.js";
import type { AuditEntry } from "../store/audit.js";
import type { InboxUsers } from "./users.js";

/** How long closing the inbox waits for requests still being answered. */
const CLOSE_GRACE_MS = 5_000;

export interface InboxOptions {
  app: App;
  users: InboxUsers;
  port?: number;
  host?: string;
  /** How often the event stream re-reads the journal index. */
  pollMs?: number;
  /** Path prefix every link and form uses ("" on its own port; "/inbox" when mounted next to the LangGraph API). */
  basePath?: string;
  /**
   * One-time sign-in links this inbox honours (GET /login/once/:token), from this computer only.
   * Without it (the inbox mounted on the API server) there are none.
   */
  signInLinks?: SignInLinks;
  /** Told of every sign-in, by password or by link: the line `npm start -- --inbox` prints. */
  onSignIn?: (event: SignInEvent) => void;
}

export interface SignInEvent {
  user: string;
  how: "password" | "one-time link";
  address: string;
  at: string;
}

export interface RunningInbox {
  url: string;
  /**
   * A one-time sign-in link for this approver, good for one sign-in from this computer within its
   * lifetime; only for an inbox listening on a loopback address.
   */
  signInLink(user: string): { url: string; expiresAt: string };
  close(): Promise<void>;
}

type Env = { Bindings: HttpBindings; Variables: { session: Session } };

const MAX_FIELD = 10_000;

export function createInboxApp(opts: InboxOptions, hostAllowed: (host: string) => boolean): Hono<Env> {
  const { app, users } = opts;
  const base = opts.basePath ?? "";
  const sessions = new Sessions();
  const perUser = new SignInLimiter(5);
  const perAddress = new SignInLimiter(20);
  const pollMs = opts.pollMs ?? 1000;
  const web = new Hono<Env>();

  web.use("*", async (c, next) => {
    // DNS rebinding: only our own host names; and nothing cross-site may change anything.
    const host = c.req.header("host") ?? "";
    if (!hostAllowed(host)) return c.text("unknown host", 421);
    await next();
    c.header("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    c.header("X-Content-Type-Options", "nosniff");
    // Not "no-referrer": with it Chromium sends "Origin: null" on our own form posts, which the cross-site check refuses.
    c.header("Referrer-Policy", "same-origin");
    c.header("X-Frame-Options", "DENY");
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
  });
  web.use("*", bodyLimit({ maxSize: 256 * 1024, onError: (c) => c.text("request too large", 413) }));

  const crossSite = (c: Context<Env>): string | undefined => {
    const origin = c.req.header("origin");
    const host = c.req.header("host");
    // https too: behind a TLS-terminating proxy the page's origin is https://<the same host>.
    if (origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`) return `a request from ${origin} may not change anything here`;
    const site = c.req.header("sec-fetch-site");
    if (site !== undefined && site !== "same-origin" && site !== "none") return `a ${site} request may not change anything here`;
    return undefined;
  };

  const refused = (c: Context<Env>, status: 401 | 403 | 409 | 422 | 429, title: string, message: string | Html, user?: Session) =>
    c.html(layout(title, html`<h1>${title}</h1><p class="refusal" role="alert">${message}</p><p><a href="${base}/">Back to the inbox</a></p>`, user ? { user: user.user, csrf: user.csrf, base } : { base }), status);

  // ── static assets ────────────────────────────────────────────────────────────────────────────────
  web.get("/static/inbox.js", (c) => c.body(CLIENT_JS, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" }));
  web.get("/static/inbox.css", (c) => c.body(CLIENT_CSS, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "no-cache" }));

  // ── sign-in ──────────────────────────────────────────────────────────────────────────────────────
  const loginForm = (c: Context<Env>, status: 200 | 401 | 403 | 429 = 200, message?: string) => {
    const t = token();
    setCookie(c, LOGIN_COOKIE, t, { httpOnly: true, secure: true, sameSite: "Strict", path: "/", maxAge: 3600 });
    return c.html(signInPage(t, message, base), status);
  };
  web.get("/login", (c) => loginForm(c));
  web.post("/login", async (c) => {
    const bad = crossSite(c);
    if (bad) return c.text(`refused: ${bad}`, 403);
    const form = await c.req.parseBody();
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
    const userWait = perUser.retryAfter([user]);
    if (userWait > 0) return tooMany(userWait);
    // The address's limit applies to failures only: behind loopback or a TLS proxy every approver
    // shares one address, and refusing a right password there would let anyone lock everyone out by
    // typing wrong ones. So the password is checked first (constant time, as for an unknown id), and
    // only a wrong one from an address past its limit is refused with 429, counted all the same.
    const addressWait = perAddress.retryAfter([address]);
    const who = await users.verify(user, password);
    if (!who) {
      perUser.fail([user]);
      perAddress.fail([address]);
      if (addressWait > 0) return tooMany(Math.max(addressWait, perAddress.retryAfter([address])));
      // Audited only below the address's limit, so guessing cannot flood the log; the refusal stands if the log fails.
      await app.deps.audit.append(signInEntry(null, user, "password", address, app.deps.clock().toISOString())).catch(() => undefined);
      return loginForm(c, 401, "Unknown approver id or wrong password.");
    }
    perUser.succeed([user]);
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
    if (!opts.signInLinks || !isLoopbackAddress(address)) return loginForm(c, 403, "A one-time sign-in link works only on the computer that printed it; sign in with your approver id and password.");
    const bad = crossSite(c);
    if (bad) return loginForm(c, 403, `Refused: ${bad}.`);
    const who = opts.signInLinks.redeem(c.req.param("token").slice(0, 128));
    if (!who) return loginForm(c, 401, "This sign-in link was used already or has expired. Each link signs in once; start the job again for a new one, or sign in with a password.");
    return signIn(c, who, "one-time link", address ?? "unknown");
  });

  // ── everything else needs a session; changes need its CSRF token too ─────────────────────────────
  web.use("*", async (c, next) => {
    const s = sessions.get(getCookie(c, SESSION_COOKIE));
    if (!s) {
      if (c.req.method === "GET" && c.req.header("accept")?.includes("text/html")) return c.redirect(`${base}/login`, 303);
      return c.text("sign in first", 401);
    }
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      const bad = crossSite(c);
      if (bad) return c.text(`refused: ${bad}`, 403);
      const form = await c.req.parseBody();
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

  web.get("/", async (c) => {
    const user = c.var.session.user;
    return c.html(inboxPage(user, c.var.session.csrf, await inboxFor(app, user), await questionsFor(app, user), base));
  });
  web.get("/list", async (c) => c.html(listFragment(await inboxFor(app, c.var.session.user), await questionsFor(app, c.var.session.user), base).value));

  web.get("/events", (c) => {
    const session = c.var.session;
    const user = session.user;
    return streamSSE(c, async (stream) => {
      let last = "";
      let open = true;
      stream.onAbort(() => {
        open = false;
      });
      while (open) {
        // The session may end while the stream is open (sign-out, idle or absolute limit): then the
        // stream ends too. The check is not activity (peek), so an open tab does not keep an idle
        // session alive.
        if (!sessions.peek(session.id)) {
          await stream.writeSSE({ event: "signed-out", data: "the session ended; sign in again" });
          break;
        }
        const items = await inboxFor(app, user);
        const questions = await questionsFor(app, user);
        const version = `${versionOf(items)}:${questions.map((q) => `${q.threadId}@${q.askedAt}`).join(",")}`;
        if (version !== last) {
          last = version;
          await stream.writeSSE({ event: "inbox", data: JSON.stringify({ version, items: items.map((i) => ({ threadId: i.threadId, envelopeHash: i.envelopeHash })) }) });
        }
        await stream.sleep(pollMs);
      }
    });
  });

  // ── a thread: its card while waiting, its outcome after ─────────────────────────────────────────
  const threadPage = async (c: Context<Env>, threadId: string, notice?: { kind: "ok" | "warn" | "refusal"; message: Html | string }, status: 200 | 409 | 422 = 200) => {
    const s = c.var.session;
    if (!(await maySeeRun(app, threadId, s.user))) return notYours(c, threadId);
    const view = await viewThread(app, threadId);
    const action = await waitingAction(app, threadId);
    // A change set is shown and decided as one: its header and every action's card, bound to the set's hash.
    const members = action?.set ? await membersOf(app.deps, action) : undefined;
    const cards = (a: ActionRow) => (members ? setSection(a, members, perActionControls(app, a, members, s)) : cardSection(a));
    const banner = notice ? html`<p class="${notice.kind === "ok" ? "notice" : notice.kind === "warn" ? "notice warn" : "refusal"}" role="alert">${notice.message}</p>` : "";
    let body: Html;
    if (view.status === "awaiting_approval" && action && boundOf(action).hash === view.approval?.envelopeHash) {
      // A single action's history is the projection's (the same the CLI's show prints); a set's is built from its members.
      const prevHash = members ? action.envelope.previousEnvelopeHash : undefined;
      const previous = prevHash ? await app.deps.journal.getAction(prevHash) : undefined;
      const history = members
        ? setRevisionSection(members, previous?.macValid && previous.set ? (await membersOf(app.deps, previous)).filter((m) => m.macValid) : [])
        : revisionSection(view.revisionHistory);
      body = html`${banner}${history}${cards(action)}${members ? setDecisionForms(app, action, members, s, view, base) : decisionForms(app, action, s, view, base)}`;
    } else if (view.status === "awaiting_input" && view.input) {
      body = html`${banner}${await questionSection(app, view, s, base)}`;
    } else if (view.status === "not_found" && action) {
      // Registered in the journal, but its run (checkpoints) lives in another process's checkpointer
      // (e.g. the LangGraph API server): the card is the journal's, so it is shown; deciding happens
      // where the run can be resumed, never here.
      body = html`${banner}<p class="refusal" role="status">This approval's run is kept by another server (its checkpoints are not reachable from this inbox). The card below is the one registered in the journal; decide it where the run lives: the inbox mounted on the LangGraph API (<code>/inbox</code>), Studio, or <code>npm run cli -- approve ${threadId} --hash ${boundOf(action).hash} --api URL</code>.</p>${cards(action)}`;
    } else if (view.status === "not_found") {
      return c.html(layout("Not found", html`<h1>No such thread</h1><p><a href="${base}/">Back to the inbox</a></p>`, { user: s.user, csrf: s.csrf, base }), 404);
    } else {
      body = html`${banner}${outcomeSection(view, await setHistoryOf(app, threadId))}`;
    }
    return c.html(
      layout(`Thread ${threadId}`, html`<p><a href="${base}/">← Inbox</a> · <a href="${base}/t/${encodeURIComponent(threadId)}/evidence">Evidence</a></p>
        <div data-thread="${threadId}" data-hash="${view.approval?.envelopeHash ?? ""}" id="thread">${body}</div>
        <p class="live" aria-live="polite" id="live-status"></p>`, { user: s.user, csrf: s.csrf, base }),
      status,
    );
  };

  const notYours = (c: Context<Env>, threadId: string) =>
    refused(c, 403, "Not yours to see", `Only the requester of thread ${threadId}, the approvers entitled for its action, and admins may see it.`, c.var.session);

  web.get("/t/:thread", (c) => threadPage(c, c.req.param("thread")));

  web.post("/t/:thread/decide", async (c) => {
    const s = c.var.session;
    const threadId = c.req.param("thread");
    // `all`: a name sent twice arrives as a list, so a per-action form naming an action twice is seen as such.
    const form = await c.req.parseBody({ all: true });
    const field = (name: string) => {
      const v = form[name];
      return typeof v === "string" ? v.slice(0, MAX_FIELD) : undefined;
    };
    const type = field("action");
    const envelopeHash = field("envelopeHash") ?? "";
    const nonce = field("nonce") ?? "";
    const action = await waitingAction(app, threadId);
    // The set on screen is the one waiting: its actions are what a per-action form must name.
    const onScreenSet = action?.set && action.set.setHash === envelopeHash ? await membersOf(app.deps, action) : undefined;
    let perAction: PerActionForm | undefined;
    if (type === "per-action") {
      const read = readPerActionForm(form, onScreenSet);
      if (!read.ok) {
        return threadPage(c, threadId, { kind: "refusal", message: html`Nothing was sent: ${read.reason}` }, 422);
      }
      perAction = read.form;
    }
    if (action) {
      const may = entitlementOf(app, action, s.user);
      const approves = type === "approve" || (perAction?.entries.some((e) => e.type === "approve") ?? false);
      // Separation of duties is left to check_decision (it refuses SELF_APPROVAL with its reason, after a stale card is refused as such).
      const allowed = approves ? may.mayDecide && may.notApprovable !== "escalated" : type === "cancel" ? may.mayCancel : may.mayDecide;
      if (!allowed) return refused(c, 403, "Not yours to decide", `${s.user} may not ${approves ? "approve" : (type ?? "decide")} this approval under policy ${app.deps.policy.id}@${app.deps.policy.version}.`, s);
      if (action.set && type === "edit") {
        return threadPage(c, threadId, { kind: "refusal", message: "Nothing was sent: an edit of a change set names the action it changes; use the per-action form (edit that action, approve or reject each of the others)." }, 422);
      }
    }
    // The time of a decision is this server's clock, unless the decision is signed: then it is the
    // decidedAt the browser signed (the signature covers it, and check_decision refuses one too far ahead).
    const serverNow = app.deps.clock().toISOString();
    const signedAt = field("decidedAt");
    const decidedAtFor = (sig: string | undefined) => (sig && signedAt ? signedAt : serverNow);
    const signature = field("signature");
    const decidedAt = decidedAtFor(signature);
    const signed = { decidedAt, ...(signature ? { signature } : {}) };
    let decision: Record<string, unknown>;
    let decisions: Array<Record<string, unknown>> | undefined;
    switch (type) {
      case "approve":
        decision = { type, envelopeHash, nonce, approver: { id: s.user }, ...signed };
        break;
      case "reject": {
        const message = field("message")?.trim();
        decision = { type, envelopeHash, nonce, approver: { id: s.user }, ...(message ? { message } : {}), ...signed };
        break;
      }
      case "edit": {
        const edited = editedFields(form, "");
        if (!edited.ok) return refused(c, 422, "Edit not sent", edited.reason, s);
        const unsafe = invisibleInEdit(edited.fields);
        if (unsafe) {
          await auditUnsafeEdit(app, threadId, action, unsafe, edited.fields);
          return refused(c, 422, "Edit not sent", unsafe, s);
        }
        decision = { type, envelopeHash, nonce, approver: { id: s.user }, editedAction: editedActionOf(action, edited.fields), ...signed };
        break;
      }
      case "cancel":
        decision = { type, envelopeHash, nonce, by: { id: s.user }, reason: field("reason")?.trim() ?? "" };
        break;
      case "per-action": {
        // One decision per action of the change set, each naming its action by id, all from the
        // signed-in approver and bound to the set's hash and nonce; signed one by one when signing is on.
        const built: Array<Record<string, unknown>> = [];
        for (const e of perAction!.entries) {
          const sig = field(`signature.${e.actionId}`);
          const common = { envelopeHash, nonce, approver: { id: s.user }, actionId: e.actionId, decidedAt: decidedAtFor(sig), ...(sig ? { signature: sig } : {}) };
          if (e.type === "approve") built.push({ type: "approve", ...common });
          else if (e.type === "reject") {
            const message = field(`message.${e.actionId}`)?.trim();
            built.push({ type: "reject", ...common, ...(message ? { message } : {}) });
          } else {
            const fields = editedFields(form, `edit.${e.actionId}.`);
            if (!fields.ok) return threadPage(c, threadId, { kind: "refusal", message: `Nothing was sent: ${e.actionId}: ${fields.reason}` }, 422);
            const unsafe = invisibleInEdit(fields.fields);
            if (unsafe) {
              await auditUnsafeEdit(app, threadId, action, unsafe, fields.fields);
              return threadPage(c, threadId, { kind: "refusal", message: `Nothing was sent: ${e.actionId}: ${unsafe}` }, 422);
            }
            const target = onScreenSet?.find((m) => m.set?.actionId === e.actionId);
            built.push({ type: "edit", ...common, editedAction: editedActionOf(target, fields.fields) });
          }
        }
        decisions = built;
        decision = built[0]!;
        break;
      }
      default:
        return refused(c, 422, "Unknown decision", "Choose approve, reject, edit or cancel.", s);
    }
    const before = action?.progress.refusalsSeen ?? 0;
    let after: ThreadView;
    try {
      after = await submitAsSignedIn(app, threadId, { envelopeHash, nonce }, { decisions: decisions ?? [decision] }, s.user);
    } catch (e) {
      if (e instanceof StaleCardError) return threadPage(c, threadId, { kind: "refusal", message: `Refused: ${e.reason}` }, 409);
      if (e instanceof DecisionNotAcceptedError) return threadPage(c, threadId, { kind: "refusal", message: `Refused (${e.code}): ${e.detail}` }, 409);
      throw e;
    }
    const now = await app.deps.journal.currentAction(threadId);
    const what = type === "per-action" ? "per-action decision" : action?.set ? `${type} of the whole set` : type;
    if (after.status === "awaiting_approval" && now && boundOf(now).hash === envelopeHash && now.progress.refusalsSeen > before) {
      const r = now.progress.lastRefusal;
      return threadPage(c, threadId, { kind: "refusal", message: html`Your ${what} was refused (${text(r?.code ?? "REFUSED")}): ${text(r?.reason ?? "")}. Nothing was applied.` }, 422);
    }
    if (after.status === "awaiting_approval") {
      const next = await waitingAction(app, threadId);
      const someoneElse = next ? !entitlementOf(app, next, s.user).mayApprove : false;
      return threadPage(c, threadId, { kind: "ok", message: `Your ${what} was accepted. A new revision (${after.approval!.revision}) now waits for a fresh approval${someoneElse ? " by another approver" : ""}.` });
    }
    // The notice follows the outcome: a decision that was taken but whose run did not write what was
    // approved is not shown as a green success.
    const outcome = after.state?.outcome;
    if (outcome && outcome !== "VERIFIED" && type !== "reject" && type !== "cancel") {
      return threadPage(c, threadId, { kind: "warn", message: html`Your ${what} was recorded, but the run ended ${text(outcome)} (${text(after.state?.reasonCode ?? "")}): ${text(after.state?.reason ?? "")}` });
    }
    return threadPage(c, threadId, { kind: "ok", message: `Your ${what} was accepted.` });
  });

  web.post("/t/:thread/answer", async (c) => {
    const s = c.var.session;
    const threadId = c.req.param("thread");
    const thread = await app.deps.journal.getThread(threadId);
    if (!mayAnswer(app, thread, s.user)) return refused(c, 403, "Not yours to answer", `${s.user} may not answer the question of thread ${threadId}: only its requester, an approver or an admin may.`, s);
    const form = await c.req.parseBody();
    const askedAt = typeof form["askedAt"] === "string" ? form["askedAt"] : "";
    const answers: Record<string, string> = {};
    for (const [k, v] of Object.entries(form)) if (k.startsWith("answer.") && typeof v === "string") answers[k.slice(7)] = v.slice(0, MAX_FIELD);
    const before = (await viewThread(app, threadId)).state?.refusals.length ?? 0;
    let after: ThreadView;
    try {
      after = await answerAsSignedIn(app, threadId, askedAt, answers, s.user);
    } catch (e) {
      if (e instanceof StaleCardError) return threadPage(c, threadId, { kind: "refusal", message: `Refused: ${e.reason}` }, 409);
      if (e instanceof DecisionNotAcceptedError) return threadPage(c, threadId, { kind: "refusal", message: `Refused (${e.code}): ${e.detail}` }, 409);
      throw e;
    }
    const refusal = (after.state?.refusals.length ?? 0) > before ? after.state?.refusals.at(-1) : undefined;
    if (after.status === "awaiting_input" && refusal) {
      return threadPage(c, threadId, { kind: "refusal", message: html`Your answer was refused (${text(refusal.code)}): ${text(refusal.reason)}. Nothing was sent to the agent; answer again.` }, 422);
    }
    if (after.status === "awaiting_approval") {
      return threadPage(c, threadId, { kind: "ok", message: "Your answer was accepted. The agent made this proposal from it; it waits for approval." });
    }
    return threadPage(c, threadId, { kind: "ok", message: `Your answer was accepted${refusal ? html` (the run then ended: ${text(refusal.code)})` : ""}.` });
  });

  // ── evidence ─────────────────────────────────────────────────────────────────────────────────────
  const caseOf = async (threadId: string) => {
    const [records, chain, view] = await Promise.all([app.deps.audit.records({ threadId }), app.deps.audit.verify(), viewThread(app, threadId)]);
    const status = view.status === "awaiting_input" ? "awaiting_approval" : view.status;
    return buildCase({ threadId, status, state: view.state, records, chain });
  };

  web.get("/t/:thread/evidence", async (c) => {
    const s = c.var.session;
    const threadId = c.req.param("thread");
    if (!(await maySeeRun(app, threadId, s.user))) return notYours(c, threadId);
    const { caseRecord, evidence } = await caseOf(threadId);
    const fp = caseRecord.firstPage;
    const STAGES: Array<[string, string]> = [
      ["approval_request", "shown"],
      ["decision", "approved"],
      ["invocation", "invoked"],
      ["acknowledgement", "acknowledged"],
      ["post_write_read", "observed"],
      ["outcome", "outcome"],
    ];
    const rows = evidence.map((e) => {
      const stage = e.kind === "decision" ? decisionStage(e) : (STAGES.find(([k]) => k === e.kind)?.[1] ?? e.kind);
      return html`<tr><td>${stage}</td><td><time datetime="${e.at}">${e.at}</time></td><td>${text(e.name)}</td><td>${text(e.summary)}</td></tr>`;
    });
    return c.html(
      layout(
        `Evidence ${threadId}`,
        html`<p><a href="${base}/">← Inbox</a> · <a href="${base}/t/${encodeURIComponent(threadId)}">Thread</a></p>
        <h1>Evidence of run ${text(threadId)}</h1>
        <dl class="facts">
          <dt>Status</dt><dd>${fp.status}</dd>
          <dt>Request</dt><dd>${text(fp.request ?? "—")}</dd>
          <dt>Requested by</dt><dd>${text(fp.requestedBy ?? "—")}</dd>
          <dt>Decided by</dt><dd>${fp.decidedBy ? html`${text(fp.decidedBy.id ?? "—")} (${fp.decidedBy.decision ?? "—"}, identity ${fp.decidedBy.verifiedBy})` : "—"}</dd>
          <dt>Outcome</dt><dd class="outcome">${fp.outcome ? html`${fp.outcome.outcome} / ${fp.outcome.reasonCode}: ${text(fp.outcome.reason)}` : "not finished"}</dd>
          <dt>Overrides</dt><dd>${fp.overrides.length ? fp.overrides.map((o) => html`${text(o.gate)} by ${text(o.by)}: ${text(o.reason)}; `) : "none"}</dd>
          <dt>Audit chain</dt><dd>${caseRecord.auditChain.intact ? "intact" : html`BROKEN: ${text(caseRecord.auditChain.problem ?? "")}`}</dd>
        </dl>
        <table class="evidence"><thead><tr><th scope="col">Stage</th><th scope="col">At</th><th scope="col">Object</th><th scope="col">Summary</th></tr></thead><tbody>${rows}</tbody></table>
        <p><a href="${base}/t/${encodeURIComponent(threadId)}/evidence.tar" download>Download the evidence bundle (tar; check with <code>sha256sum -c SHA256SUMS</code>)</a></p>`,
        { user: s.user, csrf: s.csrf, base },
      ),
    );
  });

  web.get("/t/:thread/evidence.tar", async (c) => {
    const threadId = c.req.param("thread");
    if (!(await maySeeRun(app, threadId, c.var.session.user))) return notYours(c, threadId);
    const { caseRecord, evidence } = await caseOf(threadId);
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ae-inbox-evidence-"));
    try {
      const dirName = `evidence-${threadId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 60)}`;
      const out = exportBundle(path.join(tmp, dirName), caseRecord, evidence);
      const files = out.files.map((name) => ({ name: `${dirName}/${name}`, content: fs.readFileSync(path.join(out.dir, name)) }));
      const tar = tarArchive(files);
      return c.body(new Uint8Array(tar), 200, {
        "content-type": "application/x-tar",
        "content-disposition": `attachment; filename="${dirName}.tar"`,
      });
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  return web;
}

type FormBody = Record<string, string | File | Array<string | File>>;

const PER_ACTION_TYPES = ["approve", "reject", "edit"] as const;
type PerActionType = (typeof PER_ACTION_TYPES)[number];

interface PerActionForm {
  entries: Array<{ actionId: string; type: PerActionType }>;
}

/**
 * Reads a per-action form (`decision.<actionId>` = approve | reject | edit) and checks it before
 * anything is sent: every action of the set on screen named exactly once, no other action named, and
 * only those three choices. Without the set on screen (a stale tab, or a thread no longer waiting) only
 * the shape is checked; the driver then refuses the stale card with its reason.
 */
function readPerActionForm(form: FormBody, members: ActionRow[] | undefined): { ok: true; form: PerActionForm } | { ok: false; reason: string } {
  const entries: PerActionForm["entries"] = [];
  const twice: string[] = [];
  const bad: string[] = [];
  for (const [key, value] of Object.entries(form)) {
    if (!key.startsWith("decision.")) continue;
    const actionId = key.slice("decision.".length);
    if (Array.isArray(value)) {
      twice.push(actionId);
      continue;
    }
    if (typeof value !== "string" || !(PER_ACTION_TYPES as readonly string[]).includes(value)) {
      bad.push(actionId);
      continue;
    }
    entries.push({ actionId, type: value as PerActionType });
  }
  const problems: string[] = [];
  if (twice.length) problems.push(`${twice.join(", ")} named more than once`);
  if (bad.length) problems.push(`${bad.join(", ")}: choose approve, reject or edit`);
  if (members) {
    const ids = members.map((m) => m.set?.actionId ?? "");
    const named = new Set([...entries.map((e) => e.actionId), ...twice, ...bad]);
    const missing = ids.filter((id) => !named.has(id));
    const unknown = [...named].filter((id) => !ids.includes(id));
    if (missing.length) problems.push(`no decision for ${missing.join(", ")}`);
    if (unknown.length) problems.push(`the change set has no action ${unknown.join(", ")}`);
    // In the set's order, whatever order the form sent them in.
    entries.sort((a, b) => ids.indexOf(a.actionId) - ids.indexOf(b.actionId));
    if (problems.length) return { ok: false, reason: `decide every action of the change set exactly once (${ids.join(", ")}): ${problems.join("; ")}.` };
  } else if (problems.length || entries.length === 0) {
    return { ok: false, reason: `decide every action of the change set exactly once: ${problems.join("; ") || "no action was decided"}.` };
  }
  return { ok: true, form: { entries } };
}

/**
 * The edited action of an edit of `row` (the waiting action, or the set's action it names): its operation on its
 * object under the operation's id argument. Without the row (a stale tab, a thread no longer waiting) it names
 * update_task on task 0; the driver then refuses the stale card.
 */
function editedActionOf(row: ActionRow | undefined, fields: Record<string, unknown>): { name: string; args: Record<string, unknown> } {
  return { name: row?.envelope.operation ?? "update_task", args: { [row ? OPERATIONS[row.envelope.operation].idArg : "taskId"]: row?.envelope.object.id ?? 0, fields } };
}

/** An edit's values from `<prefix>field.<F>` (text) and `<prefix>json.<F>` (JSON) inputs, as the page and its signature build them. */
function editedFields(form: FormBody, prefix: string): { ok: true; fields: Record<string, unknown> } | { ok: false; reason: string } {
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(form)) {
    if (typeof v !== "string" || !k.startsWith(prefix)) continue;
    const name = k.slice(prefix.length);
    if (name.startsWith("field.")) fields[name.slice(6)] = v.slice(0, MAX_FIELD);
    else if (name.startsWith("json.")) {
      try {
        fields[name.slice(5)] = JSON.parse(v);
      } catch {
        return { ok: false, reason: `${name.slice(5)} must be JSON (as shown in the form).` };
      }
    }
  }
  return { ok: true, fields };
}

/** Characters an edited value may carry besides visible ones: line breaks (a browser sends CR LF) and tabs. */
const LAYOUT = new Set(["\n", "\r", "\t"]);

/**
 * Why an edit's values are refused, or null: a value still shows a marker of a character that cannot
 * be seen (the form shows such characters as ⟨U+XXXX⟩, never raw), or carries such a character typed
 * or pasted in. An edit never keeps an invisible character silently: the approver deletes the markers.
 */
export function invisibleInEdit(fields: Record<string, unknown>): string | null {
  const found: string[] = [];
  const walk = (name: string, v: unknown): void => {
    if (typeof v === "string") {
      const marks = new Set(v.match(/⟨U\+[0-9A-F]{4,6}⟩/g) ?? []);
      for (const ch of v) if (!LAYOUT.has(ch) && classify(ch.codePointAt(0)!, ch)) marks.add(marker(ch.codePointAt(0)!));
      if (marks.size > 0) found.push(`${name} (${[...marks].join(" ")})`);
    } else if (Array.isArray(v)) v.forEach((x, i) => walk(`${name}[${i}]`, x));
    else if (v !== null && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(`${name}.${k}`, x);
  };
  for (const [k, v] of Object.entries(fields)) walk(k, v);
  return found.length === 0
    ? null
    : `${found.join(", ")}: a character that cannot be seen is shown as a ⟨U+XXXX⟩ marker, and an edit never keeps one. Delete each marker (this drops the character) and submit again.`;
}

/** The warning above an edit form whose current values hold characters that cannot be seen, or nothing. */
function invisibleWarning(params: Record<string, unknown>): Html | string {
  const names = Object.entries(params)
    .filter(([, v]) => invisibleInEdit({ v }) !== null)
    .map(([f]) => f);
  return names.length === 0
    ? ""
    : html`<p class="warning" role="alert">${names.join(", ")} ${names.length === 1 ? "holds" : "hold"} characters that cannot be seen, shown below as ⟨U+XXXX⟩ markers. An edit never keeps them: delete each marker before submitting (this drops the character).</p>`;
}

/**
 * The audit record of a sign-in to the inbox: `inbox_signed_in` when `who` signed in, else
 * `inbox_sign_in_refused` for the id as typed. No thread; each record is its own (a random discriminator).
 */
export function signInEntry(who: string | null, typed: string, how: SignInEvent["how"], address: string, at: string): AuditEntry {
  const digest = createHash("sha256").update(`${at}\n${typed}\n${address}\n${randomUUID()}`).digest("hex").slice(0, 16);
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

/** The audit record of an edit the inbox refused for characters that cannot be seen (nothing was sent to the graph). */
async function auditUnsafeEdit(app: App, threadId: string, action: ActionRow | undefined, reason: string, fields: Record<string, unknown>): Promise<void> {
  const thread = await app.deps.journal.getThread(threadId);
  await app.deps.audit.append(lateResumeEntry(threadId, thread, action, { code: "INVISIBLE_CHARACTERS", reason }, { editedFields: fields }, app.deps.clock().toISOString()));
}

/** What a decision's evidence says happened: approved, rejected, edited, cancelled, expired, or refused. */
function decisionStage(e: { name: string; data: Record<string, unknown> }): string {
  if (e.data["verdict"] === "refused") return "refused";
  const type = /accepted-([a-z]+)/.exec(e.name)?.[1];
  const done: Record<string, string> = { approve: "approved", reject: "rejected", edit: "edited", cancel: "cancelled", expire: "expired" };
  return (type && done[type]) ?? "decided";
}

/** Said where the Approve button would be, when this user may decide but not approve. */
function notApprovableNote(why: NotApprovable | null, escalatedTo: string | null, what: string): Html {
  if (why === "edited" || why === "requested") {
    return html`<p class="waiting" role="status"><strong>Waiting for another approver.</strong> You ${why === "edited" ? "edited" : "requested"} ${what}, so under the policy's separation of duties someone else approves it. You may still reject${what === "this one" ? " or edit" : ""} it.</p>`;
  }
  return html`<p>You may not approve ${what}${escalatedTo ? html` (escalated to ${text(escalatedTo)})` : ""}.</p>`;
}

/** The requester's (or an approver's) cancel form, the same for a single approval and a change set. */
function cancelForm(attrs: Html, bound: Html): Html {
  return html`<details><summary>Cancel the request</summary><form ${attrs}>${bound}<input type="hidden" name="action" value="cancel">
          <label for="cancel-reason">Reason</label><input id="cancel-reason" name="reason" required maxlength="4000">
          <button type="submit" class="cancel">Cancel the request</button></form></details>`;
}

/**
 * The hidden inputs every decision form carries: the session's CSRF token and what the decision is bound to
 * (boundOf: the envelope's hash and nonce, or a change set's), plus the signature's slots when policy signs.
 */
function boundInputs(s: Session, action: ActionRow, sign: boolean): Html {
  const b = boundOf(action);
  return html`<input type="hidden" name="csrf" value="${s.csrf}">
    <input type="hidden" name="envelopeHash" value="${b.hash}">
    <input type="hidden" name="nonce" value="${b.nonce}">
    ${sign ? html`<input type="hidden" name="decidedAt" value=""><input type="hidden" name="signature" value="">` : ""}`;
}

/** Where a signing approver imports their key, when policy requires signed decisions. */
const SIGNING_KEY_IMPORT = html`<div class="signing"><p>Policy requires a signed decision. Your Ed25519 key stays in this browser (WebCrypto, not extractable) and is never sent.</p>
          <label for="key-file">Import your key once (the file from <code>keygen</code>)</label> <input type="file" id="key-file" accept=".key,.pem">
          <span id="key-status" aria-live="polite"></span></div>`;

/** The id of the per-action form; each action's controls (beside its card) belong to it through their form attribute. */
const PER_ACTION_FORM = "per-action-form";

/**
 * Each action's decision control, shown beside its card: approve / reject / edit, the feedback for a
 * rejection, what rejecting it does (said before submitting), and the values for an edit. Every input
 * belongs to the per-action form (setDecisionForms) through its form attribute. Empty when this user may
 * not decide.
 */
function perActionControls(app: App, action: ActionRow, members: ActionRow[], s: Session): Map<string, Html> {
  const may = entitlementOf(app, action, s.user);
  const out = new Map<string, Html>();
  if (!may.mayDecide) return out;
  const sign = app.deps.policy.requireSignature;
  const n = members.length;
  const f = PER_ACTION_FORM;
  const setActions = members.map((x) => ({ actionId: x.set?.actionId ?? "", envelope: x.envelope }));
  for (const m of members) {
    const id = m.set?.actionId ?? "";
    const e = m.envelope;
    // Said before submitting: what rejecting this action (approving the others) does, and who approves next.
    const ifRejected = n > 1 ? partialApprovalForecast(setActions, Object.fromEntries(setActions.map((x) => [x.actionId, x.actionId === id ? "reject" : "approve"])), app.deps.policy.partialExecution).summary : "";
    const choice = (t: PerActionType, label: string, disabled = false) =>
      html`<label class="choice" for="decision-${id}-${t}"><input type="radio" form="${f}" id="decision-${id}-${t}" name="decision.${id}" value="${t}" required${disabled ? html` disabled` : ""}> ${label}</label>`;
    const editInputs = Object.entries(e.params).map(([field, v]) =>
      typeof v === "string"
        ? html`<label for="edit-${id}-${field}">${field}</label><textarea form="${f}" id="edit-${id}-${field}" name="edit.${id}.field.${field}" rows="2">${v}</textarea>`
        : html`<label for="edit-${id}-${field}">${field} (JSON)</label><textarea form="${f}" id="edit-${id}-${field}" name="edit.${id}.json.${field}" rows="2">${JSON.stringify(v)}</textarea>`,
    );
    out.set(
      id,
      html`<fieldset class="per-action" form="${f}" data-action-id="${id}" data-task="${String(e.object.id)}" data-idarg="${OPERATIONS[e.operation].idArg}" data-operation="${e.operation}">
      <legend>Your decision on ${id}</legend>
      ${choice("approve", "Approve", !may.mayApprove)}${choice("reject", "Reject")}${choice("edit", "Edit")}
      ${ifRejected ? html`<p class="if-rejected" data-if-rejected="${id}">If you reject ${id} and approve the others: ${ifRejected}.</p>` : ""}
      <label for="message-${id}">Feedback if rejected (optional)</label><textarea form="${f}" id="message-${id}" name="message.${id}" rows="1" maxlength="4000"></textarea>
      <details><summary>Values for an edit of ${id} (the set becomes a new revision for another approver)</summary>${invisibleWarning(e.params)}${editInputs}</details>
      ${sign ? html`<input type="hidden" form="${f}" name="signature.${id}" value="">` : ""}
    </fieldset>`,
    );
  }
  return out;
}

/**
 * A change set's decision forms, every one bound to the SET's hash and nonce: approve all, reject
 * all, the per-action form (its controls are beside each action's card: perActionControls), cancel.
 */
function setDecisionForms(app: App, action: ActionRow, members: ActionRow[], s: Session, view: ThreadView, base: string): Html {
  const may = entitlementOf(app, action, s.user);
  const sign = app.deps.policy.requireSignature;
  const bound = boundInputs(s, action, sign);
  const formAttrs = (type: string) =>
    html`method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/decide" class="decision decision-${type}" data-sign="${sign ? "yes" : "no"}" data-thread="${view.threadId}" data-approver="${s.user}"`;
  const n = members.length;
  return html`<section class="decide" aria-label="Decide the change set">
    ${sign ? SIGNING_KEY_IMPORT : ""}
    <p>Every decision here names the set's hash and nonce: it covers exactly these ${n} actions in this order.</p>
    ${may.mayDecide
      ? html`<form id="${PER_ACTION_FORM}" ${formAttrs("per-action")}>${bound}<input type="hidden" name="action" value="per-action">
          <p>Your choices beside each action are sent together. Rejecting some is not an edit: your approvals of the others stand, and they run at once unless one depends on a rejected action (an earlier change to the same object) or the policy (<code>partialExecution</code>) keeps its class from running alone; then they come back as a new revision that any approver, you included, may approve. An edit always comes back for another approver.</p>
          <button type="submit">Submit these ${n} decisions together</button></form>`
      : ""}
    ${may.mayApprove
      ? html`<form ${formAttrs("approve")}>${bound}<input type="hidden" name="action" value="approve">
          <button type="submit" class="approve">Approve the whole set (${n} actions, in this order)</button></form>`
      : notApprovableNote(may.notApprovable, action.escalatedTo, "this change set")}
    ${may.mayDecide
      ? html`<form ${formAttrs("reject")}>${bound}<input type="hidden" name="action" value="reject">
          <label for="feedback">Reject the whole set, with feedback for a revised proposal (leave empty to end the run)</label>
          <textarea id="feedback" name="message" rows="2" maxlength="4000"></textarea>
          <button type="submit" class="reject">Reject the whole set</button></form>`
      : ""}
    ${may.mayCancel ? cancelForm(formAttrs("cancel"), bound) : ""}
  </section>`;
}

/** A change set decided action by action in an earlier revision: who decided it and how, per action. */
interface SetHistory {
  decided?: { setHash: string; approverId: string; perAction: Array<{ actionId: string; type: string; message?: string }> };
}

async function setHistoryOf(app: App, threadId: string): Promise<SetHistory> {
  const current = await app.deps.journal.currentAction(threadId);
  if (!current?.macValid) return {};
  for (const h of [...current.supersededHashes].reverse()) {
    const row = await app.deps.journal.getAction(h);
    const d = row?.macValid ? row.progress.decision : undefined;
    if (d?.setPlan) return { decided: { setHash: row!.set?.setHash ?? d.envelopeHash, approverId: d.approverId, perAction: d.setPlan.perAction } };
  }
  return {};
}

function decisionForms(app: App, action: NonNullable<Awaited<ReturnType<typeof waitingAction>>>, s: Session, view: ThreadView, base: string): Html {
  const may = entitlementOf(app, action, s.user);
  const sign = app.deps.policy.requireSignature;
  const bound = boundInputs(s, action, sign);
  const formAttrs = (type: string) =>
    html`method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/decide" class="decision decision-${type}" data-sign="${sign ? "yes" : "no"}" data-thread="${view.threadId}" data-approver="${s.user}" data-task="${String(action.envelope.object.id)}" data-idarg="${OPERATIONS[action.envelope.operation].idArg}" data-operation="${action.envelope.operation}"`;
  const editInputs = Object.entries(action.envelope.params).map(([f, v]) =>
    typeof v === "string"
      ? html`<label for="edit-${f}">${f}</label><textarea id="edit-${f}" name="field.${f}" rows="2">${v}</textarea>`
      : html`<label for="edit-${f}">${f} (JSON)</label><textarea id="edit-${f}" name="json.${f}" rows="2">${JSON.stringify(v)}</textarea>`,
  );
  return html`<section class="decide" aria-label="Decide">
    ${sign ? SIGNING_KEY_IMPORT : ""}
    ${may.mayApprove
      ? html`<form ${formAttrs("approve")}>${bound}<input type="hidden" name="action" value="approve">
          <button type="submit" class="approve">Approve exactly this envelope</button></form>`
      : notApprovableNote(may.notApprovable, action.escalatedTo, "this one")}
    ${may.mayDecide
      ? html`<form ${formAttrs("reject")}>${bound}<input type="hidden" name="action" value="reject">
          <label for="feedback">Reject, with feedback for a revised proposal (leave empty to end the run)</label>
          <textarea id="feedback" name="message" rows="2" maxlength="4000"></textarea>
          <button type="submit" class="reject">Reject</button></form>
        <details><summary>Edit the values</summary><form ${formAttrs("edit")}>${bound}<input type="hidden" name="action" value="edit">
          ${invisibleWarning(action.envelope.params)}${editInputs}<button type="submit">Submit the edit (it becomes a new revision for a fresh approval)</button></form></details>`
      : ""}
    ${may.mayCancel ? cancelForm(formAttrs("cancel"), bound) : ""}
  </section>`;
}

/**
 * A waiting structured question and a form generated from its answer schema (enum → select, number →
 * number input, string → text input). The question and fields come from the journal's questions
 * index; the form carries the askedAt of the question on screen, so an answer to a question replaced
 * meanwhile is refused. Validation is server-side, in check_input, as for the CLI's `answer`.
 */
async function questionSection(app: App, view: ThreadView, s: Session, base: string): Promise<Html> {
  const input = view.input!;
  const q = await app.deps.journal.getQuestion(view.threadId);
  const thread = await app.deps.journal.getThread(view.threadId);
  const fromJournal = q && q.askedAt === input.askedAt;
  const fields: Record<string, InputField> = fromJournal ? q.fields : {};
  const schema = (fromJournal ? answerJsonSchema(fields) : input.answerSchema) as { properties?: Record<string, { type?: string; enum?: string[]; description?: string }> };
  const question = fromJournal ? q.question : input.question;
  const controls = Object.entries(schema.properties ?? {}).map(([name, p]) => {
    const id = `answer-${name}`;
    const label = html`<label for="${id}">${name}${p.description ? html` <small>(${text(p.description)})</small>` : ""}</label>`;
    if (p.enum) {
      return html`${label}<select id="${id}" name="answer.${name}" required><option value="">choose…</option>${p.enum.map((v) => html`<option value="${v}">${text(v)}</option>`)}</select>`;
    }
    if (p.type === "number") return html`${label}<input id="${id}" name="answer.${name}" type="text" inputmode="decimal" required maxlength="64">`;
    return html`${label}<input id="${id}" name="answer.${name}" type="text" required maxlength="4000">`;
  });
  const may = mayAnswer(app, thread, s.user);
  return html`<section class="question" aria-labelledby="question-title" data-asked="${input.askedAt}">
    <h1 id="question-title">A question waits for an answer</h1>
    <p class="narration"><small>Asked by the agent (the model's words):</small></p>
    <blockquote><pre>${text(question)}</pre></blockquote>
    <dl class="facts">
      <dt>Request</dt><dd>${text(thread?.macValid ? thread.request : "—")}</dd>
      <dt>Requested by</dt><dd>${text(thread?.macValid ? thread.requestedBy : "—")}</dd>
      <dt>Asked at</dt><dd><time datetime="${input.askedAt}">${input.askedAt}</time></dd>
    </dl>
    ${input.lastRefusal ? html`<p class="refusal" role="alert"><strong>Last answer refused (${text(input.lastRefusal.code)}):</strong> ${text(input.lastRefusal.reason)}</p>` : ""}
    ${may
      ? html`<form method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/answer" class="answer">
          <input type="hidden" name="csrf" value="${s.csrf}">
          <input type="hidden" name="askedAt" value="${input.askedAt}">
          ${controls}
          <button type="submit" class="approve">Send the answer</button>
        </form>
        <p><small>Nothing is written by answering: the agent makes a proposal from it, which needs its own approval.</small></p>`
      : html`<p>You may not answer this question.</p>`}
  </section>`;
}

function outcomeSection(view: ThreadView, history: SetHistory = {}): Html {
  const s = view.state;
  if (view.status === "interrupted_run") return html`<h1>The run stopped between steps</h1><p>A worker or <code>recover</code> finishes it.</p>`;
  const partial = s?.outcome === "PARTIALLY_EXECUTED";
  const cs = view.changeSetOutcome;
  return html`<h1>Finished: <span class="outcome">${s?.outcome ?? "—"}</span></h1>
    ${partial
      ? html`<p class="refusal partial" role="alert"><strong>Partially executed:</strong> part of the change set was written and the set stopped at the first action that was not VERIFIED; the actions after it were not run. What was written stays written (see each action below).</p>`
      : ""}
    <dl class="facts"><dt>Reason</dt><dd>${s?.reasonCode ?? "—"}: ${text(s?.reason ?? "")}</dd>
    <dt>Finished at</dt><dd>${s?.finishedAt ?? "—"}</dd>
    <dt>Decision</dt><dd>${s?.decision ? html`${s.decision.type} by ${text(s.decision.approverId)} (identity ${s.decision.verifiedBy})` : "—"}</dd></dl>
    ${cs ? html`<h2>Change set of ${cs.actions.length} actions: how each ended</h2>${setOutcomeTable(cs.actions)}` : ""}
    ${history.decided
      ? html`<h2>Decided action by action</h2><p>By ${text(history.decided.approverId)}, on change set <code class="action-hash">${history.decided.setHash}</code>:</p>
        <ul class="per-action-decisions">${history.decided.perAction.map((p) => html`<li data-action-id="${p.actionId}"><strong>${p.actionId}</strong>: ${p.type}${p.message ? html` (${text(p.message)})` : ""}</li>`)}</ul>
        <p><small>The approved and edited actions became the next revision; the table above lists every action of the set, the rejected ones as REJECTED.</small></p>`
      : ""}`;
}

export async function startInbox(opts: InboxOptions): Promise<RunningInbox> {
  const host = opts.host ?? "127.0.0.1";
  let hosts = new Set<string>();
  const loopback = host === "localhost" || isLoopbackAddress(host);
  // Links only where the inbox listens on this computer's loopback address; never on an open one.
  const { signInLinks: given, ...rest } = opts;
  const links = loopback ? (given ?? new SignInLinks()) : undefined;
  const web = createInboxApp({ ...rest, ...(links ? { signInLinks: links } : {}) }, (h) => hosts.has(h));
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: web.fetch, port: opts.port ?? 0, hostname: host }, () => resolve(s as Server)) as Server;
    s.once("error", reject);
  });
  const port = (server.address() as AddressInfo).port;
  hosts = new Set([`${host}:${port}`, `127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return {
    url,
    signInLink(user) {
      if (!links) throw new Error(`one-time sign-in links are only for an inbox on this computer's loopback address, not ${host}`);
      const { token: t, expiresAt } = links.issue(user);
      return { url: `${url}/login/once/${t}`, expiresAt: new Date(expiresAt).toISOString() };
    },
    close: () =>
      new Promise<void>((resolve) => {
        // A request still being answered (a decision whose run has just ended: `npm start --inbox` sees
        // the outcome and closes the inbox) gets its answer; idle keep-alive connections go at once, and
        // anything still open after CLOSE_GRACE_MS is cut.
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
