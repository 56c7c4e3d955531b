import type { Context } from "hono";
import { errors, RestError } from "./errors.js";
import { DEFAULT_MALFORMED_BODY, type ArmedFault, type FaultRegistry } from "./faults.js";
import { intLike, type MethodContext, type MethodResult, type Params } from "./methods/context.js";
import { findMethod } from "./methods/registry.js";
import { applySideEffect } from "./methods/tasks.js";
import { BodyTooLargeError, parseParams, readBodyLimited } from "./request.js";
import { errorResponse, successParts } from "./respond.js";
import { timeBlock } from "./shapes.js";
import { IdempotencyKeys, type Kept } from "./idempotency.js";
import { DEFAULT_SCOPES } from "./types.js";
import type { Store } from "./store.js";
import { nowSeconds } from "./dates.js";

/** Methods that only read; an Idempotency-Key on them is ignored. */
const READ_ONLY = /\.(get|list|getlist)$|^user\.current$|^scope$/;

export interface RestSettings {
  userId: number;
  code: string;
  rate: number;
  burst: number;
  maxBodyBytes: number;
  /** Scopes of the webhook, as the `scope` method lists them. */
  scopes?: string[];
}

export interface Lifecycle {
  /** Holds a request open until the client goes away or the emulator closes (timeout faults). */
  hold(c: Context): Promise<Response>;
  sleep(ms: number): Promise<void>;
}

/** Carries a computed answer out of a transaction that must not commit (ack_without_apply). */
class Rollback extends Error {
  constructor(readonly outcome: MethodResult) {
    super("rolled back on purpose");
  }
}

/** Another request with the same Idempotency-Key committed first: nothing is applied, its answer is replayed. */
class Replay extends Error {
  constructor(readonly kept: Kept | "conflict") {
    super("idempotent replay");
  }
}

function replayResponse(store: Store, method: string, params: Params, seen: Kept | "conflict"): Response {
  if (seen === "conflict") {
    store.logCall({
      method,
      params,
      status: 422,
      error: "IDEMPOTENCY_KEY_REUSED",
      fault: "idempotency_conflict",
    });
    return errorResponse(
      new RestError(
        422,
        "IDEMPOTENCY_KEY_REUSED",
        "The idempotency key was already used with a different request",
      ),
    );
  }
  store.logCall({ method, params, status: seen.status, fault: "idempotent_replay" });
  return new Response(seen.body, {
    status: seen.status,
    headers: { "content-type": seen.contentType, "idempotent-replayed": "true" },
  });
}

export function createRestHandler(
  store: Store,
  faults: FaultRegistry,
  settings: RestSettings,
  life: Lifecycle,
) {
  const idempotency = new IdempotencyKeys(store);
  return async (c: Context): Promise<Response> => {
    const started = Date.now();
    const segments = new URL(c.req.url).pathname.split("/").filter(Boolean).slice(1).map(decodeURIComponent);
    const [userSeg, codeSeg, methodSeg] = segments;
    const method = (segments.length === 3 ? (methodSeg ?? "") : "").replace(/\.json$/i, "").toLowerCase();

    let params: Params;
    try {
      params = await parseParams(c.req.raw, await readBodyLimited(c.req.raw, settings.maxBodyBytes));
    } catch (e) {
      if (!(e instanceof BodyTooLargeError)) throw e;
      const err = errors.bodyTooLarge(settings.maxBodyBytes);
      store.logCall({ method, params: {}, status: err.status, error: err.code });
      return errorResponse(err);
    }

    // Gatekeeping in one transaction so processes sharing the file share one bucket.
    const rejected = store.immediate((): RestError | undefined => {
      let err: RestError | undefined;
      if (!store.takeRateToken(settings.rate, settings.burst, Date.now())) err = errors.queryLimit();
      else if (userSeg !== String(settings.userId) || codeSeg !== settings.code)
        err = errors.invalidCredentials();
      else if (!method || !findMethod(method)) err = errors.methodNotFound();
      if (err) store.logCall({ method, params, status: err.status, error: err.code });
      return err;
    });
    if (rejected) return errorResponse(rejected);

    // REST 3.0 idempotent writes: a repeated key replays the first successful answer, a reused key with
    // another body is refused; neither carries the call out again.
    const idemKey = READ_ONLY.test(method) ? undefined : c.req.header("idempotency-key")?.trim() || undefined;
    const idemHash = idemKey ? IdempotencyKeys.bodyHash(method, params) : "";
    if (idemKey) {
      const seen = store.immediate(() => idempotency.lookup(idemKey, method, idemHash));
      if (seen) return replayResponse(store, method, params, seen);
    }

    const { latency, action } = faults.take(method);
    if (latency?.kind === "latency") await life.sleep(latency.ms);
    const faultName = action?.kind;

    if (action?.kind === "error") {
      store.logCall({ method, params, status: action.status, error: action.error, fault: faultName });
      return errorResponse(new RestError(action.status, action.error, action.description));
    }
    if (action?.kind === "operation_time_limit") {
      store.logCall({ method, params, status: 429, error: "OPERATION_TIME_LIMIT", fault: faultName });
      const now = Date.now();
      return errorResponse(
        new RestError(429, "OPERATION_TIME_LIMIT", "Method is blocked due to operation time limit.", {
          time: {
            ...timeBlock(now, now),
            operating_reset_at: Math.floor(now / 1000) + action.resetInSeconds,
            operating: 480,
          },
        }),
      );
    }
    if (action?.kind === "timeout_without_apply") {
      store.logCall({ method, params, status: 0, fault: faultName });
      return life.hold(c);
    }
    if (action?.kind === "malformed" && !action.apply) {
      store.logCall({ method, params, status: 200, fault: faultName });
      return malformed(action);
    }

    const ctx: MethodContext = {
      store,
      userId: settings.userId,
      nowSec: nowSeconds(),
      scopes: settings.scopes ?? [...DEFAULT_SCOPES],
    };
    let outcome: MethodResult;
    // The answer to an idempotent write is kept in the same transaction as the change it answers.
    let answer: { text: string; headers: Record<string, string> } | undefined;
    try {
      outcome = store.immediate(() => {
        if (idemKey) {
          // Checked again under the write lock: a concurrent request with the same key may have committed.
          const seen = idempotency.lookup(idemKey, method, idemHash);
          if (seen) throw new Replay(seen);
        }
        const result = findMethod(method)!(params, ctx);
        if (action?.kind === "side_effect") {
          const taskId = action.taskId ?? intLike(params.taskId) ?? intLike(params.TASKID);
          if (taskId === undefined)
            throw errors.internal("side_effect fault: the call has no taskId and the fault names none");
          applySideEffect(ctx, taskId, action.field, action.value, action.userId);
        }
        if (action?.kind === "ack_without_apply") throw new Rollback(result);
        store.logCall({
          method,
          params,
          status: action?.kind === "apply_then_timeout" ? 0 : 200,
          fault: faultName,
        });
        if (idemKey && action?.kind !== "malformed") {
          answer = successParts(result, started);
          idempotency.keep(
            idemKey,
            method,
            idemHash,
            200,
            answer.text,
            answer.headers["content-type"] ?? "application/json",
          );
        }
        return result;
      });
    } catch (e) {
      if (e instanceof Replay) return replayResponse(store, method, params, e.kept);
      if (e instanceof Rollback) {
        outcome = e.outcome;
        store.logCall({ method, params, status: 200, fault: faultName });
      } else {
        const err = e instanceof RestError ? e : errors.internal(`emulator failure: ${(e as Error).message}`);
        store.logCall({ method, params, status: err.status, error: err.code, fault: faultName });
        return errorResponse(err);
      }
    }
    if (action?.kind === "apply_then_timeout") {
      // The portal made its answer (kept above for a key); only the connection lost it. A replay of the key returns it.
      return life.hold(c);
    }
    if (action?.kind === "malformed") return malformed(action);
    const { text, headers } = answer ?? successParts(outcome, started);
    return new Response(text, { status: 200, headers });
  };
}

function malformed(fault: ArmedFault & { kind: "malformed" }): Response {
  const body = fault.body ?? DEFAULT_MALFORMED_BODY;
  const looksJson = /^\s*[[{]/.test(body);
  return new Response(body, {
    status: 200,
    headers: { "content-type": looksJson ? "application/json; charset=utf-8" : "text/html; charset=utf-8" },
  });
}
