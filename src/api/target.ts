/** Where the CLI's `--api URL` mode sends its requests: the LangGraph API server's URL and the Bearer token, if any. */
import { UsageError } from "../errors.js";

export interface ApiTarget {
  url: string;
  token?: string;
}

/** `--api URL` wins over LANGGRAPH_API_URL; undefined means the local stores (the default). */
export function apiTarget(
  flag: string | undefined,
  env: { url?: string; token?: string },
): ApiTarget | undefined {
  const url = flag ?? env.url;
  if (!url) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(
      `--api / LANGGRAPH_API_URL must be the http(s) URL of a LangGraph API server, e.g. http://127.0.0.1:2024; got "${url.slice(0, 200)}"`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new UsageError(`--api / LANGGRAPH_API_URL must be an http(s) URL; got "${parsed.protocol}"`);
  return { url: parsed.toString().replace(/\/+$/, ""), ...(env.token ? { token: env.token } : {}) };
}
