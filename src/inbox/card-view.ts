/**
 * The card page's content, from the journal's registered action only: the card exactly as registered
 * (the same text the CLI prints), then each change as before → requested with the changed characters
 * highlighted, the fields that must stay unchanged, and the warnings the renderer raises for invisible,
 * bidi and confusable characters. Values go through the card's own renderer (src/envelope/card.ts), so
 * a character a person cannot see is a visible ⟨U+XXXX⟩ marker here too.
 */
import { renderCard, renderValue } from "../envelope/card.js";
import { enumLabel } from "../envelope/fields.js";
import { OPERATIONS, objectNamed, operationSpec } from "../envelope/operations.js";
import { deletedLabelOf } from "../envelope/deleted.js";
import { personNote } from "../envelope/people.js";
import { requesterVerificationOf, requesterVerificationText } from "../envelope/envelope.js";
import type { ActionRow } from "../store/action-machine.js";
import { html, markedHtml, raw, rendered, text, type Html } from "./html.js";

const MARKER_OR_CHAR = /⟨U\+[0-9A-F]{4,6}⟩|[\s\S]/gu;

/** Display text as tokens: a marker counts as one character, so a highlight never splits one. */
function tokens(display: string): string[] {
  return display.match(MARKER_OR_CHAR) ?? [];
}

/**
 * Before and after with the differing middle highlighted (common prefix and suffix kept plain): the
 * smallest honest highlight without a diff library; everything between the first and last differing
 * character is marked.
 */
export function diffPair(before: string, after: string): { before: Html; after: Html } {
  const a = tokens(before);
  const b = tokens(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  const mid = (t: string[], tag: "del" | "ins") => {
    const changed = t.slice(start, t.length - end).join("");
    return changed ? html`<${raw(tag)} class="changed">${markedHtml(changed)}</${raw(tag)}>` : html``;
  };
  const wrap = (t: string[], tag: "del" | "ins") =>
    html`${markedHtml(t.slice(0, start).join(""))}${mid(t, tag)}${markedHtml(t.slice(t.length - end).join(""))}`;
  return { before: wrap(a, "del"), after: wrap(b, "ins") };
}

function display(value: unknown, label: string): { text: string; block: boolean; length?: number } {
  const r = renderValue(value, label);
  return { text: r.lines.join("\n"), block: r.block, ...(r.length !== undefined ? { length: r.length } : {}) };
}

/** For an action of a change set: its id and position, so its card is labelled and its ids are unique on the page. */
export interface MemberLabel {
  actionId: string;
  position: number;
  total: number;
}

export function cardSection(action: ActionRow, member?: MemberLabel): Html {
  const e = action.envelope;
  const titleId = member ? `card-title-${member.actionId}` : "card-title";
  const people = action.people?.names;
  const { warnings } = renderCard(e, action.envelopeHash, "text", people ? { people } : {});
  // The name next to a code or user id (PRIORITY "2" → high, RESPONSIBLE_ID "5" → Elena Kuznetsova),
  // from the names recorded with the card; escaped like every value.
  const nameOf = (field: string, value: unknown, label: string) => {
    const name = enumLabel(field, value) ?? personNote(field, value, people);
    return name === undefined ? "" : html` <small class="value-name">(${markedHtml(display(name, `${label} name`).text.replace(/^"|"$/g, ""))})</small>`;
  };
  // A created object (a comment, a task) has no value before it: only the values it is made with.
  const effect = OPERATIONS[e.operation].effect;
  const create = effect === "create" || effect === "create_child";
  const makes = OPERATIONS[e.operation].creates;
  const created = makes === "task_comment" ? "comment" : makes ?? "object";
  // A comment is posted; a task is created.
  const madeVerb = makes === "task_comment" ? "posted" : "created";
  // A delete writes nothing: what it removes is shown with its values as read now.
  const deleting = effect === "delete";
  const deletedRows = deleting
    ? [...e.comparedFields, ...e.invariantFields].map((f) => html`<tr><th scope="row">${f}</th><td><pre class="value before">${markedHtml(display(e.baseline.values[f], `${f} (now)`).text)}</pre>${nameOf(f, e.baseline.values[f], `${f} (now)`)}</td><td><em>deleted</em></td></tr>`)
    : [];
  const deletedWhat = deletedLabelOf(e) ?? "";
  const changes = deleting ? deletedRows : Object.entries(e.params).map(([field, value]) => {
    if (create) {
      const after = display(value, `${field} (requested)`);
      return html`<tr>
        <th scope="row">${field}</th>
        <td><em>new ${created}</em></td>
        <td><pre class="value after">${markedHtml(after.text)}</pre>${after.length !== undefined ? html`<small>${after.length} characters</small>` : ""}</td>
      </tr>`;
    }
    const before = display(e.baseline.values[field], `${field} (before)`);
    const after = display(value, `${field} (requested)`);
    const d = diffPair(before.text, after.text);
    return html`<tr>
        <th scope="row">${field}</th>
        <td><pre class="value before">${d.before}</pre>${nameOf(field, e.baseline.values[field], `${field} (before)`)}</td>
        <td><pre class="value after">${d.after}</pre>${nameOf(field, value, `${field} (requested)`)}${after.length !== undefined ? html`<small>${after.length} characters</small>` : ""}</td>
      </tr>`;
  });
  const invariants = e.invariantFields.map((f) => html`<tr><th scope="row">${f}</th><td><pre class="value">${markedHtml(display(e.baseline.values[f], `${f} (must stay)`).text)}</pre>${nameOf(f, e.baseline.values[f], `${f} (must stay)`)}</td></tr>`);
  const expiresMs = Date.parse(e.expiresAt);
  return html`<section class="card${member ? " set-action" : ""}" aria-labelledby="${titleId}" data-envelope-hash="${action.envelopeHash}"${member ? html` data-action-id="${member.actionId}"` : ""}>
    <h2 id="${titleId}">${member ? html`<span class="action-id">${member.position} of ${member.total} · ${member.actionId}</span> ` : ""}${actsOn(e.operation, e.object.id)} · revision ${e.revision}</h2>
    <dl class="facts">
      <dt>Risk</dt><dd><span class="risk risk-${e.risk.level}">${e.risk.level}</span> · ${e.risk.reversibility}</dd>
      <dt>Requested by</dt><dd>${text(e.requestedBy)} <small class="requester-verification">(${requesterVerificationText(requesterVerificationOf(e))})</small></dd>
      ${e.editedBy ? html`<dt>Edited by</dt><dd>${text(e.editedBy)}</dd>` : ""}
      ${action.escalatedTo ? html`<dt>Escalated to</dt><dd>group ${text(action.escalatedTo)} (only its members may approve)</dd>` : ""}
      <dt>Policy</dt><dd>${text(e.policy.id)}@${text(e.policy.version)}</dd>
      <dt>Expires</dt><dd><time datetime="${e.expiresAt}" data-expires="${String(expiresMs)}">${e.expiresAt}</time> <span class="countdown" data-expires="${String(expiresMs)}"></span></dd>
      <dt>${member ? "Action envelope hash" : "Envelope hash"}</dt><dd><code class="${member ? "action-hash" : "hash"}">${action.envelopeHash}</code>${member ? html` <small>(a decision names the set's hash, above)</small>` : ""}</dd>
    </dl>
    ${action.progress.lastRefusal && !member
      ? html`<p class="refusal" role="alert"><strong>Last decision refused (${text(action.progress.lastRefusal.code)}):</strong> ${text(action.progress.lastRefusal.reason)}</p>`
      : ""}
    ${warnings.length
      ? html`<div class="warnings" role="alert"><h3>⚠ Warnings (${warnings.length}): look closely before approving</h3><ul>${warnings.map((w) => html`<li>${rendered(w)}</li>`)}</ul></div>`
      : ""}
    <h3>${deleting ? `Delete ${deletedWhat}: cannot be undone; what is deleted, as read when the envelope was made` : create ? `New ${created}: what will be ${madeVerb} (there is no value before it)` : `Changes: value read from the ${e.object.type} when the envelope was made → value to write`}</h3>
    <table class="changes"><thead><tr><th scope="col">Field</th><th scope="col">${deleting ? "Now" : "Before"}</th><th scope="col">Requested</th></tr></thead><tbody>${changes}</tbody></table>
    ${deleting ? "" : html`<h3>Must stay unchanged (${e.invariantFields.length})</h3>
    <table class="invariants"><tbody>${invariants}</tbody></table>`}
    ${member ? "" : html`<details><summary>The card exactly as registered in the journal (the same text the CLI shows)</summary><pre class="card-text">${rendered(action.card)}</pre></details>`}
  </section>`;
}

/** An operation with what it acts on, for a heading: "update_task on task 4", "add_task making a new task". */
function actsOn(operation: string, objectId: number): string {
  return `${operation} ${operationSpec(operation)?.effect === "create" ? "making" : "on"} ${objectNamed(operation, objectId)}`;
}

/** The chain rule, in one sentence, as the set's card states it. */
export const CHAIN_RULE =
  "The actions run one after another in this order; the set stops at the first action that is not VERIFIED, and the actions after it are not run.";

/**
 * A change set waiting for approval: its header (the set's hash, which a decision names, its risk =
 * the riskiest action's, its expiry = the earliest action's, the order and the chain rule), then every
 * action's card in order (changes, or the new comment; what must stay unchanged), then the set's card
 * text exactly as registered. From the journal's rows only.
 */
export function setSection(head: ActionRow, members: ActionRow[]): Html {
  const m = head.set!;
  const s = m.set;
  const expiresMs = Date.parse(s.expiresAt);
  const order = s.actions.map(
    (a) => html`<li data-action-id="${a.actionId}"><strong>${a.actionId}</strong>: ${actsOn(a.operation, a.object.id)} <small>(${a.reversibility})</small></li>`,
  );
  const last = head.progress.lastRefusal;
  return html`<section class="set" aria-labelledby="set-title" data-set-hash="${m.setHash}">
    <h2 id="set-title">Change set of ${s.actions.length} actions · revision ${s.revision}</h2>
    <p class="chain-rule"><strong>Chain rule:</strong> ${CHAIN_RULE}</p>
    <dl class="facts">
      <dt>Risk</dt><dd><span class="risk risk-${s.risk.level}">${s.risk.level}</span> · ${s.risk.reversibility} <small>(the riskiest action's)</small></dd>
      <dt>Requested by</dt><dd>${text(s.requestedBy)} <small class="requester-verification">(${requesterVerificationText(requesterVerificationOf(s))})</small></dd>
      ${s.editedBy ? html`<dt>Edited by</dt><dd>${text(s.editedBy)}</dd>` : ""}
      ${head.escalatedTo ? html`<dt>Escalated to</dt><dd>group ${text(head.escalatedTo)} (only its members may approve)</dd>` : ""}
      <dt>Policy</dt><dd>${text(s.policy.id)}@${text(s.policy.version)}</dd>
      <dt>Expires</dt><dd><time datetime="${s.expiresAt}" data-expires="${String(expiresMs)}">${s.expiresAt}</time> <span class="countdown" data-expires="${String(expiresMs)}"></span> <small>(the earliest of its actions)</small></dd>
      <dt>Set hash</dt><dd><code class="hash">${m.setHash}</code></dd>
      ${s.previousSetHash ? html`<dt>Replaces</dt><dd><code class="action-hash">${s.previousSetHash}</code></dd>` : ""}
    </dl>
    <h3>Order</h3>
    <ol class="set-order">${order}</ol>
    ${last ? html`<p class="refusal" role="alert"><strong>Last decision refused (${text(last.code)}):</strong> ${text(last.reason)}</p>` : ""}
  </section>
  ${members.map((r, i) => cardSection(r, { actionId: r.set?.actionId ?? `a${i + 1}`, position: i + 1, total: members.length }))}
  <details><summary>The set's card exactly as registered in the journal (the same text the CLI shows)</summary><pre class="card-text">${rendered(head.card)}</pre></details>`;
}

/** How each action of a finished change set ended (its row's closing record), in order. */
export function setOutcomeTable(members: ActionRow[]): Html {
  const rows = members.map((r) => {
    const c = r.progress.closed;
    const outcome = c?.outcome ?? (r.phase === "superseded" ? "SUPERSEDED" : "open");
    return html`<tr data-action-id="${r.set?.actionId ?? ""}"><th scope="row">${r.set?.actionId ?? "—"}</th><td>${r.envelope.operation}</td><td>${objectNamed(r.envelope.operation, r.envelope.object.id)}</td>
      <td><span class="outcome outcome-${outcome}">${outcome}</span></td><td>${c?.reasonCode ?? "—"}</td><td>${text(c?.reason ?? "")}</td></tr>`;
  });
  return html`<table class="set-outcomes"><caption>Action by action</caption><thead><tr><th scope="col">Action</th><th scope="col">Operation</th><th scope="col">Object</th><th scope="col">Outcome</th><th scope="col">Reason code</th><th scope="col">Reason</th></tr></thead><tbody>${rows}</tbody></table>`;
}
