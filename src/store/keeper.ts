/**
 * Which side keeps a thread's checkpoints, recorded in the journal's thread row when the thread is
 * first registered, so each kind of worker claims only due work it can drive: "local" for threads the
 * CLI and its `worker` keep in their own checkpointer, "api" for threads the LangGraph API server keeps
 * (its deps open the journal with keeper "api": src/runtime/server-deps.ts), worked by `worker --api`.
 * A thread recorded before keepers were recorded has none and is claimed by either kind.
 */
export type Keeper = "local" | "api";

export const DEFAULT_KEEPER: Keeper = "local";
