/**
 * `npm run dev`: the LangGraph API server (and LangGraph Studio's backend) for the graphs in
 * langgraph.json, through `langgraphjs dev`, on a free port of 127.0.0.1 with analytics and tracing
 * off. The graph's nodes get dependencies built from the environment inside the server process
 * (src/runtime/server-deps.ts), so the same variables as for the CLI apply; they are checked here first so
 * a bad setting stops before the server's slow start rather than inside the first run.
 *
 * Stopping: Ctrl-C (or SIGTERM) is forwarded as SIGINT to the top `langgraphjs` process only. That
 * process runs its exit hooks and lets the API server flush `.langgraph_api/` (it mirrors its state
 * there with a 3 s debounce); signalling the server's own children first loses checkpoints. The
 * server runs in its own process group so the terminal's Ctrl-C reaches it only through us, in
 * that order, and so we can wait until every process it started has gone.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { loadConfig } from "../config/env.js";
import { loadPolicyFile, loadPublicKeys } from "../runtime/deps.js";
import { UsageError } from "../errors.js";
import { reportUsageError } from "./usage-error.js";
import { loadApiTokens } from "../auth/tokens.js";
import { esc, escapeForTerminal, escapeLines } from "../text/escape.js";
import { LOOPBACK_HOSTS, STUDIO_ORIGIN, listOf, originPolicyFromEnvironment } from "../auth/origin.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const LANGGRAPHJS = path.join(ROOT, "node_modules/.bin/langgraphjs");
const DEFAULT_STUDIO = "https://smith.langchain.com";
/** How long the server may take to answer GET /ok; measured ~4 s on an idle machine, more under load. */
const READY_TIMEOUT_MS = 180_000;
/** After the top process exits, how long its descendants get to finish flushing before SIGKILL. */
const DRAIN_TIMEOUT_MS = 15_000;
/** A second signal sooner than this is the same Ctrl-C delivered again, not a request to force. */
const REPEAT_SIGNAL_MS = 2_000;

export interface DevServerOptions {
  port?: number;
  host: string;
  config: string;
  reload: boolean;
  studioUrl: string;
}

/** Asks the kernel for a free port, then releases it for the server (langgraphjs needs a number). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Environment for the server: no analytics beacon, no LangSmith tracing (it would ship task data out). */
export function serverEnv(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...base,
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    // The API server and LangChain take the first of these that is set, so all four are pinned.
    LANGSMITH_TRACING: "false",
    LANGSMITH_TRACING_V2: "false",
    LANGCHAIN_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
    BROWSER: "none",
  };
}

async function waitUntilReady(apiUrl: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`langgraphjs dev exited (${child.exitCode ?? child.signalCode}) before it was ready`);
    try {
      const res = await fetch(`${apiUrl}/ok`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`langgraphjs dev did not answer ${apiUrl}/ok within ${READY_TIMEOUT_MS / 1000} s`);
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Waits for every process of the server's group to exit, then kills whatever is left. */
async function drainGroup(pgid: number): Promise<boolean> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (!groupAlive(pgid)) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
  return false;
}

/** Binds to every interface: not an address to connect to, nor a name a client sends as Host. */
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * The name the server was told to bind (a host name or address other than a wildcard or loopback) is
 * one its clients send as Host: an open server must answer to it (src/auth/origin.ts), so it is added
 * to ACTION_ENVELOPE_API_HOSTS for the server.
 */
export function withBoundHost(env: NodeJS.ProcessEnv, host: string): NodeJS.ProcessEnv {
  const lower = host.toLowerCase();
  // The name as a Host header carries it (src/auth/origin.ts hostName): an IPv6 address in brackets.
  const name = lower.includes(":") && !lower.startsWith("[") ? `[${lower}]` : lower;
  if (WILDCARD_HOSTS.has(name) || LOOPBACK_HOSTS.has(name)) return env;
  const listed = listOf(env["ACTION_ENVELOPE_API_HOSTS"]);
  return listed.includes(name) ? env : { ...env, ACTION_ENVELOPE_API_HOSTS: [...listed, name].join(",") };
}

/** The origins ACTION_ENVELOPE_API_ORIGINS lists, as src/auth/origin.ts reads them. */
export function listedOrigins(env: NodeJS.ProcessEnv): string[] {
  return [...originPolicyFromEnvironment(false, env).origins].filter((o) => o !== STUDIO_ORIGIN);
}

/** The config file written next to langgraph.json when it must be changed for the server (see serverConfig). */
export const DERIVED_CONFIG = ".langgraph.dev.json";

/**
 * One setting opens the server to a browser client: an origin in ACTION_ENVELOPE_API_ORIGINS passes
 * the origin check (src/auth/origin.ts) and must get CORS answers too, which the server takes only
 * from langgraph.json's `http.cors.allow_origins`. When the variable lists origins that the file does
 * not, the server is started from a copy (DERIVED_CONFIG, in the same directory so every relative
 * path and `.langgraph_api/` stay where they were) whose allow_origins adds them. Returns the config
 * path to start the server with.
 */
export function serverConfig(configPath: string, env: NodeJS.ProcessEnv): string {
  const extra = listedOrigins(env);
  if (extra.length === 0) return configPath;
  const config = JSON.parse(fs.readFileSync(configPath, "utf8")) as {
    http?: { cors?: { allow_origins?: string[]; allow_origin_regex?: string } };
  };
  const cors = config.http?.cors ?? {};
  if (cors.allow_origin_regex !== undefined) {
    throw new UsageError(
      `${configPath} sets http.cors.allow_origin_regex, which takes the place of allow_origins; add the origins of ACTION_ENVELOPE_API_ORIGINS (${extra.join(", ")}) to that pattern, or remove it`,
    );
  }
  const have = cors.allow_origins ?? [STUDIO_ORIGIN];
  const missing = extra.filter((o) => !have.includes(o));
  if (missing.length === 0) return configPath;
  const derived = path.join(path.dirname(configPath), DERIVED_CONFIG);
  fs.writeFileSync(
    derived,
    `${JSON.stringify({ ...config, http: { ...config.http, cors: { ...cors, allow_origins: [...have, ...missing] } } }, null, 2)}\n`,
  );
  return derived;
}

export async function runDevServer(opts: DevServerOptions): Promise<number> {
  const out = process.stdout;
  const configPath = path.resolve(opts.config);
  if (!fs.existsSync(configPath))
    throw new UsageError(`no LangGraph config at ${configPath}; pass --config <path to langgraph.json>`);
  const config = loadConfig();
  // The server reads these only at its first run; a bad file should stop us here, not fail that run.
  loadPolicyFile(config);
  loadPublicKeys(config);
  // The auth module reads the token file when the server loads it; an unreadable or bad one stops us here, before the server starts.
  const tokens = config.apiTokensPath ? loadApiTokens(config.apiTokensPath) : undefined;
  const startConfig = serverConfig(configPath, process.env);
  const port = opts.port ?? (await freePort(opts.host));
  const apiUrl = `http://${opts.host}:${port}`;
  // A wildcard bind (0.0.0.0, ::) is not an address to connect to nor a name anyone sends as Host, and an
  // open server answers only to loopback names or those listed (src/auth/origin.ts): its readiness is
  // asked, and this machine's browser and CLI are pointed, over loopback.
  const localUrl = WILDCARD_HOSTS.has(opts.host) ? `http://127.0.0.1:${port}` : apiUrl;
  const startedAt = Date.now();

  const portal = config.webhookUrl
    ? new URL(config.webhookUrl).host
    : config.mcp.mode === "url"
      ? new URL(config.mcp.url).host
      : "embedded emulator (started with the first run)";
  out.write(
    esc`Starting the LangGraph API server for ${path.relative(process.cwd(), configPath) || configPath} on ${apiUrl}\n`,
  );
  if (startConfig !== configPath)
    out.write(
      esc`  browser origins (ACTION_ENVELOPE_API_ORIGINS, CORS and origin check): ${listedOrigins(process.env).join(", ")} (server config ${path.relative(process.cwd(), startConfig) || startConfig})\n`,
    );
  out.write(
    esc`  model: ${config.model.model} (${config.model.chosenBecause}); portal: ${portal}; data: ${config.dataDir}\n`,
  );

  const child = spawn(
    LANGGRAPHJS,
    [
      "dev",
      "--no-browser",
      "--port",
      String(port),
      "--host",
      opts.host,
      "--config",
      startConfig,
      "--studio-url",
      opts.studioUrl,
      ...(opts.reload ? [] : ["--no-reload"]),
    ],
    {
      stdio: ["ignore", "inherit", "inherit"],
      env: withBoundHost(serverEnv(process.env), opts.host),
      detached: true,
    },
  );
  const pgid = child.pid!;
  const exited = new Promise<number>((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? (signal === "SIGINT" ? 130 : 1)));
  });
  // If we die without a chance to forward a signal, do not leave the server running.
  process.once("exit", () => {
    if (groupAlive(pgid)) process.kill(pgid, "SIGINT");
  });

  let stopping = false;
  let failed = false;
  let firstSignalAt = 0;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      // One Ctrl-C arrives several times: from the terminal, and relayed by npm.
      if (Date.now() - firstSignalAt < REPEAT_SIGNAL_MS) return;
      out.write(`\n${signal} again: killing the server without waiting for it to flush\n`);
      if (groupAlive(pgid)) process.kill(-pgid, "SIGKILL");
      return;
    }
    stopping = true;
    firstSignalAt = Date.now();
    out.write(`\nStopping (${signal}): the server flushes its state to .langgraph_api/ and exits\n`);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
  };
  for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(s, () => stop(s));

  try {
    await Promise.race([
      waitUntilReady(localUrl, child),
      exited.then((code) =>
        Promise.reject(new Error(`langgraphjs dev exited with ${code} before it was ready`)),
      ),
    ]);
    if (!stopping) {
      out.write(
        `\nLangGraph API ready in ${((Date.now() - startedAt) / 1000).toFixed(1)} s\n` +
          esc`  API:    ${localUrl}${localUrl !== apiUrl ? ` (listening on ${opts.host}: other names it answers to go in ACTION_ENVELOPE_API_HOSTS)` : ""}\n` +
          esc`  Studio: ${opts.studioUrl.replace(/\/+$/, "")}/studio/?baseUrl=${localUrl}\n` +
          (tokens
            ? esc`  auth:   API tokens from ${tokens.file} (${String(tokens.entries.length)} entries); every request needs Authorization: Bearer <token> (or x-api-key: <token>)\n`
            : "  auth:   OPEN: ACTION_ENVELOPE_API_TOKENS is not set, so every caller is anonymous and approver ids are self-declared (development only)\n") +
          `  graph:  bitrix24_task_agent (resume JSON for an approval: docs/api-and-studio.md, "Approving from Studio")\n` +
          `Stop with Ctrl-C. (The server runs as process group ${pgid}; should this process be killed outright, stop it with: kill -INT ${pgid})\n`,
      );
    }
  } catch (e) {
    if (!stopping) {
      failed = true;
      process.stderr.write(`error: ${escapeForTerminal((e as Error).message)}\n`);
      stop("SIGTERM");
    }
  }
  const code = await exited;
  const clean = await drainGroup(pgid);
  if (!clean)
    process.stderr.write(
      `warning: server processes were still running ${DRAIN_TIMEOUT_MS / 1000} s after it exited; killed them\n`,
    );
  // A stop we asked for is a clean end; the server ending by itself is not.
  if (failed) return 2;
  return stopping ? 0 : code || 2;
}

function buildProgram(): Command {
  const port = (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) > 65535)
      throw new InvalidArgumentError(`expected a port number, got "${value}"`);
    return Number(value);
  };
  return new Command("dev")
    .description("Serve the graphs of langgraph.json through the LangGraph API (for Studio and the SDK)")
    .option("--port <n>", "port (default: a free one; 2024 is often taken)", port)
    .option("--host <host>", "interface to bind", "127.0.0.1")
    .option("--config <file>", "LangGraph config", path.join(ROOT, "langgraph.json"))
    .option("--no-reload", "do not restart the server when source files change")
    .option("--studio-url <url>", "LangGraph Studio host", DEFAULT_STUDIO)
    .exitOverride();
}

// Run as a program (compiled, as `npm run dev` does, or through tsx), not when imported by tests.
const isEntry = process.argv[1] && /cli[\\/]dev-server\.[jt]s$/.test(process.argv[1]);
if (isEntry) {
  let code: number;
  try {
    code = await runDevServer(
      buildProgram().parse(process.argv.slice(2), { from: "user" }).opts<DevServerOptions>(),
    );
  } catch (e) {
    const err = e as Error & { code?: string };
    if (err.code?.startsWith("commander.")) code = err.code === "commander.helpDisplayed" ? 0 : 1;
    else {
      const usage = reportUsageError(e);
      if (usage === undefined) process.stderr.write(`error: ${escapeLines(err.stack ?? err.message)}\n`);
      code = usage ?? 2;
    }
  }
  process.exit(code);
}
