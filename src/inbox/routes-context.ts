/**
 * The inbox's options and what its route groups (sign-in, threads, evidence) share.
 */
import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import type { App } from "../app/open-app.js";
import type { Html } from "./html.js";
import type { Session, Sessions, SignInLinks } from "./security.js";
import type { InboxUsers } from "./users.js";

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

export type Env = { Bindings: HttpBindings; Variables: { session: Session } };

/** The longest form value the inbox reads; anything longer is cut there. An edit's values are taken whole (editedFields). */
export const MAX_FIELD = 10_000;

/** What the inbox's route groups share: the app, the options, the sessions and the refusals every group gives. */
export interface RouteContext {
  app: App;
  opts: InboxOptions;
  /** Path prefix every link and form uses. */
  base: string;
  sessions: Sessions;
  /** Why a request that would change something comes from another site, or undefined. */
  crossSite(c: Context<Env>): string | undefined;
  /** A refusal page with its status. */
  refused(
    c: Context<Env>,
    status: 400 | 401 | 403 | 409 | 422 | 429,
    title: string,
    message: string | Html,
    user?: Session,
  ): Response | Promise<Response>;
  /** The refusal of a thread this user may not see. */
  notYours(c: Context<Env>, threadId: string): Response | Promise<Response>;
}
