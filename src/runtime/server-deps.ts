/**
 * The LangGraph API server's dependencies, built once per process from the environment on first use.
 * The server loads the graph, auth and inbox modules itself (langgraph.json), so nothing of ours
 * hands them deps; they all take this one instance. Runs over the API get it from the run guard
 * (src/api/guard.ts), never from the client's run config. The journal records the threads it registers
 * as kept by the server (src/store/keeper.ts), so `worker --api` claims their due work and `worker` does not.
 */
import { loadConfig } from "../config/env.js";
import { createDeps, type Deps } from "./deps.js";

let building: Promise<Deps> | undefined;

export function serverDeps(): Promise<Deps> {
  building ??= createDeps(loadConfig(), { keeper: "api" });
  return building;
}
