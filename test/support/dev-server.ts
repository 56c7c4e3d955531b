/**
 * The LangGraph API server as `npm run dev` starts it (src/cli/dev-server.ts → `langgraphjs dev`),
 * from an isolated copy of langgraph.json, for tests that drive it over HTTP.
 */
import fs from "node:fs";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { ROOT, tempDir } from "./harness.js";
import { waitForExit } from "./processes.js";

/** src/cli/dev-server.ts as compiled to dist/ (the suite's global setup builds it when src/ is newer). */
export const DEV_SERVER = path.join(ROOT, "dist/cli/dev-server.js");
/**
 * How `npm run dev` runs src/cli/dev-server.ts (package.json), and so how tests run it: compiled, on
 * node, like `npm start` and the CLI (through tsx the wrapper alone took ~1.3 s of CPU per start). Not
 * under the tsx command either: a SIGINT to it is relayed to its child, and where the child does not
 * acknowledge it within 30 ms (a loaded machine) tsx SIGKILLs it: the server then never flushes
 * `.langgraph_api/` and its process group outlives it.
 */
export const DEV_SERVER_ARGS = [DEV_SERVER] as const;

const absoluteSpec = (spec: string) => {
  const [file, symbol] = spec.split(":");
  return `${path.resolve(ROOT, file!)}:${symbol}`;
};

/**
 * The repo's langgraph.json with graph and auth paths made absolute, in a directory of its own: the
 * server keeps its state in `<config dir>/.langgraph_api`, so a test run never touches the developer's.
 * The server resolves @langchain/langgraph from the config's directory, hence the node_modules link.
 */
export function isolatedConfig(graphOverrides: Record<string, string> = {}): {
  dir: string;
  file: string;
  graphs: Record<string, string>;
  auth?: { path: string; disable_studio_auth?: boolean };
} {
  const repo = JSON.parse(fs.readFileSync(path.join(ROOT, "langgraph.json"), "utf8")) as {
    graphs: Record<string, string>;
    auth?: { path: string; disable_studio_auth?: boolean };
    http?: { app?: string };
  };
  // The custom HTTP app (the web inbox under /inbox, src/inbox/mount.ts) is resolved against the config's directory too.
  if (repo.http?.app) repo.http = { ...repo.http, app: absoluteSpec(repo.http.app) };
  const dir = tempDir("ae-langgraph-");
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
  const graphs = Object.fromEntries(
    Object.entries({ ...repo.graphs, ...graphOverrides }).map(([id, spec]) => [id, absoluteSpec(spec)]),
  );
  const auth = repo.auth ? { ...repo.auth, path: absoluteSpec(repo.auth.path) } : undefined;
  const file = path.join(dir, "langgraph.json");
  fs.writeFileSync(file, JSON.stringify({ ...repo, graphs, ...(auth ? { auth } : {}) }, null, 2));
  return { dir, file, graphs, ...(auth ? { auth } : {}) };
}

export interface RunningDevServer {
  apiUrl: string;
  process: ChildProcess;
  project: ReturnType<typeof isolatedConfig>;
  output(): string;
  /** SIGINT to the top process (it forwards to the server and waits for the group), as Ctrl-C would. */
  stop(): Promise<number | null>;
}

/**
 * Starts src/cli/dev-server.ts with `env` added to this process's environment; resolves once it prints
 * the API URL. `project`: a stopped server's project, whose `.langgraph_api` the new server takes up.
 */
export async function startDevServer(
  env: Record<string, string>,
  opts: {
    readyTimeoutMs?: number;
    graphs?: Record<string, string>;
    project?: ReturnType<typeof isolatedConfig>;
  } = {},
): Promise<RunningDevServer> {
  const project = opts.project ?? isolatedConfig(opts.graphs);
  const child = spawn(process.execPath, [...DEV_SERVER_ARGS, "--config", project.file, "--no-reload"], {
    cwd: ROOT,
    env: { ...process.env, ...env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const timeoutMs = opts.readyTimeoutMs ?? 150_000;
  const apiUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`dev server not ready in ${timeoutMs / 1000} s\n${stdout}\n${stderr}`)),
      timeoutMs,
    );
    const check = () => {
      const m = /API:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`dev server exited ${code} before it was ready\n${stdout}\n${stderr}`));
    });
  });
  return {
    apiUrl,
    process: child,
    project,
    output: () => `${stdout}\n${stderr}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGINT");
      return waitForExit(child, 60_000).catch(() => {
        child.kill("SIGKILL");
        return null;
      });
    },
  };
}
