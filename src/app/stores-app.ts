/**
 * The stores alone (journal, audit log, policy, clock), for a command that reads only the journal:
 * `pending`. The graph over the checkpoints (LangGraph, the nodes, the checkpointer) is loaded and
 * opened only if the command turns out to need a thread's state, and then exactly as `show` opens it.
 */
import type { StoreDeps } from "../runtime/deps.js";
import type { ReadApp } from "./open-app.js";

export interface StoresApp {
  deps: StoreDeps;
  /** The read-only app over the same stores, opened on first call. */
  readApp(): Promise<ReadApp>;
  close(): Promise<void>;
}

export function openStoresApp(deps: StoreDeps): StoresApp {
  let read: Promise<ReadApp> | undefined;
  return {
    deps,
    readApp: () => (read ??= import("./open-app.js").then(({ openReadApp }) => openReadApp(deps))),
    async close() {
      // The read-only app closes the stores with its checkpointer; if it never opened, close them here.
      const opened = await read?.catch(() => undefined);
      if (opened) await opened.close();
      else await deps.close();
    },
  };
}
