/**
 * The model checks of `doctor`: the key, the endpoint's answer to it, and the model name among those
 * offered.
 */
import type { AppConfig } from "../config/env.js";
import type { AddCheck } from "./doctor-check.js";

const GROQ_DEFAULT_BASE = "https://api.groq.com";

export async function checkModel(config: AppConfig, timeoutMs: number, add: AddCheck): Promise<void> {
  const m = config.model;
  if (m.model === "offline") {
    add({ name: "model", status: "pass", detail: "offline model: deterministic, no network, no key" });
    return;
  }
  const id = m.model.slice("groq/".length);
  const base = (m.groqBaseUrl ?? GROQ_DEFAULT_BASE).replace(/\/+$/, "");
  add({
    name: "key",
    status: m.groqApiKey ? "pass" : "fail",
    detail: m.groqApiKey ? "GROQ_API_KEY is set" : "GROQ_API_KEY is not set",
    ...(m.groqApiKey ? {} : { fix: "set GROQ_API_KEY or use MODEL=offline" }),
  });
  let res: Response;
  try {
    res = await fetch(`${base}/openai/v1/models`, {
      headers: { authorization: `Bearer ${m.groqApiKey ?? ""}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: unknown } }).cause?.code;
    add({
      name: "endpoint",
      status: "fail",
      detail: `cannot reach ${base} (${typeof cause === "string" ? cause : (e as Error).message}) [MODEL_UNREACHABLE]`,
      fix: "check the network and GROQ_BASE_URL, or use MODEL=offline",
    });
    return;
  }
  const text = await res.text();
  if (res.status === 401 || res.status === 403) {
    add({
      name: "endpoint",
      status: "fail",
      detail: `${base} refused the key (HTTP ${res.status}) [MODEL_AUTH_FAILED]`,
      fix: "check GROQ_API_KEY",
    });
    return;
  }
  if (res.status === 429) {
    add({
      name: "endpoint",
      status: "warn",
      detail: `${base} is rate limiting this key (HTTP 429) [MODEL_RATE_LIMITED]${res.headers.get("retry-after") ? `; retry after ${res.headers.get("retry-after")} s` : ""}`,
    });
    return;
  }
  if (!res.ok) {
    add({
      name: "endpoint",
      status: "warn",
      detail: `${base} answered HTTP ${res.status} to the models list; the model name ${id} could not be checked`,
    });
    return;
  }
  add({ name: "endpoint", status: "pass", detail: `${base} accepted the key` });
  let ids: string[] = [];
  try {
    ids = ((JSON.parse(text) as { data?: Array<{ id?: unknown }> }).data ?? []).map((d) => String(d.id));
  } catch {
    // an endpoint that lists models in another form: the name stays unchecked
  }
  if (ids.length === 0)
    add({ name: "model name", status: "warn", detail: `the models list could not be read; ${id} unchecked` });
  else if (ids.includes(id))
    add({ name: "model name", status: "pass", detail: `${id} is offered to this key` });
  else
    add({
      name: "model name",
      status: "fail",
      detail: `${id} is not among the ${ids.length} models offered to this key`,
      fix: `set MODEL=groq/<one of: ${ids.slice(0, 8).join(", ")}${ids.length > 8 ? ", …" : ""}>`,
    });
}
