import type { Deps } from "../runtime/deps.js";
import type { ActionRow } from "../store/action-machine.js";
import type { ExecutionEntry } from "../store/journal.js";

/** What every phase function runs with. */
export interface PhaseContext {
  deps: Deps;
  /** For a change set: its actions in set order, as the phases left them. */
  members?: ActionRow[];
  /** The current action's write-ahead entry once a phase has recorded or found it (for the view; never to decide). */
  execution?: ExecutionEntry;
}
