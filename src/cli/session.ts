/**
 * Opens the app from the environment for one CLI command and always closes it (MCP child, SQLite).
 * The runtime (LangGraph, MCP, stores) is imported here, when a command first needs it, so `--help`
 * and commands that never open the app do not load it (README: Performance).
 */
import type { App } from "../app/threads.js";

export async function withApp<T>(fn: (app: App) => Promise<T>): Promise<T> {
  const [{ loadConfig }, { createDeps }, { openApp }] = await Promise.all([import("../config/env.js"), import("../runtime/deps.js"), import("../app/threads.js")]);
  const app = openApp(await createDeps(loadConfig()));
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
