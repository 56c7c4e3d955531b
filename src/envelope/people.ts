/**
 * People in task fields (RESPONSIBLE_ID, AUDITORS, …): what the card shows next to a user id, and how a
 * name typed in an edit becomes the exact id. Pure: the lookups themselves (user.get) are made by code
 * in src/hitl/people.ts, and their results are passed in. A name is never part of the envelope; the
 * envelope holds ids only.
 */
import type { Envelope } from "./envelope.js";
import { fieldSpec, normaliseId } from "./fields.js";

/** Task fields whose values are Bitrix24 user ids. */
export const USER_FIELDS: ReadonlySet<string> = new Set([
  "RESPONSIBLE_ID",
  "CREATED_BY",
  "CHANGED_BY",
  "CLOSED_BY",
  "STATUS_CHANGED_BY",
  "AUDITORS",
  "ACCOMPLICES",
  "ASSIGNED_BY_ID",
  "CREATED_BY_ID",
  "MODIFY_BY_ID",
  "MOVED_BY_ID",
]);

/** What the card shows next to one user id: the person's name as read, or why it could not be read. */
export type PersonName = { name: string; active: boolean } | { unavailable: string };

/**
 * The names read for a card, recorded with it so the card an approver saw can be rendered again from
 * the journal: when, with which method, and each id's result.
 */
export interface PeopleLookup {
  method: "user.get";
  readAt: string;
  names: Record<string, PersonName>;
}

/** The user ids in one field's value (an id, or a list of ids); empty for other fields and non-ids. */
export function userIdsIn(field: string, value: unknown): string[] {
  if (!USER_FIELDS.has(field)) return [];
  const items = Array.isArray(value) ? value : [value];
  return items.map(normaliseId).filter((id): id is string => id !== undefined && id !== "0");
}

/** Every user id the card of this envelope shows: before and requested values, and the fields that must stay. */
export function userIdsOnCard(e: Envelope): string[] {
  const ids = new Set<string>();
  for (const [field, value] of Object.entries(e.params)) {
    for (const id of [...userIdsIn(field, value), ...userIdsIn(field, e.baseline.values[field])]) ids.add(id);
  }
  for (const field of e.invariantFields)
    for (const id of userIdsIn(field, e.baseline.values[field])) ids.add(id);
  return [...ids].sort((a, b) => Number(a) - Number(b));
}

function nameOf(p: PersonName | undefined): string {
  if (!p) return "name unavailable: not looked up";
  if ("unavailable" in p) return `name unavailable: ${p.unavailable}`;
  return p.active ? p.name : `${p.name}, dismissed`;
}

/**
 * The note shown next to a user field's value: "Bob Smith" for an id, "2 Ivan Sokolov; 6 Pavel
 * Smirnov" for a list, "name unavailable: <why>" when the lookup failed. Undefined for fields that do
 * not hold users, for values without ids, and when no lookup was made at all (older cards).
 */
export function personNote(
  field: string,
  value: unknown,
  people: PeopleLookup["names"] | undefined,
): string | undefined {
  if (!people) return undefined;
  const ids = userIdsIn(field, value);
  if (ids.length === 0) return undefined;
  if (!Array.isArray(value)) return nameOf(people[ids[0]!]);
  return ids.map((id) => `${id} ${nameOf(people[id])}`).join("; ");
}

// ── Names typed in an edit ───────────────────────────────────────────────────────────────────────

/** A value typed for a writable user field that is not an id: a name to look up. */
export interface TypedName {
  field: string;
  typed: string;
}

export interface Candidate {
  id: string;
  name: string;
  workPosition?: string;
}

/** The lookup of one typed name (what was typed, what was searched, what it resolved to). */
export type NameResolution =
  | { field: string; typed: string; searched: string; status: "resolved"; id: string; name: string }
  | { field: string; typed: string; searched: string; status: "not_found"; near: Candidate[] }
  | { field: string; typed: string; searched: string; status: "ambiguous"; candidates: Candidate[] }
  | { field: string; typed: string; searched: string; status: "unavailable"; why: string };

/** Names typed for user fields in an edit's fields (ids and values of other fields are left alone). */
export function typedNamesIn(fields: Record<string, unknown>): TypedName[] {
  const out: TypedName[] = [];
  for (const [field, value] of Object.entries(fields)) {
    if (!USER_FIELDS.has(field) || !fieldSpec(field)?.writable) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      if (typeof item === "string" && normaliseId(item) === undefined && item.trim() !== "")
        out.push({ field, typed: item });
    }
  }
  return out;
}

const candidateText = (c: Candidate) => `${c.id} ${c.name}${c.workPosition ? ` (${c.workPosition})` : ""}`;

/** Why a typed name cannot stand for a user id, for the refusal. */
export function unresolvedReason(r: Exclude<NameResolution, { status: "resolved" }>): string {
  const what = `${r.field} ${JSON.stringify(r.typed)}`;
  switch (r.status) {
    case "not_found":
      return `${what}: no active user has that name (searched user.get ${r.searched})${r.near.length ? `; similar: ${r.near.map(candidateText).join(", ")}` : ""}; give the exact name or the user id`;
    case "ambiguous":
      return `${what} is ambiguous: ${r.candidates.length} active users have that name: ${r.candidates.map(candidateText).join(", ")}; give the user id instead`;
    case "unavailable":
      return `${what}: the name could not be looked up (${r.why}); give the user id instead`;
  }
}

/**
 * An edit's fields with every typed name replaced by the id it resolved to, or the reason one did not
 * resolve to exactly one active user. A typed name without a resolution is refused (never guessed).
 */
export function idsForNames(
  fields: Record<string, unknown>,
  resolutions: readonly NameResolution[],
): { ok: true; fields: Record<string, unknown> } | { ok: false; reason: string } {
  const typed = typedNamesIn(fields);
  if (typed.length === 0) return { ok: true, fields };
  const find = (t: TypedName) => resolutions.find((r) => r.field === t.field && r.typed === t.typed);
  const problems: string[] = [];
  for (const t of typed) {
    const r = find(t);
    if (!r)
      problems.push(
        `${t.field} ${JSON.stringify(t.typed)} is not a user id, and no lookup of it was made; give the user id`,
      );
    else if (r.status !== "resolved") problems.push(unresolvedReason(r));
  }
  if (problems.length) return { ok: false, reason: problems.join("; ") };
  const idOf = (field: string, item: unknown) => {
    const r = typeof item === "string" ? find({ field, typed: item }) : undefined;
    return r?.status === "resolved" ? r.id : item;
  };
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) {
    out[field] = !USER_FIELDS.has(field)
      ? value
      : Array.isArray(value)
        ? value.map((v) => idOf(field, v))
        : idOf(field, value);
  }
  return { ok: true, fields: out };
}
