/**
 * The inbox's thread routes: the page of one thread, and the decisions and answers posted from it.
 */
import { Hono, type Context } from "hono";
import { viewThread, type ThreadView } from "../app/view-thread.js";
import { DecisionNotAcceptedError } from "../errors.js";
import { cardSection, revisionSection, setRevisionSection, setSection } from "./card-view.js";
import { membersOf } from "../hitl/journal-gate.js";
import type { ActionRow } from "../store/action-machine.js";
import { answerAsSignedIn, submitAsSignedIn, StaleCardError } from "./driver.js";
import { html, text, type Html } from "./html.js";
import { layout } from "./pages.js";
import { boundOf, entitlementOf, mayAnswer, maySeeRun, waitingAction } from "./queue.js";
import { MAX_FIELD, type Env, type RouteContext } from "./routes-context.js";
import {
  editedActionOf,
  editedFields,
  readPerActionForm,
  refusedAsInvisible,
  type PerActionForm,
} from "./decision-form.js";
import {
  decisionForms,
  outcomeSection,
  perActionControls,
  questionSection,
  setDecisionForms,
  setDecidedOf,
} from "./thread-sections.js";

/** A thread's page (its card while waiting, its outcome after) and the decision and answer forms it posts. */
export function threadRoutes(web: Hono<Env>, ctx: RouteContext): void {
  const { app, base, refused, notYours } = ctx;

  const threadPage = async (
    c: Context<Env>,
    threadId: string,
    notice?: { kind: "ok" | "warn" | "refusal"; message: Html | string },
    status: 200 | 409 | 422 = 200,
  ) => {
    const s = c.var.session;
    if (!(await maySeeRun(app, threadId, s.user))) return notYours(c, threadId);
    const view = await viewThread(app, threadId);
    const action = await waitingAction(app, threadId);
    // A change set is shown and decided as one: its header and every action's card, bound to the set's hash.
    const members = action?.set ? await membersOf(app.deps, action) : undefined;
    const cards = (a: ActionRow) =>
      members ? setSection(a, members, perActionControls(app, a, members, s)) : cardSection(a);
    const banner = notice
      ? html`<p class="${notice.kind === "ok" ? "notice" : notice.kind === "warn" ? "notice warn" : "refusal"}" role="alert">${notice.message}</p>`
      : "";
    let body: Html;
    if (
      view.status === "awaiting_approval" &&
      action &&
      boundOf(action).hash === view.approval?.envelopeHash
    ) {
      // A single action's history is the projection's (the same the CLI's show prints); a set's is built from its members.
      const prevHash = members ? action.envelope.previousEnvelopeHash : undefined;
      const previous = prevHash ? await app.deps.journal.getAction(prevHash) : undefined;
      const history = members
        ? setRevisionSection(
            members,
            previous?.macValid && previous.set
              ? (await membersOf(app.deps, previous)).filter((m) => m.macValid)
              : [],
          )
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
      return c.html(
        layout("Not found", html`<h1>No such thread</h1><p><a href="${base}/">Back to the inbox</a></p>`, {
          user: s.user,
          csrf: s.csrf,
          base,
        }),
        404,
      );
    } else {
      body = html`${banner}${outcomeSection(view, await setDecidedOf(app, threadId))}`;
    }
    return c.html(
      layout(
        `Thread ${threadId}`,
        html`<p><a href="${base}/">← Inbox</a> · <a href="${base}/t/${encodeURIComponent(threadId)}/evidence">Evidence</a></p>
        <div data-thread="${threadId}" data-hash="${view.approval?.envelopeHash ?? ""}" id="thread">${body}</div>
        <p class="live" aria-live="polite" id="live-status"></p>`,
        { user: s.user, csrf: s.csrf, base },
      ),
      status,
    );
  };

  /** The thread's page with a refusal above it: nothing was applied. */
  const refusedOn = (c: Context<Env>, threadId: string, message: Html | string, status: 409 | 422 = 422) =>
    threadPage(c, threadId, { kind: "refusal", message }, status);

  /** The page for a decision or answer the run refused as a stale card or not accepted; anything else is thrown. */
  const notAccepted = (c: Context<Env>, threadId: string, e: unknown) => {
    if (e instanceof StaleCardError) return refusedOn(c, threadId, `Refused: ${e.reason}`, 409);
    if (e instanceof DecisionNotAcceptedError)
      return refusedOn(c, threadId, `Refused (${e.code}): ${e.detail}`, 409);
    throw e;
  };

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
    const onScreenSet =
      action?.set && action.set.setHash === envelopeHash ? await membersOf(app.deps, action) : undefined;
    let perAction: PerActionForm | undefined;
    if (type === "per-action") {
      const read = readPerActionForm(form, onScreenSet);
      if (!read.ok) return refusedOn(c, threadId, html`Nothing was sent: ${read.reason}`);
      perAction = read.form;
    }
    if (action) {
      const may = entitlementOf(app, action, s.user);
      const approves = type === "approve" || (perAction?.entries.some((e) => e.type === "approve") ?? false);
      // Separation of duties is left to check_decision (it refuses SELF_APPROVAL with its reason, after a stale card is refused as such).
      const allowed = approves
        ? may.mayDecide && may.notApprovable !== "escalated"
        : type === "cancel"
          ? may.mayCancel
          : may.mayDecide;
      if (!allowed)
        return refused(
          c,
          403,
          "Not yours to decide",
          `${s.user} may not ${approves ? "approve" : (type ?? "decide")} this approval under policy ${app.deps.policy.id}@${app.deps.policy.version}.`,
          s,
        );
      if (action.set && type === "edit")
        return refusedOn(
          c,
          threadId,
          "Nothing was sent: an edit of a change set names the action it changes; use the per-action form (edit that action, approve or reject each of the others).",
        );
    }
    // The time of a decision is this server's clock, unless the decision is signed: then it is the
    // decidedAt the browser signed (the signature covers it, and check_decision refuses one too far ahead).
    const serverNow = app.deps.clock().toISOString();
    const signedAt = field("decidedAt");
    const decidedAtFor = (sig: string | undefined) => (sig && signedAt ? signedAt : serverNow);
    const signature = field("signature");
    const decidedAt = decidedAtFor(signature);
    const signed = { decidedAt, ...(signature ? { signature } : {}) };
    const named = { envelopeHash, nonce, approver: { id: s.user } };
    let decisions: Array<Record<string, unknown>>;
    switch (type) {
      case "approve":
        decisions = [{ type, ...named, ...signed }];
        break;
      case "reject": {
        const message = field("message")?.trim();
        decisions = [{ type, ...named, ...(message ? { message } : {}), ...signed }];
        break;
      }
      case "edit": {
        const edited = editedFields(form, "");
        if (!edited.ok) return refused(c, 422, "Edit not sent", edited.reason, s);
        const unsafe = await refusedAsInvisible(app, threadId, action, edited.fields);
        if (unsafe) return refused(c, 422, "Edit not sent", unsafe, s);
        decisions = [{ type, ...named, editedAction: editedActionOf(action, edited.fields), ...signed }];
        break;
      }
      case "cancel":
        decisions = [
          { type, envelopeHash, nonce, by: { id: s.user }, reason: field("reason")?.trim() ?? "" },
        ];
        break;
      case "per-action": {
        // One decision per action of the change set, each naming its action by id, all from the
        // signed-in approver and bound to the set's hash and nonce; signed one by one when signing is on.
        decisions = [];
        for (const e of perAction!.entries) {
          const sig = field(`signature.${e.actionId}`);
          const common = {
            ...named,
            actionId: e.actionId,
            decidedAt: decidedAtFor(sig),
            ...(sig ? { signature: sig } : {}),
          };
          if (e.type === "approve") decisions.push({ type: "approve", ...common });
          else if (e.type === "reject") {
            const message = field(`message.${e.actionId}`)?.trim();
            decisions.push({ type: "reject", ...common, ...(message ? { message } : {}) });
          } else {
            const fields = editedFields(form, `edit.${e.actionId}.`);
            if (!fields.ok)
              return refusedOn(c, threadId, `Nothing was sent: ${e.actionId}: ${fields.reason}`);
            const unsafe = await refusedAsInvisible(app, threadId, action, fields.fields);
            if (unsafe) return refusedOn(c, threadId, `Nothing was sent: ${e.actionId}: ${unsafe}`);
            const target = onScreenSet?.find((m) => m.set?.actionId === e.actionId);
            decisions.push({ type: "edit", ...common, editedAction: editedActionOf(target, fields.fields) });
          }
        }
        break;
      }
      default:
        return refused(c, 422, "Unknown decision", "Choose approve, reject, edit or cancel.", s);
    }
    const before = action?.progress.refusalsSeen ?? 0;
    let after: ThreadView;
    try {
      after = await submitAsSignedIn(app, threadId, { envelopeHash, nonce }, { decisions }, s.user);
    } catch (e) {
      return notAccepted(c, threadId, e);
    }
    const now = await app.deps.journal.currentAction(threadId);
    const what =
      type === "per-action" ? "per-action decision" : action?.set ? `${type} of the whole set` : type;
    // Refused, whether the approval still waits or the refusal ended it (expired, or the last one the budget allows).
    if (now && boundOf(now).hash === envelopeHash && now.progress.refusalsSeen > before) {
      const r = now.progress.lastRefusal;
      const ended =
        after.status === "awaiting_approval"
          ? ""
          : html` The approval then ended: ${text(after.state?.outcome ?? after.status)} (${text(after.state?.reasonCode ?? "")}).`;
      return refusedOn(
        c,
        threadId,
        html`Your ${what} was refused (${text(r?.code ?? "REFUSED")}): ${text(r?.reason ?? "")}. Nothing was applied.${ended}`,
      );
    }
    if (after.status === "awaiting_approval") {
      const next = await waitingAction(app, threadId);
      const someoneElse = next ? !entitlementOf(app, next, s.user).mayApprove : false;
      return threadPage(c, threadId, {
        kind: "ok",
        message: `Your ${what} was accepted. A new revision (${after.approval!.revision}) now waits for a fresh approval${someoneElse ? " by another approver" : ""}.`,
      });
    }
    // The notice follows the outcome: a decision that was taken but whose run did not write what was
    // approved is not shown as a green success.
    const outcome = after.state?.outcome;
    if (outcome && outcome !== "VERIFIED" && type !== "reject" && type !== "cancel") {
      return threadPage(c, threadId, {
        kind: "warn",
        message: html`Your ${what} was recorded, but the run ended ${text(outcome)} (${text(after.state?.reasonCode ?? "")}): ${text(after.state?.reason ?? "")}`,
      });
    }
    return threadPage(c, threadId, { kind: "ok", message: `Your ${what} was accepted.` });
  });

  web.post("/t/:thread/answer", async (c) => {
    const s = c.var.session;
    const threadId = c.req.param("thread");
    const thread = await app.deps.journal.getThread(threadId);
    if (!mayAnswer(app, thread, s.user))
      return refused(
        c,
        403,
        "Not yours to answer",
        `${s.user} may not answer the question of thread ${threadId}: only its requester, an approver or an admin may.`,
        s,
      );
    const form = await c.req.parseBody();
    const askedAt = typeof form["askedAt"] === "string" ? form["askedAt"] : "";
    const answers: Record<string, string> = {};
    for (const [k, v] of Object.entries(form))
      if (k.startsWith("answer.") && typeof v === "string") answers[k.slice(7)] = v.slice(0, MAX_FIELD);
    const before = (await viewThread(app, threadId)).state?.refusals.length ?? 0;
    let after: ThreadView;
    try {
      after = await answerAsSignedIn(app, threadId, askedAt, answers, s.user);
    } catch (e) {
      return notAccepted(c, threadId, e);
    }
    const refusal = (after.state?.refusals.length ?? 0) > before ? after.state?.refusals.at(-1) : undefined;
    if (after.status === "awaiting_input" && refusal) {
      return refusedOn(
        c,
        threadId,
        html`Your answer was refused (${text(refusal.code)}): ${text(refusal.reason)}. Nothing was sent to the agent; answer again.`,
      );
    }
    if (after.status === "awaiting_approval") {
      return threadPage(c, threadId, {
        kind: "ok",
        message: "Your answer was accepted. The agent made this proposal from it; it waits for approval.",
      });
    }
    return threadPage(c, threadId, {
      kind: "ok",
      message: `Your answer was accepted${refusal ? html` (the run then ended: ${text(refusal.code)})` : ""}.`,
    });
  });
}
