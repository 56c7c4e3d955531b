/**
 * A web inbox over a real emulator (HTTP), real SQLite stores and the graph, with a scripted model
 * that proposes a title per task and, after a rejection with a quoted value, proposes that value.
 */
import fs from "node:fs";
import path from "node:path";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { startRun } from "../../src/app/threads.js";
import { type App } from "../../src/app/open-app.js";
import { type ThreadView } from "../../src/app/view-thread.js";
import { startInbox, type RunningInbox } from "../../src/inbox/server.js";
import { hashPassword, loadInboxUsers } from "../../src/inbox/users.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./harness.js";
import { ScriptedChatModel, call, type Script } from "./scripted-model.js";

/** alice and bob approve (policy group task-approvers); demo-user requests; mallory is neither. */
export const PASSWORDS: Record<string, string> = {
  alice: "alice-password-1",
  bob: "bob-password-22",
  "demo-user": "requester-pass-3",
  mallory: "mallory-pass-44",
};

/** Titles the model proposes, by task id; a rejection with `use "X"` makes it propose X instead. */
export function titleScript(titles: Record<number, string>): Script {
  return (messages: BaseMessage[]) => {
    const request = String(messages.find((m) => m instanceof HumanMessage)?.content ?? "");
    // A request naming no task: ask which one (a structured question), then read and propose for the answer.
    const answer = [...messages]
      .reverse()
      .find((m) => m.getType() === "tool" && (m as { name?: string }).name === "request_input");
    if (!/task \d+/.test(request) && !answer) {
      return new AIMessage({
        content: "",
        tool_calls: [
          call("request_input", {
            question: "Which task do you mean?",
            fields: {
              taskId: { type: "enum", description: "task id", choices: ["1", "4", "8"] },
              note: { type: "string", description: "anything the approver should know" },
            },
          }),
        ],
      });
    }
    if (answer && messages.at(-1) === answer) {
      return new AIMessage({
        content: "",
        tool_calls: [call("get_task_by_id", { taskId: Number(JSON.parse(String(answer.content)).taskId) })],
      });
    }
    const taskId = answer
      ? Number(JSON.parse(String(answer.content)).taskId)
      : Number(/task (\d+)/.exec(request)?.[1] ?? 4);
    const feedback = [...messages]
      .reverse()
      .find((m) => m instanceof HumanMessage && String(m.content).includes("rejected"));
    const quoted = feedback ? /"([^"]+)"/.exec(String(feedback.content))?.[1] : undefined;
    if (!messages.some((m) => m.getType() === "tool"))
      return new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId })] });
    if (feedback && messages.at(-1) === feedback && quoted) {
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", { taskId, fields: { TITLE: quoted }, rationale: "revised after review" }),
        ],
      });
    }
    const last = messages.at(-1) as { name?: string };
    if (messages.at(-1)?.getType() === "tool" && last.name === "get_task_by_id") {
      return new AIMessage({
        content: "",
        tool_calls: [
          call("propose_change", {
            taskId,
            fields: { TITLE: titles[taskId] ?? "Renamed" },
            rationale: "first try",
          }),
        ],
      });
    }
    return new AIMessage("Nothing more to propose.");
  };
}

export interface InboxWorld {
  portal: Portal;
  app: App;
  inbox: RunningInbox;
  dataDir: string;
  run(taskId: number, requestedBy?: string): Promise<ThreadView>;
  /** A request naming no task: the agent asks which one (a structured question). */
  ask(requestedBy?: string): Promise<ThreadView>;
  close(): Promise<void>;
}

export async function startInboxWorld(
  titles: Record<number, string>,
  env: Record<string, string> = {},
): Promise<InboxWorld> {
  const portal = await startPortal();
  const dataDir = tempDir("ae-inbox-");
  const usersFile = path.join(dataDir, "inbox-users.json");
  const users = [];
  for (const [id, password] of Object.entries(PASSWORDS))
    users.push({ id, password: await hashPassword(password) });
  fs.writeFileSync(usersFile, JSON.stringify({ users }));
  const app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(titleScript(titles)),
    env: { ACTION_ENVELOPE_INBOX_USERS: usersFile, ...env },
  });
  const inbox = await startInbox({ app, users: loadInboxUsers(app.deps.config.inboxUsersPath), pollMs: 200 });
  return {
    portal,
    app,
    inbox,
    dataDir,
    run: (taskId, requestedBy = "demo-user") =>
      startRun(app, { request: `rename task ${taskId} to the proposed title`, requestedBy }),
    ask: (requestedBy = "demo-user") =>
      startRun(app, { request: "rename the lab task to the proposed title", requestedBy }),
    async close() {
      await inbox.close();
      await app.close();
      await portal.emulator.close();
    },
  };
}

/**
 * A browser's session on the inbox at `base`, signed in as `user` through its login form: `req` GETs
 * a path, or POSTs a form with the inbox's Origin, carrying and keeping the session's cookies (no
 * redirect followed).
 */
export async function signedInSession(
  base: string,
  user: string,
  password: string,
): Promise<(path: string, form?: Record<string, string>) => Promise<Response>> {
  const cookies = new Map<string, string>();
  const req = async (p: string, form?: Record<string, string>) => {
    const res = await fetch(base + p, {
      method: form ? "POST" : "GET",
      headers: {
        cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        accept: "text/html",
        ...(form ? { "content-type": "application/x-www-form-urlencoded", origin: base } : {}),
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
      redirect: "manual",
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      cookies.set(pair!.slice(0, pair!.indexOf("=")), pair!.slice(pair!.indexOf("=") + 1));
    }
    return res;
  };
  const login = await (await req("/login")).text();
  const signedIn = await req("/login", {
    csrf: /name="csrf" value="([^"]+)"/.exec(login)![1]!,
    user,
    password,
  });
  if (signedIn.status !== 303)
    throw new Error(`signing in as ${user}: expected a redirect (303), got ${signedIn.status}`);
  return req;
}
