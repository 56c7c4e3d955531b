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
import { deletedLabelOf } from "../envelope/delete-subjects.js";
import { personNote } from "../envelope/people.js";
import { requesterVerificationOf, requesterVerificationText } from "../envelope/envelope.js";
import type { ActionRow } from "../store/action-machine.js";
import { fieldChanges, type RevisionChange, type RevisionHistory } from "../hitl/thread-view.js";
import type { SetActionOutcome } from "../app/view-thread.js";
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
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end])
    end++;
  const mid = (t: string[], tag: "del" | "ins") => {
    const changed = t.slice(start, t.length - end).join("");
    return changed ? html`<${raw(tag)} class="changed">${markedHtml(changed)}</${raw(tag)}>` : html``;
  };
  const wrap = (t: string[], tag: "del" | "ins") =>
    html`${markedHtml(t.slice(0, start).join(""))}${mid(t, tag)}${markedHtml(t.slice(t.length - end).join(""))}`;
  return { before: wrap(a, "del"), after: wrap(b, "ins") };
}

function display(value: unknown, label: string) {
  const { lines, block, length } = renderValue(value, label);
  return { text: lines.join("\n"), block, length };
}

/** For an action of a change set: its id and position, so its card is labelled and its ids are unique on the page. */
export interface MemberLabel {
  actionId: string;
  position: number;
  total: number;
  /** This action's decision control, shown beside its card. */
  control?: Html;
  /** Fields this action must find unchanged that an earlier action of the set writes: field → that action's id and value. */
  expects?: Record<string, { actionId: string; value: unknown }>;
}

export function cardSection(action: ActionRow, member?: MemberLabel): Html {
  const e = action.envelope;
  const titleId = member ? `card-title-${member.actionId}` : "card-title";
  const people = action.people?.names;
  const { warnings } = renderCard(e, action.envelopeHash, "text", people ? { people } : {});
  // The name next to a code or user id (PRIORITY "2" → high, RESPONSIBLE_ID "5" → Elena Kuznetsova),
  // from the names recorded with the card; escaped like every value.
  const nameText = (field: string, value: unknown, label: string) => {
    const name = enumLabel(field, value) ?? personNote(field, value, people);
    return name === undefined ? undefined : display(name, `${label} name`).text.replace(/^"|"$/g, "");
  };
  const nameOf = (field: string, value: unknown, label: string) => {
    const name = nameText(field, value, label);
    return name === undefined ? "" : html` <small class="value-name">(${markedHtml(name)})</small>`;
  };
  // A created object (a comment, a task) has no value before it: only the values it is made with.
  const effect = OPERATIONS[e.operation].effect;
  const create = effect === "create" || effect === "create_child";
  const makes = OPERATIONS[e.operation].creates;
  const created = makes === "task_comment" ? "comment" : (makes ?? "object");
  // A comment is posted; a task is created.
  const madeVerb = makes === "task_comment" ? "posted" : "created";
  // A delete writes nothing: what it removes is shown with its values as read now.
  const deleting = effect === "delete";
  const deletedRows = deleting
    ? [...e.comparedFields, ...e.invariantFields].map(
        (f) =>
          html`<tr><th scope="row">${f}</th><td><pre class="value before">${markedHtml(display(e.baseline.values[f], `${f} (now)`).text)}</pre>${nameOf(f, e.baseline.values[f], `${f} (now)`)}</td><td><em>deleted</em></td></tr>`,
      )
    : [];
  const deletedWhat = deletedLabelOf(e) ?? "";
  const changes = deleting
    ? deletedRows
    : Object.entries(e.params).map(([field, value]) => {
        if (create) {
          const after = display(value, `${field} (requested)`);
          return html`<tr>
        <th scope="row">${field}</th>
        <td data-label="Before"><em>new ${created}</em></td>
        <td data-label="Requested"><pre class="value after">${markedHtml(after.text)}</pre>${after.length !== undefined ? html`<small>${after.length} characters</small>` : ""}</td>
      </tr>`;
        }
        const before = display(e.baseline.values[field], `${field} (before)`);
        const after = display(value, `${field} (requested)`);
        const d = diffPair(before.text, after.text);
        // A code or user id reads as its name with the value beside it: "Anna Petrova (1) → Ivan Sokolov (2)".
        const cell = (
          v: unknown,
          shown: Html,
          cls: string,
          label: string,
          heading: string,
          note: Html | string = "",
        ) => {
          const name = nameText(field, v, label);
          return name === undefined
            ? html`<td data-label="${heading}"><pre class="value ${cls}">${shown}</pre>${note}</td>`
            : html`<td class="named" data-label="${heading}"><span class="value-name">${markedHtml(name)}</span> (<pre class="value ${cls}">${shown}</pre>)${note}</td>`;
        };
        // The length helps with long or multi-line text, not with an id or a code.
        const length =
          after.length !== undefined && (after.block || after.length > 20)
            ? html`<small class="length">${after.length} characters</small>`
            : "";
        return html`<tr>
        <th scope="row">${field}</th>
        ${cell(e.baseline.values[field], d.before, "before", `${field} (before)`, "Before")}
        ${cell(value, d.after, "after", `${field} (requested)`, "Requested", length)}
      </tr>`;
      });
  // A field an earlier action of the set writes is expected to hold what that action wrote, not the value read before it.
  const invariants = e.invariantFields.map((f) => {
    const by = member?.expects?.[f];
    return by
      ? html`<tr class="expects" data-expects="${by.actionId}"><th scope="row">${f}</th><td><pre class="value">${markedHtml(display(by.value, `${f} (after ${by.actionId})`).text)}</pre>${nameOf(f, by.value, `${f} (after ${by.actionId})`)} <small class="expects-note">expects what ${by.actionId} wrote (read before the set: <span class="was">${markedHtml(display(e.baseline.values[f], `${f} (before)`).text)}</span>)</small></td></tr>`
      : html`<tr><th scope="row">${f}</th><td><pre class="value">${markedHtml(display(e.baseline.values[f], `${f} (must stay)`).text)}</pre>${nameOf(f, e.baseline.values[f], `${f} (must stay)`)}</td></tr>`;
  });
  const expected = member?.expects ? e.invariantFields.filter((f) => member.expects![f]) : [];
  const expiresMs = Date.parse(e.expiresAt);
  return html`<section class="card${member ? " set-action" : ""}${member?.control ? " with-control" : ""}" aria-labelledby="${titleId}" data-envelope-hash="${action.envelopeHash}"${member ? html` data-action-id="${member.actionId}"` : ""}>
    <h2 id="${titleId}">${member ? html`<span class="action-id">${member.position} of ${member.total} · ${member.actionId}</span> ` : ""}${actsOn(e.operation, e.object.id)} · revision ${e.revision}</h2>
    ${member?.control ? html`<aside class="action-control" aria-label="Your decision on ${member.actionId}">${member.control}</aside>` : ""}
    <dl class="facts">
      <dt>Risk</dt><dd><span class="risk risk-${e.risk.level}">${e.risk.level}</span> · ${e.risk.reversibility}</dd>
      <dt>Requested by</dt><dd>${text(e.requestedBy)} <small class="requester-verification">(${requesterVerificationText(requesterVerificationOf(e))})</small></dd>
      ${e.editedBy ? html`<dt>Edited by</dt><dd>${text(e.editedBy)}</dd>` : ""}
      ${action.escalatedTo ? html`<dt>Escalated to</dt><dd>group ${text(action.escalatedTo)} (only its members may approve)</dd>` : ""}
      <dt>Policy</dt><dd>${text(e.policy.id)}@${text(e.policy.version)}</dd>
      <dt>Expires</dt><dd><time datetime="${e.expiresAt}" data-expires="${String(expiresMs)}">${e.expiresAt}</time> <span class="countdown" data-expires="${String(expiresMs)}"></span></dd>
      <dt>${member ? "Action envelope hash" : "Envelope hash"}</dt><dd><code class="${member ? "action-hash" : "hash"}">${action.envelopeHash}</code>${member ? html` <small>(a decision names the set's hash, above)</small>` : ""}</dd>
    </dl>
    ${
      action.progress.lastRefusal && !member
        ? html`<p class="refusal" role="alert"><strong>Last decision refused (${text(action.progress.lastRefusal.code)}):</strong> ${text(action.progress.lastRefusal.reason)}</p>`
        : ""
    }
    ${
      warnings.length
        ? html`<div class="warnings" role="alert"><h3>⚠ Warnings (${warnings.length}): look closely before approving</h3><ul>${warnings.map((w) => html`<li>${rendered(w)}</li>`)}</ul></div>`
        : ""
    }
    <h3>${deleting ? `Delete ${deletedWhat}: cannot be undone; what is deleted, as read when the envelope was made` : create ? `New ${created}: what will be ${madeVerb} (there is no value before it)` : `Changes: value read from the ${e.object.type} when the envelope was made → value to write`}</h3>
    <table class="changes"><thead><tr><th scope="col">Field</th><th scope="col">${deleting ? "Now" : "Before"}</th><th scope="col">Requested</th></tr></thead><tbody>${changes}</tbody></table>
    ${
      deleting
        ? ""
        : html`${expected.length ? html`<p class="expects-summary">Expects what ${[...new Set(expected.map((f) => member!.expects![f]!.actionId))].join(", ")} wrote: ${expected.join(", ")} must hold the value written earlier in this set.</p>` : ""}
        <details class="invariants"${member ? "" : html` open`}><summary>Must stay unchanged (${e.invariantFields.length} fields)</summary>
    <table class="invariants"><tbody>${invariants}</tbody></table></details>`
    }
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
export function setSection(
  head: ActionRow,
  members: ActionRow[],
  controls: Map<string, Html> = new Map(),
): Html {
  const m = head.set!;
  const s = m.set;
  const expiresMs = Date.parse(s.expiresAt);
  const order = s.actions.map(
    (a) =>
      html`<li data-action-id="${a.actionId}"><strong>${a.actionId}</strong>: ${actsOn(a.operation, a.object.id)} <small>(${a.reversibility})</small></li>`,
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
  ${members.map((r, i) => {
    const actionId = r.set?.actionId ?? `a${i + 1}`;
    const control = controls.get(actionId);
    return cardSection(r, {
      actionId,
      position: i + 1,
      total: members.length,
      ...(control ? { control } : {}),
      expects: expectsFrom(members.slice(0, i), r),
    });
  })}
  <details><summary>The set's card exactly as registered in the journal (the same text the CLI shows)</summary><pre class="card-text">${rendered(head.card)}</pre></details>`;
}

/**
 * The fields `later` must find unchanged that an earlier action of the set writes on the same object:
 * the last such write before it, by action id and value.
 */
export function expectsFrom(
  earlier: ActionRow[],
  later: ActionRow,
): Record<string, { actionId: string; value: unknown }> {
  const out: Record<string, { actionId: string; value: unknown }> = {};
  const e = later.envelope;
  for (const r of earlier) {
    const x = r.envelope;
    if (
      x.object.type !== e.object.type ||
      x.object.id !== e.object.id ||
      OPERATIONS[x.operation].effect !== "update"
    )
      continue;
    for (const f of e.invariantFields)
      if (Object.prototype.hasOwnProperty.call(x.params, f))
        out[f] = { actionId: r.set?.actionId ?? "", value: x.params[f] };
  }
  return out;
}

/** How each action of a finished change set ended, in order: the thread view's table (a rejected action as REJECTED, with its reason). */
export function setOutcomeTable(actions: SetActionOutcome[]): Html {
  const rows = actions.map(
    (
      o,
    ) => html`<tr data-action-id="${o.actionId}"><th scope="row">${o.actionId}</th><td data-label="Operation">${o.operation}</td><td data-label="Object">${objectNamed(o.operation, o.taskId)}</td>
      <td data-label="Outcome"><span class="outcome outcome-${o.outcome}">${o.outcome}</span></td><td data-label="Reason code">${o.reasonCode}</td><td data-label="Reason">${text(o.reason ?? "")}</td><td data-label="Write">${o.sent ? "sent" : "not sent"}</td></tr>`,
  );
  return html`<table class="set-outcomes"><caption>Action by action</caption><thead><tr><th scope="col">Action</th><th scope="col">Operation</th><th scope="col">Object</th><th scope="col">Outcome</th><th scope="col">Reason code</th><th scope="col">Reason</th><th scope="col">Write</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/**
 * What a revision replaced and why (the projection's RevisionHistory, src/hitl/thread-view.ts): the
 * previous revision's decision (who rejected or edited it, with their feedback) and each field whose
 * requested value differs from the previous revision's, as previous → now with the changed characters highlighted.
 */
export function revisionSection(h: RevisionHistory | undefined): Html {
  if (!h) return html``;
  const rows = changedFieldRows(
    h.previousRevision,
    h.revision,
    h.changes,
    (f) => html`<th scope="row">${f}</th>`,
  );
  const label = `What changed since revision ${h.previousRevision}`;
  const columns = html`<th scope="col">Revision ${String(h.previousRevision)} asked for</th><th scope="col">Revision ${String(h.revision)} asks for</th>`;
  return html`<section class="revision-history" aria-label="${label}" data-previous="${h.previousEnvelopeHash}">
    ${replacedHeading(h.revision, h.previousRevision, h.decision)}
    ${
      rows.length
        ? html`<table class="changes revision-diff"><thead><tr><th scope="col">Field</th>${columns}</tr></thead><tbody>${rows}</tbody></table>`
        : html`<p>The requested values are the same as revision ${String(h.previousRevision)}'s.</p>`
    }
  </section>`;
}

/**
 * A change set's revision: what the previous revision's decision was (by whom, its feedback and each
 * action's), each field an action now asks for differently (action by action, previous → now), and
 * the actions the previous revision had that this one no longer has. From the journal's rows only.
 */
export function setRevisionSection(members: ActionRow[], previousMembers: ActionRow[]): Html {
  const revision = members[0]?.envelope.revision ?? 1;
  if (revision <= 1 || previousMembers.length === 0) return html``;
  const prevRevision = previousMembers[0]!.envelope.revision;
  const made = previousMembers.find((m) => m.progress.decision)?.progress.decision;
  const d = made ? { type: made.type, by: made.approverId, message: made.message ?? null } : null;
  const idOf = (r: ActionRow) => r.set?.actionId ?? "";
  const before = new Map(previousMembers.map((m) => [idOf(m), m] as const));
  const perAction = new Map((made?.setPlan?.perAction ?? []).map((x) => [x.actionId, x] as const));
  const rows = members.flatMap((m) => {
    const was = before.get(idOf(m));
    if (!was)
      return [
        html`<tr><th scope="row">${idOf(m)}</th><td colspan="3">new in revision ${String(revision)}</td></tr>`,
      ];
    const changes = fieldChanges(was.envelope.params, m.envelope.params);
    return changedFieldRows(
      was.envelope.revision,
      revision,
      changes,
      (f) => html`<th scope="row">${idOf(m)}</th><td data-label="Field">${f}</td>`,
    );
  });
  const dropped = previousMembers.filter((m) => !members.some((x) => idOf(x) === idOf(m)));
  const droppedItems = dropped.map((m) => {
    const why = perAction.get(idOf(m));
    return html`<li data-action-id="${idOf(m)}">${idOf(m)} (${m.envelope.operation} ${objectNamed(m.envelope.operation, m.envelope.object.id)}) is no longer in the set${why?.type === "reject" ? html`: rejected${why.message ? html` — <q>${text(why.message)}</q>` : ""}` : ""}</li>`;
  });
  return html`<section class="revision-history set-revision" aria-label="What changed since revision ${String(prevRevision)}" data-previous="${previousMembers[0]!.set?.setHash ?? ""}">
    ${replacedHeading(revision, prevRevision, d)}
    ${droppedItems.length ? html`<ul class="dropped">${droppedItems}</ul>` : ""}
    ${
      rows.length
        ? html`<table class="changes revision-diff"><thead><tr><th scope="col">Action</th><th scope="col">Field</th><th scope="col">Revision ${String(prevRevision)} asked for</th><th scope="col">Revision ${String(revision)} asks for</th></tr></thead><tbody>${rows}</tbody></table>`
        : html`<p>The actions still in the set ask for the same values as in revision ${String(prevRevision)}.</p>`
    }
  </section>`;
}

/** A decision's type in the past tense where adding "d" does not make it ("approve" → "approved"). */
const DECIDED: Record<string, string> = { reject: "rejected", edit: "edited", expire: "expired" };

/** "Revision 2 replaces revision 1, which rejected by alice", and the decision's feedback. */
function replacedHeading(revision: number, prevRevision: number, d: RevisionHistory["decision"]): Html {
  return html`<h3>Revision ${String(revision)} replaces revision ${String(prevRevision)}, which ${d ? html`${DECIDED[d.type] ?? `${d.type}d`} by ${text(d.by)}` : "was replaced"}</h3>
    ${d?.message ? html`<p class="feedback"><strong>Feedback:</strong> <q>${text(d.message)}</q></p>` : ""}`;
}

/** One row per field whose requested value differs between two revisions of an action, previous → now highlighted. */
function changedFieldRows(
  prevRevision: number,
  revision: number,
  changes: RevisionChange[],
  head: (field: string) => Html,
): Html[] {
  return changes.map((c) => {
    const was =
      "was" in c ? display(c.was, `${c.field} (revision ${prevRevision})`).text : "(not changed by it)";
    const now = "now" in c ? display(c.now, `${c.field} (revision ${revision})`).text : "(no longer changed)";
    const dp = diffPair(was, now);
    const before = html`<td data-label="Revision ${String(prevRevision)}"><pre class="value previous">${dp.before}</pre></td>`;
    return html`<tr>${head(c.field)}${before}<td data-label="Revision ${String(revision)}"><pre class="value current">${dp.after}</pre></td></tr>`;
  });
}
