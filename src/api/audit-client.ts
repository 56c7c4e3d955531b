/**
 * The CLI's side of `audit … --api URL`: reads the API server's /audit routes (src/api/audit-routes.ts)
 * with the same Bearer token as the other --api commands (LANGGRAPH_API_TOKEN). It returns what the
 * local audit log would, so src/cli/audit-command.ts prints it with the same renderers.
 */
import type { AuditThreadSummary, ChainVerification } from "../store/audit.js";
import type { CaseRecord } from "../evidence/bundle.js";
import type { EvidenceObject } from "../evidence/evidence-objects.js";
import type { QuestionEntry } from "../store/journal.js";
import type { ApiTarget } from "./target.js";
import { UsageError } from "../errors.js";

/** The server answered with an error: 401 (no or unknown token), 403 (not yours / role), 5xx. */
export class AuditApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "AuditApiError";
  }
}

async function getJson<T>(target: ApiTarget, pathAndQuery: string): Promise<T> {
  const url = `${target.url}${pathAndQuery}`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: {
        Accept: "application/json",
        ...(target.token ? { Authorization: `Bearer ${target.token}` } : {}),
      },
    });
  } catch (e) {
    throw new UsageError(`cannot reach the LangGraph API server at ${target.url}: ${(e as Error).message}`);
  }
  const text = await res.text();
  if (res.ok) return JSON.parse(text) as T;
  let message = text.slice(0, 2000);
  try {
    const body = JSON.parse(text) as { message?: unknown; detail?: unknown };
    if (typeof body.message === "string") message = body.message;
    else if (typeof body.detail === "string") message = body.detail;
  } catch {
    // Not JSON (the auth middleware answers 401 as plain text): keep the text.
  }
  if (res.status === 404) {
    // A server without the /audit routes answers 404 for every path; a missing thread says so in JSON.
    if (!/no audit records/.test(message))
      throw new UsageError(
        `${target.url} does not serve the audit routes (GET ${pathAndQuery} answered 404); it needs this project's langgraph.json http.app (src/inbox/mount.ts)`,
      );
    throw new UsageError(message);
  }
  throw new AuditApiError(res.status, `${res.status} from ${target.url}: ${message}`);
}

export const apiAudit = {
  /**
   * Every thread the server shows the caller, a page at a time (`limit` threads each; the server's
   * default when absent): the next page is asked for when this one has been consumed. A server whose
   * routes predate paging answers with all of them and no `next`.
   */
  threadPages: async function* (target: ApiTarget, limit?: number) {
    for (let cursor: string | null | undefined; ;) {
      const query = new URLSearchParams({
        ...(limit !== undefined ? { limit: String(limit) } : {}),
        ...(cursor ? { cursor } : {}),
      }).toString();
      const page = await getJson<{ threads: AuditThreadSummary[]; next?: string | null }>(
        target,
        `/audit/threads${query ? `?${query}` : ""}`,
      );
      yield page.threads;
      cursor = page.next;
      if (!cursor) return;
    }
  },
  /** `question`: the journal's question row (null: none); absent from a server whose routes predate it. */
  caseOf: (target: ApiTarget, threadId: string) =>
    getJson<{ caseRecord: CaseRecord; evidence: EvidenceObject[]; question?: QuestionEntry | null }>(
      target,
      `/audit/threads/${encodeURIComponent(threadId)}`,
    ),
  verify: (target: ApiTarget, head?: string) =>
    getJson<ChainVerification>(
      target,
      `/audit/verify${head !== undefined ? `?head=${encodeURIComponent(head)}` : ""}`,
    ),
};
