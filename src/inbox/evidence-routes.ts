/**
 * The inbox's evidence routes: a run's evidence page and its downloadable bundle.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Hono } from "hono";
import type { EvidenceKind } from "../evidence/evidence-objects.js";
import { caseOf, threadFromCheckpoints, type CaseSource } from "../evidence/case-source.js";
import { exportBundle } from "../evidence/export.js";
import { html, text } from "./html.js";
import { layout } from "./pages.js";
import { maySeeRun } from "./queue.js";
import { tarArchive } from "./tar.js";
import type { Env, RouteContext } from "./routes-context.js";

/** The evidence page of a run and its bundle as a tar archive, for whoever may see the run. */
export function evidenceRoutes(web: Hono<Env>, ctx: RouteContext): void {
  const { app, base, notYours } = ctx;

  // The case record `audit show` and the API's /audit routes build, from this app's stores.
  const source: CaseSource = {
    audit: app.deps.audit,
    thread: (id) => threadFromCheckpoints((t) => app.graph.getState({ configurable: { thread_id: t } }), id),
    journal: app.deps.journal,
  };
  /** The run's case, where `user` may see the run and it has records or checkpoints. */
  const visibleCase = async (threadId: string, user: string) =>
    (await maySeeRun(app, threadId, user)) ? caseOf(source, threadId) : undefined;

  web.get("/t/:thread/evidence", async (c) => {
    const s = c.var.session;
    const threadId = c.req.param("thread");
    const found = await visibleCase(threadId, s.user);
    if (!found) return notYours(c, threadId);
    const { caseRecord, evidence } = found;
    const fp = caseRecord.firstPage;
    const rows = evidence.map((e) => {
      const stage = e.kind === "decision" ? decisionStage(e) : (STAGES[e.kind] ?? e.kind);
      return html`<tr><td>${stage}</td><td><time datetime="${e.at}">${e.at}</time></td><td>${text(e.name)}</td><td>${text(e.summary)}</td></tr>`;
    });
    return c.html(
      layout(
        `Evidence ${threadId}`,
        html`<p><a href="${base}/">← Inbox</a> · <a href="${base}/t/${encodeURIComponent(threadId)}">Thread</a></p>
        <h1>Evidence of run ${text(threadId)}</h1>
        <dl class="facts">
          <dt>Status</dt><dd>${fp.status}</dd>
          <dt>Request</dt><dd>${text(fp.request ?? "—")}</dd>
          <dt>Requested by</dt><dd>${text(fp.requestedBy ?? "—")}</dd>
          <dt>Decided by</dt><dd>${fp.decidedBy ? html`${text(fp.decidedBy.id ?? "—")} (${fp.decidedBy.decision ?? "—"}, identity ${fp.decidedBy.verifiedBy})` : "—"}</dd>
          <dt>Outcome</dt><dd class="outcome">${fp.outcome ? html`${fp.outcome.outcome} / ${fp.outcome.reasonCode}: ${text(fp.outcome.reason)}` : "not finished"}</dd>
          <dt>Overrides</dt><dd>${fp.overrides.length ? fp.overrides.map((o) => html`${text(o.gate)} by ${text(o.by)}: ${text(o.reason)}; `) : "none"}</dd>
          <dt>Audit chain</dt><dd>${caseRecord.auditChain.intact ? "intact" : html`BROKEN: ${text(caseRecord.auditChain.problem ?? "")}`} (checked from seq ${caseRecord.auditChain.checkedFrom} to the head)</dd>
        </dl>
        <table class="evidence"><thead><tr><th scope="col">Stage</th><th scope="col">At</th><th scope="col">Object</th><th scope="col">Summary</th></tr></thead><tbody>${rows}</tbody></table>
        <p><a href="${base}/t/${encodeURIComponent(threadId)}/evidence.tar" download>Download the evidence bundle (tar; check with <code>sha256sum -c SHA256SUMS</code>)</a></p>`,
        { user: s.user, csrf: s.csrf, base },
      ),
    );
  });

  web.get("/t/:thread/evidence.tar", async (c) => {
    const threadId = c.req.param("thread");
    const found = await visibleCase(threadId, c.var.session.user);
    if (!found) return notYours(c, threadId);
    const { caseRecord, evidence } = found;
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "ae-inbox-evidence-"));
    try {
      const dirName = `evidence-${threadId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 60)}`;
      const out = exportBundle(path.join(tmp, dirName), caseRecord, evidence);
      const files = out.files.map((name) => ({
        name: `${dirName}/${name}`,
        content: fs.readFileSync(path.join(out.dir, name)),
      }));
      const tar = tarArchive(files);
      return c.body(new Uint8Array(tar), 200, {
        "content-type": "application/x-tar",
        "content-disposition": `attachment; filename="${dirName}.tar"`,
      });
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}

/** The stage an evidence object shows, by its kind (a decision's: decisionStage); other kinds show their kind. */
const STAGES: Partial<Record<EvidenceKind, string>> = {
  approval_request: "shown",
  invocation: "invoked",
  acknowledgement: "acknowledged",
  post_write_read: "observed",
  outcome: "outcome",
};

/** What a decision's evidence says happened: approved, rejected, edited, cancelled, expired, or refused. */
function decisionStage(e: { name: string; data: Record<string, unknown> }): string {
  if (e.data["verdict"] === "refused") return "refused";
  const type = /accepted-([a-z]+)/.exec(e.name)?.[1];
  const done: Record<string, string> = {
    approve: "approved",
    reject: "rejected",
    edit: "edited",
    cancel: "cancelled",
    expire: "expired",
  };
  return (type && done[type]) ?? "decided";
}
