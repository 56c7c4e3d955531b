/** Small helper shared by nodes that end the run early: every early end names its code and reason. */
import type { Update } from "../graph/state.js";
import type { Outcome, ReasonCode } from "../hitl/records.js";

export function endRun(outcome: Outcome, reasonCode: ReasonCode, reason: string): Update {
  return { outcome, reasonCode, reason };
}
