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
import { randomUUID } from "node:crypto";
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

/** The configurable key a run's origin travels under (runConfigurable). */
const RUN_KEY = "action_envelope_run";

/**
 * One run, as the code that started it in this process made it: a nonce no checkpoint can hold before
 * the run exists, whether the run only continues a stopped one, and the resume value it was sent with.
 */
class RunOrigin {
  readonly nonce = randomUUID();
  constructor(
    readonly continued: boolean,
    private readonly resume: unknown,
  ) {}
  /** Whether `value` is what this run was sent to resume with (the value, or one of a map's per-interrupt values). */
  resumesWith(value: unknown): boolean {
    if (this.resume === undefined) return false;
    const text = jsonText(value);
    if (text === undefined) return false;
    if (text === jsonText(this.resume)) return true;
    const map = this.resume;
    return (
      typeof map === "object" &&
      map !== null &&
      !Array.isArray(map) &&
      Object.values(map).some((v) => jsonText(v) === text)
    );
  }
  toJSON(): string {
    return "(this run's origin)";
  }
}

/**
 * The configurable entry that marks a run started here (src/app/threads.ts, the inbox, the API run
 * guard), made per run. `continued`: a run with no input of its own (recover, the worker, an admin's
 * continue through the API); `resume`: the value of the Command the run was sent with.
 */
export function runConfigurable(continued: boolean, resume?: unknown): Record<string, unknown> {
  return { [RUN_KEY]: new RunOrigin(continued, resume) };
}

/**
 * A value's JSON text with object keys sorted: the same for the value a run was sent with and the copy
 * the checkpoint gives back (which drops undefined properties); undefined for what is not JSON. Not
 * canonicalJson: that refuses text it cannot hash (an unpaired surrogate), and such a value is still the
 * run's own, to be judged (and refused for what it says) by check_decision.
 */
function jsonText(value: unknown): string | undefined {
  try {
    return JSON.stringify(value, (_key, v: unknown) =>
      v !== null && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : v,
    );
  } catch {
    return undefined;
  }
}

function originOf(config: Pick<LangGraphRunnableConfig, "configurable"> | undefined): RunOrigin | undefined {
  const origin: unknown = config?.configurable?.[RUN_KEY];
  return origin instanceof RunOrigin ? origin : undefined;
}

/**
 * Which run a pending decision is received in, as the node that receives it records it: this run's
 * nonce; null where the value is not this run's own (a run that only continues, or a resume value the
 * run was not sent with: both come from the checkpoint, where a writer of the data directory can put
 * them); undefined for a run started without an origin (a script invoking the compiled graph itself).
 * `resumed`: the value an interrupt returned, which must be the one this run was sent with.
 */
export function receivedIn(
  config: Pick<LangGraphRunnableConfig, "configurable"> | undefined,
  resumed?: { value: unknown },
): string | null | undefined {
  const origin = originOf(config);
  if (!origin) return undefined;
  if (origin.continued || (resumed && !origin.resumesWith(resumed.value))) return null;
  return origin.nonce;
}

/** This run's nonce (undefined for a run started without an origin): names what the run itself records. */
export function runNonce(
  config: Pick<LangGraphRunnableConfig, "configurable"> | undefined,
): string | undefined {
  return originOf(config)?.nonce;
}

/** Whether a pending decision recorded as received in `from` was sent with this very run (always, for a run without an origin). */
export function sentWithThisRun(
  config: Pick<LangGraphRunnableConfig, "configurable"> | undefined,
  from: string | null | undefined,
): boolean {
  const origin = originOf(config);
  return !origin || (from != null && from === origin.nonce);
}
