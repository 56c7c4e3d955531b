/**
 * Opens the app from the environment for one CLI command and always closes it (MCP child, SQLite).
 * The runtime (LangGraph, MCP, stores) is imported here, when a command first needs it, so `--help`
 * and commands that never open the app do not load it (docs/operations.md: Performance).
 */
import type { App, ReadApp } from "../app/open-app.js";
import type { StoreDeps } from "../runtime/deps.js";

const runtime = () =>
  Promise.all([import("../config/env.js"), import("../runtime/deps.js"), import("../app/open-app.js")]);

export async function withApp<T>(fn: (app: App) => Promise<T>): Promise<T> {
  const [{ loadConfig }, { createDeps }, { openApp }] = await runtime();
  return using(openApp(await createDeps(loadConfig())), fn);
}

/**
 * For commands that only read a thread (`show`): the journal, audit log, policy and checkpoints, and
 * none of the portal, MCP server child, embedded emulator or model a run needs. The same viewThread
 * reads through it, so output, seal checks and refusals are those of withApp.
 */
export async function withReadOnlyApp<T>(fn: (app: ReadApp) => Promise<T>): Promise<T> {
  const [{ loadConfig }, { createStoreDeps }, { openReadApp }] = await runtime();
  return using(openReadApp(await createStoreDeps(loadConfig())), fn);
}

/** For commands that read only the journal (`pending`): the stores, policy and clock, without LangGraph or the checkpointer. */
export async function withStores<T>(fn: (app: { deps: StoreDeps }) => Promise<T>): Promise<T> {
  const [{ loadConfig }, { createStoreDeps }] = await Promise.all([
    import("../config/env.js"),
    import("../runtime/deps.js"),
  ]);
  const deps = await createStoreDeps(loadConfig());
  return using({ deps, close: () => deps.close() }, fn);
}

async function using<A extends { close(): Promise<void> }, T>(
  app: A,
  fn: (app: A) => Promise<T>,
): Promise<T> {
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
