/**
 * The one error type of the Bitrix24 REST client. Callers branch on `kind`; `outcomeUnknown` is the only
 * flag that says "a write may or may not have been applied" and must never be read as success or failure.
 */
export const BITRIX24_ERROR_KINDS = [
  "rate_limited",
  // 429 OPERATION_TIME_LIMIT: the method used up its per-method time budget and is blocked until
  // `operatingResetAt`.
  "operation_time_limit",
  "auth",
  "access_denied",
  "not_found",
  "invalid_request",
  "target_rejected",
  "transport_timeout",
  "malformed_response",
] as const;

export type Bitrix24ErrorKind = (typeof BITRIX24_ERROR_KINDS)[number];

/** Plain-data form of a Bitrix24Error: what MCP tools put into `structuredContent.error`. */
export interface Bitrix24ErrorData {
  kind: Bitrix24ErrorKind;
  code?: string;
  description: string;
  httpStatus?: number;
  outcomeUnknown: boolean;
  rawBody?: string;
  /** operation_time_limit: when the portal unblocks the method (unix seconds), if it said. */
  operatingResetAt?: number;
}

export interface Bitrix24ErrorInit extends Omit<Bitrix24ErrorData, "outcomeUnknown"> {
  method?: string;
  outcomeUnknown?: boolean;
}

export class Bitrix24Error extends Error {
  readonly kind: Bitrix24ErrorKind;
  readonly httpStatus?: number;
  /** Bitrix24 `error` field, always as a string: the portal sends `"0"` or `0` for the same error. */
  readonly code?: string;
  readonly description: string;
  readonly outcomeUnknown: boolean;
  /** The body as received (with the webhook code masked), kept as evidence. */
  readonly rawBody?: string;
  /** REST method of the failed call, when known. */
  readonly method?: string;
  /** operation_time_limit: when the method is unblocked (unix seconds), when the portal said. */
  readonly operatingResetAt?: number;

  constructor(init: Bitrix24ErrorInit) {
    const where = init.method ? `${init.method}: ` : "";
    const status =
      init.httpStatus !== undefined
        ? ` (HTTP ${init.httpStatus}${init.code !== undefined ? `, error "${init.code}"` : ""})`
        : "";
    super(`Bitrix24 ${init.kind}: ${where}${init.description}${status}`);
    this.name = "Bitrix24Error";
    this.kind = init.kind;
    this.description = init.description;
    this.outcomeUnknown = init.outcomeUnknown ?? false;
    if (init.httpStatus !== undefined) this.httpStatus = init.httpStatus;
    if (init.code !== undefined) this.code = init.code;
    if (init.rawBody !== undefined) this.rawBody = init.rawBody;
    if (init.method !== undefined) this.method = init.method;
    if (init.operatingResetAt !== undefined) this.operatingResetAt = init.operatingResetAt;
  }

  toData(): Bitrix24ErrorData {
    const data: Bitrix24ErrorData = {
      kind: this.kind,
      description: this.description,
      outcomeUnknown: this.outcomeUnknown,
    };
    if (this.code !== undefined) data.code = this.code;
    if (this.httpStatus !== undefined) data.httpStatus = this.httpStatus;
    if (this.rawBody !== undefined) data.rawBody = this.rawBody;
    if (this.operatingResetAt !== undefined) data.operatingResetAt = this.operatingResetAt;
    return data;
  }

  override toString(): string {
    return this.message;
  }
}

export function isBitrix24Error(value: unknown): value is Bitrix24Error {
  return value instanceof Bitrix24Error;
}

// Codes the portal uses when the webhook itself is not allowed to call (wrong code, no scope, expired token).
const AUTH_CODES = new Set(
  [
    "INVALID_CREDENTIALS",
    "NO_AUTH_FOUND",
    "INSUFFICIENT_SCOPE",
    "EXPIRED_TOKEN",
    "INVALID_TOKEN",
    "USER_ACCESS_ERROR",
    "WRONG_AUTH_TYPE",
    "AUTHORIZATION_ERROR",
  ].map((c) => c.toLowerCase()),
);

/**
 * Error codes that mean the portal refused the call before running it, whatever the HTTP status:
 * its rate limit (503 QUERY_LIMIT_EXCEEDED), a method's time budget (429 OPERATION_TIME_LIMIT) and
 * the manual block of the REST API (503 OVERLOAD_LIMIT). Any other 5xx to a write leaves it open.
 */
export const NOT_RUN_CODES: ReadonlySet<string> = new Set([
  "QUERY_LIMIT_EXCEEDED",
  "OPERATION_TIME_LIMIT",
  "OVERLOAD_LIMIT",
]);

// Task-level permission refusals: "Action on the task is not allowed", "Access denied. (internal error)"; CRM's
// "Access denied"; tasks.task.delete's "No access to delete the task"; task.commentitem.add's "Insufficient
// permissions to add a comment"; task.commentitem.delete's "Action is not allowed" (also for a missing comment).
const ACCESS_DENIED_TEXT =
  /action on the task is not allowed|access denied|no access to delete the task|insufficient permissions to add a comment|4\/TE\/ACTION_NOT_ALLOWED/i;
// The object named does not exist: CRM's "Not found" (empty code) and task.commentitem.get's 512 error.
const NOT_FOUND_TEXT = /^not found\.?$|ITEM_NOT_FOUND_OR_NOT_ACCESSIBLE/i;

/**
 * Maps an error answer of the portal (any HTTP status, or a 200 that carries `error`) to a kind.
 * Order matters: rate limiting and auth are decided by code first, because their descriptions vary.
 */
export function classifyErrorAnswer(args: {
  httpStatus: number;
  code: string | undefined;
  description: string;
  method?: string;
  rawBody?: string;
  /** `time.operating_reset_at` from the error body, when present. */
  operatingResetAt?: number;
  /** Whether the call was a write: a 5xx to a write leaves its outcome unknown (see below). Default read. */
  intent?: "read" | "write";
}): Bitrix24Error {
  const { httpStatus, code, description } = args;
  const upper = code?.toUpperCase();
  if (upper === "OPERATION_TIME_LIMIT") {
    // Its own kind: the method is blocked for minutes, so it is never retried (a read would fail again,
    // and a write must not be sent late); the portal did not run the call.
    const until =
      args.operatingResetAt !== undefined
        ? ` until ${new Date(args.operatingResetAt * 1000).toISOString()}`
        : " (the portal did not say until when)";
    const init: Bitrix24ErrorInit = {
      kind: "operation_time_limit",
      description: `${description || "Method is blocked due to operation time limit."} — Bitrix24's per-method time limit blocks ${args.method ?? "this method"}${until}; not retried, and the call was not carried out`,
      httpStatus,
      code: code!,
      outcomeUnknown: false,
    };
    if (args.method !== undefined) init.method = args.method;
    if (args.rawBody !== undefined) init.rawBody = args.rawBody;
    if (args.operatingResetAt !== undefined) init.operatingResetAt = args.operatingResetAt;
    return new Bitrix24Error(init);
  }
  let kind: Bitrix24ErrorKind;
  if (upper === "QUERY_LIMIT_EXCEEDED" || httpStatus === 429) {
    kind = "rate_limited";
  } else if (code !== undefined && AUTH_CODES.has(code.toLowerCase())) {
    kind = "auth";
  } else if (ACCESS_DENIED_TEXT.test(description)) {
    kind = "access_denied";
  } else if (httpStatus >= 400 && httpStatus < 500 && NOT_FOUND_TEXT.test(description)) {
    kind = "not_found";
  } else if (httpStatus === 401 || httpStatus === 403) {
    kind = "auth";
  } else if (httpStatus >= 400 && httpStatus < 500) {
    kind = "invalid_request";
  } else {
    // 5xx, and the odd 200/3xx that still carries an `error` field.
    kind = "target_rejected";
  }
  const init: Bitrix24ErrorInit = {
    kind,
    description: description || `HTTP ${httpStatus} without a description`,
    httpStatus,
  };
  // A 5xx may come from the portal (or a gateway before it) while the write is being, or has been,
  // carried out: a 502/504 says nothing about whether it was. Only codes that mean the portal refused
  // the call before running it keep the outcome known. A read changes nothing, so it is unaffected.
  if (
    args.intent === "write" &&
    kind === "target_rejected" &&
    httpStatus >= 500 &&
    !(upper !== undefined && NOT_RUN_CODES.has(upper))
  ) {
    init.outcomeUnknown = true;
    init.description = `${init.description} — HTTP ${httpStatus} to a write: the portal may have carried it out before failing, so the write may or may not have been applied`;
  }
  if (code !== undefined) init.code = code;
  if (args.method !== undefined) init.method = args.method;
  if (args.rawBody !== undefined) init.rawBody = args.rawBody;
  return new Bitrix24Error(init);
}
