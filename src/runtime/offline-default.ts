/**
 * The one door from production code into the offline demo (src/offline-demo/): the offline model that
 * `MODEL=offline` (the default) picks, and the embedded Bitrix24 emulator that stands in for a portal when
 * none is configured. The emulator loads on first use, so commands that never start a portal never load it.
 */
export { OFFLINE_MODEL_LABEL, OfflineTaskModel } from "../offline-demo/models/model.js";
export type { RunningEmulator } from "../offline-demo/emulator/index.js";

/** The emulator's module: `startEmulator` and `loadSeedFile`, loaded on demand. */
export const loadEmulator = () => import("../offline-demo/emulator/index.js");
