/**
 * Turns what ChatGroq throws into something a CLI line or a graph state can carry.
 * ChatGroq throws groq-sdk's APIError subclasses (AuthenticationError, RateLimitError, ...)
 * whose message is `<status> <raw JSON body>`; LangChain's retry layer may rename a 429 to
 * RateLimitQuotaExhaustedError / RateLimitCapacityError. Status and body are what stay stable.
 */
export type ModelFailureKind = "auth" | "rate_limited" | "bad_request" | "server" | "connection" | "unknown";

export interface ModelFailure {
  kind: ModelFailureKind;
  /** HTTP status from the provider, when there was an answer. */
  status?: number;
  /** Provider error code, e.g. "invalid_api_key", "rate_limit_exceeded". */
  code?: string;
  /** Provider's own message when it sent one, else the error's message. */
  message: string;
  /** From a `retry-after` header, when present. */
  retryAfterMs?: number;
}

export function describeModelError(err: unknown): ModelFailure {
  const e = (typeof err === "object" && err !== null ? err : {}) as Record<string, unknown>;
  const status = typeof e.status === "number" ? e.status : undefined;
  const body = pick(e.error, "error") ?? e.error;
  const providerMessage = pick(body, "message");
  const code = pick(body, "code");
  const message =
    typeof providerMessage === "string" ? providerMessage : err instanceof Error ? err.message : String(err);
  const retryAfter = retryAfterMs(e.headers);
  const failure: ModelFailure = { kind: kindOf(status, e), message };
  if (status !== undefined) failure.status = status;
  if (typeof code === "string") failure.code = code;
  if (retryAfter !== undefined) failure.retryAfterMs = retryAfter;
  return failure;
}

function kindOf(status: number | undefined, e: Record<string, unknown>): ModelFailureKind {
  if (status === 401 || status === 403) return "auth";
  if (status === 429) return "rate_limited";
  if (status !== undefined && status >= 500) return "server";
  if (status !== undefined && status >= 400) return "bad_request";
  const ctor = (e.constructor as { name?: unknown } | undefined)?.name;
  if (ctor === "APIConnectionError" || ctor === "APIConnectionTimeoutError") return "connection";
  return "unknown";
}

function pick(v: unknown, key: string): unknown {
  return typeof v === "object" && v !== null ? (v as Record<string, unknown>)[key] : undefined;
}

function retryAfterMs(headers: unknown): number | undefined {
  const get = pick(headers, "get");
  const raw = typeof get === "function" ? (get as (k: string) => unknown).call(headers, "retry-after") : undefined;
  if (typeof raw !== "string" || raw.trim() === "") return undefined;
  const seconds = Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}
