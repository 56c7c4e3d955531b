/**
 * The LangGraph API path: `npm run dev` (src/cli/dev-server.ts → `langgraphjs dev`) serving
 * bitrix24_task_agent, driven over HTTP with @langchain/langgraph-sdk exactly as Studio or any client
 * would. The server builds its own dependencies from the environment (our MCP server over stdio
 * against an emulator this test started), so nothing here is shared in-process with the graph.
 */
import fs from "node:fs";
import path from "node:path";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { ROOT, envFor, startPortal, tempDir, type Portal } from "./support/harness.js";
import { descendants, killAll, stillAlive, waitForExit } from "./support/processes.js";
import { DEV_SERVER_ARGS, isolatedConfig } from "./support/dev-server.js";

const GRAPH_ID = "bitrix24_task_agent";

const extraPortals: Portal[] = [];
async function startPortalOnce(): Promise<Portal> {
  const p = await startPortal();
  extraPortals.push(p);
  return p;
}
async function closePortals(): Promise<void> {
  for (const p of extraPortals.splice(0)) await p.emulator.close();
}

interface ApprovalPayload {
  kind: string;
  envelopeHash: string;
  nonce: string;
  envelope: { params: Record<string, unknown>; object: { id: number } };
  lastRefusal?: { code: string; reason: string };
}

describe("LangGraph API server (npm run dev) driven through @langchain/langgraph-sdk", () => {
  let portal: Portal;
  let dataDir: string;
  let project: ReturnType<typeof isolatedConfig>;
  let server: ChildProcess;
  let stdout = "";
  let stderr = "";
  let apiUrl = "";
  let client: Client;
  let seenPids: number[] = [];
  let serverGroup: number | undefined;
  let threadId = "";

  beforeAll(async () => {
    portal = await startPortal();
    dataDir = tempDir();
    project = isolatedConfig();
    // What `npm run dev` runs (package.json): node with tsx's loader, so a SIGINT reaches the server itself.
    server = spawn(process.execPath, [...DEV_SERVER_ARGS, "--config", project.file, "--no-reload"], {
      cwd: ROOT,
      env: { ...process.env, ...envFor(portal, dataDir), NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    server.stdout!.on("data", (d) => (stdout += d));
    server.stderr!.on("data", (d) => (stderr += d));
    apiUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`dev server not ready in 150 s\n${stdout}\n${stderr}`)),
        150_000,
      );
      const check = () => {
        const m = /API:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      };
      server.stdout!.on("data", check);
      server.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`dev server exited ${code} before it was ready\n${stdout}\n${stderr}`));
      });
    });
    client = new Client({ apiUrl });
  }, 180_000);

  afterAll(async () => {
    // Only reached with processes alive when a test failed before the SIGINT test.
    if (server && server.exitCode === null) {
      server.kill("SIGINT");
      await waitForExit(server, 30_000).catch(() => undefined);
    }
    killAll(seenPids, serverGroup ? [serverGroup] : []);
    await portal?.emulator.close();
  }, 60_000);

  it("serves the graph of langgraph.json on a free port of 127.0.0.1, with analytics off", async () => {
    expect(Object.keys(project.graphs)).toEqual([GRAPH_ID]);
    expect(apiUrl).not.toMatch(/:2024$/);
    expect(stdout).toContain(`Studio: https://smith.langchain.com/studio/?baseUrl=${apiUrl}`);
    const assistants = await client.assistants.search({ graphId: GRAPH_ID });
    expect(assistants.map((a) => a.graph_id)).toContain(GRAPH_ID);

    const tree = descendants(server.pid!);
    seenPids = tree.map((p) => p.pid);
    const top = tree.find((p) => p.pgid === p.pid);
    expect(top, "langgraphjs runs in its own process group").toBeDefined();
    serverGroup = top!.pid;
    const env = fs.readFileSync(`/proc/${top!.pid}/environ`, "utf8").split("\0");
    expect(env).toContain("LANGGRAPH_CLI_NO_ANALYTICS=1");
    expect(env).toContain("LANGSMITH_TRACING=false");
    expect(env).toContain("LANGCHAIN_TRACING_V2=false");
  });

  it("runs to the approval, refuses a bare approve, then executes exactly the approved envelope", async () => {
    const thread = await client.threads.create();
    threadId = thread.thread_id;
    const first = (await client.runs.wait(threadId, GRAPH_ID, {
      input: { request: "rename task 4 to X", requestedBy: "demo-user" },
    })) as { __interrupt__?: Array<{ value: ApprovalPayload }> };
    expect(first.__interrupt__?.[0]?.value.kind).toBe("approval");

    const waiting = await client.threads.getState(threadId);
    expect(waiting.next).toEqual(["await_approval"]);
    const payload = waiting.tasks[0]!.interrupts[0]!.value as ApprovalPayload;
    expect(payload.envelopeHash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(payload.nonce).toMatch(/\S/);
    expect(payload.envelope.object.id).toBe(4);
    expect(payload.envelope.params).toEqual({ TITLE: "X" });
    expect((await client.threads.get(threadId)).status).toBe("interrupted");

    // What Studio's "resume" box would send if someone just clicked approve: not bound to anything.
    await client.runs.wait(threadId, GRAPH_ID, { command: { resume: { decisions: [{ type: "approve" }] } } });
    const refused = await client.threads.getState(threadId);
    const refusals = (refused.values as { refusals: Array<{ code: string; envelopeHash: string }> }).refusals;
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ code: "MALFORMED", envelopeHash: payload.envelopeHash });
    const again = refused.tasks[0]!.interrupts[0]!.value as ApprovalPayload;
    expect(again.envelopeHash).toBe(payload.envelopeHash);
    expect(again.lastRefusal?.code).toBe("MALFORMED");
    expect(await portal.writes()).toEqual([]);

    const approval = {
      decisions: [
        {
          type: "approve",
          envelopeHash: payload.envelopeHash,
          nonce: payload.nonce,
          approver: { id: "demo-approver" },
        },
      ],
    };
    // Resumed as Studio streams a run: the executor's phases arrive as custom events, in order, each
    // with what it found or sent, and no raw answer of the portal (those stay in the journal).
    const parts: Array<{ event: string; data: any }> = [];
    for await (const part of client.runs.stream(threadId, GRAPH_ID, {
      command: { resume: approval },
      streamMode: ["custom", "values"],
    }))
      parts.push(part as { event: string; data: any });
    expect(parts.filter((p) => p.event === "error")).toEqual([]);
    const phases = parts.filter((p) => p.event === "custom").map((p) => p.data);
    expect(phases.map((e) => e.step)).toEqual(["pre_read", "write", "verify"]);
    for (const e of phases)
      expect(e).toMatchObject({ event: "action_envelope_phase", envelopeHash: payload.envelopeHash });
    expect(phases[0].preRead).toMatchObject({ verdict: "MATCH" });
    expect(phases[1].invocation).toMatchObject({
      tool: "update_task",
      args: { taskId: 4, fields: { TITLE: "X" } },
    });
    expect(phases[1].acknowledgement).toMatchObject({ status: "OK" });
    expect(phases[2].verification).toMatchObject({ verdict: "VERIFIED" });
    expect(JSON.stringify(phases)).not.toContain('"result"');
    const final = parts.filter((p) => p.event === "values").at(-1)!.data as Record<string, unknown>;
    expect(final["outcome"]).toBe("VERIFIED");
    const done = await client.threads.getState(threadId);
    expect(done.next).toEqual([]);
    expect(done.values).toMatchObject({
      outcome: "VERIFIED",
      reasonCode: "VERIFIED",
      envelopeHash: payload.envelopeHash,
    });

    const writes = await portal.writes();
    expect(writes).toHaveLength(1);
    expect(writes[0]!.status).toBe(200);
    expect(Number(writes[0]!.params["taskId"])).toBe(4);
    expect(writes[0]!.params["fields"]).toEqual(payload.envelope.params);
    expect((await portal.task(4))["title"]).toBe("X");
  });

  it("stops on SIGINT to the top process, flushes its state, and leaves no process behind", async () => {
    // At least the LangGraph CLI and the API server it starts, below the dev server.
    expect(seenPids.length).toBeGreaterThanOrEqual(2);
    // The MCP server the graph spawned inside the API server is part of the tree now.
    const now = descendants(server.pid!);
    seenPids = [...new Set([...seenPids, ...now.map((p) => p.pid)])];
    const mcpChildren = now.filter((p) =>
      fs.readFileSync(`/proc/${p.pid}/cmdline`, "utf8").includes("mcp-stdio"),
    );
    expect(mcpChildren.length).toBeGreaterThan(0);

    server.kill("SIGINT");
    const code = await waitForExit(server, 60_000);
    expect(code, stderr).toBe(0);
    expect(stillAlive(seenPids, [serverGroup!])).toEqual([]);

    // The graceful path flushed the threads to disk (it is debounced by 3 s otherwise).
    const checkpoints = fs.readFileSync(
      path.join(project.dir, ".langgraph_api", ".langgraphjs_api.checkpointer.json"),
      "utf8",
    );
    expect(checkpoints).toContain(threadId);
  }, 90_000);

  it("keeps the server's state directory out of git", () => {
    expect(fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8")).toContain(".langgraph_api");
    // Exit status 0 means ignored; execFileSync throws otherwise.
    execFileSync("git", ["check-ignore", "-q", ".langgraph_api/.langgraphjs_ops.json"], { cwd: ROOT });
  });
});

describe("npm run dev stopped by Ctrl-C at a terminal", () => {
  it("SIGINT to the whole foreground process group (npm, sh, us) still stops cleanly, flushed, with nothing left", async () => {
    const project = isolatedConfig();
    // detached: its own process group, like the foreground job of a terminal.
    const npm = spawn("npm", ["run", "dev", "--", "--config", project.file, "--no-reload"], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...envFor(await startPortalOnce(), tempDir()),
        NO_COLOR: "1",
        npm_config_update_notifier: "false",
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    npm.stdout!.on("data", (d) => (out += d));
    npm.stderr!.on("data", (d) => (out += d));
    let serverGroup: number | undefined;
    let tree: number[] = [];
    try {
      const apiUrl = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`not ready in 150 s\n${out}`)), 150_000);
        npm.stdout!.on("data", () => {
          const m = /API:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
        npm.once("exit", (code) => reject(new Error(`exited ${code} before ready\n${out}`)));
      });
      const thread = await new Client({ apiUrl }).threads.create({ metadata: { by: "ctrl-c test" } });
      const procs = descendants(npm.pid!);
      tree = procs.map((p) => p.pid);
      serverGroup = procs.find((p) => p.pgid === p.pid)?.pid;
      expect(serverGroup).toBeDefined();

      process.kill(-npm.pid!, "SIGINT");
      const code = await waitForExit(npm, 60_000);
      // npm itself answers a Ctrl-C with 130 whatever its script returned (the script returns 0 here).
      expect([0, 130], out).toContain(code);
      expect(out).toContain("Stopping (SIGINT)");
      expect(out).not.toContain("again: killing the server");
      expect(out).not.toContain("Force killing");
      // npm has exited; give the last of the group a moment to be reaped, then require it gone.
      for (let i = 0; i < 50 && stillAlive(tree, [npm.pid!, serverGroup!]).length > 0; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(stillAlive(tree, [npm.pid!, serverGroup!])).toEqual([]);
      expect(
        fs.readFileSync(path.join(project.dir, ".langgraph_api", ".langgraphjs_ops.json"), "utf8"),
      ).toContain(thread.thread_id);
    } finally {
      if (npm.exitCode === null) npm.kill("SIGKILL");
      killAll(tree, serverGroup ? [serverGroup] : []);
      await closePortals();
    }
  }, 200_000);
});
