/** Page layouts of the web inbox: plain server-rendered HTML, one script and one stylesheet from /static. */
import { html, markedHtml, text, type Html } from "./html.js";
import { expiresIn, type ChangeLine } from "./summary.js";
import { requesterVerificationText } from "../envelope/envelope.js";
import type { InboxItem, QuestionItem } from "./queue.js";
import type { InboxListPage } from "./list-page.js";

/** Where a list page sits: its damaged rows and next cursor, whether it is past the first, and the filters to keep in its links. */
export interface ListPaging {
  damaged: InboxListPage["damaged"];
  next: string | null;
  paged: boolean;
  filters: ListFilters;
}

/** The list's text and risk filters, as the page's query string carries them (`?q=&risk=`). */
export interface ListFilters {
  q?: string;
  risk?: string;
}

/** A list link: the cursor (if any) and the filters, as a query string under `base`. */
function listHref(base: string, cursor: string | undefined, f: ListFilters): string {
  const params = new URLSearchParams();
  if (cursor !== undefined) params.set("cursor", cursor);
  if (f.q) params.set("q", f.q);
  if (f.risk) params.set("risk", f.risk);
  const query = params.toString();
  return `${base}/${query ? `?${query}` : ""}`;
}

/** The damaged rows of a page and the links to the first and the next page. */
function pager(p: ListPaging, base: string): Html {
  const damaged = p.damaged.length
    ? html`<div class="refusal damaged" role="alert"><p>${p.damaged.length} waiting row(s) fail their integrity check (the journal seal) and are not listed as approvals:</p>
        <ul>${p.damaged.map((d) => html`<li data-damaged-thread="${d.threadId}">thread ${text(d.threadId)} · ${text(d.envelopeHash)}</li>`)}</ul></div>`
    : "";
  const links = [
    p.paged ? html`<a class="first-page" href="${listHref(base, undefined, p.filters)}">First page</a>` : "",
    p.next !== null
      ? html`<a class="next-page" rel="next" href="${listHref(base, p.next, p.filters)}">Next page</a>`
      : "",
  ];
  return html`${damaged}${p.paged || p.next !== null ? html`<nav class="pager">${links}</nav>` : ""}`;
}

/**
 * Every link and form action is under `base`: "" when the inbox has its own port, "/inbox" (say)
 * when it is mounted next to the LangGraph API (src/inbox/mount.ts).
 */
export function layout(
  title: string,
  body: Html,
  opts: { user?: string; csrf?: string; base?: string } = {},
): string {
  const base = opts.base ?? "";
  return `<!doctype html>${
    html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · action-envelope inbox</title>
<link rel="stylesheet" href="${base}/static/inbox.css">
<script src="${base}/static/inbox.js" defer></script>
</head>
<body data-base="${base}"${opts.user ? html` data-user="${opts.user}"` : ""}>
<header class="top">
  <a href="${base}/" class="brand">action-envelope · approvals</a>
  ${
    opts.user
      ? html`<form method="post" action="${base}/logout" class="logout"><span>Signed in as <strong>${text(opts.user)}</strong></span>
        <input type="hidden" name="csrf" value="${opts.csrf}"><button type="submit">Sign out</button></form>`
      : ""
  }
</header>
<main id="main">${body}</main>
</body>
</html>`.value
  }`;
}

export function signInPage(loginToken: string, message?: string, base = ""): string {
  return layout(
    "Sign in",
    html`<h1>Sign in to approve</h1>
    ${message ? html`<p class="refusal" role="alert">${message}</p>` : ""}
    <form method="post" action="${base}/login" class="signin">
      <input type="hidden" name="csrf" value="${loginToken}">
      <label for="user">Approver id</label>
      <input id="user" name="user" autocomplete="username" required maxlength="128" autofocus>
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
      <button type="submit">Sign in</button>
    </form>`,
    { base },
  );
}

export function listFragment(
  items: InboxItem[],
  questions: QuestionItem[] = [],
  base = "",
  paging?: ListPaging,
): Html {
  const after = paging ? pager(paging, base) : "";
  if (items.length === 0 && questions.length === 0)
    return html`<p class="empty">${paging?.paged ? "Nothing more is waiting for you." : "Nothing is waiting for you."}</p>${after}`;
  const asked = questions.map(
    (
      q,
    ) => html`<li class="item question" data-kind="question" data-risk="" data-thread="${q.threadId}" data-asked="${q.askedAt}">
      <a href="${base}/t/${encodeURIComponent(q.threadId)}">
        <span class="risk risk-question">question</span>
        <span class="what">${text(q.question)}</span>
        <span class="who">requested by ${text(q.requestedBy || "—")} · ${Object.keys(q.fields).length} answer field(s)</span>
        <span class="when">asked <time datetime="${q.askedAt}">${q.askedAt}</time></span>
      </a>
    </li>`,
  );
  return html`<ul class="inbox">${asked}${items.map((i) => listRow(i, base))}</ul>${after}`;
}

/** A change as `FIELD: old → new`, each value shortened (src/inbox/summary.ts). */
function changeList(changes: ChangeLine[]): Html {
  return html`<ul class="changes-short">${changes.map((c) => html`<li><span class="field">${c.field}</span>: <span class="old">${markedHtml(c.before)}</span> → <span class="new">${markedHtml(c.after)}</span></li>`)}</ul>`;
}

/**
 * One waiting approval: what it acts on (title as read) and each change, who asked and when, how long
 * until it expires, and tags for what this user can do with it: approve, or only wait for another
 * approver (they requested or edited it, or it is escalated elsewhere), or decide it on the API server.
 */
function listRow(i: InboxItem, base: string): Html {
  const tags: Html[] = [];
  if (i.elsewhere) tags.push(html`<span class="tag tag-elsewhere">decide on the API server</span>`);
  if (!i.mayApprove) tags.push(html`<span class="tag tag-waiting">waiting for another approver</span>`);
  if (i.notApprovable === "edited") tags.push(html`<span class="tag tag-edited">you edited this</span>`);
  if (i.notApprovable === "requested" || !i.mayDecide)
    tags.push(
      html`<span class="tag tag-mine">your request${i.mayCancel ? ": you may cancel it" : ""}</span>`,
    );
  if (i.escalatedTo) tags.push(html`<span class="tag">escalated to ${text(i.escalatedTo)}</span>`);
  if (i.lastRefusal)
    tags.push(html`<span class="tag">last decision refused: ${text(i.lastRefusal.code)}</span>`);
  const what = i.actions
    ? html`<span class="what">change set of ${i.actions.length} actions, in order</span>
        <ol class="set-actions">${i.actions.map((a) => html`<li data-action-id="${a.actionId}"><strong>${a.actionId}</strong> ${a.operation} · ${markedHtml(a.title)}${changeList(a.changes)}</li>`)}</ol>`
    : html`<span class="what">${markedHtml(i.title)} <small>· ${i.operation}</small></span>${changeList(i.changes)}`;
  return html`<li class="item${i.actions ? " set" : ""}" data-risk="${i.risk}" data-thread="${i.threadId}" data-hash="${i.envelopeHash}"${i.actions ? html` data-kind="set"` : ""} data-expires-at="${i.expiresAt}">
      <a href="${base}/t/${encodeURIComponent(i.threadId)}">
        <span class="head"><span class="risk risk-${i.risk}">${i.risk}</span> ${what}</span>
        <span class="meta">
          <span class="who">requested by ${text(i.requestedBy)} <small class="requester-verification">(${requesterVerificationText(i.requesterVerifiedBy)})</small></span>
          <span class="when">requested <time datetime="${i.createdAt}">${i.createdAt}</time></span>
          <span class="expires">expires <span class="countdown" data-expires="${String(Date.parse(i.expiresAt))}" data-style="left">${expiresIn(i.expiresAt, new Date())}</span></span>
          ${i.revision > 1 ? html`<span class="revision">revision ${i.revision}</span>` : ""}
        </span>
        ${tags.length ? html`<span class="tags">${tags}</span>` : ""}
      </a>
    </li>`;
}

export function inboxPage(
  user: string,
  csrf: string,
  items: InboxItem[],
  questions: QuestionItem[] = [],
  base = "",
  paging?: ListPaging,
): string {
  const f = paging?.filters ?? {};
  const risks = ["low", "medium", "high", "critical"];
  return layout(
    "Inbox",
    html`<h1>Waiting for your decision</h1>
    <div class="filters" role="search">
      <label for="filter-text">Filter</label>
      <input id="filter-text" type="search" placeholder="task, deal, field, requester" value="${f.q ?? ""}">
      <label for="filter-risk">Risk</label>
      <select id="filter-risk"><option value="">any</option>${risks.map((r) => html`<option${f.risk === r ? html` selected` : ""}>${r}</option>`)}<option value="question"${f.risk === "question" ? html` selected` : ""}>questions</option></select>
    </div>
    <p class="live" aria-live="polite" id="live-status"></p>
    <div id="inbox-list" data-live="list">${listFragment(items, questions, base, paging)}</div>`,
    { user, csrf, base },
  );
}
