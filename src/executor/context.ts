import type { Update } from "../graph/state.js";
import type { Deps } from "../runtime/deps.js";
import type { ActionRow } from "../store/action-machine.js";

/** What every phase function runs with: the process's dependencies and, for a change set, its actions in set order. */
export interface PhaseContext {
  deps: Deps;
  members?: ActionRow[];
}

/**
 * One phase of an approved action: its only durable act is one journal transition (or the close that
 * ends the action). It returns the evidence it produced, for the stream and the state mirror; the
 * executor reads where the action is from the journal, never from this.
 */
export type PhaseFunction = (ctx: PhaseContext, action: ActionRow) => Promise<Update>;
