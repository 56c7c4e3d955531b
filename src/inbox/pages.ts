/** Page layouts of the web inbox: plain server-rendered HTML, one script and one stylesheet from /static. */
import { objectNamed } from "../envelope/operations.js";
import { html, text, type Html } from "./html.js";
import type { InboxItem, QuestionItem } from "./queue.js";

/**
 * Every link and form action is under `base`: "" when the inbox has its own port, "/inbox" (say)
 * when it is mounted next to the LangGraph API (src/inbox/mount.ts).
 */
export function layout(title: string, body: Html, opts: { user?: string; csrf?: string; base?: string } = {}): string {
  const base = opts.base ?? "";
  return `<!doctype html>${html`<html lang="en">
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
  ${opts.user
    ? html`<form method="post" action="${base}/logout" class="logout"><span>Signed in as <strong>${text(opts.user)}</strong></span>
        <input type="hidden" name="csrf" value="${opts.csrf}"><button type="submit">Sign out</button></form>`
    : ""}
</header>
<main id="main">${body}</main>
</body>
</html>`.value}`;
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

export function listFragment(items: InboxItem[], questions: QuestionItem[] = [], base = ""): Html {
  if (items.length === 0 && questions.length === 0) return html`<p class="empty">Nothing is waiting for you.</p>`;
  const asked = questions.map(
    (q) => html`<li class="item question" data-kind="question" data-risk="" data-thread="${q.threadId}" data-asked="${q.askedAt}">
      <a href="${base}/t/${encodeURIComponent(q.threadId)}">
        <span class="risk risk-question">question</span>
        <span class="what">${text(q.question)}</span>
        <span class="who">requested by ${text(q.requestedBy || "—")} · ${Object.keys(q.fields).length} answer field(s)</span>
        <span class="when">asked <time datetime="${q.askedAt}">${q.askedAt}</time></span>
      </a>
    </li>`,
  );
  return html`<ul class="inbox">${asked}${items.map(
    (i) => html`<li class="item${i.actions ? " set" : ""}" data-risk="${i.risk}" data-thread="${i.threadId}" data-hash="${i.envelopeHash}"${i.actions ? html` data-kind="set"` : ""}>
      <a href="${base}/t/${encodeURIComponent(i.threadId)}">
        <span class="risk risk-${i.risk}">${i.risk}</span>
        ${i.actions
          ? html`<span class="what">change set of ${i.actions.length} actions, in order: ${i.actions.map((a, n) => html`${n ? "; " : ""}${a.actionId} ${a.operation} · ${objectNamed(a.operation, a.taskId)} · ${a.fields.join(", ")}`)}</span>`
          : html`<span class="what">${i.operation} · ${objectNamed(i.operation, i.taskId)} · ${i.fields.join(", ")}</span>`}
        <span class="who">requested by ${text(i.requestedBy)} · revision ${i.revision}</span>
        <span class="when">expires <span class="countdown" data-expires="${String(Date.parse(i.expiresAt))}">${i.expiresAt}</span></span>
        ${i.escalatedTo ? html`<span class="flag">escalated to ${text(i.escalatedTo)}</span>` : ""}
        ${i.lastRefusal ? html`<span class="flag">last decision refused: ${text(i.lastRefusal.code)}</span>` : ""}
        ${!i.mayDecide ? html`<span class="flag">your request: you may cancel it</span>` : !i.mayApprove ? html`<span class="flag">you may reject or edit, not approve</span>` : ""}
      </a>
    </li>`,
  )}</ul>`;
}

export function inboxPage(user: string, csrf: string, items: InboxItem[], questions: QuestionItem[] = [], base = ""): string {
  return layout(
    "Inbox",
    html`<h1>Waiting for your decision</h1>
    <div class="filters" role="search">
      <label for="filter-text">Filter</label>
      <input id="filter-text" type="search" placeholder="task, deal, field, requester">
      <label for="filter-risk">Risk</label>
      <select id="filter-risk"><option value="">any</option><option>low</option><option>medium</option><option>high</option><option>critical</option><option value="question">questions</option></select>
    </div>
    <p class="live" aria-live="polite" id="live-status"></p>
    <div id="inbox-list" data-live="list">${listFragment(items, questions, base)}</div>`,
    { user, csrf, base },
  );
}
