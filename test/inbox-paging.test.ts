/**
 * The web inbox's list pages through the journal's keyset order over HTTP: 50 approvals a page and a
 * "Next page" link carrying the opaque cursor and the list's filters; following the links visits
 * every approval once; a forged cursor is a 400 page; a row whose seal fails is named on the page
 * where it lies and no page moves. Real inbox server, SQLite stores, rows registered and sealed by
 * the real journal.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RegisteredAction } from "../src/store/action-machine.js";
import { PASSWORDS, startInboxWorld, type InboxWorld } from "./support/inbox.js";
import { journalSql } from "./support/harness.js";
import { testAction } from "./support/journal-rows.js";

let w: InboxWorld;
const rows: RegisteredAction[] = [];
const T0 = Date.parse("2026-03-01T00:00:00.000Z");
const COUNT = 120;

/** Registers a waiting approval of demo-user's through the journal (sealed with its key) at T0 + `second` s. */
async function register(name: string, second: number): Promise<RegisteredAction> {
  const hash = `sha256:${Buffer.from(name).toString("hex").padEnd(64, "0")}`;
  const at = new Date(T0 + second * 1000).toISOString();
  const base = testAction(`thread-${name}`, hash, {
    nonce: `n-${name}`,
    createdAt: at,
    expiresAt: "2099-01-01T00:00:00.000Z",
  });
  const a: RegisteredAction = {
    ...base,
    envelope: {
      ...base.envelope,
      requestedBy: "demo-user",
      baseline: { values: { TITLE: `title ${name}` }, fingerprints: {} },
      risk: { level: "medium", reversibility: "reversible" },
    } as never,
  };
  await w.app.deps.journal.registerThread({
    threadId: a.threadId,
    request: "test",
    requestedBy: "demo-user",
    scope: {},
    createdAt: at,
  });
  await w.app.deps.journal.registerAction(a, at);
  return a;
}

beforeAll(async () => {
  w = await startInboxWorld({ 4: "Quarterly plan" });
  for (let i = 0; i < COUNT; i++) rows.push(await register(`p${String(i).padStart(3, "0")}`, i));
});
afterAll(async () => {
  await w?.close();
});

/** A signed-in browser without a browser: cookies kept, redirects not followed. */
async function signedIn(user: string): Promise<(path: string) => Promise<Response>> {
  const cookies = new Map<string, string>();
  const req = async (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set("cookie", [...cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    headers.set("accept", "text/html");
    const res = await fetch(w.inbox.url + path, { ...init, headers, redirect: "manual" });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      if (/max-age=0/i.test(c)) cookies.delete(pair!.slice(0, eq));
      else cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    return res;
  };
  const login = await (await req("/login")).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(login)![1]!;
  const res = await req("/login", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ csrf, user, password: PASSWORDS[user]! }).toString(),
  });
  expect(res.status).toBe(303);
  return req;
}

interface Page {
  threads: string[];
  damaged: string[];
  next: string | null;
}

const unescape = (s: string) => s.replaceAll("&amp;", "&");

function pageOf(body: string): Page {
  const next = /<a class="next-page" rel="next" href="([^"]+)"/.exec(body)?.[1];
  return {
    threads: [...body.matchAll(/<li class="item[^"]*" data-risk="[^"]*" data-thread="([^"]+)"/g)].map(
      (m) => m[1]!,
    ),
    damaged: [...body.matchAll(/data-damaged-thread="([^"]+)"/g)].map((m) => m[1]!),
    next: next === undefined ? null : unescape(next),
  };
}

/** Every page from `first`, following "Next page" links. */
async function allPages(req: (path: string) => Promise<Response>, first = "/"): Promise<Page[]> {
  const pages: Page[] = [];
  let at: string | null = first;
  while (at !== null) {
    const res = await req(at);
    expect(res.status).toBe(200);
    const page = pageOf(await res.text());
    pages.push(page);
    at = page.next;
    if (pages.length > 10) throw new Error("more pages than approvals allow");
  }
  return pages;
}

const names = (from: number, to: number) => rows.slice(from, to).map((r) => r.threadId);

describe("inbox list paging", () => {
  it("shows 50 approvals a page with a next link; following the links lists every approval exactly once", async () => {
    const req = await signedIn("alice");
    const pages = await allPages(req);
    expect(pages.map((p) => p.threads.length)).toEqual([50, 50, 20]);
    expect(pages[0]!.next).toMatch(/^\/\?cursor=[A-Za-z0-9_-]+$/);
    expect(pages[2]!.next).toBeNull();
    const listed = pages.flatMap((p) => p.threads);
    expect(new Set(listed).size).toBe(COUNT);
    expect([...listed].sort()).toEqual(names(0, COUNT).sort());
    // Pages follow the registration order: the first 50 registered are the first page.
    expect([...pages[0]!.threads].sort()).toEqual(names(0, 50).sort());
    // The live list fragment reads the same page.
    const fragment = pageOf(await (await req(`/list?cursor=${pages[0]!.next!.split("=")[1]}`)).text());
    expect(fragment.threads).toEqual(pages[1]!.threads);
  });

  it("keeps the list's filters in the page links and on the filter controls", async () => {
    const req = await signedIn("bob");
    const body = await (await req("/?q=task%204&risk=medium")).text();
    const page = pageOf(body);
    expect(page.next ?? "").toMatch(/^\/\?cursor=[A-Za-z0-9_-]+&q=task\+4&risk=medium$/);
    expect(body).toContain(
      'id="filter-text" type="search" placeholder="task, deal, field, requester" value="task 4"',
    );
    expect(body).toContain("<option selected>medium</option>");
    const second = await (await req(page.next!)).text();
    expect(second).toMatch(/<a class="first-page" href="\/\?q=task\+4&amp;risk=medium">/);
  });

  it("answers a cursor no page printed with 400 and an escaped message", async () => {
    const req = await signedIn("alice");
    const forged = Buffer.from(JSON.stringify({ after: "<b>x</b>" })).toString("base64url");
    for (const cursor of ["<script>alert(1)</script>", forged]) {
      for (const path of ["/", "/list"]) {
        const res = await req(`${path}?cursor=${encodeURIComponent(cursor)}`);
        expect(res.status).toBe(400);
        const body = await res.text();
        expect(body).toContain("expected a cursor as a page printed it");
        expect(body).not.toContain("<script>alert");
        expect(body).not.toContain('data-thread="');
      }
    }
    // Signed out, a cursor changes nothing: the sign-in page comes first.
    const anon = await fetch(`${w.inbox.url}/?cursor=x`, {
      redirect: "manual",
      headers: { accept: "text/html" },
    });
    expect(anon.status).not.toBe(200);
    expect(anon.status).not.toBe(400);
  });

  it("a requester sees their own requests paged alike; someone who may see none gets an empty page", async () => {
    const own = await allPages(await signedIn("demo-user"));
    expect(own.map((p) => p.threads.length)).toEqual([50, 50, 20]);
    const none = await allPages(await signedIn("mallory"));
    expect(none).toEqual([{ threads: [], damaged: [], next: null }]);
  });

  it("the live stream watches the tab's page or card: a card beyond the first page is still seen as waiting", async () => {
    const req = await signedIn("alice");
    /** The thread ids of the first "inbox" event of /events`query`. */
    const firstEvent = async (query: string): Promise<string[]> => {
      const res = await req(`/events${query}`);
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (!/event: inbox\ndata: .*\n/.test(text)) text += decoder.decode((await reader.read()).value);
      await reader.cancel();
      const data = JSON.parse(/event: inbox\ndata: (.*)\n/.exec(text)![1]!) as {
        items: Array<{ threadId: string }>;
      };
      return data.items.map((i) => i.threadId);
    };
    const late = rows[110]!.threadId;
    const first = await firstEvent("");
    expect(first).toHaveLength(50);
    expect(first).not.toContain(late);
    expect(await firstEvent(`?thread=${late}`)).toEqual([late]);
    const pages = await allPages(req);
    expect(new Set(await firstEvent(pages[1]!.next!.slice(1)))).toEqual(new Set(pages[2]!.threads));
    expect((await req("/events?cursor=forged")).status).toBe(400);
  });

  it("names a damaged row on the page where it lies and moves no page", async () => {
    const req = await signedIn("alice");
    const before = await allPages(req);
    const victim = rows[60]!;
    expect(before[1]!.threads).toContain(victim.threadId);
    await journalSql(w.dataDir, "UPDATE T.actions SET mac = ? WHERE envelope_hash = ?", [
      "0".repeat(64),
      victim.envelopeHash,
    ]);
    const after = await allPages(req);
    // The first page and its cursor are unchanged; the row is named where it lies and not listed.
    expect(after[0]).toEqual(before[0]);
    expect(after[1]!.damaged).toEqual([victim.threadId]);
    expect(after[1]!.threads).not.toContain(victim.threadId);
    expect(after[1]!.threads).toHaveLength(50);
    expect(after.flatMap((p) => p.damaged)).toEqual([victim.threadId]);
    const listed = after.flatMap((p) => p.threads);
    expect(new Set(listed).size).toBe(COUNT - 1);
    expect(listed).not.toContain(victim.threadId);
    // A reader holding the third page's cursor from before the damage continues where they were.
    const resumed = pageOf(await (await req(before[1]!.next!)).text());
    expect(resumed).toEqual(before[2]);
  });
});
