import { describe, expect, it } from "vitest";
import { z } from "zod";
import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import {
  AIMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  type BaseMessage,
  type ToolCall,
} from "@langchain/core/messages";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { OFFLINE_MODEL_LABEL, OfflineTaskModel } from "../src/offline-demo/models/model.js";
import { parseFeedbackValue } from "../src/offline-demo/models/feedback.js";
import { parseRequest } from "../src/offline-demo/models/intent.js";
import { planRequest, splitClauses } from "../src/offline-demo/models/plan.js";

// A small portal whose answers have the shape of Bitrix24 tasks.task.* bodies (camelCase, string scalars).
const TIME = {
  start: 1767225600.1,
  finish: 1767225600.2,
  duration: 0.1,
  processing: 0,
  date_start: "2026-01-01T00:00:00+00:00",
  date_finish: "2026-01-01T00:00:00+00:00",
  operating_reset_at: 1767226200,
  operating: 0,
};

function task(id: string, title: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id,
    parentId: null,
    title,
    description: `Description of ${title}`,
    priority: "1",
    status: "2",
    responsibleId: "5",
    createdBy: "1",
    groupId: "3",
    deadline: "2026-06-30T18:00:00+03:00",
    changedDate: "2026-01-10T09:00:00+03:00",
    auditors: ["8"],
    accomplices: ["9"],
    subStatus: "2",
    action: { edit: true, remove: false, changeDeadline: true },
    ...extra,
  };
}

const PORTAL: Record<string, Record<string, unknown>> = {
  "4": task("4", "LAB-AGENT-EXEC-002 - BOUND ACTION TEST"),
  "6": task("6", "Read-only budget review", { action: { edit: false } }),
  "12": task("12", "Q3 report for the board", { priority: "2", responsibleId: "11" }),
  "13": task("13", "Q4 report draft"),
  "14": task("14", "Office move checklist"),
};

const getTaskById = tool(
  async ({ taskId }: { taskId: number }) => {
    if (taskId === 500) {
      // What the MCP adapter raises for an isError result; ToolNode turns it into an error ToolMessage.
      throw new Error(
        JSON.stringify({
          error: {
            kind: "transport_timeout",
            description: "no answer within 10000 ms",
            outcomeUnknown: false,
          },
        }),
      );
    }
    const t = PORTAL[String(taskId)];
    // Bitrix24 answers 200 with "result": [] for a task that is missing or not readable.
    return JSON.stringify(t ? { result: { task: t }, time: TIME } : { result: [], time: TIME });
  },
  {
    name: "get_task_by_id",
    description: "Read one Bitrix24 task (tasks.task.get).",
    schema: z.object({ taskId: z.number().int().positive().describe("Bitrix24 task id") }),
  },
);

const listTasks = tool(
  async ({ filter }: { filter?: Record<string, unknown>; start?: number }) => {
    const like = typeof filter?.["%TITLE"] === "string" ? filter["%TITLE"].toLowerCase() : "";
    const tasks = Object.values(PORTAL).filter((t) => String(t.title).toLowerCase().includes(like));
    return JSON.stringify({ result: { tasks }, total: tasks.length, time: TIME });
  },
  {
    name: "list_tasks",
    description: "List Bitrix24 tasks (tasks.task.list).",
    schema: z.object({
      filter: z
        .record(z.string(), z.unknown())
        .optional()
        .describe('Bitrix24 filter, e.g. {"%TITLE":"report"}'),
      start: z.number().int().optional(),
    }),
  },
);

const getTaskHistory = tool(
  async ({ taskId }: { taskId: number }) =>
    JSON.stringify({
      result: {
        list: [
          {
            id: "1",
            createdDate: "2026-01-10T09:00:00+03:00",
            field: "TITLE",
            value: { from: "a", to: "b" },
            user: { id: "1" },
            taskId: String(taskId),
          },
        ],
      },
      time: TIME,
    }),
  {
    name: "get_task_history",
    description: "History of one task (tasks.task.history.list).",
    schema: z.object({ taskId: z.number().int().positive() }),
  },
);

// The graph intercepts these two; their bodies never run in these tests.
const proposeChange = tool(async () => "intercepted by the graph", {
  name: "propose_change",
  description: "Propose a change to one task for human approval.",
  schema: z.object({
    taskId: z.number().int().positive(),
    fields: z.record(
      z.string().regex(/^[A-Z][A-Z0-9_]*$/),
      z.union([z.string(), z.number(), z.array(z.string())]),
    ),
    rationale: z.string(),
  }),
});

// Mirrors the shape of src/tools/proposal-tools.ts ChangeSetArgsSchema (2..5 actions in order).
const proposeChangeSet = tool(async () => "intercepted by the graph", {
  name: "propose_change_set",
  description: "Propose several changes that belong together as one change set.",
  schema: z.object({
    actions: z
      .array(
        z.object({
          operation: z.enum(["update_task", "add_task_comment"]),
          taskId: z.number().int().positive(),
          fields: z.record(z.string().regex(/^[A-Z][A-Z0-9_]*$/), z.string()),
        }),
      )
      .min(2)
      .max(5),
    rationale: z.string().min(1),
  }),
});

const requestInput = tool(async () => "intercepted by the graph", {
  name: "request_input",
  description: "Ask the human for structured input.",
  schema: z.object({
    question: z.string(),
    fields: z.record(
      z.string(),
      z.object({
        type: z.enum(["string", "number", "enum"]),
        description: z.string(),
        choices: z.array(z.string()).optional(),
      }),
    ),
  }),
});

const READ_TOOLS = [getTaskById, listTasks, getTaskHistory];
const ALL_TOOLS: StructuredToolInterface[] = [...READ_TOOLS, proposeChange, proposeChangeSet, requestInput];
const STOP_TOOLS = new Set(["propose_change", "propose_change_set", "request_input"]);

interface Run {
  messages: BaseMessage[];
  /** Every tool call the model made, in order. */
  calls: ToolCall[];
  last: AIMessage;
}

/**
 * The agent loop in miniature: model turn, read tools through a real ToolNode, repeat until the
 * model answers in text or calls a tool the graph would intercept.
 */
async function drive(messages: BaseMessage[], tools: StructuredToolInterface[] = ALL_TOOLS): Promise<Run> {
  const model = new OfflineTaskModel().bindTools(tools);
  const toolNode = new ToolNode(READ_TOOLS);
  const history = [...messages];
  const calls: ToolCall[] = [];
  for (let turn = 0; turn < 10; turn++) {
    const ai = (await model.invoke(history)) as AIMessage;
    history.push(ai);
    calls.push(...(ai.tool_calls ?? []));
    const call = ai.tool_calls?.[0];
    if (call === undefined || STOP_TOOLS.has(call.name)) return { messages: history, calls, last: ai };
    const out = (await toolNode.invoke({ messages: history })) as { messages: ToolMessage[] };
    history.push(...out.messages);
  }
  throw new Error("the offline model did not settle within 10 turns");
}

const names = (calls: ToolCall[]) => calls.map((c) => c.name);

describe("OfflineTaskModel: request phrasings", () => {
  it("renames a task: reads it first, then proposes with the current title in the rationale", async () => {
    const run = await drive([new HumanMessage('Rename task 4 to "Quarterly report v2"')]);
    expect(run.calls).toEqual([
      { id: "offline_call_1", name: "get_task_by_id", args: { taskId: 4 }, type: "tool_call" },
      {
        id: "offline_call_2",
        name: "propose_change",
        args: { taskId: 4, fields: { TITLE: "Quarterly report v2" }, rationale: expect.any(String) },
        type: "tool_call",
      },
    ]);
    const rationale = String(run.calls[1]?.args.rationale);
    expect(rationale).toContain("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
    expect(rationale).toContain("Quarterly report v2");
    expect(run.last.text).toMatch(/^\[offline model\]/);
    // The args satisfy the schema the graph binds for propose_change.
    expect(proposeChange.schema.safeParse(run.calls[1]?.args).success).toBe(true);
  });

  const cases: Array<[string, Record<string, string>, string]> = [
    ["set title of task 4 to Weekly sync notes", { TITLE: "Weekly sync notes" }, "LAB-AGENT-EXEC-002"],
    ['Change the title of task 4 to "Q3 report: final"', { TITLE: "Q3 report: final" }, "LAB-AGENT-EXEC-002"],
    ['rename task #4 to Report "final" draft', { TITLE: 'Report "final" draft' }, "LAB-AGENT-EXEC-002"],
    ["rename task 4 to “Curly quoted”", { TITLE: "Curly quoted" }, "LAB-AGENT-EXEC-002"],
    [
      "Please set the description of task 4 to Steps:\n1. build\n2. ship",
      { DESCRIPTION: "Steps:\n1. build\n2. ship" },
      "Description of LAB",
    ],
    [
      "set deadline of task 4 to 2026-07-01T18:00:00+03:00",
      { DEADLINE: "2026-07-01T18:00:00+03:00" },
      "2026-06-30T18:00:00+03:00",
    ],
    ["Set the deadline of task 4 to 2026-07-15", { DEADLINE: "2026-07-15" }, "2026-06-30T18:00:00+03:00"],
    ["set priority of task 4 to high", { PRIORITY: "2" }, '"1" (medium)'],
    ["set priority of task 4 to Low", { PRIORITY: "0" }, '"1" (medium)'],
    ["set task 4 priority to 1", { PRIORITY: "1" }, '"1" (medium)'],
    ["set status of task 4 to in progress", { STATUS: "3" }, '"2" (waiting)'],
    ["set status of task 4 to awaiting control", { STATUS: "4" }, '"2" (waiting)'],
    ["set status of task 4 to completed", { STATUS: "5" }, '"2" (waiting)'],
    ["set status of task 4 to deferred", { STATUS: "6" }, '"2" (waiting)'],
    ["change task 4's status to waiting", { STATUS: "2" }, '"2" (waiting)'],
    ["set status of task 4 to 5", { STATUS: "5" }, '"2" (waiting)'],
    ["change responsible for task 4 to 7", { RESPONSIBLE_ID: "7" }, '"5"'],
    ["Change the responsible person for task 4 to user 7", { RESPONSIBLE_ID: "7" }, '"5"'],
    ["assign task 4 to user 7", { RESPONSIBLE_ID: "7" }, '"5"'],
    ["Reassign task 4 to user #12.", { RESPONSIBLE_ID: "12" }, '"5"'],
  ];

  it.each(cases)("%s", async (request, fields, currentValue) => {
    const run = await drive([new HumanMessage(request)]);
    expect(names(run.calls)).toEqual(["get_task_by_id", "propose_change"]);
    expect(run.calls[0]?.args).toEqual({ taskId: 4 });
    expect(run.calls[1]?.args).toMatchObject({ taskId: 4, fields });
    expect(Object.keys(run.calls[1]?.args.fields ?? {})).toEqual(Object.keys(fields));
    expect(String(run.calls[1]?.args.rationale)).toContain(currentValue);
  });

  it("rejects values it cannot map, naming the accepted ones", async () => {
    for (const [request, hint] of [
      ["set priority of task 4 to urgent", "low, medium, high"],
      ["set deadline of task 4 to next friday", "ISO date"],
      ["set status of task 4 to blocked", "in progress"],
      ["assign task 4 to John", "numeric Bitrix24 user id"],
    ] as const) {
      const run = await drive([new HumanMessage(request)]);
      expect(run.calls).toEqual([]);
      expect(run.last.text).toContain(hint);
    }
  });

  it("answers an unsupported request in text, listing the phrasings it knows", async () => {
    const run = await drive([new HumanMessage("What is the weather in Berlin?")]);
    expect(run.calls).toEqual([]);
    expect(run.last.text).toMatch(/^\[offline model\] I did not recognise a supported request/);
    expect(run.last.text).toContain("rename task 4 to");
    expect(run.last.text).toContain("set priority of task 4 to low | medium | high");
  });

  it("ignores a leading system prompt", async () => {
    const run = await drive([
      new SystemMessage("You propose changes to Bitrix24 tasks."),
      new HumanMessage("rename task 4 to X"),
    ]);
    expect(names(run.calls)).toEqual(["get_task_by_id", "propose_change"]);
  });
});

describe("OfflineTaskModel: tool results", () => {
  it("stops with an explanation when the task is missing or unreadable (result: [])", async () => {
    const run = await drive([new HumanMessage("rename task 7 to Secret")]);
    expect(names(run.calls)).toEqual(["get_task_by_id"]);
    expect(run.last.tool_calls ?? []).toEqual([]);
    expect(run.last.text).toContain(
      'task 7 was not found or is not accessible (get_task_by_id returned "result": [])',
    );
  });

  it("stops with the reason when reading the task fails", async () => {
    const run = await drive([new HumanMessage("rename task 500 to X")]);
    const toolMsg = run.messages.find((m): m is ToolMessage => m.type === "tool");
    expect(toolMsg?.status).toBe("error");
    expect(names(run.calls)).toEqual(["get_task_by_id"]);
    expect(run.last.text).toContain("reading task 500 failed");
    expect(run.last.text).toContain("transport_timeout");
  });

  it("reads a Bitrix24 error body as a failure, not as a task", async () => {
    const messages: BaseMessage[] = [
      new HumanMessage("rename task 4 to X"),
      new AIMessage({
        content: "",
        tool_calls: [{ id: "offline_call_1", name: "get_task_by_id", args: { taskId: 4 } }],
      }),
      new ToolMessage({
        tool_call_id: "offline_call_1",
        content: JSON.stringify({ error: "QUERY_LIMIT_EXCEEDED", error_description: "Too many requests" }),
      }),
    ];
    const ai = (await new OfflineTaskModel().bindTools(ALL_TOOLS).invoke(messages)) as AIMessage;
    expect(ai.tool_calls ?? []).toEqual([]);
    expect(ai.text).toContain("QUERY_LIMIT_EXCEEDED: Too many requests");
  });

  it("proposes for a task it may not edit: refusing is the envelope's job, not the model's", async () => {
    const run = await drive([new HumanMessage("set priority of task 6 to high")]);
    expect(names(run.calls)).toEqual(["get_task_by_id", "propose_change"]);
    expect(run.calls[1]?.args).toMatchObject({ taskId: 6, fields: { PRIORITY: "2" } });
  });

  it("gives up in text when the graph answers the proposal with an error", async () => {
    const run = await drive([new HumanMessage("set priority of task 4 to high")]);
    const proposal = run.calls[1];
    expect(proposal?.name).toBe("propose_change");
    const refused = new ToolMessage({
      tool_call_id: proposal?.id ?? "",
      status: "error",
      content: 'Invalid proposal: PRIORITY must be one of 0, 1, 2 (got "9").',
    });
    const ai = (await new OfflineTaskModel()
      .bindTools(ALL_TOOLS)
      .invoke([...run.messages, refused])) as AIMessage;
    expect(ai.tool_calls ?? []).toEqual([]);
    expect(ai.text).toContain("was refused: Invalid proposal: PRIORITY must be one of 0, 1, 2");
    expect(ai.text).toContain("I will not retry");
  });
});

describe("OfflineTaskModel: reviewer feedback", () => {
  async function proposedThenRejected(
    request: string,
    feedback: string,
    answerProposal: boolean,
  ): Promise<AIMessage> {
    const run = await drive([new HumanMessage(request)]);
    const proposal = run.calls.at(-1);
    expect(proposal?.name).toBe("propose_change");
    const extra: BaseMessage[] = answerProposal
      ? [new ToolMessage({ tool_call_id: proposal?.id ?? "", content: "Rejected by the reviewer." })]
      : [];
    const human = new HumanMessage(
      `The reviewer rejected the proposal: ${feedback}. Propose a revised change or stop.`,
    );
    return (await new OfflineTaskModel()
      .bindTools(ALL_TOOLS)
      .invoke([...run.messages, ...extra, human])) as AIMessage;
  }

  it.each([
    ["instead use Quarterly report v3", "Quarterly report v3", true],
    ["the title is too long, instead use Q3 v3", "Q3 v3", false],
    ['use "Board: Q3 report" instead', "Board: Q3 report", true],
    ["please call it 'Q3 summary'", "Q3 summary", false],
  ] as const)("revises the title after %j", async (feedback, title, answerProposal) => {
    const ai = await proposedThenRejected('rename task 4 to "Quarterly report v2"', feedback, answerProposal);
    expect(ai.tool_calls).toEqual([
      {
        id: "offline_call_3",
        name: "propose_change",
        args: {
          taskId: 4,
          fields: { TITLE: title },
          rationale: expect.stringContaining("Revised after reviewer feedback"),
        },
        type: "tool_call",
      },
    ]);
    expect(String(ai.tool_calls?.[0]?.args.rationale)).toContain("LAB-AGENT-EXEC-002 - BOUND ACTION TEST");
  });

  it("maps a revised value for an enumerated field", async () => {
    const ai = await proposedThenRejected("set priority of task 4 to medium", "use high instead", true);
    expect(ai.tool_calls?.[0]?.args).toMatchObject({ taskId: 4, fields: { PRIORITY: "2" } });
  });

  it("stops when the feedback names no new value, or the same value again", async () => {
    const vague = await proposedThenRejected("rename task 4 to X", "not now", true);
    expect(vague.tool_calls ?? []).toEqual([]);
    expect(vague.text).toContain("without naming another value");

    const same = await proposedThenRejected("rename task 4 to X", 'use "X" instead', true);
    expect(same.tool_calls ?? []).toEqual([]);
    expect(same.text).toContain("which is what I already proposed");

    const invalid = await proposedThenRejected("set priority of task 4 to low", "use critical instead", true);
    expect(invalid.tool_calls ?? []).toEqual([]);
    expect(invalid.text).toContain("not a valid PRIORITY");
  });
});

describe("OfflineTaskModel: finding the task by title", () => {
  it("uses the single match of a title search", async () => {
    const run = await drive([new HumanMessage('rename the Q3 report task to "Q3 report (final)"')]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      ["list_tasks", { filter: { "%TITLE": "Q3 report" } }],
      ["get_task_by_id", { taskId: 12 }],
      [
        "propose_change",
        {
          taskId: 12,
          fields: { TITLE: "Q3 report (final)" },
          rationale: expect.stringContaining("Q3 report for the board"),
        },
      ],
    ]);
    expect(String(run.calls[2]?.args.rationale)).toContain('title containing "Q3 report"');
  });

  it("asks which task is meant when several match, then proceeds with the answer", async () => {
    const run = await drive([new HumanMessage("set priority of the report task to low")]);
    expect(names(run.calls)).toEqual(["list_tasks", "request_input"]);
    const ask = run.calls[1];
    expect(ask?.args).toEqual({
      question: "Which task do you mean?",
      fields: {
        taskId: {
          type: "enum",
          description: expect.stringContaining("12: Q3 report for the board; 13: Q4 report draft"),
          choices: ["12", "13"],
        },
      },
    });
    expect(requestInput.schema.safeParse(ask?.args).success).toBe(true);

    const answered = [
      ...run.messages,
      new ToolMessage({ tool_call_id: ask?.id ?? "", content: JSON.stringify({ taskId: "13" }) }),
    ];
    const rest = await drive(answered);
    expect(rest.calls.map((c) => [c.name, c.args])).toEqual([
      ["get_task_by_id", { taskId: 13 }],
      [
        "propose_change",
        { taskId: 13, fields: { PRIORITY: "0" }, rationale: expect.stringContaining('"1" (medium)') },
      ],
    ]);
  });

  it("asks for the task id when the request names no task", async () => {
    const run = await drive([new HumanMessage("rename the task to Launch plan")]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      [
        "request_input",
        {
          question: expect.stringContaining("Which task should I change"),
          fields: { taskId: { type: "number", description: "Bitrix24 task id" } },
        },
      ],
    ]);
    const answered = [
      ...run.messages,
      new ToolMessage({ tool_call_id: run.calls[0]?.id ?? "", content: '{"taskId":4}' }),
    ];
    const rest = await drive(answered);
    expect(names(rest.calls)).toEqual(["get_task_by_id", "propose_change"]);
    expect(rest.calls[1]?.args).toMatchObject({ taskId: 4, fields: { TITLE: "Launch plan" } });
  });

  it("stops when no title matches", async () => {
    const run = await drive([new HumanMessage("rename the Q9 forecast task to X")]);
    expect(names(run.calls)).toEqual(["list_tasks"]);
    expect(run.last.text).toContain('No task title contains "Q9 forecast"');
  });
});

describe("OfflineTaskModel: as a chat model", () => {
  it("is a BaseChatModel with a label", () => {
    expect(new OfflineTaskModel()).toBeInstanceOf(BaseChatModel);
    expect(OFFLINE_MODEL_LABEL).toBe("offline (deterministic, no LLM)");
  });

  it("calls only tools that were bound, and says what is missing", async () => {
    const onlyPropose = await new OfflineTaskModel()
      .bindTools([proposeChange])
      .invoke([new HumanMessage("rename task 4 to X")]);
    expect(onlyPropose.tool_calls ?? []).toEqual([]);
    expect(onlyPropose.text).toContain("no get_task_by_id tool is bound");

    const unbound = await new OfflineTaskModel().invoke([new HumanMessage("rename task 4 to X")]);
    expect(unbound.tool_calls ?? []).toEqual([]);
    expect(unbound.text).toContain("no get_task_by_id tool is bound");

    const run = await drive([new HumanMessage("rename task 4 to X")], READ_TOOLS);
    expect(names(run.calls)).toEqual(["get_task_by_id"]);
    expect(run.last.text).toContain("no propose_change tool is bound");

    const noList = await drive(
      [new HumanMessage("rename the Q3 report task to X")],
      [getTaskById, proposeChange],
    );
    expect(noList.calls).toEqual([]);
    expect(noList.last.text).toContain("no list_tasks tool is bound");
  });

  it("uses server-prefixed tool names from the MCP adapter", async () => {
    const prefixed = tool(async () => "", {
      name: "tasks__get_task_by_id",
      description: "d",
      schema: z.object({ taskId: z.number() }),
    });
    const ai = await new OfflineTaskModel()
      .bindTools([prefixed, proposeChange])
      .invoke([new HumanMessage("rename task 4 to X")]);
    expect(ai.tool_calls?.map((c) => c.name)).toEqual(["tasks__get_task_by_id"]);
  });

  it("gives the same answer for the same conversation", async () => {
    const a = await drive([new HumanMessage("set status of task 4 to completed")]);
    const b = await drive([new HumanMessage("set status of task 4 to completed")]);
    expect(b.calls).toEqual(a.calls);
    expect(b.last.text).toBe(a.last.text);
  });

  it("streams the same tool call", async () => {
    const bound = new OfflineTaskModel().bindTools(ALL_TOOLS);
    const stream = await bound.stream([new HumanMessage("rename task 4 to X")]);
    let merged;
    for await (const chunk of stream) merged = merged === undefined ? chunk : merged.concat(chunk);
    expect(merged?.tool_calls).toEqual([
      { id: "offline_call_1", name: "get_task_by_id", args: { taskId: 4 }, type: "tool_call" },
    ]);
  });

  it("drives a LangGraph agent loop to the proposal", async () => {
    const model = new OfflineTaskModel().bindTools(ALL_TOOLS);
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
      .addNode("tools", new ToolNode(READ_TOOLS))
      .addEdge(START, "agent")
      .addConditionalEdges(
        "agent",
        (state) => {
          const call = (state.messages.at(-1) as AIMessage).tool_calls?.[0];
          return call === undefined || STOP_TOOLS.has(call.name) ? "end" : "tools";
        },
        { tools: "tools", end: END },
      )
      .addEdge("tools", "agent")
      .compile();
    const result = await graph.invoke({ messages: [new HumanMessage("assign task 4 to user 7")] });
    const last = result.messages.at(-1) as AIMessage;
    expect(last.tool_calls?.[0]).toMatchObject({
      name: "propose_change",
      args: { taskId: 4, fields: { RESPONSIBLE_ID: "7" } },
    });
    expect(result.messages.map((m) => m.type)).toEqual(["human", "ai", "tool", "ai"]);
  });
});

describe("offline request and feedback parsing", () => {
  it("keeps the title verbatim, stripping only quotes that wrap all of it", () => {
    const title = (s: string) => {
      const p = parseRequest(s);
      return p.ok ? p.intent.rawValue : undefined;
    };
    expect(title('rename task 4 to "a" and "b"')).toBe('"a" and "b"');
    expect(title("rename task 4 to 'It''s'")).toBe("'It''s'");
    expect(title("rename task 4 to Fix: the  login page.")).toBe("Fix: the  login page.");
    expect(title("rename the move to cloud task to Cloud move")).toBe("Cloud move");
  });

  it("finds the target in each form", () => {
    const target = (s: string) => {
      const p = parseRequest(s);
      return p.ok ? p.intent.target : undefined;
    };
    expect(target("rename the move to cloud task to Cloud move")).toEqual({
      kind: "title",
      fragment: "move to cloud",
    });
    expect(target('rename task titled "Q3 report" to X')).toEqual({ kind: "title", fragment: "Q3 report" });
    expect(target("rename task number 15 to X")).toEqual({ kind: "id", taskId: 15 });
    expect(target("rename task to X")).toEqual({ kind: "unspecified" });
  });

  it("reads the value out of reviewer feedback", () => {
    const wrap = (m: string) => `The reviewer rejected the proposal: ${m}. Propose a revised change or stop.`;
    expect(parseFeedbackValue(wrap("instead use 2026-07-02"))).toBe("2026-07-02");
    expect(parseFeedbackValue(wrap("use user 9 instead"))).toBe("user 9");
    expect(parseFeedbackValue(wrap("don't do it"))).toBeUndefined();
    expect(parseFeedbackValue(wrap("wrong task"))).toBeUndefined();
  });
});

describe("OfflineTaskModel: several changes in one request", () => {
  const REQUEST =
    "set status of task 4 to awaiting control; assign task 4 to user 5; comment on task 4: Ready for review, please check";

  it("reads the task once, then proposes one change set in request order, merging the consecutive updates", async () => {
    const run = await drive([new HumanMessage(REQUEST)]);
    expect(run.calls).toEqual([
      { id: "offline_call_1", name: "get_task_by_id", args: { taskId: 4 }, type: "tool_call" },
      {
        id: "offline_call_2",
        name: "propose_change_set",
        args: {
          actions: [
            { operation: "update_task", taskId: 4, fields: { STATUS: "4", RESPONSIBLE_ID: "5" } },
            {
              operation: "add_task_comment",
              taskId: 4,
              fields: { POST_MESSAGE: "Ready for review, please check" },
            },
          ],
          rationale: expect.any(String),
        },
        type: "tool_call",
      },
    ]);
    const args = run.calls[1]?.args;
    expect(Object.keys(args?.actions[0].fields)).toEqual(["STATUS", "RESPONSIBLE_ID"]);
    expect(proposeChangeSet.schema.safeParse(args).success).toBe(true);
    const rationale = String(args?.rationale);
    expect(rationale).toContain("2 changes in one request, to run in this order");
    expect(rationale).toContain(
      '1. set STATUS to "4" (awaiting control) and RESPONSIBLE_ID to "5" on task 4',
    );
    expect(rationale).toContain('2. comment on task 4: "Ready for review, please check"');
    expect(rationale).toContain('Read with get_task_by_id: task 4 "LAB-AGENT-EXEC-002 - BOUND ACTION TEST"');
    expect(rationale).toContain('current STATUS "2" (waiting), current RESPONSIBLE_ID "5"');
    expect(run.last.text).toMatch(/^\[offline model\] Proposing a change set of 2 actions/);
  });

  it("reads every distinct task once, one call per turn, in the order the tasks first appear", async () => {
    const run = await drive([
      new HumanMessage(
        "set priority of task 12 to low, then set status of task 4 to completed and then comment on task 12: Handed over",
      ),
    ]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      ["get_task_by_id", { taskId: 12 }],
      ["get_task_by_id", { taskId: 4 }],
      [
        "propose_change_set",
        {
          actions: [
            { operation: "update_task", taskId: 12, fields: { PRIORITY: "0" } },
            { operation: "update_task", taskId: 4, fields: { STATUS: "5" } },
            { operation: "add_task_comment", taskId: 12, fields: { POST_MESSAGE: "Handed over" } },
          ],
          rationale: expect.stringContaining(
            'task 12 "Q3 report for the board", current PRIORITY "2" (high); task 4 "LAB-AGENT-EXEC-002',
          ),
        },
      ],
    ]);
    expect(
      run.messages
        .filter((m) => m.type === "ai")
        .every((m) => ((m as AIMessage).tool_calls ?? []).length === 1),
    ).toBe(true);
  });

  it('resolves "it" / "the task" to the previous clause\'s task', async () => {
    const run = await drive([
      new HumanMessage("set status of task 4 to awaiting control and then comment on it: Ready"),
    ]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      ["get_task_by_id", { taskId: 4 }],
      [
        "propose_change_set",
        {
          actions: [
            { operation: "update_task", taskId: 4, fields: { STATUS: "4" } },
            { operation: "add_task_comment", taskId: 4, fields: { POST_MESSAGE: "Ready" } },
          ],
          rationale: expect.any(String),
        },
      ],
    ]);
  });

  it("proposes clauses that merge into one write with propose_change, as one proposal with several fields", async () => {
    const run = await drive([new HumanMessage("set status of task 4 to in progress; assign it to user 7")]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      ["get_task_by_id", { taskId: 4 }],
      [
        "propose_change",
        {
          taskId: 4,
          fields: { STATUS: "3", RESPONSIBLE_ID: "7" },
          rationale: expect.stringContaining("merged into one write"),
        },
      ],
    ]);
    expect(proposeChange.schema.safeParse(run.calls[1]?.args).success).toBe(true);
  });

  it("leaves a single-clause request exactly as before, even with a separator inside its text", async () => {
    for (const [request, fields] of [
      ["set priority of task 4 to high", { PRIORITY: "2" }],
      [
        "set description of task 4 to build; ship and then celebrate",
        { DESCRIPTION: "build; ship and then celebrate" },
      ],
      ['comment on task 4: "Done; set up the demo next"', { POST_MESSAGE: "Done; set up the demo next" }],
    ] as const) {
      const run = await drive([new HumanMessage(request)]);
      expect(names(run.calls)).toEqual(["get_task_by_id", "propose_change"]);
      expect(run.calls[1]?.args).toMatchObject({ taskId: 4, fields });
    }
  });

  it("answers an invalid clause value like the single-change path, naming the clause", async () => {
    const run = await drive([new HumanMessage("set status of task 4 to completed; assign it to John")]);
    expect(run.calls).toEqual([]);
    expect(run.last.text).toBe(
      '[offline model] In clause 2 ("assign it to John") I understood a change of RESPONSIBLE_ID, but "John" is not a value I can propose: expected a numeric Bitrix24 user id, e.g. user 7.',
    );
  });

  it("refuses tasks named by title, a first clause without a task id, unknown clauses, a field set twice and too many actions", async () => {
    const cases: Array<[string, string]> = [
      [
        "set status of task 4 to completed; rename the Q3 report task to Done",
        'Clause 2 ("rename the Q3 report task to Done") names its task by title ("Q3 report"). A request with several changes must name each task by id',
      ],
      ["rename it to X; comment on it: done", 'Clause 1 ("rename it to X") does not name a task by id'],
      [
        "set status of task 4 to completed; set the mood of task 4 to happy",
        'I did not recognise clause 2 ("set the mood of task 4 to happy") as a supported change',
      ],
      [
        "set status of task 4 to completed; set status of it to deferred",
        "Clauses 1 and 2 both set STATUS of task 4",
      ],
      [
        "comment on task 4: a; comment on it: b; comment on it: c; comment on it: d; comment on it: e; comment on it: f",
        "asks for 6 separate changes; one change set holds at most 5",
      ],
    ];
    for (const [request, message] of cases) {
      const run = await drive([new HumanMessage(request)]);
      expect(run.calls).toEqual([]);
      expect(run.last.text).toContain(message);
    }
  });

  it("stops when a task of the set cannot be read", async () => {
    const run = await drive([
      new HumanMessage("set status of task 4 to completed; set status of task 7 to completed"),
    ]);
    expect(run.calls.map((c) => [c.name, c.args])).toEqual([
      ["get_task_by_id", { taskId: 4 }],
      ["get_task_by_id", { taskId: 7 }],
    ]);
    expect(run.last.text).toContain(
      "I cannot propose these changes: task 7 was not found or is not accessible",
    );
  });

  it("says so when propose_change_set is not bound", async () => {
    const run = await drive([new HumanMessage(REQUEST)], [...READ_TOOLS, proposeChange]);
    expect(names(run.calls)).toEqual(["get_task_by_id"]);
    expect(run.last.text).toContain("no propose_change_set tool is bound");
  });

  it("stops after a rejected change set, whatever the feedback asks for", async () => {
    for (const feedback of ["not now", 'use "user 9" instead']) {
      const run = await drive([new HumanMessage(REQUEST)]);
      const set = run.calls.at(-1);
      expect(set?.name).toBe("propose_change_set");
      const human = new HumanMessage(
        `The reviewer rejected the proposal: ${feedback}. Propose a revised change or stop.`,
      );
      const ai = (await new OfflineTaskModel()
        .bindTools(ALL_TOOLS)
        .invoke([...run.messages, human])) as AIMessage;
      expect(ai.tool_calls ?? []).toEqual([]);
      expect(ai.text).toContain(`The reviewer rejected the change set of 2 actions ("${feedback}")`);
      expect(ai.text).toContain("I do not revise change sets");
    }
  });

  it("stops after a rejected merged proposal, and keeps revising single proposals", async () => {
    const merged = await drive([
      new HumanMessage("set status of task 4 to in progress; assign it to user 7"),
    ]);
    const human = new HumanMessage(
      'The reviewer rejected the proposal: use "user 9" instead. Propose a revised change or stop.',
    );
    const ai = (await new OfflineTaskModel()
      .bindTools(ALL_TOOLS)
      .invoke([...merged.messages, human])) as AIMessage;
    expect(ai.tool_calls ?? []).toEqual([]);
    expect(ai.text).toContain("combined several changes from one request (STATUS, RESPONSIBLE_ID)");

    const single = await drive([new HumanMessage("assign task 4 to user 7")]);
    const revised = (await new OfflineTaskModel()
      .bindTools(ALL_TOOLS)
      .invoke([...single.messages, human])) as AIMessage;
    expect(revised.tool_calls?.[0]).toMatchObject({
      name: "propose_change",
      args: { taskId: 4, fields: { RESPONSIBLE_ID: "9" } },
    });
  });

  it("reports a refused change set without retrying", async () => {
    const run = await drive([new HumanMessage(REQUEST)]);
    const refused = new ToolMessage({
      tool_call_id: run.calls.at(-1)?.id ?? "",
      status: "error",
      content: "Error: invalid change set: actions: too many",
    });
    const ai = (await new OfflineTaskModel()
      .bindTools(ALL_TOOLS)
      .invoke([...run.messages, refused])) as AIMessage;
    expect(ai.tool_calls ?? []).toEqual([]);
    expect(ai.text).toContain("The change set of 2 actions was refused: Error: invalid change set");
  });
});

describe("offline multi-clause parsing", () => {
  it('splits at ";", ", then", ", and then" and " and then" when a clause verb follows', () => {
    expect(splitClauses("set status of task 4 to completed; assign task 4 to user 5")).toEqual([
      "set status of task 4 to completed",
      "assign task 4 to user 5",
    ]);
    expect(
      splitClauses("rename task 4 to A, then set priority of it to high, and then comment on it: ok"),
    ).toEqual(["rename task 4 to A", "set priority of it to high", "comment on it: ok"]);
    expect(
      splitClauses("set status of task 4 to done and then please assign it to user 2; then comment on it: x"),
    ).toEqual(["set status of task 4 to done", "assign it to user 2", "comment on it: x"]);
  });

  it("keeps separators inside double quotes or not followed by a clause verb", () => {
    expect(splitClauses('rename task 4 to "Build; set up CI"')).toEqual([
      'rename task 4 to "Build; set up CI"',
    ]);
    expect(splitClauses("comment on task 4: done, then we ship; thanks")).toEqual([
      "comment on task 4: done, then we ship; thanks",
    ]);
    expect(splitClauses("comment on task 4: “Plan; then set targets”; assign it to user 3")).toEqual([
      "comment on task 4: “Plan; then set targets”",
      "assign it to user 3",
    ]);
  });

  it('resolves "it", "the task" and "the same task" to the previous clause\'s task', () => {
    const plan = planRequest(
      "set status of task 4 to completed; comment on task 12: moved; assign the task to user 3; set priority of the same task to low; comment on it: done",
    );
    expect(plan.kind).toBe("multi");
    if (plan.kind !== "multi") return;
    expect(plan.clauses.map((c) => [c.index, c.taskId, c.refersBack])).toEqual([
      [1, 4, false],
      [2, 12, false],
      [3, 12, true],
      [4, 12, true],
      [5, 12, true],
    ]);
    expect(plan.actions).toEqual([
      { operation: "update_task", taskId: 4, fields: { STATUS: "5" }, clauses: [1] },
      { operation: "add_task_comment", taskId: 12, fields: { POST_MESSAGE: "moved" }, clauses: [2] },
      {
        operation: "update_task",
        taskId: 12,
        fields: { RESPONSIBLE_ID: "3", PRIORITY: "0" },
        clauses: [3, 4],
      },
      { operation: "add_task_comment", taskId: 12, fields: { POST_MESSAGE: "done" }, clauses: [5] },
    ]);
  });

  it("merges only consecutive updates of the same task", () => {
    const plan = planRequest(
      "set status of task 4 to in progress; comment on it: started; set status of it to completed; set priority of task 5 to high",
    );
    expect(plan.kind === "multi" && plan.actions.map((a) => [a.operation, a.taskId, a.fields])).toEqual([
      ["update_task", 4, { STATUS: "3" }],
      ["add_task_comment", 4, { POST_MESSAGE: "started" }],
      ["update_task", 4, { STATUS: "5" }],
      ["update_task", 5, { PRIORITY: "2" }],
    ]);
  });

  it("gives a one-clause request to parseRequest unchanged", () => {
    for (const request of [
      "rename task 4 to X",
      "rename it to X",
      "set description of task 4 to a; b",
      "comment on task 4: fine, then done",
    ]) {
      expect(planRequest(request)).toEqual({ kind: "single", parsed: parseRequest(request) });
    }
    expect(parseRequest("comment on it: x")).toEqual({ ok: false, kind: "unsupported" });
  });
});

describe("offline model: deals (update_deal)", () => {
  it("parses the deal phrasings into a field and a value, and refuses a bad value naming it", async () => {
    const { parseDealRequest } = await import("../src/offline-demo/models/deal-request.js");
    expect(parseDealRequest("move deal 3 to WON")).toEqual({
      ok: true,
      intent: { dealId: 3, field: "STAGE_ID", value: "WON" },
    });
    expect(parseDealRequest("set the stage of deal 3 to final invoice")).toEqual({
      ok: true,
      intent: { dealId: 3, field: "STAGE_ID", value: "FINAL_INVOICE" },
    });
    expect(parseDealRequest("set the amount of deal 3 to 51 000.50 RUB")).toEqual({
      ok: true,
      intent: { dealId: 3, field: "OPPORTUNITY", value: "51000.50" },
    });
    expect(parseDealRequest("assign deal 2 to user 5")).toEqual({
      ok: true,
      intent: { dealId: 2, field: "ASSIGNED_BY_ID", value: "5" },
    });
    expect(parseDealRequest("move deal 3 to somewhere")).toMatchObject({ ok: false, field: "STAGE_ID" });
    expect(parseDealRequest("set the amount of deal 3 to lots")).toMatchObject({
      ok: false,
      field: "OPPORTUNITY",
    });
    expect(parseDealRequest("rename task 4 to X")).toBeUndefined();
  });

  it("reads the deal with get_deal, then proposes update_deal naming it by dealId", async () => {
    const { decideNextStep } = await import("../src/offline-demo/models/decision.js");
    const { AIMessage, HumanMessage, ToolMessage } = await import("@langchain/core/messages");
    const bound = ["get_task_by_id", "get_deal", "propose_change", "propose_change_set", "request_input"];
    const first = decideNextStep([new HumanMessage("move deal 3 to WON")], bound);
    expect(first).toMatchObject({ kind: "tool", call: { name: "get_deal", args: { dealId: 3 } } });
    const call = (first as { call: { id: string; name: string; args: Record<string, unknown> } }).call;
    const read = new ToolMessage({
      tool_call_id: call.id,
      name: "get_deal",
      content: JSON.stringify({ result: { ID: "3", STAGE_ID: "EXECUTING" } }),
    });
    const second = decideNextStep(
      [
        new HumanMessage("move deal 3 to WON"),
        new AIMessage({ content: "", tool_calls: [{ ...call, type: "tool_call" }] }),
        read,
      ],
      bound,
    );
    expect(second).toMatchObject({
      kind: "tool",
      call: {
        name: "propose_change",
        args: { operation: "update_deal", dealId: 3, fields: { STAGE_ID: "WON" } },
      },
    });
    expect((second as unknown as { call: { args: { rationale: string } } }).call.args.rationale).toContain(
      '"EXECUTING"',
    );
  });
});
