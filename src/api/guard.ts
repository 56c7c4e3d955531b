/**
 * The graph as the LangGraph API server runs it (src/api/served-graph.ts applies this): before a run
 * with `command.resume` starts, a resume to a thread that is not waiting is refused visibly
 * (src/api/late-resume.ts), and a decision without an approver gets the authenticated caller
 * (src/api/resume-identity.ts). A run with neither input nor command continues a run stopped between
 * steps from where the journal says, as `recover` does locally. Run input that is not an object fails
 * with INVALID_INPUT; other input passes through unchanged (the agent node validates it). Every run
 * gets the server's dependencies in its config (src/runtime/run-deps.ts) in place of anything the
 * client sent under that key. Each run holds the journal's lease on its thread while it streams. The
 * CLI and tests that compile the builder themselves do not go through this; they decide through src/app/.
 */
import { Command, isCommand, type CompiledStateGraph } from "@langchain/langgraph";
import { refuseLateResume } from "./late-resume.js";
import { withAuthenticatedApprover } from "./resume-identity.js";
import { recoveryInput, takeThreadLock } from "../app/threads.js";
import type { Deps } from "../runtime/deps.js";
import { AUTH_USER_KEYS } from "../auth/rules.js";
import { depsConfigurable, runConfigurable, runNonce } from "../runtime/run-deps.js";

type RunOptions = { configurable?: Record<string, unknown> } | undefined;
// The compiled graph's own signatures are generic over its state; the guard only forwards their arguments.
/* eslint-disable @typescript-eslint/no-explicit-any */
type Served = {
  stream: (...a: any[]) => any;
  streamEvents: (...a: any[]) => any;
  getState: CompiledStateGraph<any, any, any>["getState"];
};
/* eslint-enable @typescript-eslint/no-explicit-any */

/** The run failed before any node because its input is not an object; the API reports `{error: name, message}`. */
export class InvalidRunInputError extends Error {
  override readonly name = "InvalidInput";
}

async function admit(graph: Served, input: unknown, options: RunOptions, deps: Deps): Promise<unknown> {
  // LangGraph would fail such input with an InvalidUpdateError about node "__start__"; say what is expected instead.
  if (
    input !== null &&
    input !== undefined &&
    !isCommand(input) &&
    (typeof input !== "object" || Array.isArray(input))
  ) {
    throw new InvalidRunInputError(
      `INVALID_INPUT: the run input must be an object, {"request": "…", "requestedBy": "…"} or Studio's {"messages": [...]}; got ${Array.isArray(input) ? "an array" : `a ${typeof input}`}`,
    );
  }
  if (input === null || input === undefined) return continued(graph, options, deps, input);
  if (!isCommand(input) || input.resume === undefined) return input;
  await refuseLateResume(graph, input, options, deps);
  const resume = withAuthenticatedApprover(input.resume, options?.configurable);
  return resume === input.resume ? input : new Command({ resume });
}

/**
 * A run with neither input nor command (only an admin's, with tokens: src/auth/rules.ts) continues a
 * run the server stopped between steps from where the journal says, with the input the local
 * `recover` would use (recoveryInput, src/app/threads.ts); on a thread that is not an interrupted run
 * it runs as sent. Nothing the client sends chooses the step: the run carries no command of its own.
 */
async function continued(
  graph: Served,
  options: RunOptions,
  deps: Deps,
  input: null | undefined,
): Promise<unknown> {
  const threadId = options?.configurable?.["thread_id"];
  if (typeof threadId !== "string" || threadId === "") return input;
  const recovery = await recoveryInput({ graph, deps }, threadId);
  return recovery.input === undefined ? input : recovery.input;
}

/**
 * In open mode (no token file) no run carries an authenticated user. src/auth/rules.ts takes the
 * server's stamp out of the run's own config, but the server merges the config it keeps for the thread
 * (the config of the last run started on it while idle) under the run's: a user stamped there while the
 * server ran with a token file, on the same `.langgraph_api`, would reach this anonymous run as that user.
 */
function withoutKeptUser(options: RunOptions, deps: Deps): RunOptions {
  const configurable = options?.configurable;
  if (deps.config.apiTokensPath !== undefined || !configurable) return options;
  if (!AUTH_USER_KEYS.some((key) => key in configurable)) return options;
  const rest = Object.fromEntries(
    Object.entries(configurable).filter(([key]) => !(AUTH_USER_KEYS as readonly string[]).includes(key)),
  );
  return { ...options, configurable: rest };
}

/**
 * The run's options with the server's dependencies and the run's origin (`continued`: a run sent with
 * neither input nor command; the resume value of its admitted Command); a client's value under either
 * key is replaced.
 */
function withServerDeps(options: RunOptions, deps: Deps, input: unknown, admitted: unknown): RunOptions & {} {
  const continued = input === null || input === undefined;
  const resume = isCommand(admitted) ? admitted.resume : undefined;
  return {
    ...options,
    configurable: {
      ...options?.configurable,
      ...depsConfigurable(deps),
      ...runConfigurable(continued, resume),
    },
  };
}

/**
 * Takes the journal's lease on the run's thread, as the CLI, the inbox and the workers do, so that no
 * two processes carry out one thread's action at once (the inbox mounted on this server drives the
 * graph outside the API's run queue): a run sent while another holds it fails IN_PROGRESS before it
 * starts. Returns its release (nothing to release for a run without a thread).
 */
async function lockRun(deps: Deps, options: RunOptions): Promise<() => Promise<void>> {
  const threadId = options?.configurable?.["thread_id"];
  if (typeof threadId !== "string" || threadId === "") return async () => {};
  return takeThreadLock(deps, threadId, "api:");
}

/**
 * The run's chunks as they come, the thread's lease released once they end, fail, or the reader stops
 * early (`for await` returns the iterator); a reader that stops reading without returning keeps it.
 */
async function* releasedAfter(chunks: AsyncIterable<unknown>, release: () => Promise<void>) {
  try {
    yield* chunks;
  } finally {
    await release();
  }
}

export function guardApiRuns<G extends Served>(graph: G, serverDeps: () => Promise<Deps>): G {
  const stream = graph.stream.bind(graph);
  const streamEvents = graph.streamEvents.bind(graph);
  /** Admits the run under its thread's lease and starts it; the lease goes with the run's chunks. */
  const start = async (run: typeof stream, input: unknown, sent: RunOptions, rest: unknown[]) => {
    const deps = await serverDeps();
    const options = withoutKeptUser(sent, deps);
    const release = await lockRun(deps, options);
    try {
      const admitted = await admit(graph, input, options, deps);
      const chunks = (await run(
        admitted,
        withServerDeps(options, deps, input, admitted),
        ...rest,
      )) as AsyncIterable<unknown>;
      return releasedAfter(chunks, release);
    } catch (e) {
      await release();
      throw e;
    }
  };
  // streamEvents runs through stream: a run this guard has admitted (its origin set) passes straight on.
  graph.stream = (input: unknown, options?: RunOptions, ...rest: unknown[]) =>
    runNonce(options) !== undefined ? stream(input, options, ...rest) : start(stream, input, options, rest);
  graph.streamEvents = (input: unknown, options?: RunOptions, ...rest: unknown[]) =>
    (async function* () {
      yield* await start(streamEvents, input, options, rest);
    })();
  return graph;
}
