/**
 * Chat messages while a structured question waits (issue 13), at graph level with a scripted model
 * whose every call is counted. Studio's chat sends a new run with input {messages: [...]} to a thread
 * waiting at ask_input (LangGraph then drops its pending ask_input task and starts at the agent); the
 * SDK's thread streams (run.start on a thread with a pending interrupt) send the same input folded into
 * command.resume. Either way the message is the answer only when it validates as the question's single
 * field; otherwise it is refused with what is expected. It never reaches the model, and the question
 * keeps waiting.
 */
import { describe, expect, it } from "vitest";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { recoverThread, startRun, submitDecision } from "../src/app/threads.js";
import { viewThread } from "../src/app/view-thread.js";
import { answersFromChat, chatMessageText } from "../src/hitl/structured-input.js";
import { eachTestApp } from "./support/harness.js";
import { ScriptedChatModel, askThenPropose, call, type Script } from "./support/scripted-model.js";

const t = eachTestApp();

/** Asks which task (one number field, or two fields), then reads and proposes the answered one; records what the model saw. */
function asker(fields: Record<string, unknown>) {
  const seen: BaseMessage[][] = [];
  const asks = askThenPropose(fields, { TITLE: "Chosen in chat" });
  const script: Script = (messages, tools) => {
    seen.push(messages);
    return asks(messages, tools);
  };
  return { script, seen };
}

const ONE_FIELD = { taskId: { type: "number", description: "Bitrix24 task id" } };
const TWO_FIELDS = {
  taskId: { type: "number", description: "Bitrix24 task id" },
  note: { type: "string", description: "why" },
};

async function asked(fields: Record<string, unknown>) {
  const model = asker(fields);
  await t.open({ model: new ScriptedChatModel(model.script) });
  const view = await startRun(t.app, {
    request: "rename the lab task to Chosen in chat",
    requestedBy: "demo-user",
  });
  expect(view.status).toBe("awaiting_input");
  expect(model.seen).toHaveLength(1);
  return {
    model,
    threadId: view.threadId,
    config: { configurable: { thread_id: view.threadId }, durability: "sync" as const },
  };
}

const chat = (content: string) => ({ messages: [{ role: "user", content }] });
const seenText = (seen: BaseMessage[][]) => seen.flat().map((m) => m.text);

describe("a chat message sent as new run input while a question waits (what Studio's chat sends)", () => {
  it("that validates as the single field is the answer: no model call for the chat itself, the model sees only the tool answer, then the approval", async () => {
    const { model, threadId, config } = await asked(ONE_FIELD);
    await t.app.graph.invoke(chat("4") as never, config);
    const view = await viewThread(t.app, threadId);
    expect(view.status).toBe("awaiting_approval");
    expect(view.approval?.envelope.object.id).toBe(4);
    // Two model calls after the answer (read, propose); the chat message itself was never shown as a message.
    expect(model.seen).toHaveLength(3);
    for (const conversation of model.seen.slice(1)) {
      expect(conversation.filter((m) => m.getType() === "human").map((m) => m.text)).toEqual([
        "rename the lab task to Chosen in chat",
      ]);
      const tool = conversation.find((m) => m.getType() === "tool");
      expect(tool?.text).toBe(JSON.stringify({ taskId: 4 }));
    }
    expect(view.state?.messages.some((m) => m.getType() === "human" && m.text === "4")).toBe(false);
    expect(await t.portal.writes()).toHaveLength(0);
  });

  it("that does not validate is refused visibly with the fields and the example; the model is not called and the same question waits", async () => {
    const { model, threadId, config } = await asked(ONE_FIELD);
    const before = await viewThread(t.app, threadId);
    await t.app.graph.invoke(chat("the fourth one, please") as never, config);
    const view = await viewThread(t.app, threadId);
    expect(model.seen).toHaveLength(1);
    expect(seenText(model.seen)).not.toContain("the fourth one, please");
    expect(view.status).toBe("awaiting_input");
    expect(view.input).toMatchObject({
      question: "Which task do you mean?",
      askedAt: before.input!.askedAt,
      exampleResume: { answers: { taskId: 0 } },
    });
    expect(view.input?.lastRefusal?.code).toBe("INVALID_ANSWER");
    expect(view.input?.lastRefusal?.reason).toMatch(
      /the chat message "the fourth one, please" is not a valid answer to the waiting question "Which task do you mean\?": it expects taskId: a number \(Bitrix24 task id\)/,
    );
    expect(view.input?.lastRefusal?.reason).toContain('{"answers":{"taskId":0}}');
    expect(view.state?.messages.some((m) => m.text === "the fourth one, please")).toBe(false);

    // The question still takes its answer, the structured way.
    await t.app.graph.invoke(new Command({ resume: { answers: { taskId: 4 } } }), config);
    expect((await viewThread(t.app, threadId)).status).toBe("awaiting_approval");
  });

  it("a question with two fields cannot be answered by a chat message: refused naming both fields; no model call", async () => {
    const { model, threadId, config } = await asked(TWO_FIELDS);
    await t.app.graph.invoke(chat("4") as never, config);
    const view = await viewThread(t.app, threadId);
    expect(model.seen).toHaveLength(1);
    expect(view.status).toBe("awaiting_input");
    expect(view.input?.lastRefusal?.reason).toMatch(
      /has 2 fields \(taskId: a number \(Bitrix24 task id\); note: text \(why\)\), and a chat message can answer only a question with one\. Answer it \(resume\) with \{"answers":\{"taskId":0,"note":"…"\}\}/,
    );
  });
});

describe("a chat message folded into command.resume (the SDK's run.start on an interrupted thread) or a plain string resume", () => {
  it("{messages: [...]} as the resume value answers a single-field question when it validates, and is refused otherwise", async () => {
    const { model, threadId, config } = await asked(ONE_FIELD);
    await t.app.graph.invoke(
      new Command({ resume: { messages: [{ type: "human", content: "four" }] } }),
      config,
    );
    let view = await viewThread(t.app, threadId);
    expect(view.status).toBe("awaiting_input");
    expect(view.input?.lastRefusal?.reason).toMatch(/the chat message "four" is not a valid answer/);
    expect(model.seen).toHaveLength(1);
    await t.app.graph.invoke(new Command({ resume: "4" }), config);
    view = await viewThread(t.app, threadId);
    expect(view.status).toBe("awaiting_approval");
    expect(view.approval?.envelope.object.id).toBe(4);
    expect(seenText(model.seen)).not.toContain("four");
  });
});

describe("reading chat messages (pure)", () => {
  it("takes the last human message's text from every shape a client sends; other values are not chat", () => {
    expect(chatMessageText("4")).toBe("4");
    expect(
      chatMessageText({
        messages: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
        ],
      }),
    ).toBe("a");
    expect(chatMessageText({ messages: [{ type: "human", content: [{ type: "text", text: "4" }] }] })).toBe(
      "4",
    );
    expect(
      chatMessageText({
        messages: [
          {
            lc: 1,
            type: "constructor",
            id: ["langchain_core", "messages", "HumanMessage"],
            kwargs: { content: "7" },
          },
        ],
      }),
    ).toBe("7");
    expect(chatMessageText({ messages: [{ role: "assistant", content: "b" }] })).toBe("");
    expect(chatMessageText({ answers: { taskId: 4 } })).toBeUndefined();
    expect(chatMessageText({ decisions: [] })).toBeUndefined();
    expect(answersFromChat("Q?", { status: { type: "enum", choices: ["open", "done"] } }, " done ")).toEqual({
      ok: true,
      answers: { status: "done" },
    });
    expect(
      answersFromChat("Q?", { status: { type: "enum", choices: ["open", "done"] } }, "closed"),
    ).toMatchObject({ ok: false, reason: expect.stringContaining('status: one of "open", "done"') });
  });
});

describe("the budget of invalid answers to a question", () => {
  it("is counted in the journal: a fork of the checkpoint from before the refusals does not reset it, and the fifth invalid answer ends the run", async () => {
    const { model, threadId, config } = await asked(ONE_FIELD);
    // The checkpoint at the question, before any answer: its state holds no refusals.
    const atQuestion = (await t.app.graph.getState(config)).config;
    const bad = (from: typeof config | typeof atQuestion) =>
      t.app.graph.invoke(new Command({ resume: { answers: { taskId: "the fourth" } } }), {
        ...from,
        durability: "sync" as const,
      });
    for (let i = 0; i < 4; i++) {
      await bad(config);
      // Each refusal shows in the view (from its audit record), so a caller can tell this answer was refused.
      const view = await viewThread(t.app, threadId);
      expect(view.state?.refusals.map((r) => r.code)).toEqual(
        Array.from({ length: i + 1 }, () => "INVALID_ANSWER"),
      );
      expect(view.input?.lastRefusal?.code).toBe("INVALID_ANSWER");
    }
    expect((await viewThread(t.app, threadId)).status).toBe("awaiting_input");
    expect((await t.app.deps.journal.getQuestion(threadId))?.invalidAnswers).toBe(4);
    // Anyone who can reach the API or the checkpoints resumes the old checkpoint: state's count starts
    // again from none, the journal's does not.
    await bad(atQuestion);
    const ended = await viewThread(t.app, threadId);
    expect(ended.status).toBe("finished");
    expect(ended.state?.reasonCode).toBe("TOO_MANY_REFUSED_DECISIONS");
    expect(ended.state?.reason).toMatch(/^5 invalid answers/);
    expect(model.seen).toHaveLength(1);
    expect(await t.portal.writes()).toEqual([]);
  });
});

describe("a pause at a question the journal no longer holds open", () => {
  it("a second question under an already answered tool call id (a provider that reuses ids) does not loop: recover drops it and the run goes on to an approval", async () => {
    const ask = {
      name: "request_input",
      args: { question: "Which task do you mean?", fields: ONE_FIELD },
      id: "same-id",
      type: "tool_call" as const,
    };
    const script: Script = (messages) => {
      const tools = messages.filter((m) => m.getType() === "tool");
      const last = messages.at(-1);
      if (tools.length === 0) return new AIMessage({ content: "", tool_calls: [ask] });
      // Answered once: the model asks again, reusing the id.
      if (tools.length === 1 && last?.getType() === "tool")
        return new AIMessage({ content: "", tool_calls: [ask] });
      if (!tools.some((m) => (m as { name?: string }).name === "get_task_by_id"))
        return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            taskId: 4,
            fields: { TITLE: "Chosen in chat" },
            rationale: "the human chose it",
          }),
        ],
      });
    };
    await t.open({ model: new ScriptedChatModel(script) });
    const first = await startRun(t.app, {
      request: "rename the lab task to Chosen in chat",
      requestedBy: "demo-user",
    });
    expect(first.status).toBe("awaiting_input");
    // The answer closes the question; the second ask (same id) is not a question the journal holds open.
    const second = await submitDecision(t.app, first.threadId, { answers: { taskId: 4 } });
    expect(second.status).toBe("interrupted_run");
    expect((await t.app.deps.journal.getQuestion(first.threadId))?.status).toBe("answered");
    const recovered = await recoverThread(t.app, first.threadId);
    expect(recovered.status).toBe("awaiting_approval");
    expect(recovered.approval?.envelope.object.id).toBe(4);
    expect(
      (await t.app.deps.audit.records({ threadId: first.threadId })).filter(
        (r) => r.event === "answer_refused",
      ),
    ).toEqual([]);
    expect(await t.portal.writes()).toHaveLength(0);
  });
});
