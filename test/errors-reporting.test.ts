/**
 * Errors a new user meets (issue 17 B.2): a failed read is never described as a write whose outcome is
 * unknown; LangChain's "Please fix your mistakes." never reaches the model or the outcome; the CLI's
 * general error handler prints one line (stack only with --debug); the model provider's 401, 429 and
 * connection failures each get their own reason code and a line naming the fix.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { ChatGroq } from "@langchain/groq";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { Bitrix24Client } from "../src/bitrix24/client.js";
import { startRun } from "../src/app/threads.js";
import { type App } from "../src/app/open-app.js";
import { describeUnexpected } from "../src/cli/main.js";
import { describeModelError, modelFailureLine, modelReasonCode } from "../src/models/model-errors.js";
import {
  envFor,
  parseJsonOutput,
  openTestApp,
  runCli,
  startPortal,
  tempDir,
  type Portal,
  TASK_READS_FAIL,
} from "./support/harness.js";
import { ScriptedChatModel, call, type Script } from "./support/scripted-model.js";
import {
  groqErrors,
  startFakeGroq,
  type FakeGroqReply,
  type RunningFakeGroq,
} from "./support/fake-groq-server.js";

const MODEL_ID = "llama-3.3-70b-versatile";

describe("a failed read is never 'may or may not have been applied'", () => {
  let emu: RunningEmulator;
  beforeEach(async () => {
    emu = await startEmulator({ port: 0, rate: 0 });
  });
  afterEach(async () => {
    await emu.close();
  });
  const arm = (spec: Record<string, unknown>) =>
    fetch(`${emu.baseUrl}/_emulator/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(spec),
    });

  it("a read that times out says it was a read and changed nothing; a write that times out keeps the doubt", async () => {
    const client = new Bitrix24Client({
      webhookUrl: emu.webhookUrl,
      rate: 0,
      retryBaseMs: 20,
      timeoutMs: 300,
      maxReadRetries: 0,
    });
    await arm({ method: "tasks.task.get", kind: "latency", ms: 1_500, times: 1 });
    const read = await client.getTask(4).then(
      () => undefined,
      (e: unknown) => e as { kind: string; description: string },
    );
    expect(read?.kind).toBe("transport_timeout");
    expect(read?.description).not.toMatch(/may or may not/);
    expect(read?.description).toMatch(/this was a read \(tasks\.task\.get\), so nothing was changed/);
    expect(read?.description).toContain("BITRIX24_WEBHOOK_URL");

    await arm({ method: "tasks.task.update", kind: "timeout_without_apply", times: 1 });
    const write = await client.updateTask(4, { TITLE: "x" }).then(
      () => undefined,
      (e: unknown) => e as { kind: string; description: string },
    );
    expect(write?.description).toMatch(/may or may not have been applied/);
  });

  it("a closed port: the request was not sent, and the variable to check is named", async () => {
    const url = new URL(emu.webhookUrl);
    await emu.close();
    const client = new Bitrix24Client({
      webhookUrl: url.toString(),
      rate: 0,
      retryBaseMs: 20,
      timeoutMs: 1_000,
      maxReadRetries: 0,
    });
    const err = await client.getTask(4).then(
      () => undefined,
      (e: unknown) => e as { description: string; outcomeUnknown: boolean },
    );
    expect(err?.outcomeUnknown).toBe(false);
    expect(err?.description).toMatch(
      /could not connect .* the request was not sent — check BITRIX24_WEBHOOK_URL/,
    );
    emu = await startEmulator({ port: 0, rate: 0 });
  });
});

describe("read tool failures reach the model as the portal's words only", () => {
  let portal: Portal;
  let app: App | undefined;
  beforeEach(async () => {
    portal = await startPortal();
  });
  afterEach(async () => {
    await app?.close();
    await portal.emulator.close();
  });

  it("no 'Please fix your mistakes.' in the tool reply or the outcome; the reply says nothing was changed", async () => {
    await portal.fault(TASK_READS_FAIL);
    let turn = 0;
    const script: Script = () => {
      turn += 1;
      return turn === 1
        ? new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] })
        : new AIMessage("I could not read task 4.");
    };
    app = await openTestApp(portal, tempDir(), { model: new ScriptedChatModel(script) });
    const view = await startRun(app, { request: "rename task 4 to X", requestedBy: "demo-user" });
    expect(view.state?.outcome).toBe("NOT_EXECUTED");
    const tool = view.state!.messages.find((m) => m.getType() === "tool")!;
    expect((tool as { status?: string }).status).toBe("error");
    expect(String(tool.content)).toMatch(
      /^Error: the read tool get_task_by_id failed \(invalid_request ERROR_CORE: Internal problem\)\. Nothing was changed in Bitrix24\./,
    );
    for (const text of [String(tool.content), view.state!.reason ?? ""]) {
      expect(text).not.toContain("Please fix your mistakes");
      expect(text).not.toMatch(/may or may not/);
    }
    expect(await portal.writes()).toHaveLength(0);
  });
});

describe("model provider errors: their own reason codes, one line with the fix", () => {
  let groq: RunningFakeGroq | undefined;
  afterEach(async () => {
    await groq?.close();
    groq = undefined;
  });

  async function providerError(reply: FakeGroqReply | null): Promise<Error> {
    let baseUrl = "http://127.0.0.1:9";
    if (reply) {
      groq = await startFakeGroq({ script: () => reply });
      baseUrl = groq.baseUrl;
    }
    const model = new ChatGroq({
      model: MODEL_ID,
      apiKey: "gsk_bad",
      baseUrl,
      maxRetries: 0,
    } as ConstructorParameters<typeof ChatGroq>[0]);
    return model.invoke([new HumanMessage("hi")]).then(
      () => {
        throw new Error("expected the provider to fail");
      },
      (e: unknown) => e as Error,
    );
  }

  it("401 → MODEL_AUTH_FAILED, naming GROQ_API_KEY, without the raw JSON body or a stack", async () => {
    const err = await providerError(groqErrors.invalidApiKey());
    const f = describeModelError(err);
    expect(modelReasonCode(f)).toBe("MODEL_AUTH_FAILED");
    const line = describeUnexpected(err, false);
    expect(line).toBe(
      "model provider (MODEL_AUTH_FAILED): the model provider refused the API key (401 invalid_api_key: Invalid API Key); check GROQ_API_KEY",
    );
    expect(describeUnexpected(err, true)).toMatch(/\n\s+at /);
  });

  it("429 → MODEL_RATE_LIMITED with the retry-after", async () => {
    const err = await providerError(groqErrors.rateLimited(MODEL_ID, 7));
    const f = describeModelError(err);
    expect(modelReasonCode(f)).toBe("MODEL_RATE_LIMITED");
    expect(modelFailureLine(f)).toMatch(
      /rate limiting this key \(429 rate_limit_exceeded: Rate limit reached .*\); retry after 7 s$/,
    );
    expect(describeUnexpected(err, false)).not.toContain("\n");
  });

  it("no connection → MODEL_UNREACHABLE, naming what to check", async () => {
    const err = await providerError(null);
    const f = describeModelError(err);
    expect(modelReasonCode(f)).toBe("MODEL_UNREACHABLE");
    const line = describeUnexpected(err, false);
    expect(line).toMatch(
      /^model provider \(MODEL_UNREACHABLE\): cannot reach the model provider .*check the network, GROQ_BASE_URL, or use MODEL=offline$/,
    );
    expect(line).not.toMatch(/\n\s+at /);
  });

  it("any other error: one line with a --debug hint; the stack only with --debug", () => {
    const err = new Error(
      'MCP tool mapping: getTask must be a read tool, but the server marks "update_task" as writing',
    );
    const line = describeUnexpected(err, false);
    expect(line).not.toContain("\n");
    expect(line).toMatch(
      /^MCP tool mapping: getTask must be a read tool.*\(run again with --debug for the stack trace\)$/,
    );
    expect(describeUnexpected(err, true)).toMatch(/\n\s+at /);
  });
});

describe("the CLI with a rejected model key", () => {
  let portal: Portal;
  let groq: RunningFakeGroq;
  beforeEach(async () => {
    portal = await startPortal();
    groq = await startFakeGroq({ apiKey: "gsk_the_right_key", script: () => ({ content: "never" }) });
  });
  afterEach(async () => {
    await groq.close();
    await portal.emulator.close();
  });

  it("the run ends NOT_EXECUTED / MODEL_AUTH_FAILED naming GROQ_API_KEY: no stack, no raw body, no write, and the ending is audited", async () => {
    const dataDir = tempDir();
    const env = envFor(portal, dataDir, {
      MODEL: `groq/${MODEL_ID}`,
      GROQ_API_KEY: "gsk_bad",
      GROQ_BASE_URL: groq.baseUrl,
    });
    const r = await runCli(["run", "rename task 4 to X", "--no-prompt", "--json"], env);
    expect(r.code).toBe(2);
    const out = parseJsonOutput(r.stdout);
    expect(out).toMatchObject({ outcome: "NOT_EXECUTED", reasonCode: "MODEL_AUTH_FAILED" });
    expect(out.reason).toMatch(/refused the API key .*check GROQ_API_KEY/);
    expect(r.stdout + r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stdout + r.stderr).not.toContain('{"error"');
    expect(await portal.writes()).toHaveLength(0);
    const audit = parseJsonOutput((await runCli(["audit", "show", out.threadId, "--json"], env)).stdout);
    expect(JSON.stringify(audit)).toContain("MODEL_AUTH_FAILED");
  }, 60_000);
});
