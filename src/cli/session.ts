/** Opens the app from the environment for one CLI command and always closes it (MCP child, SQLite). */
import { loadConfig } from "../config/env.js";
import { createDeps } from "../runtime/deps.js";
import { openApp, type App } from "../app/threads.js";

export async function withApp<T>(fn: (app: App) => Promise<T>): Promise<T> {
  const app = openApp(await createDeps(loadConfig()));
  try {
    return await fn(app);
  } finally {
    await app.close();
  }
}
