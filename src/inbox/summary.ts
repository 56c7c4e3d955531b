/**
 * The one-line summary of an approval the inbox list shows: what it acts on (the task's or deal's
 * title as read for the card), each change as `old → new` shortened, and how long until it expires.
 * Pure: from the journal's registered envelope only.
 */
import { escapeForTerminal } from "../text/escape.js";
import type { Envelope } from "../envelope/envelope.js";
import { enumLabel } from "../envelope/fields.js";
import { OPERATIONS, objectNamed } from "../envelope/operations.js";
import { personNote, type PeopleLookup } from "../envelope/people.js";

/** Longest value shown in a list row, in characters (markers count as theirs). */
const SHORT = 32;

/** A value as one short line: invisible characters as markers, a name beside an id or code, cut at SHORT. */
export function shortValue(
  field: string,
  value: unknown,
  people?: PeopleLookup["names"],
  max = SHORT,
): string {
  if (value === undefined || value === null || value === "") return "—";
  const plain = typeof value === "string" ? value : JSON.stringify(value);
  const shown = escapeForTerminal(plain);
  const cut = [...shown].length > max ? `${[...shown].slice(0, max - 1).join("")}…` : shown;
  const name = enumLabel(field, value) ?? personNote(field, value, people);
  return name === undefined ? cut : `${escapeForTerminal(name)} (${cut})`;
}

export interface ChangeLine {
  field: string;
  before: string;
  after: string;
}

/** Each requested field as before → after; a created object has no before, a delete no after. */
export function changeLines(e: Envelope, people?: PeopleLookup["names"]): ChangeLine[] {
  const effect = OPERATIONS[e.operation].effect;
  if (effect === "delete")
    return [{ field: objectNamed(e.operation, e.object.id), before: "exists", after: "deleted" }];
  const create = effect === "create" || effect === "create_child";
  return Object.entries(e.params).map(([field, value]) => ({
    field,
    before: create ? "new" : shortValue(field, e.baseline.values[field], people),
    after: shortValue(field, value, people),
  }));
}

/** What the row names: "task 4 «Quarterly plan»" with the title as read, or the object alone. */
export function objectTitle(e: Envelope): string {
  const title =
    e.baseline.values["TITLE"] ??
    (OPERATIONS[e.operation].effect === "create" ? e.params["TITLE"] : undefined);
  const named = objectNamed(e.operation, e.object.id);
  return typeof title === "string" && title !== ""
    ? `${named} «${shortValue("TITLE", title, undefined, 2 * SHORT)}»`
    : named;
}

/** "in 23 min", "in 2 h 5 min", "in 3 days", "expired": the time left, for a list row. */
export function expiresIn(expiresAt: string, now: Date): string {
  const ms = Date.parse(expiresAt) - now.getTime();
  if (!(ms > 0)) return "expired";
  const min = Math.floor(ms / 60_000);
  if (min < 1) return "in under a minute";
  if (min < 60) return `in ${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return `in ${h} h${min % 60 ? ` ${min % 60} min` : ""}`;
  return `in ${Math.floor(h / 24)} days`;
}
