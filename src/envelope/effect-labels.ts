/**
 * What an envelope acts on, told by its operation's effect (make, remove, change), for the chat report
 * and for an ending that names what a sent write left unchecked.
 */
import { deletedLabelOf } from "./delete-subjects.js";
import type { Envelope } from "./envelope.js";
import { objectNamed, operationSpec } from "./operations.js";

type Acted = Pick<Envelope, "operation" | "object" | "params">;

/** What a proposal acts on, by its effect: "on task 4", "making a new task", "removing comment 5 of task 4". */
export function proposedOn(e: Acted): string {
  if (operationSpec(e.operation)?.effect === "create")
    return `making ${objectNamed(e.operation, e.object.id)}`;
  const deleted = deletedLabelOf(e);
  return deleted ? `removing ${deleted}` : `on ${objectNamed(e.operation, e.object.id)}`;
}

/** What a sent write left unchecked without its verification: the object's state, whether a new one was made, whether a deleted one is gone. */
export function leftUnchecked(e: Acted): string {
  if (operationSpec(e.operation)?.effect === "create")
    return `whether ${objectNamed(e.operation, e.object.id)} was made`;
  const deleted = deletedLabelOf(e);
  return deleted ? `whether ${deleted} is gone` : `the state of ${objectNamed(e.operation, e.object.id)}`;
}
