/**
 * The sections of a thread's page: the decision forms beside the card, the question form and the outcome.
 */
import type { App } from "../app/open-app.js";
import type { ThreadView } from "../app/view-thread.js";
import { OPERATIONS } from "../envelope/operations.js";
import { partialApprovalForecast } from "../envelope/change-set.js";
import { setOutcomeTable } from "./card-view.js";
import type { ActionRow } from "../store/action-machine.js";
import { html, text, type Html } from "./html.js";
import { boundOf, entitlementOf, type NotApprovable, mayAnswer, waitingAction } from "./queue.js";
import { answerJsonSchema, type InputField } from "../hitl/structured-input.js";
import type { Session } from "./security.js";
import { invisibleInEdit, type PerActionType } from "./decision-form.js";

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
 * An edit form's inputs, one per field: a text value as it is, any other as JSON (editedFields reads
 * them back from `<namePrefix>field.<F>` and `<namePrefix>json.<F>`). `form`: the form they belong to.
 */
function editInputs(params: Record<string, unknown>, idPrefix: string, namePrefix: string, form?: string) {
  return Object.entries(params).map(([field, v]) => {
    const plain = typeof v === "string";
    return html`<label for="${idPrefix}${field}">${field}${plain ? "" : " (JSON)"}</label><textarea${form ? html` form="${form}"` : ""} id="${idPrefix}${field}" name="${namePrefix}${plain ? "field" : "json"}.${field}" rows="2">${plain ? v : JSON.stringify(v)}</textarea>`;
  });
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
export function perActionControls(
  app: App,
  action: ActionRow,
  members: ActionRow[],
  s: Session,
): Map<string, Html> {
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
    const ifRejected =
      n > 1
        ? partialApprovalForecast(
            setActions,
            Object.fromEntries(setActions.map((x) => [x.actionId, x.actionId === id ? "reject" : "approve"])),
            app.deps.policy.partialExecution,
          ).summary
        : "";
    const choice = (t: PerActionType, label: string, disabled = false) =>
      html`<label class="choice" for="decision-${id}-${t}"><input type="radio" form="${f}" id="decision-${id}-${t}" name="decision.${id}" value="${t}" required${disabled ? html` disabled` : ""}> ${label}</label>`;
    out.set(
      id,
      html`<fieldset class="per-action" form="${f}" data-action-id="${id}" data-task="${String(e.object.id)}" data-idarg="${OPERATIONS[e.operation].idArg}" data-operation="${e.operation}">
      <legend>Your decision on ${id}</legend>
      ${choice("approve", "Approve", !may.mayApprove)}${choice("reject", "Reject")}${choice("edit", "Edit")}
      ${ifRejected ? html`<p class="if-rejected" data-if-rejected="${id}">If you reject ${id} and approve the others: ${ifRejected}.</p>` : ""}
      <label for="message-${id}">Feedback if rejected (optional)</label><textarea form="${f}" id="message-${id}" name="message.${id}" rows="1" maxlength="4000"></textarea>
      <details><summary>Values for an edit of ${id} (the set becomes a new revision for another approver)</summary>${invisibleWarning(e.params)}${editInputs(e.params, `edit-${id}-`, `edit.${id}.`, f)}</details>
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
export function setDecisionForms(
  app: App,
  action: ActionRow,
  members: ActionRow[],
  s: Session,
  view: ThreadView,
  base: string,
): Html {
  const may = entitlementOf(app, action, s.user);
  const sign = app.deps.policy.requireSignature;
  const bound = boundInputs(s, action, sign);
  const formAttrs = (type: string) =>
    html`method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/decide" class="decision decision-${type}" data-sign="${sign ? "yes" : "no"}" data-thread="${view.threadId}" data-approver="${s.user}"`;
  const n = members.length;
  return html`<section class="decide" aria-label="Decide the change set">
    ${sign ? SIGNING_KEY_IMPORT : ""}
    <p>Every decision here names the set's hash and nonce: it covers exactly these ${n} actions in this order.</p>
    ${
      may.mayDecide
        ? html`<form id="${PER_ACTION_FORM}" ${formAttrs("per-action")}>${bound}<input type="hidden" name="action" value="per-action">
          <p>Your choices beside each action are sent together. Rejecting some is not an edit: your approvals of the others stand, and they run at once unless one depends on a rejected action (an earlier change to the same object) or the policy (<code>partialExecution</code>) keeps its class from running alone; then they come back as a new revision that any approver, you included, may approve. An edit always comes back for another approver.</p>
          <button type="submit">Submit these ${n} decisions together</button></form>`
        : ""
    }
    ${
      may.mayApprove
        ? html`<form ${formAttrs("approve")}>${bound}<input type="hidden" name="action" value="approve">
          <button type="submit" class="approve">Approve the whole set (${n} actions, in this order)</button></form>`
        : notApprovableNote(may.notApprovable, action.escalatedTo, "this change set")
    }
    ${
      may.mayDecide
        ? html`<form ${formAttrs("reject")}>${bound}<input type="hidden" name="action" value="reject">
          <label for="feedback">Reject the whole set, with feedback for a revised proposal (leave empty to end the run)</label>
          <textarea id="feedback" name="message" rows="2" maxlength="4000"></textarea>
          <button type="submit" class="reject">Reject the whole set</button></form>`
        : ""
    }
    ${may.mayCancel ? cancelForm(formAttrs("cancel"), bound) : ""}
  </section>`;
}

/** A change set decided action by action in an earlier revision: who decided it and how, per action. */
interface SetDecided {
  setHash: string;
  approverId: string;
  perAction: Array<{ actionId: string; type: string; message?: string }>;
}

export async function setDecidedOf(app: App, threadId: string): Promise<SetDecided | undefined> {
  const current = await app.deps.journal.currentAction(threadId);
  if (!current?.macValid) return undefined;
  for (const h of [...current.supersededHashes].reverse()) {
    const row = await app.deps.journal.getAction(h);
    const d = row?.macValid ? row.progress.decision : undefined;
    if (d?.setPlan)
      return {
        setHash: row!.set?.setHash ?? d.envelopeHash,
        approverId: d.approverId,
        perAction: d.setPlan.perAction,
      };
  }
  return undefined;
}

export function decisionForms(
  app: App,
  action: NonNullable<Awaited<ReturnType<typeof waitingAction>>>,
  s: Session,
  view: ThreadView,
  base: string,
): Html {
  const may = entitlementOf(app, action, s.user);
  const sign = app.deps.policy.requireSignature;
  const bound = boundInputs(s, action, sign);
  const formAttrs = (type: string) =>
    html`method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/decide" class="decision decision-${type}" data-sign="${sign ? "yes" : "no"}" data-thread="${view.threadId}" data-approver="${s.user}" data-task="${String(action.envelope.object.id)}" data-idarg="${OPERATIONS[action.envelope.operation].idArg}" data-operation="${action.envelope.operation}"`;
  return html`<section class="decide" aria-label="Decide">
    ${sign ? SIGNING_KEY_IMPORT : ""}
    ${
      may.mayApprove
        ? html`<form ${formAttrs("approve")}>${bound}<input type="hidden" name="action" value="approve">
          <button type="submit" class="approve">Approve exactly this envelope</button></form>`
        : notApprovableNote(may.notApprovable, action.escalatedTo, "this one")
    }
    ${
      may.mayDecide
        ? html`<form ${formAttrs("reject")}>${bound}<input type="hidden" name="action" value="reject">
          <label for="feedback">Reject, with feedback for a revised proposal (leave empty to end the run)</label>
          <textarea id="feedback" name="message" rows="2" maxlength="4000"></textarea>
          <button type="submit" class="reject">Reject</button></form>
        <details><summary>Edit the values</summary><form ${formAttrs("edit")}>${bound}<input type="hidden" name="action" value="edit">
          ${invisibleWarning(action.envelope.params)}${editInputs(action.envelope.params, "edit-", "")}<button type="submit">Submit the edit (it becomes a new revision for a fresh approval)</button></form></details>`
        : ""
    }
    ${may.mayCancel ? cancelForm(formAttrs("cancel"), bound) : ""}
  </section>`;
}

/**
 * A waiting structured question and a form generated from its answer schema (enum → select, number →
 * number input, string → text input). The question and fields come from the journal's questions
 * index; the form carries the askedAt of the question on screen, so an answer to a question replaced
 * meanwhile is refused. Validation is server-side, in check_input, as for the CLI's `answer`.
 */
export async function questionSection(app: App, view: ThreadView, s: Session, base: string): Promise<Html> {
  const input = view.input!;
  const q = await app.deps.journal.getQuestion(view.threadId);
  const thread = await app.deps.journal.getThread(view.threadId);
  const fromJournal = q && q.askedAt === input.askedAt;
  const fields: Record<string, InputField> = fromJournal ? q.fields : {};
  const schema = (fromJournal ? answerJsonSchema(fields) : input.answerSchema) as {
    properties?: Record<string, { type?: string; enum?: string[]; description?: string }>;
  };
  const question = fromJournal ? q.question : input.question;
  const controls = Object.entries(schema.properties ?? {}).map(([name, p]) => {
    const id = `answer-${name}`;
    const label = html`<label for="${id}">${name}${p.description ? html` <small>(${text(p.description)})</small>` : ""}</label>`;
    if (p.enum) {
      return html`${label}<select id="${id}" name="answer.${name}" required><option value="">choose…</option>${p.enum.map((v) => html`<option value="${v}">${text(v)}</option>`)}</select>`;
    }
    if (p.type === "number")
      return html`${label}<input id="${id}" name="answer.${name}" type="text" inputmode="decimal" required maxlength="64">`;
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
    ${
      may
        ? html`<form method="post" action="${base}/t/${encodeURIComponent(view.threadId)}/answer" class="answer">
          <input type="hidden" name="csrf" value="${s.csrf}">
          <input type="hidden" name="askedAt" value="${input.askedAt}">
          ${controls}
          <button type="submit" class="approve">Send the answer</button>
        </form>
        <p><small>Nothing is written by answering: the agent makes a proposal from it, which needs its own approval.</small></p>`
        : html`<p>You may not answer this question.</p>`
    }
  </section>`;
}

/** How the page names each evidence part. */
const PART_LABELS: Record<string, string> = {
  decision: "Decision",
  preRead: "Pre-read",
  invocation: "Invocation",
  acknowledgement: "Acknowledgement",
  verification: "Verification",
};

/**
 * The evidence parts the journal's view withholds (their seal under the journal key does not hold, or no
 * checked seal covers them yet), each with why; `shown`: parts the page already notes in their place.
 */
function withheldSection(view: ThreadView, shown: string[] = []): Html | string {
  const parts = Object.entries(view.withheld ?? {}).filter(([part]) => !shown.includes(part));
  if (parts.length === 0) return "";
  return html`<h2>Evidence withheld</h2><ul class="withheld refusal">${parts.map(([part, why]) => html`<li data-part="${part}"><strong>${PART_LABELS[part] ?? part}</strong>: ${text(why ?? "")}</li>`)}</ul>`;
}

export function outcomeSection(view: ThreadView, decided: SetDecided | undefined): Html {
  const s = view.state;
  if (view.status === "interrupted_run")
    return html`<h1>The run stopped between steps</h1><p>A worker or <code>recover</code> finishes it.</p>${withheldSection(view)}`;
  const partial = s?.outcome === "PARTIALLY_EXECUTED";
  const cs = view.changeSetOutcome;
  return html`<h1>Finished: <span class="outcome">${s?.outcome ?? "—"}</span></h1>
    ${
      partial
        ? html`<p class="refusal partial" role="alert"><strong>Partially executed:</strong> part of the change set was written and the set stopped at the first action that was not VERIFIED; the actions after it were not run. What was written stays written (see each action below).</p>`
        : ""
    }
    <dl class="facts"><dt>Reason</dt><dd>${s?.reasonCode ?? "—"}: ${text(s?.reason ?? "")}</dd>
    <dt>Finished at</dt><dd>${s?.finishedAt ?? "—"}</dd>
    <dt>Decision</dt><dd>${s?.decision ? html`${s.decision.type} by ${text(s.decision.approverId)} (identity ${s.decision.verifiedBy})` : view.withheld?.decision ? html`withheld: ${text(view.withheld.decision)}` : "—"}</dd></dl>
    ${withheldSection(view, ["decision"])}
    ${cs ? html`<h2>Change set of ${cs.actions.length} actions: how each ended</h2>${setOutcomeTable(cs.actions)}` : ""}
    ${
      decided
        ? html`<h2>Decided action by action</h2><p>By ${text(decided.approverId)}, on change set <code class="action-hash">${decided.setHash}</code>:</p>
        <ul class="per-action-decisions">${decided.perAction.map((p) => html`<li data-action-id="${p.actionId}"><strong>${p.actionId}</strong>: ${p.type}${p.message ? html` (${text(p.message)})` : ""}</li>`)}</ul>
        <p><small>The approved and edited actions became the next revision; the table above lists every action of the set, the rejected ones as REJECTED.</small></p>`
        : ""
    }`;
}
