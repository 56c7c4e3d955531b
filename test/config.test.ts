/**
 * Configuration: every setting is checked at start and a bad one stops the program with the
 * variable's name and the shape it must have; `.env.example` documents every variable the config
 * module reads; secrets (the webhook code, the Groq key) never reach output or stored evidence.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/env.js";
import { ConfigError } from "../src/errors.js";
import { loadPolicyFile, loadPublicKeys } from "../src/runtime/deps.js";
import { loadApiTokens, newApiToken } from "../src/auth/tokens.js";
import { loadJournalKey } from "../src/store/journal-key.js";
import { generateApproverKeyPair } from "../src/envelope/index.js";
import { startEmulator, type RunningEmulator } from "../src/offline-demo/emulator/index.js";
import { ROOT, parseJsonOutput, runCli, tempDir } from "./support/harness.js";
import { DEV_SERVER_ARGS } from "./support/dev-server.js";
import { freePort, withBoundHost } from "../src/cli/dev-server.js";
import {
  startFakeGroq,
  type ChatCompletionRequest,
  type RunningFakeGroq,
} from "./support/fake-groq-server.js";

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, "/work/somewhere");
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe("loadConfig", () => {
  it("with nothing set: embedded emulator over stdio, offline model, .data under the current directory", () => {
    const c = loadConfig({}, "/work/somewhere");
    expect(c.webhookUrl).toBeUndefined();
    expect(c.mcp).toEqual({ mode: "stdio" });
    expect(c.model).toEqual({ model: "offline", chosenBecause: "neither MODEL nor GROQ_API_KEY is set" });
    expect(c.dataDir).toBe("/work/somewhere/.data");
    expect(c.bitrix24).toEqual({ timeoutMs: 30_000, rate: 2, burst: 50 });
    expect(c.limits).toEqual({
      maxAgentSteps: 12,
      maxInvalidProposals: 2,
      maxRefusedDecisions: 5,
      maxRevisions: 3,
    });
    expect(c.policyPath).toBeUndefined();
    expect(c.approverKeysPath).toBeUndefined();
    expect(c.ttlSeconds).toBeUndefined();
  });

  it("empty values count as unset, as in a copied .env with NAME= placeholders", () => {
    expect(loadConfig({ MODEL: "", BITRIX24_WEBHOOK_URL: "", BITRIX24_RATE: "" }, "/x")).toEqual(
      loadConfig({}, "/x"),
    );
  });

  it("a Groq key alone selects Groq, and says why", () => {
    const c = loadConfig({ GROQ_API_KEY: "k" }, "/x");
    expect(c.model).toMatchObject({
      model: "groq/llama-3.3-70b-versatile",
      groqApiKey: "k",
      chosenBecause: "GROQ_API_KEY is set and MODEL is not",
    });
    expect(loadConfig({ GROQ_API_KEY: "k", MODEL: "offline" }, "/x").model.model).toBe("offline");
  });

  it("reads every setting into its typed place", () => {
    const c = loadConfig(
      {
        BITRIX24_WEBHOOK_URL: "https://acme.bitrix24.com/rest/7/abc123",
        BITRIX24_MCP_URL: "http://127.0.0.1:3391/mcp",
        BITRIX24_MCP_TOOLS: "getTask=t_get, updateTask=t_update",
        BITRIX24_TIMEOUT_MS: "5000",
        BITRIX24_RATE: "0.5",
        BITRIX24_BURST: "10",
        MODEL: "groq/llama-3.1-8b-instant",
        GROQ_API_KEY: "k",
        GROQ_BASE_URL: "http://127.0.0.1:9",
        ACTION_ENVELOPE_DATA_DIR: "state",
        ACTION_ENVELOPE_POLICY: "policy/default.json",
        ACTION_ENVELOPE_APPROVER_KEYS: "/etc/keys",
        ACTION_ENVELOPE_TTL_SECONDS: "600",
        ACTION_ENVELOPE_MAX_AGENT_STEPS: "4",
        ACTION_ENVELOPE_MAX_INVALID_PROPOSALS: "1",
        ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: "2",
        ACTION_ENVELOPE_MAX_REVISIONS: "1",
      },
      "/srv/app",
    );
    expect(c.webhookUrl).toBe("https://acme.bitrix24.com/rest/7/abc123/");
    expect(c.mcp).toEqual({
      mode: "url",
      url: "http://127.0.0.1:3391/mcp",
      toolNames: { getTask: "t_get", updateTask: "t_update" },
    });
    expect(c.bitrix24).toEqual({ timeoutMs: 5000, rate: 0.5, burst: 10 });
    expect(c.model).toMatchObject({
      model: "groq/llama-3.1-8b-instant",
      groqApiKey: "k",
      groqBaseUrl: "http://127.0.0.1:9",
    });
    expect(c.dataDir).toBe("/srv/app/state");
    expect(c.policyPath).toBe("/srv/app/policy/default.json");
    expect(c.approverKeysPath).toBe("/etc/keys");
    expect(c.ttlSeconds).toBe(600);
    expect(c.limits).toEqual({
      maxAgentSteps: 4,
      maxInvalidProposals: 1,
      maxRefusedDecisions: 2,
      maxRevisions: 1,
    });
  });

  it("a PostgreSQL database gets the per-process connection budget: ACTION_ENVELOPE_PG_POOL, else 10", () => {
    const url = "postgres://app:secret@db.internal:5432/ae";
    expect(loadConfig({ DATABASE_URL: url }, "/x").database).toEqual({
      url,
      schema: "public",
      label: "postgres://app@db.internal:5432/ae",
      poolSize: 10,
      prepare: true,
    });
    expect(loadConfig({ DATABASE_URL: url, ACTION_ENVELOPE_PG_POOL: "4" }, "/x").database?.poolSize).toBe(4);
  });

  it("statements are prepared per connection unless ACTION_ENVELOPE_PG_PREPARE=off", () => {
    const url = "postgres://u@db/x";
    expect(loadConfig({ DATABASE_URL: url, ACTION_ENVELOPE_PG_PREPARE: "on" }, "/x").database?.prepare).toBe(
      true,
    );
    expect(loadConfig({ DATABASE_URL: url, ACTION_ENVELOPE_PG_PREPARE: "off" }, "/x").database?.prepare).toBe(
      false,
    );
  });

  // Each bad value names its variable and says what it must look like.
  const cases: Array<[Record<string, string>, string, RegExp]> = [
    [
      { BITRIX24_WEBHOOK_URL: "acme.bitrix24.com/rest/1/abc" },
      "BITRIX24_WEBHOOK_URL",
      /must be a URL like https:\/\/your\.bitrix24\.com\/rest\/1\/abcdef123456\//,
    ],
    [
      { BITRIX24_WEBHOOK_URL: "https://acme.bitrix24.com/" },
      "BITRIX24_WEBHOOK_URL",
      /must be an inbound webhook URL ending in \/rest\/<userId>\/<code>\//,
    ],
    // "localhost:3391" parses as a URL whose scheme is "localhost:"; only http(s) is accepted.
    [
      { BITRIX24_MCP_URL: "localhost:3391" },
      "BITRIX24_MCP_URL",
      /must be the http\(s\) URL of a Streamable HTTP MCP endpoint, e\.g\. http:\/\/127\.0\.0\.1:3391\/mcp/,
    ],
    [
      { BITRIX24_MCP_URL: "http://127.0.0.1:1/mcp", BITRIX24_MCP_TOOLS: "getTask" },
      "BITRIX24_MCP_TOOLS",
      /expected role=toolName pairs with roles getTask, listTasks, getHistory, getUsers, getDeal, listDeals, listTaskComments, getTaskComment, updateTask, addTaskComment, addTask, updateDeal, deleteTaskComment, deleteTask; got "getTask"/,
    ],
    [
      { BITRIX24_MCP_URL: "http://127.0.0.1:1/mcp", BITRIX24_MCP_TOOLS: "dropTask=x" },
      "BITRIX24_MCP_TOOLS",
      /expected role=toolName pairs/,
    ],
    [{ BITRIX24_MCP_TOOLS: "getTask=x" }, "BITRIX24_MCP_TOOLS", /only applies with BITRIX24_MCP_URL/],
    [{ BITRIX24_TIMEOUT_MS: "30s" }, "BITRIX24_TIMEOUT_MS", /must be a whole number/],
    [{ BITRIX24_TIMEOUT_MS: "0" }, "BITRIX24_TIMEOUT_MS", /must be greater than 0/],
    [{ BITRIX24_RATE: "-1" }, "BITRIX24_RATE", /must be a number ≥ 0/],
    [{ BITRIX24_BURST: "1.5" }, "BITRIX24_BURST", /must be a whole number/],
    [
      { MODEL: "gpt-4o" },
      "MODEL",
      /must be "offline" or "groq\/<model-id>", e\.g\. groq\/llama-3\.3-70b-versatile/,
    ],
    [{ MODEL: "groq/" }, "MODEL", /must be "offline" or "groq\/<model-id>"/],
    [
      { MODEL: "groq/llama-3.3-70b-versatile" },
      "GROQ_API_KEY",
      /is required when MODEL=groq\/llama-3\.3-70b-versatile; set it or use MODEL=offline/,
    ],
    [{ GROQ_BASE_URL: "api.groq.com" }, "GROQ_BASE_URL", /must be a URL such as https:\/\/api\.groq\.com/],
    [{ GROQ_BASE_URL: "localhost:8081" }, "GROQ_BASE_URL", /must be a URL such as https:\/\/api\.groq\.com/],
    [{ ACTION_ENVELOPE_TTL_SECONDS: "1h" }, "ACTION_ENVELOPE_TTL_SECONDS", /must be a whole number/],
    [{ ACTION_ENVELOPE_MAX_AGENT_STEPS: "0" }, "ACTION_ENVELOPE_MAX_AGENT_STEPS", /must be greater than 0/],
    [
      { ACTION_ENVELOPE_MAX_INVALID_PROPOSALS: "two" },
      "ACTION_ENVELOPE_MAX_INVALID_PROPOSALS",
      /must be a whole number/,
    ],
    [
      { ACTION_ENVELOPE_MAX_REFUSED_DECISIONS: "-5" },
      "ACTION_ENVELOPE_MAX_REFUSED_DECISIONS",
      /must be a whole number/,
    ],
    [{ ACTION_ENVELOPE_MAX_REVISIONS: "0" }, "ACTION_ENVELOPE_MAX_REVISIONS", /must be greater than 0/],
    [
      { DATABASE_URL: "postgres://u@db/x", ACTION_ENVELOPE_PG_POOL: "0" },
      "ACTION_ENVELOPE_PG_POOL",
      /must be greater than 0/,
    ],
    [
      { DATABASE_URL: "postgres://u@db/x", ACTION_ENVELOPE_PG_POOL: "abc" },
      "ACTION_ENVELOPE_PG_POOL",
      /must be a whole number/,
    ],
    [
      { DATABASE_URL: "postgres://u@db/x", ACTION_ENVELOPE_PG_POOL: "1" },
      "ACTION_ENVELOPE_PG_POOL",
      /must be at least 2 \(one connection for queries, one for thread locks\)/,
    ],
    [
      { ACTION_ENVELOPE_PG_POOL: "10" },
      "ACTION_ENVELOPE_PG_POOL",
      /only applies with DATABASE_URL; set that too or remove it/,
    ],
    [
      { DATABASE_URL: "postgres://u@db/x", ACTION_ENVELOPE_PG_PREPARE: "no" },
      "ACTION_ENVELOPE_PG_PREPARE",
      /must be "on" or "off"/,
    ],
    [
      { ACTION_ENVELOPE_PG_PREPARE: "off" },
      "ACTION_ENVELOPE_PG_PREPARE",
      /only applies with DATABASE_URL; set that too or remove it/,
    ],
  ];
  it.each(cases)("%j stops with %s and its expected shape", (env, variable, shape) => {
    const e = configError(env);
    expect(e.variable).toBe(variable);
    expect(e.message.startsWith(`${variable} `)).toBe(true);
    expect(e.message.indexOf(variable, 1), "the name is said once").toBe(-1);
    expect(e.message).toMatch(shape);
  });

  it("a policy or key path that cannot be used stops with its variable", () => {
    const dir = tempDir();
    const missing = loadConfig({ ACTION_ENVELOPE_POLICY: "nope.json" }, dir);
    expect(() => loadPolicyFile(missing)).toThrow(
      /^ACTION_ENVELOPE_POLICY points to .*nope\.json, which cannot be read$/,
    );
    fs.writeFileSync(path.join(dir, "bad.json"), JSON.stringify({ id: "x" }));
    const bad = loadConfig({ ACTION_ENVELOPE_POLICY: "bad.json" }, dir);
    expect(() => loadPolicyFile(bad)).toThrow(ConfigError);
    expect(() => loadPolicyFile(bad)).toThrow(
      /^ACTION_ENVELOPE_POLICY file .*bad\.json is not a valid policy/,
    );
    const keys = loadConfig({ ACTION_ENVELOPE_APPROVER_KEYS: "keys" }, dir);
    expect(() => loadPublicKeys(keys)).toThrow(
      /^ACTION_ENVELOPE_APPROVER_KEYS points to .*keys, which does not exist$/,
    );
  });
});

describe("strict start: an empty token setting, and secret files others can read or write", () => {
  it("ACTION_ENVELOPE_API_TOKENS set but empty stops with the variable and both ways out", () => {
    for (const value of ["", "  "]) {
      const e = configError({ ACTION_ENVELOPE_API_TOKENS: value });
      expect(e.message).toMatch(
        /^ACTION_ENVELOPE_API_TOKENS is set but empty, which would leave the LangGraph API open to every caller; set it to the API token file .*or unset it \(unset ACTION_ENVELOPE_API_TOKENS\)/,
      );
    }
  });

  it.skipIf(process.platform === "win32")(
    "a world-writable token file, a journal key others can read, a world-writable approver key: refused with chmod in the message",
    () => {
      const dir = tempDir("ae-modes-");
      const tokenFile = path.join(dir, "api-tokens.json");
      fs.writeFileSync(tokenFile, JSON.stringify({ tokens: [newApiToken("alice", ["approver"]).entry] }));
      fs.chmodSync(tokenFile, 0o644);
      expect(loadApiTokens(tokenFile).entries).toHaveLength(1); // hashes only: others may read it
      fs.chmodSync(tokenFile, 0o666);
      expect(() => loadApiTokens(tokenFile)).toThrow(
        new RegExp(
          `^ACTION_ENVELOPE_API_TOKENS ${tokenFile} is writable by every user \\(mode 0666\\): .*; fix: chmod 644 ${tokenFile}$`,
        ),
      );
      fs.chmodSync(tokenFile, 0o000);
      if (process.getuid?.() !== 0)
        expect(() => loadApiTokens(tokenFile)).toThrow(/cannot be read \(EACCES\)/);

      const keyFile = path.join(dir, "journal.key");
      fs.writeFileSync(keyFile, `${Buffer.alloc(32, 7).toString("base64")}\n`, { mode: 0o640 });
      const config = loadConfig(
        { ACTION_ENVELOPE_DATA_DIR: path.join(dir, "data"), ACTION_ENVELOPE_JOURNAL_KEY_FILE: keyFile },
        ROOT,
      );
      expect(() => loadJournalKey(config, () => {})).toThrow(
        new RegExp(
          `^ACTION_ENVELOPE_JOURNAL_KEY_FILE ${keyFile} is readable or writable by other users \\(mode 0640\\): .*; fix: chmod 600 ${keyFile}$`,
        ),
      );
      fs.chmodSync(keyFile, 0o600);
      expect(loadJournalKey(config, () => {})).toEqual(Buffer.alloc(32, 7));

      const keysDir = path.join(dir, "keys");
      fs.mkdirSync(keysDir, { mode: 0o755 });
      const pub = path.join(keysDir, "alice.pub");
      fs.writeFileSync(pub, `${generateApproverKeyPair("alice").publicKeyLine}\n`);
      fs.chmodSync(pub, 0o644);
      const keys = loadConfig({ ACTION_ENVELOPE_APPROVER_KEYS: keysDir }, dir);
      expect([...loadPublicKeys(keys).keys()]).toEqual(["alice"]);
      fs.chmodSync(pub, 0o646);
      expect(() => loadPublicKeys(keys)).toThrow(
        new RegExp(
          `^ACTION_ENVELOPE_APPROVER_KEYS ${pub} is writable by every user \\(mode 0646\\): .*fix: chmod 644`,
        ),
      );
      fs.chmodSync(pub, 0o644);
      fs.chmodSync(keysDir, 0o777);
      expect(() => loadPublicKeys(keys)).toThrow(
        /ACTION_ENVELOPE_APPROVER_KEYS .*keys is writable by every user/,
      );
    },
  );
});

describe(".env.example", () => {
  const example = fs.readFileSync(path.join(ROOT, ".env.example"), "utf8");
  const source = fs.readFileSync(path.join(ROOT, "src/config/env.ts"), "utf8");

  it("documents every variable the config module reads, with its default", () => {
    // The keys of EnvSchema, the one list of variables the program reads.
    const schema = source.slice(
      source.indexOf("const EnvSchema = z.object({"),
      source.indexOf("\n});", source.indexOf("const EnvSchema")),
    );
    const read = new Set([...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!));
    expect(read.size).toBeGreaterThanOrEqual(17);
    expect(read).toContain("MODEL");
    // The comment lines between one NAME= line and the next are that setting's documentation.
    const docs = new Map<string, string>();
    let comment = "";
    for (const line of example.split("\n")) {
      // A setting that must not be set empty is shown commented out ("# NAME="), so a copy leaves it unset.
      const assigned = /^(?:# )?([A-Z][A-Z0-9_]*)=/.exec(line);
      if (assigned) {
        docs.set(assigned[1]!, comment);
        comment = "";
      } else if (line.startsWith("#")) comment += `${line}\n`;
    }
    for (const name of read) {
      expect([...docs.keys()], `${name} has a NAME= line in .env.example`).toContain(name);
      expect(docs.get(name), `${name} has its default documented`).toMatch(/Default/);
    }
  });

  it("is itself a valid configuration when copied unchanged", () => {
    const env = Object.fromEntries(
      [...example.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]),
    );
    expect(() => loadConfig(env, "/x")).not.toThrow();
  });
});

describe("a bad setting stops the programs before they start", () => {
  it("the CLI exits 1 and names the variable on stderr", async () => {
    const r = await runCli(["run", "rename task 4 to X", "--no-prompt"], {
      MODEL: "gpt-4o",
      ACTION_ENVELOPE_DATA_DIR: tempDir(),
      DATABASE_URL: "",
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'configuration error: MODEL must be "offline" or "groq/<model-id>", e.g. groq/llama-3.3-70b-versatile',
    );
    expect(r.stderr).toContain("see .env.example");
    expect(r.stdout).toBe("");
  });

  const devServer = (env: Record<string, string>) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [...DEV_SERVER_ARGS], {
        cwd: ROOT,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      // Should the check ever let it through, stop the server the way a person would.
      const guard = setTimeout(() => child.kill("SIGINT"), 30_000);
      child.on("error", reject);
      child.on("close", (code) => {
        clearTimeout(guard);
        resolve({ code, stdout, stderr });
      });
    });

  it("npm run dev exits 1 the same way, without starting the LangGraph server", async () => {
    const r = await devServer({ BITRIX24_TIMEOUT_MS: "soon" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("configuration error: BITRIX24_TIMEOUT_MS must be a whole number\n");
    expect(r.stdout).not.toContain("Welcome to");

    // The policy file is read by the server only at its first run; it is checked before the start too.
    const policy = await devServer({ ACTION_ENVELOPE_POLICY: path.join(tempDir(), "missing-policy.json") });
    expect(policy.code).toBe(1);
    expect(policy.stderr).toMatch(
      /configuration error: ACTION_ENVELOPE_POLICY points to .*missing-policy\.json, which cannot be read/,
    );
    expect(policy.stdout).not.toContain("Welcome to");
  });
});

describe("npm run dev bound to every interface", () => {
  it("--host 0.0.0.0 becomes ready (asked over loopback), points Studio at 127.0.0.1, and still refuses another Host", async () => {
    const port = await freePort();
    const dataDir = tempDir();
    const child = spawn(process.execPath, [...DEV_SERVER_ARGS, "--host", "0.0.0.0", "--port", String(port)], {
      cwd: ROOT,
      // Open mode: the variable unset (set but empty is refused).
      env: {
        ...Object.fromEntries(
          Object.entries(process.env).filter(([k]) => k !== "ACTION_ENVELOPE_API_TOKENS"),
        ),
        LANGGRAPH_CLI_NO_ANALYTICS: "1",
        ACTION_ENVELOPE_DATA_DIR: dataDir,
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
    try {
      for (let i = 0; i < 600 && !stdout.includes("Studio:") && child.exitCode === null; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(stdout).toContain(
        `Studio: https://smith.langchain.com/studio/?baseUrl=http://127.0.0.1:${port}`,
      );
      expect((await fetch(`http://127.0.0.1:${port}/ok`)).status).toBe(200);
      const rebound = await new Promise<number>((resolve, reject) => {
        // fetch cannot set Host; a raw request can.
        import("node:http").then(({ request }) => {
          const req = request(
            {
              host: "127.0.0.1",
              port,
              path: "/threads/search",
              method: "POST",
              headers: { host: `evil.example:${port}`, "content-type": "application/json" },
            },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            },
          );
          req.on("error", reject);
          req.end("{}");
        }, reject);
      });
      expect(rebound).toBe(403);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, "SIGINT");
      await closed;
    }
  });

  it("a named bind is added to the Host names an open server answers to; loopback and wildcards are not", () => {
    expect(withBoundHost({}, "0.0.0.0")).toEqual({});
    expect(withBoundHost({}, "127.0.0.1")).toEqual({});
    expect(
      withBoundHost({ ACTION_ENVELOPE_API_HOSTS: "a.example" }, "Box.Local")["ACTION_ENVELOPE_API_HOSTS"],
    ).toBe("a.example,box.local");
    expect(withBoundHost({}, "fe80::1")["ACTION_ENVELOPE_API_HOSTS"]).toBe("[fe80::1]");
  });
});

describe("secrets never appear in output or stored evidence", () => {
  const WEBHOOK_CODE = "s3cr3tW3bh00kC0de7f3a";
  const GROQ_KEY = "gsk_SECRETtestKEY5b2c9d";
  let emulator: RunningEmulator;
  let groq: RunningFakeGroq;
  let dataDir: string;

  const toolReply = (body: ChatCompletionRequest, name: string) => {
    const ids = new Set(
      body.messages.flatMap((m) =>
        (m.tool_calls ?? []).filter((c) => c.function.name === name).map((c) => c.id),
      ),
    );
    return body.messages.some(
      (m) => m.role === "tool" && m.tool_call_id !== undefined && ids.has(m.tool_call_id),
    );
  };

  beforeEach(async () => {
    emulator = await startEmulator({ port: 0, rate: 0, code: WEBHOOK_CODE });
    groq = await startFakeGroq({
      apiKey: GROQ_KEY,
      script: (body) =>
        toolReply(body, "get_task_by_id")
          ? {
              toolCalls: [
                { name: "propose_change", args: { taskId: 4, fields: { TITLE: "X" }, rationale: "asked" } },
              ],
            }
          : { toolCalls: [{ name: "get_task_by_id", args: { taskId: 4 } }] },
    });
    dataDir = tempDir();
  });
  afterEach(async () => {
    await groq.close();
    await emulator.close();
  });

  const env = (over: Record<string, string> = {}) => ({
    BITRIX24_WEBHOOK_URL: emulator.webhookUrl,
    MODEL: "groq/llama-3.3-70b-versatile",
    GROQ_API_KEY: GROQ_KEY,
    GROQ_BASE_URL: groq.baseUrl,
    ACTION_ENVELOPE_DATA_DIR: dataDir,
    // SQLite under dataDir, whatever the caller's environment says: the files are inspected below.
    DATABASE_URL: "",
    BITRIX24_RATE: "0",
    BITRIX24_TIMEOUT_MS: "5000",
    ACTION_ENVELOPE_DEFAULT_APPROVER: "demo-approver",
    ...over,
  });

  function expectNoSecrets(text: string, what: string, secrets = [WEBHOOK_CODE, GROQ_KEY]) {
    for (const s of secrets) expect(text.includes(s), `${what} contains ${s}`).toBe(false);
  }

  it("through a whole run and approval, in human and JSON output, and in the data directory", async () => {
    expect(emulator.webhookUrl).toContain(WEBHOOK_CODE);
    const human = await runCli(["run", "rename task 4 to X", "--no-prompt"], env());
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain("approval card");
    expect(human.stdout).toContain(`model: groq/llama-3.3-70b-versatile via ${groq.baseUrl}`);
    expectNoSecrets(human.stdout + human.stderr, "run output");

    const json = await runCli(["run", "rename task 4 to Y", "--no-prompt", "--json"], env());
    expect(json.code, json.stderr).toBe(0);
    expectNoSecrets(json.stdout + json.stderr, "run --json output");
    const waiting = parseJsonOutput(json.stdout);

    const approved = await runCli(
      ["approve", waiting.threadId, "--hash", waiting.envelopeHash, "--json"],
      env(),
    );
    expect(approved.code, approved.stderr).toBe(0);
    expect(parseJsonOutput(approved.stdout).outcome).toBe("VERIFIED");
    expectNoSecrets(approved.stdout + approved.stderr, "approve output");

    const shown = await runCli(["show", waiting.threadId], env());
    expectNoSecrets(shown.stdout + shown.stderr, "show output");

    // The key did reach Groq (the fake server refuses anything else), so the check above is not vacuous.
    expect(groq.requests.every((r) => r.headers.authorization === `Bearer ${GROQ_KEY}`)).toBe(true);
    for (const file of fs.readdirSync(dataDir)) {
      const bytes = fs.readFileSync(path.join(dataDir, file));
      expectNoSecrets(bytes.toString("latin1"), `data file ${file}`);
    }
  });

  it("when the portal or Groq refuses the credentials, the error output names the problem, not the secret", async () => {
    const wrongCode = "wr0ngC0deSECRET99";
    const badPortal = await runCli(
      ["run", "rename task 4 to X", "--no-prompt"],
      env({ BITRIX24_WEBHOOK_URL: emulator.webhookUrl.replace(WEBHOOK_CODE, wrongCode) }),
    );
    expect(badPortal.code).not.toBe(0);
    expect(badPortal.stdout + badPortal.stderr).toContain("INVALID_CREDENTIALS");
    expectNoSecrets(badPortal.stdout + badPortal.stderr, "output with a wrong webhook code", [
      wrongCode,
      GROQ_KEY,
    ]);

    const wrongKey = "gsk_WRONGsecretKEY0000";
    const badKey = await runCli(
      ["run", "rename task 4 to X", "--no-prompt"],
      env({ GROQ_API_KEY: wrongKey }),
    );
    expect(badKey.code).not.toBe(0);
    expect(badKey.stdout + badKey.stderr).toMatch(/Invalid API Key/);
    expectNoSecrets(badKey.stdout + badKey.stderr, "output with a wrong Groq key", [wrongKey, WEBHOOK_CODE]);
  });
});
