/** The `--api` option of the thread commands and how a command reaches the LangGraph API server it names. */
import { loadConfig } from "../config/env.js";

export const API_OPTION = [
  "--api <url>",
  "use this LangGraph API server instead of the local stores (or LANGGRAPH_API_URL; token: LANGGRAPH_API_TOKEN)",
] as const;

/** `--api URL` or LANGGRAPH_API_URL: the command talks to that LangGraph API server (src/api/cli-api.ts). */
export const apiOf = async (flag: string | undefined) => {
  const configured = loadConfig().langgraphApi;
  // The API client (the LangGraph SDK) is loaded only when an API server is named.
  return flag || configured.url ? (await import("../api/cli-api.js")).apiTarget(flag, configured) : undefined;
};
export const runApiCommand = async (...args: Parameters<typeof import("./api-command.js").runApiCommand>) =>
  (await import("./api-command.js")).runApiCommand(...args);
