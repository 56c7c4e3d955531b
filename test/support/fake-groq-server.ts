/**
 * A scripted stand-in for Groq's OpenAI-compatible chat API, so ChatGroq can be exercised
 * over real HTTP without a network or a key. It speaks `POST /openai/v1/chat/completions`
 * (JSON and SSE streaming) with Groq's body shapes, including its error body
 * `{"error":{"message","type","code"}}`.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface FakeToolCall {
  name: string;
  args: Record<string, unknown>;
  /** Default `call_<request#>_<index>`. */
  id?: string;
}

export type FakeGroqReply =
  | { toolCalls: FakeToolCall[]; content?: string }
  | { content: string }
  | {
      status: number;
      error: { message: string; type: string; code?: string | null };
      headers?: Record<string, string>;
    };

/** The JSON body ChatGroq sends (only the fields tests look at are typed). */
export interface ChatCompletionRequest {
  model: string;
  messages: Array<{
    role: string;
    content?: string | null;
    tool_call_id?: string;
    tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  }>;
  tools?: Array<{
    type: "function";
    function: { name: string; description?: string; parameters?: Record<string, unknown> };
  }>;
  stream?: boolean;
  temperature?: number;
  [key: string]: unknown;
}

export interface RecordedGroqRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body; undefined when the body was not JSON. */
  body: ChatCompletionRequest | undefined;
  rawBody: string;
}

export interface FakeGroqOptions {
  /** Decides the answer to each chat completion request; `index` counts from 0. */
  script: (body: ChatCompletionRequest, index: number) => FakeGroqReply | Promise<FakeGroqReply>;
  /** When set, requests without `Authorization: Bearer <apiKey>` get Groq's 401 invalid_api_key. */
  apiKey?: string;
  host?: string;
  port?: number;
}

export interface RunningFakeGroq {
  /** Host root to pass as ChatGroq `baseUrl` (groq-sdk appends `/openai/v1/...`). */
  baseUrl: string;
  port: number;
  /** Every request received, in order, including rejected ones. */
  requests: RecordedGroqRequest[];
  close(): Promise<void>;
}

export const CHAT_COMPLETIONS_PATH = "/openai/v1/chat/completions";

/** Groq's answers to a bad key and to an exhausted rate limit, as the real API words them. */
export const groqErrors = {
  invalidApiKey(): FakeGroqReply {
    return {
      status: 401,
      error: { message: "Invalid API Key", type: "invalid_request_error", code: "invalid_api_key" },
    };
  },
  rateLimited(model = "llama-3.3-70b-versatile", retryAfterSeconds = 7): FakeGroqReply {
    return {
      status: 429,
      headers: { "retry-after": String(retryAfterSeconds) },
      error: {
        message:
          `Rate limit reached for model \`${model}\` in organization \`org_fake\` service tier \`on_demand\` on tokens per minute (TPM): ` +
          `Limit 12000, Used 11890, Requested 1020. Please try again in ${retryAfterSeconds}s. ` +
          "Need more tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing",
        type: "tokens",
        code: "rate_limit_exceeded",
      },
    };
  },
};

export async function startFakeGroq(opts: FakeGroqOptions): Promise<RunningFakeGroq> {
  const requests: RecordedGroqRequest[] = [];
  const sockets = new Set<Socket>();
  let completionCount = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const rawBody = Buffer.concat(chunks).toString("utf8");
      let body: ChatCompletionRequest | undefined;
      try {
        body = rawBody === "" ? undefined : (JSON.parse(rawBody) as ChatCompletionRequest);
      } catch {
        body = undefined;
      }
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      requests.push({ method: req.method ?? "GET", path, headers: req.headers, body, rawBody });
      void answer(req.method ?? "GET", path, req.headers, body, res).catch((err: unknown) => {
        sendError(res, {
          status: 500,
          error: { message: `fake groq script failed: ${String(err)}`, type: "internal_server_error" },
        });
      });
    });
  });

  async function answer(
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
    body: ChatCompletionRequest | undefined,
    res: ServerResponse,
  ): Promise<void> {
    if (method !== "POST" || path !== CHAT_COMPLETIONS_PATH) {
      sendError(res, {
        status: 404,
        error: {
          message: `Unknown request URL: ${method} ${path}. Please check the URL for typos, or see the docs at https://console.groq.com/docs/`,
          type: "invalid_request_error",
          code: "unknown_url",
        },
      });
      return;
    }
    if (opts.apiKey !== undefined && headers.authorization !== `Bearer ${opts.apiKey}`) {
      sendError(res, groqErrors.invalidApiKey() as Extract<FakeGroqReply, { status: number }>);
      return;
    }
    if (body === undefined) {
      sendError(res, {
        status: 400,
        error: {
          message: "We could not parse the JSON body of your request.",
          type: "invalid_request_error",
        },
      });
      return;
    }
    const index = completionCount++;
    const reply = await opts.script(body, index);
    if ("status" in reply) {
      sendError(res, reply);
      return;
    }
    const toolCalls = ("toolCalls" in reply ? reply.toolCalls : []).map((tc, i) => ({
      id: tc.id ?? `call_${index + 1}_${i + 1}`,
      type: "function" as const,
      function: { name: tc.name, arguments: JSON.stringify(tc.args) },
    }));
    const content = reply.content ?? null;
    const id = `chatcmpl-fake-${index + 1}`;
    const created = 1_767_225_600 + index;
    const finishReason = toolCalls.length > 0 ? "tool_calls" : "stop";
    const usage = {
      prompt_tokens: 100,
      completion_tokens: 20,
      total_tokens: 120,
      queue_time: 0.01,
      prompt_time: 0.01,
      completion_time: 0.02,
      total_time: 0.03,
    };

    if (body.stream === true) {
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
      });
      const chunk = (
        delta: Record<string, unknown>,
        finish: string | null,
        extra: Record<string, unknown> = {},
      ) =>
        `data: ${JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created,
          model: body.model,
          system_fingerprint: "fp_fake",
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
          ...extra,
        })}\n\n`;
      res.write(chunk({ role: "assistant", content: "" }, null, { x_groq: { id: `req_fake_${index + 1}` } }));
      // Groq sends text in small pieces and each tool call whole, in its own chunk.
      for (const piece of content === null ? [] : (content.match(/\S+\s*|\s+/g) ?? []))
        res.write(chunk({ content: piece }, null));
      toolCalls.forEach((tc, i) => res.write(chunk({ tool_calls: [{ index: i, ...tc }] }, null)));
      res.write(chunk({}, finishReason, { x_groq: { id: `req_fake_${index + 1}`, usage } }));
      res.end("data: [DONE]\n\n");
      return;
    }
    const json = {
      id,
      object: "chat.completion",
      created,
      model: body.model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
          logprobs: null,
          finish_reason: finishReason,
        },
      ],
      usage,
      system_fingerprint: "fp_fake",
      x_groq: { id: `req_fake_${index + 1}` },
    };
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(json));
  }

  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? "127.0.0.1";

  return {
    baseUrl: `http://${host}:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Keep-alive connections from the client would otherwise hold close() open.
        for (const s of sockets) s.destroy();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

function sendError(res: ServerResponse, reply: Extract<FakeGroqReply, { status: number }>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(reply.status, { "content-type": "application/json", ...(reply.headers ?? {}) });
  res.end(
    JSON.stringify({
      error: { message: reply.error.message, type: reply.error.type, code: reply.error.code ?? null },
    }),
  );
}
