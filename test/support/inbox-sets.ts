/**
 * A web inbox whose scripted model proposes change sets: each request (by its text) has the set the
 * model proposes after reading every task it names. Real emulator over HTTP, SQLite stores, the graph.
 */
import fs from "node:fs";
import path from "node:path";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { startRun } from "../../src/app/threads.js";
import { type App } from "../../src/app/open-app.js";
import { type ThreadView } from "../../src/app/view-thread.js";
import { startInbox, type RunningInbox } from "../../src/inbox/server.js";
import { hashPassword, loadInboxUsers } from "../../src/inbox/users.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./harness.js";
import { PASSWORDS } from "./inbox.js";
import { ScriptedChatModel, call, type Script } from "./scripted-model.js";

export type SetAction = { operation: string; taskId: number; fields: Record<string, unknown> };

export const SET_COMMENT = "Moved to review; please check the numbers.";

/** Reads every task the request's set names, then proposes the set (once). */
export function setScript(sets: Record<string, SetAction[]>): Script {
  const done = (messages: Parameters<Script>[0], name: string) =>
    messages.some((m) => m.getType() === "tool" && (m as { name?: string }).name === name);
  return (messages) => {
    const request = String(messages.find((m) => m instanceof HumanMessage)?.content ?? "");
    const actions = Object.entries(sets).find(([r]) => request.includes(r))?.[1];
    if (!actions || done(messages, "propose_change_set")) return new AIMessage("Nothing more to propose.");
    if (!done(messages, "get_task_by_id"))
      return new AIMessage({
        content: "",
        tool_calls: [...new Set(actions.map((a) => a.taskId))].map((taskId) =>
          call("get_task_by_id", { taskId }),
        ),
      });
    return new AIMessage({
      content: "",
      tool_calls: [call("propose_change_set", { actions, rationale: "requested by the user" })],
    });
  };
}

export interface SetWorld {
  portal: Portal;
  app: App;
  inbox: RunningInbox;
  /** Starts a run for one of the requests; the model proposes its set. */
  propose(request: string, requestedBy?: string): Promise<ThreadView>;
  /** Writes the emulator recorded for these tasks (updates by taskId, comments by their task). */
  writesOn(...taskIds: number[]): Promise<Array<{ method: string; params: Record<string, unknown> }>>;
  close(): Promise<void>;
}

export async function startSetWorld(
  sets: Record<string, SetAction[]>,
  env: Record<string, string> = {},
): Promise<SetWorld> {
  const portal = await startPortal();
  const dataDir = tempDir("ae-inbox-set-");
  const usersFile = path.join(dataDir, "inbox-users.json");
  const users = [];
  for (const [id, password] of Object.entries(PASSWORDS))
    users.push({ id, password: await hashPassword(password) });
  fs.writeFileSync(usersFile, JSON.stringify({ users }));
  const app = await openTestApp(portal, dataDir, {
    model: new ScriptedChatModel(setScript(sets)),
    env: { ACTION_ENVELOPE_INBOX_USERS: usersFile, ...env },
  });
  const inbox = await startInbox({ app, users: loadInboxUsers(app.deps.config.inboxUsersPath), pollMs: 200 });
  const taskOf = (p: Record<string, unknown> | unknown[]): number => {
    if (Array.isArray(p)) return Number(p[0]);
    return Number(p["taskId"] ?? p["TASKID"] ?? p["TASK_ID"] ?? NaN);
  };
  return {
    portal,
    app,
    inbox,
    propose: (request, requestedBy = "demo-user") => startRun(app, { request, requestedBy }),
    writesOn: async (...taskIds) => (await portal.writes()).filter((w) => taskIds.includes(taskOf(w.params))),
    async close() {
      await inbox.close();
      await app.close();
      await portal.emulator.close();
    },
  };
}
