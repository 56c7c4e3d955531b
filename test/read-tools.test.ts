/**
 * read_tools runs only tools the model was offered. The router sends calls here by the default
 * read-tool names; under a remapped configuration a default name may not be offered, so the node
 * itself checks, and refuses (and audits) anything else. Real deps: MCP over stdio, emulator, stores.
 */
import { AIMessage } from "@langchain/core/messages";
import { afterEach, beforeEach, expect, it } from "vitest";
import type { App } from "../src/app/open-app.js";
import type { State } from "../src/graph/state.js";
import { readTools } from "../src/nodes/read-tools.js";
import { depsConfigurable } from "../src/runtime/run-deps.js";
import { openTestApp, startPortal, tempDir, type Portal } from "./support/harness.js";
import { ScriptedChatModel, call } from "./support/scripted-model.js";

let portal: Portal;
let app: App;
beforeEach(async () => {
  portal = await startPortal();
  app = await openTestApp(portal, tempDir(), { model: new ScriptedChatModel(() => new AIMessage("unused")) });
});
afterEach(async () => {
  await app.close();
  await portal.emulator.close();
});

it("a call to a tool that was not offered is refused and audited, and nothing of that turn runs", async () => {
  const turn = new AIMessage({
    content: "",
    tool_calls: [
      call("get_task_by_id", { taskId: 4 }),
      call("update_task", { taskId: 4, fields: { TITLE: "x" } }),
    ],
  });
  const before = (await portal.calls()).length;
  const out = await readTools(
    { messages: [turn], agentSteps: 1, requestedBy: "demo-user", proposal: null } as unknown as State,
    { configurable: { thread_id: "read-tools-1", ...depsConfigurable(app.deps) } },
  );
  const replies = (out.messages ?? []) as Array<{ status?: string; content: unknown; name?: string }>;
  expect(replies.map((m) => [m.name, m.status])).toEqual([
    ["update_task", "error"],
    ["get_task_by_id", "error"],
  ]);
  expect(String(replies[0]!.content)).toContain("update_task is not available");
  expect((await portal.calls()).length).toBe(before);
  const records = await app.deps.audit.records({ threadId: "read-tools-1" });
  expect(records.map((r) => r.event)).toEqual(["boundary_refused"]);
});

it("offered read tools run as before", async () => {
  const turn = new AIMessage({ content: "", tool_calls: [call("get_task_by_id", { taskId: 4 })] });
  const out = await readTools({ messages: [turn] } as unknown as State, {
    configurable: { thread_id: "read-tools-2", ...depsConfigurable(app.deps) },
  });
  const replies = (out.messages ?? []) as Array<{ status?: string; content: unknown }>;
  expect(replies).toHaveLength(1);
  expect(replies[0]!.status).not.toBe("error");
  expect(String(replies[0]!.content)).toContain("LAB-AGENT");
  expect(await portal.calls("tasks.task.get")).toHaveLength(1);
});
