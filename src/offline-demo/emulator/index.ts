export { startEmulator } from "./server.js";
export { defaultSeed, loadSeedFile, parseSeed, SeedError } from "./seed.js";
export { EmulatorSeedSchema } from "./types.js";
export type { EmulatorOptions, EmulatorSeed, RunningEmulator } from "./types.js";
export type { CallLogEntry } from "./store.js";
export type { FaultSpec } from "./faults.js";
export { EmulatorControl, type FaultRequest } from "./control-client.js";
