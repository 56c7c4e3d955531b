/**
 * Which browsers may talk to the LangGraph API (src/auth/auth.ts). A web page the approver happens to
 * visit can send requests to a local server: CORS only hides the answer, a "simple" POST (text/plain,
 * which langgraph-api reads as JSON) still runs. In open mode such a request needs no credentials, so
 * a page could read an approval's hash and nonce and resume the thread with a self-declared approver.
 *
 * - Origin: a request that carries one must come from this server's own origin, or from LangGraph
 *   Studio (STUDIO_ORIGIN), or from an origin listed in ACTION_ENVELOPE_API_ORIGINS (comma-separated).
 *   A browser request without Origin that says it is cross-site (Sec-Fetch-Site) is refused too.
 *   Clients that are not browsers (the SDK, the CLI, curl) send no Origin and are unaffected.
 * - Host (open mode only): the Host header must be a loopback name (localhost, 127.0.0.1, [::1], any
 *   port) or a name listed in ACTION_ENVELOPE_API_HOSTS, so a DNS-rebound name pointing at 127.0.0.1
 *   is refused. With a token file every request needs a Bearer token, which a browser never attaches
 *   by itself, so the Host is not restricted there (a deployment serves its own name).
 *
 * langgraph.json's http.cors allows the same browser origin (Studio) and no other (never
 * `Access-Control-Allow-Origin: *`).
 */

/** LangGraph Studio, as `npm run dev` links to it (src/cli/dev-server.ts DEFAULT_STUDIO). */
export const STUDIO_ORIGIN = "https://smith.langchain.com";

export interface OriginPolicy {
  /** Browser origins allowed besides the server's own. */
  origins: ReadonlySet<string>;
  /** Host names (without port) allowed besides loopback names; checked only when restrictHost. */
  hosts: ReadonlySet<string>;
  restrictHost: boolean;
}

export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** A comma-separated setting's entries, trimmed, empty ones dropped. */
export const listOf = (v: string | undefined): string[] =>
  (v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

export function originPolicyFromEnvironment(
  restrictHost: boolean,
  env: NodeJS.ProcessEnv = process.env,
): OriginPolicy {
  return {
    origins: new Set([
      STUDIO_ORIGIN,
      ...listOf(env["ACTION_ENVELOPE_API_ORIGINS"]).map((o) => o.replace(/\/+$/, "")),
    ]),
    hosts: new Set(listOf(env["ACTION_ENVELOPE_API_HOSTS"]).map((h) => h.toLowerCase())),
    restrictHost,
  };
}

/** The host name of a Host header value, lower-cased, without its port ("[::1]" kept bracketed). */
export function hostName(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    return end === -1 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(":");
  return colon === -1 ? h : h.slice(0, colon);
}

/** Why this request is refused as coming from another site or naming another host, or null. */
export function browserOriginProblem(request: Request, policy: OriginPolicy): string | null {
  const host = request.headers.get("host") ?? "";
  if (policy.restrictHost) {
    const name = hostName(host);
    if (!LOOPBACK_HOSTS.has(name) && !policy.hosts.has(name)) {
      return `Host ${JSON.stringify(host)} is not a loopback name; this open server answers only to localhost, 127.0.0.1 or [::1] (or a name in ACTION_ENVELOPE_API_HOSTS)`;
    }
  }
  const origin = request.headers.get("origin");
  if (origin !== null) {
    if (policy.origins.has(origin)) return null;
    let own = false;
    try {
      const u = new URL(origin);
      own = (u.protocol === "http:" || u.protocol === "https:") && u.host === host.trim().toLowerCase();
    } catch {
      own = false;
    }
    if (!own)
      return `requests from origin ${JSON.stringify(origin)} are refused: only this server's own pages and LangGraph Studio (${STUDIO_ORIGIN}) may call this API from a browser`;
    return null;
  }
  const site = request.headers.get("sec-fetch-site");
  if (site === "cross-site" || site === "same-site")
    return `a ${site} browser request without Origin is refused`;
  return null;
}
