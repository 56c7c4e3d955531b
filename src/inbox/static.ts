/**
 * The inbox's only script and stylesheet, served from /static (the Content-Security-Policy allows no
 * inline code). Plain browser JavaScript, no build step: expiry countdowns, list filters, live updates
 * over server-sent events, and signing with the approver's Ed25519 key held in this browser.
 */
export const CLIENT_JS = String.raw`"use strict";
(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  function tick() {
    const now = Date.now();
    for (const el of $$(".countdown[data-expires]")) {
      const left = Number(el.dataset.expires) - now;
      if (left <= 0) { el.textContent = el.dataset.style === "left" ? "expired" : "(expired)"; el.classList.add("expired"); continue; }
      const m = Math.floor(left / 60000), s = Math.floor((left % 60000) / 1000);
      if (el.dataset.style === "left") {
        // A list row: minutes are enough ("in 23 min", "in 2 h 5 min").
        const h = Math.floor(m / 60);
        el.textContent = m < 1 ? "in under a minute" : h < 1 ? "in " + m + " min" : h < 48 ? "in " + h + " h" + (m % 60 ? " " + (m % 60) + " min" : "") : "in " + Math.floor(h / 24) + " days";
      } else el.textContent = "(in " + (m > 0 ? m + " min " : "") + s + " s)";
    }
    // Every UTC time on the page also in the browser's local time, beside it.
    for (const t of $$("time[datetime]:not([data-local])")) {
      const d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      t.dataset.local = "yes";
      const span = document.createElement("span");
      span.className = "local-time";
      span.textContent = " (your time: " + d.toLocaleString() + ")";
      t.after(span);
    }
  }
  setInterval(tick, 1000);
  tick();

  function applyFilters() {
    const q = ($("#filter-text") || {}).value || "";
    const risk = ($("#filter-risk") || {}).value || "";
    for (const li of $$("#inbox-list li.item")) {
      const okText = !q || li.textContent.toLowerCase().includes(q.toLowerCase());
      const okRisk = !risk || (risk === "question" ? li.dataset.kind === "question" : li.dataset.risk === risk);
      li.hidden = !(okText && okRisk);
    }
    // The page links keep the filters, so the next page opens filtered alike.
    for (const a of $$("#inbox-list nav.pager a")) {
      const url = new URL(a.href);
      for (const [k, v] of [["q", q], ["risk", risk]]) { if (v) url.searchParams.set(k, v); else url.searchParams.delete(k); }
      a.href = url.pathname + url.search;
    }
  }
  for (const id of ["#filter-text", "#filter-risk"]) { const el = $(id); if (el) el.addEventListener("input", applyFilters); }
  applyFilters();

  const live = (msg) => { const el = $("#live-status"); if (el) el.textContent = msg; };
  if (document.body.dataset.user && window.EventSource) {
    const base = document.body.dataset.base || "";
    // A card watches its own thread; the list watches the page it shows.
    const card = $("#thread");
    const events = new EventSource(base + "/events" + (card ? "?thread=" + encodeURIComponent(card.dataset.thread) : location.search));
    events.addEventListener("inbox", async (ev) => {
      const data = JSON.parse(ev.data);
      const list = $("#inbox-list");
      if (list) {
        const res = await fetch(base + "/list" + location.search, { headers: { accept: "text/html" }, credentials: "same-origin" });
        if (res.ok) { list.innerHTML = await res.text(); applyFilters(); tick(); live("Inbox updated " + new Date().toLocaleTimeString()); }
      }
      const thread = $("#thread");
      if (thread && thread.dataset.hash) {
        const still = data.items.some((i) => i.threadId === thread.dataset.thread && i.envelopeHash === thread.dataset.hash);
        if (!still && !$("#changed-banner")) {
          const p = document.createElement("p");
          p.id = "changed-banner"; p.className = "refusal"; p.setAttribute("role", "alert");
          p.textContent = "This card changed or was decided elsewhere. A decision from this page will be refused. ";
          const a = document.createElement("a"); a.href = location.pathname; a.textContent = "Load the current card";
          p.appendChild(a);
          thread.prepend(p);
        }
      }
    });
  }

  // ── signing: the key is imported once into WebCrypto (not extractable) and kept in IndexedDB ──
  const DB = "action-envelope-keys";
  function db() {
    return new Promise((resolve, reject) => {
      const r = indexedDB.open(DB, 1);
      r.onupgradeneeded = () => r.result.createObjectStore("keys");
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
    });
  }
  async function keyOp(mode, fn) {
    const d = await db();
    return new Promise((resolve, reject) => {
      const tx = d.transaction("keys", mode);
      const req = fn(tx.objectStore("keys"));
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  const user = document.body.dataset.user;
  const keyStatus = (msg) => { const el = $("#key-status"); if (el) el.textContent = msg; };
  async function showKey() {
    if (!$("#key-status")) return;
    const k = await keyOp("readonly", (s) => s.get(user)).catch(() => undefined);
    keyStatus(k ? "A signing key for " + user + " is held in this browser." : "No signing key imported yet.");
  }
  showKey();
  const keyFile = $("#key-file");
  if (keyFile) keyFile.addEventListener("change", async () => {
    try {
      const pem = await keyFile.files[0].text();
      const b64 = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
      const der = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const key = await crypto.subtle.importKey("pkcs8", der, { name: "Ed25519" }, false, ["sign"]);
      await keyOp("readwrite", (s) => s.put(key, user));
      keyFile.value = "";
      keyStatus("Key imported for " + user + "; it stays in this browser and cannot be read back.");
    } catch (e) {
      keyStatus("Could not import the key: " + (e && e.message ? e.message : e));
    }
  });

  function jcs(v) {
    if (v === null || typeof v !== "object") return JSON.stringify(v);
    if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}";
  }
  for (const form of $$("form.decision[data-sign=yes]")) {
    form.addEventListener("submit", async (ev) => {
      const type = form.elements["action"].value;
      if (type === "cancel") return;
      ev.preventDefault();
      const key = await keyOp("readonly", (s) => s.get(user)).catch(() => undefined);
      if (!key) { keyStatus("Import your signing key first: this policy requires signed decisions."); return; }
      const decidedAt = new Date().toISOString();
      const signPayload = async (payload) => {
        const sig = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, key, new TextEncoder().encode(jcs(payload))));
        return btoa(String.fromCharCode.apply(null, Array.from(sig)));
      };
      const editedFields = (prefix) => {
        const fields = {};
        for (const el of Array.from(form.elements)) {
          if (!el.name || !el.name.startsWith(prefix)) continue;
          const name = el.name.slice(prefix.length);
          if (name.startsWith("field.")) fields[name.slice(6)] = el.value;
          else if (name.startsWith("json.")) fields[name.slice(5)] = JSON.parse(el.value);
        }
        return fields;
      };
      if (type === "per-action") {
        // A change set decided action by action: one signature per decision, each over the set's
        // hash and nonce with its actionId (the same canonical payload as signedPayloadOf).
        // Each action's controls sit beside its card and belong to this form through their form attribute.
        for (const fs of Array.from(form.elements).filter((el) => el.tagName === "FIELDSET" && el.dataset.actionId)) {
          const id = fs.dataset.actionId;
          const chosen = $("input[type=radio]:checked", fs);
          if (!chosen) continue;
          const payload = {
            envelopeHash: form.elements["envelopeHash"].value,
            nonce: form.elements["nonce"].value,
            threadId: form.dataset.thread,
            decision: chosen.value,
            approverId: form.dataset.approver,
            decidedAt: decidedAt,
            actionId: id,
          };
          const feedback = form.elements["message." + id] ? form.elements["message." + id].value.trim() : "";
          if (chosen.value === "reject" && feedback) payload.message = feedback;
          if (chosen.value === "edit") {
            payload.editedAction = { name: fs.dataset.operation || "update_task", args: { [fs.dataset.idarg || "taskId"]: Number(fs.dataset.task), fields: editedFields("edit." + id + ".") } };
          }
          form.elements["signature." + id].value = await signPayload(payload);
        }
        form.elements["decidedAt"].value = decidedAt;
        form.submit();
        return;
      }
      const payload = {
        envelopeHash: form.elements["envelopeHash"].value,
        nonce: form.elements["nonce"].value,
        threadId: form.dataset.thread,
        decision: type,
        approverId: form.dataset.approver,
        decidedAt: decidedAt,
      };
      // The server sends a rejection's feedback trimmed, and only when some is left: sign that text.
      const feedback = form.elements["message"] ? form.elements["message"].value.trim() : "";
      if (type === "reject" && feedback) payload.message = feedback;
      if (type === "edit") {
        payload.editedAction = { name: form.dataset.operation || "update_task", args: { [form.dataset.idarg || "taskId"]: Number(form.dataset.task), fields: editedFields("") } };
      }
      form.elements["decidedAt"].value = decidedAt;
      form.elements["signature"].value = await signPayload(payload);
      form.submit();
    });
  }
})();
`;

export const CLIENT_CSS = `
:root { color-scheme: light dark; --line: #8884; --warn: #b45309; --bad: #b91c1c; --ok: #15803d; }
* { box-sizing: border-box; }
body { font: 16px/1.45 system-ui, sans-serif; margin: 0; }
header.top { display: flex; flex-wrap: wrap; gap: .5rem 1rem; justify-content: space-between; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
header.top .brand { font-weight: 600; text-decoration: none; color: inherit; }
main { max-width: 70rem; margin: 0 auto; padding: 1rem; }
a:focus-visible, button:focus-visible, input:focus-visible, textarea:focus-visible, select:focus-visible, summary:focus-visible { outline: 3px solid #2563eb; outline-offset: 2px; }
button { font: inherit; padding: .45rem .9rem; border-radius: .3rem; border: 1px solid var(--line); cursor: pointer; }
button.approve { background: var(--ok); color: #fff; border-color: var(--ok); }
button.reject, button.cancel { background: var(--bad); color: #fff; border-color: var(--bad); }
label { display: block; margin: .5rem 0 .2rem; font-weight: 500; }
input, textarea, select { font: inherit; width: 100%; max-width: 40rem; padding: .35rem; }
form.signin { max-width: 22rem; } form.signin button { margin-top: .8rem; }
form.logout { display: flex; gap: .6rem; align-items: center; } form.logout button { padding: .2rem .6rem; }
.filters { display: flex; flex-wrap: wrap; gap: .3rem 1rem; align-items: end; } .filters input, .filters select { width: auto; }
nav.pager { display: flex; gap: 1rem; margin: .8rem 0; }
ul.inbox { list-style: none; padding: 0; }
ul.inbox li a { display: flex; flex-direction: column; flex-wrap: wrap; gap: .2rem .8rem; padding: .7rem; border: 1px solid var(--line); border-radius: .4rem; margin: .5rem 0; color: inherit; text-decoration: none; }
.risk { font-weight: 700; text-transform: uppercase; font-size: .8rem; padding: .05rem .4rem; border-radius: .2rem; border: 1px solid currentColor; }
.risk-high, .risk-critical { color: var(--bad); } .risk-question { color: #2563eb; }
form.answer { display: grid; gap: .3rem; justify-items: start; } form.answer button { margin-top: .6rem; } .risk-medium { color: var(--warn); } .risk-low { color: var(--ok); }
ul.inbox .head { display: flex; flex-wrap: wrap; gap: .2rem .6rem; align-items: baseline; } ul.inbox .what { font-weight: 600; }
ul.changes-short, ol.set-actions { margin: .1rem 0; padding-left: 1.2rem; } ul.changes-short { list-style: none; padding-left: 0; }
ul.changes-short .field { font-family: ui-monospace, monospace; font-size: .9rem; } ul.changes-short .old { text-decoration: line-through; opacity: .75; }
ul.inbox .meta { display: flex; flex-wrap: wrap; gap: .1rem .9rem; font-size: .9rem; }
.tags { display: flex; flex-wrap: wrap; gap: .3rem; } .tag { font-size: .8rem; padding: .05rem .45rem; border-radius: 1rem; border: 1px solid var(--warn); color: var(--warn); }
.tag-elsewhere { border-color: #2563eb; color: #2563eb; }
.local-time { font-size: .85rem; opacity: .8; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
code.hash { overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; } th, td { border: 1px solid var(--line); padding: .35rem; vertical-align: top; text-align: left; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font: 14px/1.4 ui-monospace, monospace; }
pre.card-text { padding: .6rem; border: 1px solid var(--line); }
mark.invisible { background: #fde047; color: #000; font-weight: 700; border-radius: .2rem; }
del.changed { background: #fecaca; color: #7f1d1d; text-decoration: line-through; }
ins.changed { background: #bbf7d0; color: #14532d; text-decoration: none; }
.warnings { border: 2px solid var(--warn); padding: .3rem .8rem; border-radius: .4rem; margin: .8rem 0; }
.refusal { border-left: 4px solid var(--bad); padding: .4rem .8rem; background: #fee2e2; color: #7f1d1d; }
.notice { border-left: 4px solid var(--ok); padding: .4rem .8rem; background: #dcfce7; color: #14532d; }
.notice.warn { border-left-color: var(--warn); background: #fef3c7; color: #78350f; }
section.card.with-control { display: grid; grid-template-columns: minmax(0, 1fr) minmax(16rem, 22rem); column-gap: 1rem; }
section.card.with-control > aside.action-control { grid-column: 2; grid-row: 1 / span 20; align-self: start; position: sticky; top: .5rem; }
section.card.with-control > :not(aside) { grid-column: 1; }
.expects-note { color: var(--warn); } tr.expects th { color: var(--warn); }
td.named pre { display: inline; } small.length { display: block; }
p.waiting { border-left: 4px solid var(--warn); padding: .4rem .8rem; }
section.revision-history { border: 1px dashed var(--line); border-radius: .4rem; padding: .2rem .8rem .6rem; margin-bottom: 1rem; }
.outcome-VERIFIED { color: var(--ok); } .outcome-NOT_EXECUTED, .outcome-INCONCLUSIVE { color: var(--warn); } .outcome-REJECTED_BY_TARGET, .outcome-VERIFICATION_FAILED, .outcome-INVARIANT_VIOLATION, .outcome-PARTIALLY_EXECUTED { color: var(--bad); }
.outcome { font-weight: 700; }
section.decide { margin-top: 1.2rem; display: grid; gap: .8rem; }
section.decide form { display: grid; gap: .3rem; justify-items: start; }
section.set { border: 2px solid var(--line); border-radius: .4rem; padding: .3rem .9rem; margin-bottom: 1rem; }
section.card.set-action { border-left: 4px solid var(--line); padding-left: .8rem; margin: 1rem 0; }
.chain-rule { font-weight: 500; }
fieldset.per-action { border: 1px solid var(--line); border-radius: .3rem; width: 100%; max-width: 42rem; }
label.choice { display: inline-flex; gap: .3rem; align-items: center; margin-right: 1rem; font-weight: 400; } label.choice input { width: auto; }
@media (max-width: 40rem) { dl.facts { grid-template-columns: 1fr; } section.card.with-control { display: block; } section.card.with-control > aside.action-control { position: static; } table.changes, table.changes tbody, table.changes tr, table.changes td, table.changes th, table.set-outcomes, table.set-outcomes tbody, table.set-outcomes tr, table.set-outcomes td, table.set-outcomes th { display: block; } table.changes thead, table.set-outcomes thead { display: none; }
  td[data-label]::before { content: attr(data-label); display: block; font-size: .8rem; font-weight: 600; opacity: .75; } }
`;
