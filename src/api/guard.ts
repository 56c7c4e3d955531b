/**
 * The graph as the LangGraph API server runs it (src/graph/graph.ts exports it wrapped): before a run
 * with `command.resume` starts, a resume to a thread that is not waiting is refused visibly
 * (src/api/late-resume.ts), and a decision without an approver gets the authenticated caller
 * (src/api/resume-identity.ts). Run input that is not an object fails with INVALID_INPUT; other
 * input passes through unchanged (the agent node validates it). The CLI and tests that compile the
 * builder themselves do not go through this; they decide through src/app/.
 */
import { Command, isCommand, type CompiledStateGraph } from "@langchain/langgraph";
import { refuseLateResume } from "./late-resume.js";
import { withAuthenticatedApprover } from "./resume-identity.js";

type RunOptions = { configurable?: Record<string, unknown> } | undefined;
type Served = { stream: (...a: any[]) => any; streamEvents: (...a: any[]) => any; getState: CompiledStateGraph<any, any, any>["getState"] };

/** The run failed before any node because its input is not an object; the API reports `{error: name, message}`. */
export class InvalidRunInputError extends Error {
  override readonly name = "InvalidInput";
}

async function admit(graph: Served, input: unknown, options: RunOptions): Promise<unknown> {
  // LangGraph would fail such input with an InvalidUpdateError about node "__start__"; say what is expected instead.
  if (input !== null && input !== undefined && !isCommand(input) && (typeof input !== "object" || Array.isArray(input))) {
    throw new InvalidRunInputError(
      `INVALID_INPUT: the run input must be an object, {"request": "…", "requestedBy": "…"} or Studio's {"messages": [...]}; got ${Array.isArray(input) ? "an array" : `a ${typeof input}`}`,
    );
  }
  if (!isCommand(input) || input.resume === undefined) return input;
  await refuseLateResume(graph, input, options);
  const resume = withAuthenticatedApprover(input.resume, options?.configurable);
  return resume === input.resume ? input : new Command({ resume });
}

export function guardApiRuns<G extends Served>(graph: G): G {
  const stream = graph.stream.bind(graph);
  const streamEvents = graph.streamEvents.bind(graph);
  graph.stream = async (input: unknown, options?: RunOptions, ...rest: unknown[]) => stream(await admit(graph, input, options), options, ...rest);
  graph.streamEvents = (input: unknown, options?: RunOptions, ...rest: unknown[]) => {
    const plain = input === null || input === undefined || (typeof input === "object" && !Array.isArray(input) && !isCommand(input));
    if (plain || (isCommand(input) && input.resume === undefined)) return streamEvents(input, options, ...rest);
    return (async function* () {
      const admitted = await admit(graph, input, options);
      yield* (await streamEvents(admitted, options, ...rest)) as AsyncIterable<unknown>;
    })();
  };
  return graph;
}
