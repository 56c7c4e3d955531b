/**
 * The graph the LangGraph API server serves (langgraph.json: `./src/api/served-graph.ts:graph`): the
 * graph's one API instance (src/graph/graph.ts), its runs guarded (src/api/guard.ts) and given this
 * server process's dependencies (src/runtime/server-deps.ts). A resume sent to a thread that is not
 * waiting fails its run visibly (THREAD_ENDED / NOT_WAITING, audited) instead of the silent success
 * LangGraph gives a resume with nothing to resume; a decision without an approver gets the
 * authenticated caller.
 */
import { apiGraph } from "../graph/graph.js";
import { serverDeps } from "../runtime/server-deps.js";
import { guardApiRuns } from "./guard.js";

export const graph = guardApiRuns(apiGraph, serverDeps);
