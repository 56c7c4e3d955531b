import { RestError } from "./errors.js";
import { timeBlock } from "./shapes.js";
import type { MethodResult } from "./methods/context.js";

const BASE_HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "access-control-allow-origin": "*",
};

/** PHP's json_encode with JSON_HEX_TAG, as the portal answers: `<br>` travels as `\u003Cbr\u003E`. */
export function encodeJson(body: unknown): string {
  return JSON.stringify(body).replace(/</g, "\\u003C").replace(/>/g, "\\u003E");
}

export function jsonResponse(
  body: unknown,
  status = 200,
  extraHeaders: Record<string, string> = {},
): Response {
  return new Response(encodeJson(body), { status, headers: { ...BASE_HEADERS, ...extraHeaders } });
}

export function errorResponse(err: RestError): Response {
  return jsonResponse(err.toBody(), err.status);
}

/** The success answer's body text and headers, built synchronously (kept inside a transaction for idempotent replays). */
export function successParts(
  outcome: MethodResult,
  startedMs: number,
): { text: string; headers: Record<string, string> } {
  const finished = Date.now();
  const body: Record<string, unknown> = { result: outcome.result };
  if (outcome.next !== undefined) body.next = outcome.next;
  if (outcome.total !== undefined) body.total = outcome.total;
  body.time = timeBlock(startedMs, finished);
  const seconds = ((finished - startedMs) / 1000).toFixed(4);
  return {
    text: encodeJson(body),
    headers: {
      ...BASE_HEADERS,
      "x-bitrix-rest-time": seconds,
      "x-bitrix-rest-user-time": seconds,
      "x-bitrix-rest-system-time": "0",
    },
  };
}
