import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { OFFLINE_MODEL_LABEL, OfflineTaskModel } from "../runtime/offline-default.js";

export interface ModelConfig {
  /** "offline" or "groq/<model id>", e.g. "groq/llama-3.3-70b-versatile". */
  model: "offline" | `groq/${string}`;
  groqApiKey?: string;
  /** Host root, without `/openai/v1` (groq-sdk appends it). Default: GROQ_DEFAULT_BASE_URL. */
  groqBaseUrl?: string;
  /** Default 0: the agent should propose the same change for the same request. */
  temperature?: number;
  /**
   * Retries of a failed Groq call by LangChain's caller (default 1). 4xx answers other than 429
   * are never retried; a 429 is retried only when Groq gives a short wait hint.
   */
  maxRetries?: number;
}

export interface CreatedChatModel {
  model: BaseChatModel;
  label: string;
  provider: "offline" | "groq";
}

export const GROQ_DEFAULT_BASE_URL = "https://api.groq.com";

/** The model configuration cannot produce a chat model. */
export class ModelConfigError extends Error {
  override readonly name = "ModelConfigError";
}

/**
 * Builds the agent's chat model from configuration that has already been read from the
 * environment. Nothing here reads process.env: the base URL and key are always passed to
 * ChatGroq explicitly, so groq-sdk's own GROQ_BASE_URL / GROQ_API_KEY fallbacks never apply.
 * Groq's client is imported only for a Groq model: the offline model's processes (every CLI
 * decision of the demo and the tests) do not load it.
 */
export async function createChatModel(cfg: ModelConfig): Promise<CreatedChatModel> {
  const name = String(cfg.model ?? "");
  if (name === "offline")
    return { model: new OfflineTaskModel(), label: OFFLINE_MODEL_LABEL, provider: "offline" };
  if (!name.startsWith("groq/")) {
    throw new ModelConfigError(
      `MODEL must be "offline" or "groq/<model id>" (e.g. groq/llama-3.3-70b-versatile), got "${name}"`,
    );
  }
  const id = name.slice("groq/".length).trim();
  if (id === "")
    throw new ModelConfigError(
      `MODEL=${name} names no Groq model id; expected e.g. groq/llama-3.3-70b-versatile`,
    );
  const apiKey = cfg.groqApiKey?.trim();
  if (!apiKey) throw new ModelConfigError(`GROQ_API_KEY is required for MODEL=${name}, but no key was given`);
  const baseUrl = (cfg.groqBaseUrl?.trim() || GROQ_DEFAULT_BASE_URL).replace(/\/+$/, "");
  const { ChatGroq } = await import("@langchain/groq");
  const model = new ChatGroq({
    model: id,
    apiKey,
    baseUrl,
    temperature: cfg.temperature ?? 0,
    maxRetries: cfg.maxRetries ?? 1,
  });
  const label = baseUrl === GROQ_DEFAULT_BASE_URL ? `groq/${id}` : `groq/${id} via ${baseUrl}`;
  return { model, label, provider: "groq" };
}
