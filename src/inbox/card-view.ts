/**
 * The card page's content, from the journal's registered action only: the card exactly as registered
 * (the same text the CLI prints), then each change as before → requested with the changed characters
 * highlighted, the fields that must stay unchanged, and the warnings the renderer raises for invisible,
 * bidi and confusable characters. Values go through the card's own renderer (src/envelope/card.ts), so
 * a character a person cannot see is a visible ⟨U+XXXX⟩ marker here too.
 */
import { renderCard, renderValue } from "../envelope/card.js";
import { enumLabel } from "../envelope/fields.js";
import { OPERATIONS } from "../envelope/operations.js";
import { personNote } from "../envelope/people.js";
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

export function cardSection(action: ActionRow): Html {
  const e = action.envelope;
  const people = action.people?.names;
  const { warnings } = renderCard(e, action.envelopeHash, "text", people ? { people } : {});
  // The name next to a code or user id (PRIORITY "2" → high, RESPONSIBLE_ID "5" → Elena Kuznetsova),
  // from the names recorded with the card; escaped like every value.
  const nameOf = (field: string, value: unknown, label: string) => {
    const name = enumLabel(field, value) ?? personNote(field, value, people);
    return name === undefined ? "" : html` <small class="value-name">(${markedHtml(display(name, `${label} name`).text.replace(/^"|"$/g, ""))})</small>`;
  };
  // A comment is a new object: there is no value before it, only the text to post.
  const create = OPERATIONS[e.operation].effect !== "update";
  const changes = Object.entries(e.params).map(([field, value]) => {
    if (create) {
      const after = display(value, `${field} (requested)`);
      return html`<tr>
        <th scope="row">${field}</th>
        <td><em>new ${OPERATIONS[e.operation].creates === "task_comment" ? "comment" : "object"}</em></td>
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
  return html`<section class="card" aria-labelledby="card-title" data-envelope-hash="${action.envelopeHash}">
    <h2 id="card-title">${e.operation} on ${e.object.type} ${e.object.id} · revision ${e.revision}</h2>
    <dl class="facts">
      <dt>Risk</dt><dd><span class="risk risk-${e.risk.level}">${e.risk.level}</span> · ${e.risk.reversibility}</dd>
      <dt>Requested by</dt><dd>${text(e.requestedBy)}</dd>
      ${e.editedBy ? html`<dt>Edited by</dt><dd>${text(e.editedBy)}</dd>` : ""}
      ${action.escalatedTo ? html`<dt>Escalated to</dt><dd>group ${text(action.escalatedTo)} (only its members may approve)</dd>` : ""}
      <dt>Policy</dt><dd>${text(e.policy.id)}@${text(e.policy.version)}</dd>
      <dt>Expires</dt><dd><time datetime="${e.expiresAt}" data-expires="${String(expiresMs)}">${e.expiresAt}</time> <span class="countdown" data-expires="${String(expiresMs)}"></span></dd>
      <dt>Envelope hash</dt><dd><code class="hash">${action.envelopeHash}</code></dd>
    </dl>
    ${action.progress.lastRefusal
      ? html`<p class="refusal" role="alert"><strong>Last decision refused (${text(action.progress.lastRefusal.code)}):</strong> ${text(action.progress.lastRefusal.reason)}</p>`
      : ""}
    ${warnings.length
      ? html`<div class="warnings" role="alert"><h3>⚠ Warnings (${warnings.length}): look closely before approving</h3><ul>${warnings.map((w) => html`<li>${rendered(w)}</li>`)}</ul></div>`
      : ""}
    <h3>Changes: value read from the task when the envelope was made → value to write</h3>
    <table class="changes"><thead><tr><th scope="col">Field</th><th scope="col">Before</th><th scope="col">Requested</th></tr></thead><tbody>${changes}</tbody></table>
    <h3>Must stay unchanged (${e.invariantFields.length})</h3>
    <table class="invariants"><tbody>${invariants}</tbody></table>
    <details><summary>The card exactly as registered in the journal (the same text the CLI shows)</summary><pre class="card-text">${rendered(action.card)}</pre></details>
  </section>`;
}
