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
  /**
   * The action whose pre-read this run made right before its write (its envelope hash). A pre-read
   * found in the journal instead was made by a process that stopped before writing, maybe long ago.
   */
  preReadThisRun?: string;
}
