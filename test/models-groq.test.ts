import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { tool } from "@langchain/core/tools";
import { AIMessage, AIMessageChunk, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatGroq } from "@langchain/groq";
import { createChatModel, GROQ_DEFAULT_BASE_URL, ModelConfigError } from "../src/models/factory.js";
import { describeModelError } from "../src/models/model-errors.js";
import { OFFLINE_MODEL_LABEL, OfflineTaskModel } from "../src/offline-demo/models/model.js";
import {
  CHAT_COMPLETIONS_PATH,
  groqErrors,
  startFakeGroq,
  type FakeGroqOptions,
  type RunningFakeGroq,
} from "./support/fake-groq-server.js";

const MODEL_ID = "llama-3.3-70b-versatile";
const KEY = "gsk_test_key";

const getTaskById = tool(async () => "", {
  name: "get_task_by_id",
  description: "Read one Bitrix24 task (tasks.task.get).",
  schema: z.object({ taskId: z.number().int().positive().describe("Bitrix24 task id") }),
});
const listTasks = tool(async () => "", {
  name: "list_tasks",
  description: "List Bitrix24 tasks.",
  schema: z.object({
    filter: z.record(z.string(), z.unknown()).optional(),
    start: z.number().int().optional(),
  }),
});
const proposeChange = tool(async () => "", {
  name: "propose_change",
  description: "Propose a change to one task for human approval.",
  schema: z.object({
    taskId: z.number().int().positive(),
    fields: z.record(z.string(), z.union([z.string(), z.number(), z.array(z.string())])),
    rationale: z.string(),
  }),
});
const TOOLS = [getTaskById, listTasks, proposeChange];

const TASK_BODY = JSON.stringify({
  result: {
    task: {
      id: "4",
      title: "LAB-AGENT-EXEC-002 - BOUND ACTION TEST",
      responsibleId: "5",
      priority: "1",
      status: "2",
    },
  },
  time: { start: 1767225600.1, finish: 1767225600.2, duration: 0.1 },
});

let fake: RunningFakeGroq | undefined;

async function serve(script: FakeGroqOptions["script"], apiKey?: string): Promise<RunningFakeGroq> {
  fake = await startFakeGroq({ script, ...(apiKey !== undefined ? { apiKey } : {}) });
  return fake;
}

async function groqModel(baseUrl: string, extra: { groqApiKey?: string; maxRetries?: number } = {}) {
  return createChatModel({ model: `groq/${MODEL_ID}`, groqApiKey: KEY, groqBaseUrl: baseUrl, ...extra });
}

afterEach(async () => {
  await fake?.close();
  fake = undefined;
  vi.unstubAllEnvs();
});

describe("createChatModel", () => {
  it("builds the offline model", async () => {
    const created = await createChatModel({ model: "offline" });
    expect(created.model).toBeInstanceOf(OfflineTaskModel);
    expect(created).toMatchObject({ label: OFFLINE_MODEL_LABEL, provider: "offline" });
  });

  it("builds ChatGroq for groq/<id> with temperature 0", async () => {
    const created = await createChatModel({ model: `groq/${MODEL_ID}`, groqApiKey: KEY });
    expect(created.model).toBeInstanceOf(ChatGroq);
    expect(created).toMatchObject({ label: `groq/${MODEL_ID}`, provider: "groq" });
    expect((created.model as ChatGroq).model).toBe(MODEL_ID);
    expect((created.model as ChatGroq).temperature).toBe(0);
    expect(
      (
        await createChatModel({
          model: `groq/${MODEL_ID}`,
          groqApiKey: KEY,
          groqBaseUrl: `${GROQ_DEFAULT_BASE_URL}/`,
        })
      ).label,
    ).toBe(`groq/${MODEL_ID}`);
  });

  it("refuses groq without a key, even when GROQ_API_KEY is in the environment", async () => {
    vi.stubEnv("GROQ_API_KEY", "gsk_from_env");
    const attempt = () => createChatModel({ model: `groq/${MODEL_ID}` });
    await expect(attempt()).rejects.toThrow(ModelConfigError);
    await expect(attempt()).rejects.toThrow(`GROQ_API_KEY is required for MODEL=groq/${MODEL_ID}`);
    await expect(createChatModel({ model: `groq/${MODEL_ID}`, groqApiKey: "  " })).rejects.toThrow(
      ModelConfigError,
    );
  });

  it("refuses model names it does not know, saying what it expected", async () => {
    const bad = (model: string) => createChatModel({ model: model as `groq/${string}` });
    await expect(bad("openai/gpt-4o")).rejects.toThrow(ModelConfigError);
    await expect(bad("openai/gpt-4o")).rejects.toThrow('MODEL must be "offline" or "groq/<model id>"');
    await expect(bad("openai/gpt-4o")).rejects.toThrow('got "openai/gpt-4o"');
    await expect(bad("groq/")).rejects.toThrow("names no Groq model id");
    await expect(bad("")).rejects.toMatchObject({ name: "ModelConfigError" });
  });
});

describe("ChatGroq from the factory against a fake Groq server", () => {
  it("sends the bound tools' JSON schemas and the key, and parses the tool call", async () => {
    const server = await serve(() => ({ toolCalls: [{ name: "get_task_by_id", args: { taskId: 4 } }] }));
    const { model, label } = await groqModel(server.baseUrl);
    expect(label).toBe(`groq/${MODEL_ID} via ${server.baseUrl}`);

    const ai = await model.bindTools!(TOOLS).invoke([new HumanMessage("rename task 4 to X")]);
    expect(ai.tool_calls).toEqual([
      { id: "call_1_1", name: "get_task_by_id", args: { taskId: 4 }, type: "tool_call" },
    ]);

    expect(server.requests).toHaveLength(1);
    const req = server.requests[0]!;
    expect(req.method).toBe("POST");
    expect(req.path).toBe(CHAT_COMPLETIONS_PATH);
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.body).toMatchObject({
      model: MODEL_ID,
      temperature: 0,
      stream: false,
      messages: [{ role: "user", content: "rename task 4 to X" }],
    });
    const sent = req.body?.tools ?? [];
    expect(sent.map((t) => [t.type, t.function.name])).toEqual([
      ["function", "get_task_by_id"],
      ["function", "list_tasks"],
      ["function", "propose_change"],
    ]);
    expect(sent[0]?.function.description).toBe("Read one Bitrix24 task (tasks.task.get).");
    expect(sent[0]?.function.parameters).toMatchObject({
      type: "object",
      properties: { taskId: { type: "integer", exclusiveMinimum: 0, description: "Bitrix24 task id" } },
      required: ["taskId"],
    });
    expect(sent[2]?.function.parameters).toMatchObject({
      type: "object",
      properties: { taskId: { type: "integer" }, fields: { type: "object" }, rationale: { type: "string" } },
      required: ["taskId", "fields", "rationale"],
    });
  });

  it("carries a tool round trip: the second request holds the assistant call and the tool result", async () => {
    const server = await serve((_body, index) =>
      index === 0
        ? { toolCalls: [{ name: "get_task_by_id", args: { taskId: 4 }, id: "call_abc" }] }
        : {
            toolCalls: [
              { name: "propose_change", args: { taskId: 4, fields: { TITLE: "X" }, rationale: "asked" } },
            ],
          },
    );
    const bound = (await groqModel(server.baseUrl)).model.bindTools!(TOOLS);
    const history = [new HumanMessage("rename task 4 to X")];
    const first = (await bound.invoke(history)) as AIMessage;
    const second = await bound.invoke([
      ...history,
      first,
      new ToolMessage({ tool_call_id: "call_abc", content: TASK_BODY }),
    ]);
    expect(second.tool_calls?.[0]).toMatchObject({
      name: "propose_change",
      args: { taskId: 4, fields: { TITLE: "X" }, rationale: "asked" },
    });

    const messages = server.requests[1]?.body?.messages ?? [];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(messages[1]?.tool_calls).toEqual([
      { id: "call_abc", type: "function", function: { name: "get_task_by_id", arguments: '{"taskId":4}' } },
    ]);
    expect(messages[2]).toMatchObject({ tool_call_id: "call_abc", content: TASK_BODY });
  });

  it("streams tool calls over SSE", async () => {
    const server = await serve(() => ({
      toolCalls: [{ name: "list_tasks", args: { filter: { "%TITLE": "Q3 report" } } }],
    }));
    const stream = await (
      await groqModel(server.baseUrl)
    ).model.bindTools!(TOOLS).stream([new HumanMessage("rename the Q3 report task to X")]);
    let merged: AIMessageChunk | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      merged = merged === undefined ? chunk : merged.concat(chunk);
    }
    expect(chunks).toBeGreaterThan(1);
    expect(merged?.tool_calls).toEqual([
      { id: "call_1_1", name: "list_tasks", args: { filter: { "%TITLE": "Q3 report" } }, type: "tool_call" },
    ]);
    expect(server.requests[0]?.body).toMatchObject({ stream: true, model: MODEL_ID });
    expect(server.requests[0]?.body?.tools?.map((t) => t.function.name)).toEqual([
      "get_task_by_id",
      "list_tasks",
      "propose_change",
    ]);
  });

  it("returns plain text answers, streamed and not", async () => {
    const server = await serve(() => ({ content: "I cannot change task 7: it is not accessible." }));
    const { model } = await groqModel(server.baseUrl);
    const ai = await model.invoke([new HumanMessage("rename task 7 to X")]);
    expect(ai.content).toBe("I cannot change task 7: it is not accessible.");
    expect(ai.tool_calls ?? []).toEqual([]);
    let text = "";
    for await (const chunk of await model.stream([new HumanMessage("rename task 7 to X")]))
      text += chunk.text;
    expect(text).toBe("I cannot change task 7: it is not accessible.");
  });

  it("surfaces a rejected key as groq-sdk's AuthenticationError with status 401, without retrying", async () => {
    const server = await serve(() => ({ content: "never sent" }), "gsk_the_right_key");
    const { model } = await groqModel(server.baseUrl, { maxRetries: 3 });
    const error = await model.bindTools!(TOOLS)
      .invoke([new HumanMessage("hi")])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).constructor.name).toBe("AuthenticationError");
    expect(error).toMatchObject({ status: 401 });
    expect((error as Error).message).toContain("invalid_api_key");
    expect(describeModelError(error)).toEqual({
      kind: "auth",
      status: 401,
      code: "invalid_api_key",
      message: "Invalid API Key",
    });
    expect(server.requests).toHaveLength(1);
  });

  it("surfaces a 401 from a streaming call", async () => {
    const server = await serve(() => groqErrors.invalidApiKey());
    const { model } = await groqModel(server.baseUrl);
    const consume = async () => {
      for await (const _chunk of await model.stream([new HumanMessage("hi")])) void _chunk;
    };
    await expect(consume()).rejects.toMatchObject({ status: 401 });
  });

  it("surfaces Groq's rate-limit answer as RateLimitError with status 429; LangChain does not retry it", async () => {
    const server = await serve(() => groqErrors.rateLimited(MODEL_ID, 7));
    const { model } = await groqModel(server.baseUrl, { maxRetries: 2 });
    const error = await model.invoke([new HumanMessage("hi")]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as Error).constructor.name).toBe("RateLimitError");
    expect(error).toMatchObject({ status: 429 });
    // Groq's message links to its billing page, which LangChain's caller reads as "quota exhausted".
    expect(server.requests).toHaveLength(1);
    expect(describeModelError(error)).toMatchObject({
      kind: "rate_limited",
      status: 429,
      code: "rate_limit_exceeded",
      retryAfterMs: 7000,
    });
    expect(describeModelError(error).message).toContain("Please try again in 7s");
  });

  it("retries a 429 that carries a short retry-after hint when maxRetries allows", async () => {
    const server = await serve((_body, index) =>
      index === 0
        ? {
            status: 429,
            headers: { "retry-after": "0" },
            error: { message: "Too many requests", type: "requests", code: "rate_limit_exceeded" },
          }
        : { content: "ok" },
    );
    const ai = await (
      await groqModel(server.baseUrl, { maxRetries: 1 })
    ).model.invoke([new HumanMessage("hi")]);
    expect(ai.content).toBe("ok");
    expect(server.requests).toHaveLength(2);
  });
});

describe("the fake Groq server", () => {
  let server: RunningFakeGroq;
  beforeEach(async () => {
    server = await serve(() => ({ content: "hi" }));
  });

  it("answers unknown paths with Groq's 404 body and records them", async () => {
    const res = await fetch(`${server.baseUrl}/v1/chat/completions`, { method: "POST", body: "{}" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      error: {
        message: expect.stringContaining("Unknown request URL: POST /v1/chat/completions"),
        type: "invalid_request_error",
        code: "unknown_url",
      },
    });
    expect(server.requests.map((r) => r.path)).toEqual(["/v1/chat/completions"]);
  });

  it("answers a non-JSON body with 400", async () => {
    const res = await fetch(`${server.baseUrl}${CHAT_COMPLETIONS_PATH}`, {
      method: "POST",
      body: "not json",
    });
    expect(res.status).toBe(400);
    expect(server.requests[0]?.rawBody).toBe("not json");
  });
});
