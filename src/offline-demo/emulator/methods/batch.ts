import qs from "qs";
import { RestError } from "../errors.js";
import { phpAssoc, timeBlock } from "../shapes.js";
import { isRecord, type MethodHandler, type MethodResult } from "./context.js";

export const MAX_BATCH_COMMANDS = 50;

export function parseQueryString(query: string): Record<string, unknown> {
  return qs.parse(query, { depth: 20, arrayLimit: 1000, parameterLimit: 10_000 }) as Record<string, unknown>;
}

function dig(value: unknown, path: string[]): unknown {
  let cur = value;
  for (const key of path) {
    if (Array.isArray(cur)) cur = cur[Number(key)];
    else if (isRecord(cur)) cur = cur[key];
    else return undefined;
  }
  return cur;
}

/** `$result[key][path]` in a later command's query refers to an earlier command's result (scalars only here). */
function substituteResults(query: string, results: Map<string, unknown>): string {
  return query.replace(/\$result\[([^\]]+)\]((?:\[[^\]]*\])*)/g, (whole, key: string, rest: string) => {
    if (!results.has(key)) return whole;
    const path = [...rest.matchAll(/\[([^\]]*)\]/g)].map((m) => m[1] ?? "");
    const v = dig(results.get(key), path);
    return typeof v === "string" || typeof v === "number" || typeof v === "boolean"
      ? encodeURIComponent(String(v))
      : "";
  });
}

const isTruthy = (v: unknown) => v === true || v === 1 || v === "1" || v === "true" || v === "Y";

/**
 * `batch`: commands are `method?query` strings run in order inside the caller's transaction.
 * HTTP 200 even when sub-calls fail; `halt` stops at the first failure. Sub-calls are written to the call log
 * with `viaBatch: true`. Faults armed for a method do not fire inside a batch, only for direct calls.
 */
export function makeBatch(lookup: (method: string) => MethodHandler | undefined): MethodHandler {
  return (params, ctx) => {
    const cmdRaw = params.cmd ?? [];
    if (!isRecord(cmdRaw) && !Array.isArray(cmdRaw)) {
      throw new RestError(400, "ERROR_ARGUMENT", "Parameter cmd should be an array of commands", {
        argument: "cmd",
      });
    }
    const entries = Array.isArray(cmdRaw)
      ? cmdRaw.map((v, i) => [String(i), v] as const)
      : Object.entries(cmdRaw);
    if (entries.length > MAX_BATCH_COMMANDS)
      throw new RestError(400, "ERROR_BATCH_LENGTH_EXCEEDED", "Max batch length exceeded");
    const halt = isTruthy(params.halt);
    const results = new Map<string, unknown>();
    const errorsOut: [string, unknown][] = [];
    const totals: [string, number][] = [];
    const nexts: [string, number][] = [];
    const times: [string, unknown][] = [];
    for (const [key, command] of entries) {
      const started = Date.now();
      const text = typeof command === "string" ? command : "";
      const q = text.indexOf("?");
      const method = (q === -1 ? text : text.slice(0, q))
        .trim()
        .replace(/\.json$/i, "")
        .toLowerCase();
      const subParams = q === -1 ? {} : parseQueryString(substituteResults(text.slice(q + 1), results));
      let outcome: MethodResult | RestError;
      try {
        if (method === "batch")
          throw new RestError(400, "ERROR_BATCH_METHOD_NOT_ALLOWED", "Method is not allowed for batch usage");
        const handler = lookup(method);
        if (!handler) throw new RestError(404, "ERROR_METHOD_NOT_FOUND", "Method not found!");
        outcome = handler(subParams, ctx);
      } catch (e) {
        if (!(e instanceof RestError)) throw e;
        outcome = e;
      }
      ctx.store.logCall({
        method: method || String(command),
        params: subParams,
        status: outcome instanceof RestError ? outcome.status : 200,
        error: outcome instanceof RestError ? outcome.code : undefined,
        viaBatch: true,
      });
      times.push([key, timeBlock(started, Date.now())]);
      if (outcome instanceof RestError) {
        errorsOut.push([key, outcome.toBody()]);
        if (halt) break;
        continue;
      }
      results.set(key, outcome.result);
      if (outcome.total !== undefined) totals.push([key, outcome.total]);
      if (outcome.next !== undefined) nexts.push([key, outcome.next]);
    }
    return {
      result: {
        result: phpAssoc([...results.entries()]),
        result_error: phpAssoc(errorsOut),
        result_total: phpAssoc(totals),
        result_next: phpAssoc(nexts),
        result_time: phpAssoc(times),
      },
    };
  };
}
