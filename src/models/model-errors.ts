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
  const raw =
    typeof get === "function" ? (get as (k: string) => unknown).call(headers, "retry-after") : undefined;
  if (typeof raw !== "string" || raw.trim() === "") return undefined;
  const seconds = Number(raw);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** Reason codes for a run the model provider stopped; each calls for a different fix. */
export type ModelReasonCode =
  | "MODEL_AUTH_FAILED"
  | "MODEL_RATE_LIMITED"
  | "MODEL_UNREACHABLE"
  | "MODEL_REQUEST_REJECTED"
  | "MODEL_SERVER_ERROR"
  | "MODEL_FAILED";

const REASON_CODES: Record<ModelFailureKind, ModelReasonCode> = {
  auth: "MODEL_AUTH_FAILED",
  rate_limited: "MODEL_RATE_LIMITED",
  connection: "MODEL_UNREACHABLE",
  bad_request: "MODEL_REQUEST_REJECTED",
  server: "MODEL_SERVER_ERROR",
  unknown: "MODEL_FAILED",
};

export function modelReasonCode(f: ModelFailure): ModelReasonCode {
  return REASON_CODES[f.kind];
}

/**
 * Whether `err` came from the model provider's SDK (an HTTP answer or a connection failure), as
 * opposed to a bug of ours: groq-sdk's APIError family, or LangChain's renamed 429 errors.
 */
export function isModelProviderError(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const name = (err as { constructor?: { name?: unknown } }).constructor?.name;
  const names = [typeof name === "string" ? name : "", String((err as { name?: unknown }).name ?? "")];
  return names.some((n) =>
    /^(APIError|APIConnectionError|APIConnectionTimeoutError|AuthenticationError|PermissionDeniedError|RateLimitError|RateLimit\w*Error|BadRequestError|NotFoundError|ConflictError|UnprocessableEntityError|InternalServerError|APIUserAbortError)$/.test(
      n,
    ),
  );
}

/**
 * One line for a person: what failed, the provider's words, and the likely fix (naming the variable
 * or endpoint). No stack, no raw JSON body.
 */
export function modelFailureLine(
  f: ModelFailure,
  where: { endpoint?: string; keyVariable?: string } = {},
): string {
  const key = where.keyVariable ?? "GROQ_API_KEY";
  const at = where.endpoint ? ` at ${where.endpoint}` : "";
  const said = `${f.status !== undefined ? `${f.status}${f.code ? ` ${f.code}` : ""}: ` : ""}${oneLine(f.message)}`;
  switch (f.kind) {
    case "auth":
      return `the model provider${at} refused the API key (${said}); check ${key}`;
    case "rate_limited":
      return `the model provider${at} is rate limiting this key (${said})${f.retryAfterMs !== undefined ? `; retry after ${Math.ceil(f.retryAfterMs / 1000)} s` : "; retry later"}`;
    case "connection":
      return `cannot reach the model provider${at} (${said}); check the network, GROQ_BASE_URL, or use MODEL=offline`;
    case "bad_request":
      return `the model provider${at} rejected the request (${said}); check MODEL names a model this key may use`;
    case "server":
      return `the model provider${at} failed (${said}); try again later`;
    case "unknown":
      return `the model call failed (${said})`;
  }
}

function oneLine(s: string): string {
  const line = s.replace(/\s+/g, " ").trim();
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}
