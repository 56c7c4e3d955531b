import { parseQueryString } from "./methods/batch.js";
import { isRecord } from "./methods/context.js";

export class BodyTooLargeError extends Error {
  constructor(
    readonly limit: number,
    received: number,
  ) {
    super(`request body of at least ${received} bytes exceeds the ${limit}-byte limit`);
    this.name = "BodyTooLargeError";
  }
}

/** Reads the body but stops as soon as it passes `limit`, so an oversized upload is never buffered whole. */
export async function readBodyLimited(req: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError(limit, declared);
  if (!req.body) return new Uint8Array();
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(limit, total);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * Parameters the way the portal sees them: query string merged with the body (body keys win, shallow),
 * PHP bracket syntax for forms and queries. A JSON body that does not parse counts as no parameters,
 * as on the real server; so does a body with a content type the portal does not read.
 */
export async function parseParams(req: Request, body: Uint8Array): Promise<Record<string, unknown>> {
  const url = new URL(req.url);
  const query = url.search.length > 1 ? parseQueryString(url.search.slice(1)) : {};
  const type = (req.headers.get("content-type") ?? "").toLowerCase();
  const text = Buffer.from(body).toString("utf8");
  let fromBody: Record<string, unknown> = {};
  if (text.trim() !== "") {
    if (type.includes("application/json") || (type === "" && /^\s*[[{]/.test(text))) {
      try {
        const parsed: unknown = JSON.parse(text);
        if (isRecord(parsed)) fromBody = parsed;
        else if (Array.isArray(parsed)) fromBody = Object.fromEntries(parsed.map((v, i) => [String(i), v]));
      } catch {
        fromBody = {};
      }
    } else if (type.includes("application/x-www-form-urlencoded") || type === "") {
      fromBody = parseQueryString(text);
    } else if (type.includes("multipart/form-data")) {
      const form = await new Response(body as unknown as BodyInit, { headers: { "content-type": type } })
        .formData()
        .catch(() => undefined);
      if (form) {
        const pairs = new URLSearchParams();
        form.forEach((v, k) => pairs.append(k, typeof v === "string" ? v : v.name));
        fromBody = parseQueryString(pairs.toString());
      }
    }
  }
  return { ...query, ...fromBody };
}
