/**
 * One REST call to a portal through its incoming webhook: pacing by the leaky bucket, a timeout, retries by
 * intent, and the answer read into a response or a Bitrix24Error that says what was expected and what arrived.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { Bitrix24Error, classifyErrorAnswer } from "./errors.js";
import { LeakyBucket } from "./leaky-bucket.js";
import { EnvelopeSchema, ErrorBodySchema } from "./schemas.js";

/** The full body of a successful answer, exactly as the portal sent it. */
export type Bitrix24Response<R = unknown> = {
  result: R;
  total?: number;
  next?: number;
  time?: Record<string, unknown>;
  [key: string]: unknown;
};

export type CallIntent = "read" | "write";

export interface Bitrix24ClientOptions {
  /** Inbound webhook, `https://portal/rest/{userId}/{code}/`. */
  webhookUrl: string;
  /** Portal drain rate, requests per second (default 2); 0 disables client-side pacing. */
  rate?: number;
  /** Portal bucket size (default 50). */
  burst?: number;
  /** Per-attempt budget for an answer, ms (default 20000). */
  timeoutMs?: number;
  /** Extra attempts for reads after rate limiting, transport failures or 5xx (default 2). */
  maxReadRetries?: number;
  /** Extra attempts for a write the portal refused with QUERY_LIMIT_EXCEEDED (default 3). */
  maxRateLimitRetries?: number;
  /** First backoff step, doubled per attempt (default 500 ms). */
  retryBaseMs?: number;
  /** Requests kept free below `burst` (default 10% of burst, at least 1). */
  headroom?: number;
  /**
   * Longest a write may wait for pacing and rate-limit retries before it is refused unsent (default
   * 60000 ms). It must stay below the MCP call timeout, or a write could leave after the caller
   * recorded its acknowledgement as missing.
   */
  maxWriteDelayMs?: number;
}

const DEFAULTS = {
  rate: 2,
  burst: 50,
  timeoutMs: 20_000,
  maxReadRetries: 2,
  maxRateLimitRetries: 3,
  retryBaseMs: 500,
  maxWriteDelayMs: 60_000,
};
const MAX_BACKOFF_MS = 8_000;
const METHOD_NAME = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/i;
const WEBHOOK_PATH = /^(.*\/rest\/\d+\/)([^/]+)\/?$/;

// Connection-level failures that happen before any byte of the request leaves: the portal cannot have acted.
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "CERT_HAS_EXPIRED",
]);

/** `http://host:port/rest/1/***\/`: safe for logs, errors and UI. */
export function redactWebhook(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "***";
  }
  const match = WEBHOOK_PATH.exec(parsed.pathname);
  const path = match ? `${match[1]}***/` : "/***";
  return `${parsed.protocol}//${parsed.host}${path}`;
}

/** A portal reached through its incoming webhook: one paced, bounded REST call at a time (`call`). */
export class Bitrix24Transport {
  /** host[:port] of the webhook, never the code. */
  readonly portal: string;
  private readonly baseUrl: string;
  private readonly secret: string;
  private readonly bucket: LeakyBucket;
  private readonly timeoutMs: number;
  private readonly maxReadRetries: number;
  private readonly maxRateLimitRetries: number;
  private readonly retryBaseMs: number;
  private readonly maxWriteDelayMs: number;
  // Raw text of each successful body, so a shape mismatch found later can still show what arrived.
  private readonly rawText = new WeakMap<object, string>();
  /** Answers the portal marked `Idempotent-Replayed: true`. */
  private readonly replayedBodies = new WeakSet<object>();

  constructor(opts: Bitrix24ClientOptions) {
    let parsed: URL;
    try {
      parsed = new URL(opts.webhookUrl);
    } catch {
      throw new Error(
        `Bitrix24Client: expected webhookUrl like https://portal/rest/1/<code>/, got an unparsable URL (${redactWebhook(opts.webhookUrl)})`,
      );
    }
    const match = WEBHOOK_PATH.exec(parsed.pathname);
    if (
      (parsed.protocol !== "https:" && parsed.protocol !== "http:") ||
      !match ||
      parsed.search ||
      parsed.hash
    ) {
      throw new Error(
        `Bitrix24Client: expected webhookUrl like https://portal/rest/1/<code>/, got ${redactWebhook(opts.webhookUrl)}`,
      );
    }
    this.secret = decodeURIComponent(match[2] ?? "");
    this.portal = parsed.host;
    this.baseUrl = `${parsed.protocol}//${parsed.host}${match[1]}${match[2]}/`;
    this.timeoutMs = positive(opts.timeoutMs, DEFAULTS.timeoutMs, "timeoutMs");
    this.maxReadRetries = nonNegativeInt(opts.maxReadRetries, DEFAULTS.maxReadRetries, "maxReadRetries");
    this.maxRateLimitRetries = nonNegativeInt(
      opts.maxRateLimitRetries,
      DEFAULTS.maxRateLimitRetries,
      "maxRateLimitRetries",
    );
    this.retryBaseMs = nonNegative(opts.retryBaseMs, DEFAULTS.retryBaseMs, "retryBaseMs");
    this.maxWriteDelayMs = nonNegative(opts.maxWriteDelayMs, DEFAULTS.maxWriteDelayMs, "maxWriteDelayMs");
    const bucketOpts: ConstructorParameters<typeof LeakyBucket>[0] = {
      rate: nonNegative(opts.rate, DEFAULTS.rate, "rate"),
      burst: positive(opts.burst, DEFAULTS.burst, "burst"),
    };
    if (opts.headroom !== undefined) bucketOpts.headroom = nonNegativeInt(opts.headroom, 0, "headroom");
    this.bucket = new LeakyBucket(bucketOpts);
  }

  /**
   * One REST call with pacing and bounded retries. Reads retry on rate limiting, transport failures and
   * 5xx. A write retries only on QUERY_LIMIT_EXCEEDED, which the portal sends before doing anything;
   * a write whose outcome is unknown is never repeated here.
   */
  async call(
    method: string,
    params: Record<string, unknown>,
    intent: CallIntent,
    headers: Record<string, string> = {},
  ): Promise<Bitrix24Response> {
    if (!METHOD_NAME.test(method)) {
      throw new Bitrix24Error({
        kind: "invalid_request",
        description: `expected a REST method name like tasks.task.get, got ${JSON.stringify(method)}`,
      });
    }
    const writeDeadline = Date.now() + this.maxWriteDelayMs;
    for (let attempt = 0; ; attempt++) {
      if (intent === "write") {
        const budget = writeDeadline - Date.now();
        if (!(await this.bucket.tryTake(Math.max(0, budget)))) {
          throw new Bitrix24Error({
            kind: "rate_limited",
            method,
            description: `not sent: the portal's rate limit would hold this write longer than ${this.maxWriteDelayMs} ms; it was refused unsent rather than sent late`,
          });
        }
      } else {
        await this.bucket.take();
      }
      try {
        return await this.send(method, params, headers, intent);
      } catch (err) {
        if (!(err instanceof Bitrix24Error)) throw err;
        if (err.kind === "rate_limited") this.bucket.markFull();
        if (!this.mayRetry(err, intent, attempt)) throw err;
        await sleep(Math.min(MAX_BACKOFF_MS, this.retryBaseMs * 2 ** attempt));
      }
    }
  }

  private mayRetry(err: Bitrix24Error, intent: CallIntent, attempt: number): boolean {
    const refusedByLimiter =
      err.kind === "rate_limited" && err.code?.toUpperCase() === "QUERY_LIMIT_EXCEEDED";
    if (intent === "write") return refusedByLimiter && attempt < this.maxRateLimitRetries;
    if (attempt >= this.maxReadRetries) return false;
    return (
      refusedByLimiter ||
      err.kind === "transport_timeout" ||
      (err.kind === "target_rejected" && err.httpStatus !== undefined && err.httpStatus >= 500)
    );
  }

  private async send(
    method: string,
    params: Record<string, unknown>,
    headers: Record<string, string>,
    intent: CallIntent,
  ): Promise<Bitrix24Response> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    let status: number;
    let text: string;
    let replayed = false;
    try {
      const res = await fetch(`${this.baseUrl}${method}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", ...headers },
        body: JSON.stringify(params),
        signal: controller.signal,
      });
      status = res.status;
      text = await res.text();
      replayed = res.headers.get("idempotent-replayed")?.toLowerCase() === "true";
    } catch (err) {
      throw this.transportError(err, method, timedOut);
    } finally {
      clearTimeout(timer);
    }
    const body = this.interpret(method, status, text, intent);
    if (replayed) this.replayedBodies.add(body);
    return body;
  }

  /**
   * Whether this answer is the portal's replay of an earlier answer to the same Idempotency-Key
   * (`Idempotent-Replayed: true`): the call was not carried out again.
   */
  wasReplayed(body: object): boolean {
    return this.replayedBodies.has(body);
  }

  private interpret(method: string, status: number, rawText: string, intent: CallIntent): Bitrix24Response {
    const text = this.scrub(rawText);
    let body: unknown;
    let parsed = true;
    try {
      body = JSON.parse(rawText);
    } catch {
      parsed = false;
    }
    const errorBody = parsed ? ErrorBodySchema.safeParse(body) : undefined;
    if (errorBody?.success) {
      const resetAt = operatingResetAtOf(body);
      return classifyAndThrow({
        httpStatus: status,
        code: String(errorBody.data.error),
        description: this.scrub(errorBody.data.error_description ?? ""),
        method,
        rawBody: text,
        intent,
        ...(resetAt !== undefined ? { operatingResetAt: resetAt } : {}),
      });
    }
    if (status < 200 || status >= 300) {
      return classifyAndThrow({
        httpStatus: status,
        code: undefined,
        description: `HTTP ${status} without a Bitrix24 error body: ${snippet(text)}`,
        method,
        rawBody: text,
        intent,
      });
    }
    // A 2xx to a write that cannot be read says nothing about whether the portal carried it out: the
    // outcome is unknown, as for a lost answer (a read changes nothing, so for it this is moot).
    const unread = intent === "write" ? "; the write may or may not have been applied" : "";
    const malformed = (expected: string) =>
      new Bitrix24Error({
        kind: "malformed_response",
        method,
        httpStatus: status,
        rawBody: text,
        outcomeUnknown: intent === "write",
        description: `expected ${expected}, got ${snippet(text)}${unread}`,
      });
    if (!parsed) throw malformed("a JSON body");
    const envelope = EnvelopeSchema.safeParse(body);
    if (!envelope.success || typeof body !== "object" || body === null || Array.isArray(body)) {
      throw malformed('{"result": ...}');
    }
    this.rawText.set(body, text);
    return body as Bitrix24Response;
  }

  /** Validates `result` against the documented shape and hands back the untouched body. */
  protected expectShape<S extends z.ZodType>(
    body: Bitrix24Response,
    schema: S,
    method: string,
    expected: string,
  ): Bitrix24Response<z.infer<S>> {
    const check = schema.safeParse(body.result);
    if (!check.success) {
      const issue = check.error.issues[0];
      const where = issue
        ? `${["result", ...issue.path.map(String)].join(".")}: ${issue.message}`
        : "shape mismatch";
      // Called after a 200: for a write the portal answered, but not in a shape that says what it did.
      const write = !isReadOnlyMethod(method);
      throw new Bitrix24Error({
        kind: "malformed_response",
        method,
        httpStatus: 200,
        rawBody: this.rawText.get(body) ?? this.scrub(JSON.stringify(body)),
        outcomeUnknown: write,
        description: `expected ${expected} as documented, got a body that does not match (${where})${write ? "; the write may or may not have been applied" : ""}`,
      });
    }
    return body as Bitrix24Response<z.infer<S>>;
  }

  private transportError(err: unknown, method: string, timedOut: boolean): Bitrix24Error {
    // A read changes nothing, so its failure is never described as a call whose effect is unknown.
    const read = isReadOnlyMethod(method);
    const doubt = read
      ? `; this was a read (${method}), so nothing was changed — check that BITRIX24_WEBHOOK_URL points at a reachable portal`
      : "; the call may or may not have been applied";
    const failed = (outcomeUnknown: boolean, description: string) =>
      new Bitrix24Error({ kind: "transport_timeout", method, outcomeUnknown, description });
    if (timedOut) return failed(true, `no answer from ${this.portal} within ${this.timeoutMs} ms${doubt}`);
    const code = errorCode(err);
    if (code !== undefined && NOT_SENT_CODES.has(code)) {
      return failed(
        false,
        `could not connect to ${this.portal} (${code}); the request was not sent — check BITRIX24_WEBHOOK_URL (host, port) and that the portal is reachable from here`,
      );
    }
    return failed(
      true,
      `connection to ${this.portal} dropped before an answer arrived (${code ?? this.scrub(String(err))})${doubt}`,
    );
  }

  /** Masks the webhook code in anything that may end up in a message, log or MCP answer. */
  private scrub(text: string): string {
    if (this.secret.length < 3) return text;
    return text.split(this.secret).join("***");
  }
}

function classifyAndThrow(args: Parameters<typeof classifyErrorAnswer>[0]): never {
  throw classifyErrorAnswer(args);
}

function errorCode(err: unknown): string | undefined {
  // fetch wraps socket errors: TypeError("fetch failed", { cause: { code } }), sometimes nested once more.
  let current: unknown = err;
  for (let depth = 0; depth < 4 && current && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length === 0) return "an empty body";
  return JSON.stringify(flat.length > 200 ? `${flat.slice(0, 200)}…` : flat);
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`Bitrix24Client: expected ${name} > 0, got ${value}`);
  return value;
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`Bitrix24Client: expected ${name} >= 0, got ${value}`);
  return value;
}

function nonNegativeInt(value: number | undefined, fallback: number, name: string): number {
  const n = nonNegative(value, fallback, name);
  if (!Number.isInteger(n))
    throw new Error(`Bitrix24Client: expected ${name} to be an integer, got ${value}`);
  return n;
}

/** Methods that only read (documented as such); used to word transport failures, never to allow a call. */
function isReadOnlyMethod(method: string): boolean {
  const m = method.toLowerCase().replace(/\.json$/, "");
  return (
    /\.(get|list|getlist)$/.test(m) ||
    m === "user.current" ||
    m === "scope" ||
    m === "methods" ||
    m === "profile"
  );
}

/** `time.operating_reset_at` (unix seconds) of an answer, when it carries one. */
function operatingResetAtOf(body: unknown): number | undefined {
  const time = (body as { time?: { operating_reset_at?: unknown } } | null)?.time;
  const v = time?.operating_reset_at;
  const n = typeof v === "string" && /^\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.floor(n) : undefined;
}
