/**
 * The app a thread is driven through: the graph over the checkpoints, with the stores (and, for runs, the
 * portal and model).
 */
import { closeCheckpointer, createCheckpointer } from "../store/checkpointer.js";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { compileGraph, type CompileOptions } from "../graph/graph.js";
import type { Deps, StoreDeps } from "../runtime/deps.js";
import { depsConfigurable } from "../runtime/run-deps.js";

/**
 * What reading a thread needs: the stores and the graph over the checkpoints. `show` opens only this
 * (src/cli/session.ts, withReadOnlyApp), `pending` less still (withStores); an App is one too.
 */
export interface ReadApp {
  deps: StoreDeps;
  checkpointer: BaseCheckpointSaver;
  graph: ReturnType<typeof compileGraph>;
  close(): Promise<void>;
}

/** A ReadApp with the portal's tools and the model, which runs and decisions need. */
export interface App extends ReadApp {
  deps: Deps;
}

type OpenOptions = Omit<CompileOptions, "checkpointer"> & { checkpointer?: BaseCheckpointSaver };

/** The graph over the checkpoints, for reading only: its runs carry no deps, so no node can run against them. */
export function openReadApp(deps: StoreDeps, opts: OpenOptions = {}): ReadApp {
  const checkpointer = opts.checkpointer ?? createCheckpointer(deps.config);
  const graph = compileGraph({ ...opts, checkpointer });
  return {
    deps,
    checkpointer,
    graph,
    async close() {
      await deps.close();
      await closeCheckpointer(checkpointer);
    },
  };
}

/** The graph with these deps bound to every run it starts (src/runtime/run-deps.ts). */
export function openApp(deps: Deps, opts: OpenOptions = {}): App {
  const read = openReadApp(deps, opts);
  return { ...read, deps, graph: read.graph.withConfig({ configurable: depsConfigurable(deps) }) };
}
