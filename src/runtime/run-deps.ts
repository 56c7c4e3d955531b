/**
 * How a run carries its dependencies (src/runtime/deps.ts): the code that starts runs in this process
 * (src/app/threads.ts binds them to its graph; the API server's run guard adds its own to each run)
 * puts them into `config.configurable` with `depsConfigurable`, and every node takes them with
 * `depsOf(config)`, so a reader sees what each node uses and a test passes its own.
 *
 * Run config sent over the LangGraph API is a client's JSON. Only a handle made in this process is
 * taken: a JSON value under the same key is never an instance of the handle's class, so no client can
 * put its own journal, policy, keys or portal client in the place of the process's.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { Deps } from "./deps.js";

/** The configurable key a run's dependencies travel under. */
export const DEPS_KEY = "action_envelope_deps";

class DepsHandle {
  readonly #deps: Deps;
  constructor(deps: Deps) {
    this.#deps = deps;
  }
  get deps(): Deps {
    return this.#deps;
  }
  /** What a serialised run config shows in its place (debug events, traces): never the stores or keys. */
  toJSON(): string {
    return "(this process's dependencies)";
  }
}

/** A node ran without this process's deps in its config: a run started outside src/app/ or the API guard. */
export class MissingDepsError extends Error {
  constructor(arrived: unknown) {
    super(
      `expected this process's dependencies in config.configurable.${DEPS_KEY} ` +
        `(set by src/app/threads.ts or the API run guard); arrived ` +
        (arrived === undefined ? "nothing" : `a ${typeof arrived} from outside this process`),
    );
    this.name = "MissingDepsError";
  }
}

/** The configurable entry that gives a run these dependencies. */
export function depsConfigurable(deps: Deps): Record<string, unknown> {
  return { [DEPS_KEY]: new DepsHandle(deps) };
}

/** The run's dependencies, as this process put them into its config. */
export function depsOf(config: Pick<LangGraphRunnableConfig, "configurable"> | undefined): Deps {
  const value: unknown = config?.configurable?.[DEPS_KEY];
  if (value instanceof DepsHandle) return value.deps;
  throw new MissingDepsError(value);
}
