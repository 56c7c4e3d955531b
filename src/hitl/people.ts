/**
 * People lookups made by code, never by the model: the names shown next to user ids on the card, and
 * the id a name typed in an edit stands for. Both read Bitrix24's user.get through the read-only tool
 * (role getUsers). A lookup that fails never blocks the card: each id then shows why its name is
 * unavailable. Names are never written into an envelope.
 */
import type { Candidate, NameResolution, PeopleLookup, PersonName, TypedName } from "../envelope/index.js";
import { typedNamesIn } from "../envelope/index.js";
import type { Bitrix24Tools } from "../tools/bitrix24-tools.js";
import type { McpCallResult } from "../tools/mcp-call.js";

/** How long a card waits for names before it is shown without them. */
export const NAME_LOOKUP_BUDGET_MS = 5_000;
/** user.get pages hold 50 users; more pages than this are not followed. */
const MAX_PAGES = 4;

type Reader = Pick<Bitrix24Tools, "read">;
type UserRow = {
  ID?: unknown;
  NAME?: unknown;
  LAST_NAME?: unknown;
  SECOND_NAME?: unknown;
  ACTIVE?: unknown;
  WORK_POSITION?: unknown;
};

/** "Bob Smith" from user.get's UPPER_SNAKE row. */
export function fullName(u: UserRow): string {
  return [u.NAME, u.SECOND_NAME, u.LAST_NAME]
    .filter((p): p is string => typeof p === "string" && p.trim() !== "")
    .join(" ");
}

function isActive(u: UserRow): boolean {
  return u.ACTIVE === true || u.ACTIVE === "Y" || u.ACTIVE === "true" || u.ACTIVE === 1;
}

function failureOf(res: McpCallResult & { ok: false }): string {
  return `user.get failed: ${res.error.kind}${res.error.code !== undefined ? ` ${res.error.code}` : ""}: ${res.error.description}`.slice(
    0,
    300,
  );
}

/** All pages of one user.get query (bounded), within the time budget; a read that throws is a failure too. */
async function usersWhere(
  tools: Reader,
  filter: Record<string, unknown>,
): Promise<{ ok: true; users: UserRow[] } | { ok: false; why: string }> {
  const deadline = Date.now() + NAME_LOOKUP_BUDGET_MS;
  const users: UserRow[] = [];
  let start: number | undefined;
  try {
    for (let page = 0; page < MAX_PAGES; page++) {
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">(
        (resolve) => (timer = setTimeout(() => resolve("timeout"), Math.max(0, left))),
      );
      const res = await Promise.race([
        tools.read("getUsers", { filter, ...(start !== undefined ? { start } : {}) }),
        timeout,
      ]).finally(() => clearTimeout(timer));
      if (res === "timeout")
        return { ok: false, why: `user.get gave no answer within ${NAME_LOOKUP_BUDGET_MS} ms` };
      if (!res.ok) return { ok: false, why: failureOf(res) };
      const body = res.body as { result?: unknown; next?: unknown } | null;
      if (!Array.isArray(body?.result)) return { ok: false, why: "user.get answered without a result list" };
      users.push(...(body.result as UserRow[]).filter((u) => u && typeof u === "object"));
      if (typeof body.next !== "number") return { ok: true, users };
      start = body.next;
    }
  } catch (e) {
    return { ok: false, why: `user.get failed: ${(e as Error).message}`.slice(0, 300) };
  }
  return { ok: true, users };
}

/**
 * The names of these user ids, for the card. Every id gets an entry: its name (and whether the person
 * is still active), or why it is unavailable (lookup failed, or no such user visible to the webhook).
 */
export async function lookupNames(
  tools: Reader,
  ids: readonly string[],
  now: () => Date,
): Promise<PeopleLookup | undefined> {
  if (ids.length === 0) return undefined;
  const readAt = now().toISOString();
  const found = await usersWhere(tools, { "@ID": ids.map(Number) });
  const names: Record<string, PersonName> = {};
  for (const id of ids) {
    if (!found.ok) {
      names[id] = { unavailable: found.why };
      continue;
    }
    const u = found.users.find((row) => String(row.ID) === id);
    const name = u ? fullName(u) : "";
    names[id] =
      u && name
        ? { name, active: isActive(u) }
        : {
            unavailable: u
              ? "the user has no name in Bitrix24"
              : `user.get returned no user ${id} (deleted, or not visible to the webhook)`,
          };
  }
  return { method: "user.get", readAt, names };
}

const normal = (s: string) => s.normalize("NFC").trim().replace(/\s+/g, " ").toLowerCase();

/** The spellings a typed name is compared with: "Bob Smith", "Smith Bob", with the second name, or one name alone. */
function spellings(u: UserRow): string[] {
  const n = (v: unknown) => (typeof v === "string" ? v.trim() : "");
  const [first, second, last] = [n(u.NAME), n(u.SECOND_NAME), n(u.LAST_NAME)];
  const forms = [[first, last], [last, first], [first, second, last], [last, first, second], [first], [last]];
  return [...new Set(forms.map((f) => normal(f.filter(Boolean).join(" "))).filter(Boolean))];
}

function candidateOf(u: UserRow): Candidate {
  const position =
    typeof u.WORK_POSITION === "string" && u.WORK_POSITION.trim() ? u.WORK_POSITION.trim() : undefined;
  return { id: String(u.ID), name: fullName(u), ...(position ? { workPosition: position } : {}) };
}

/**
 * The one active user a typed name stands for. Asks user.get for active users matching the name
 * (NAME_SEARCH, ACTIVE=true), then keeps those whose name is exactly what was typed (case and spacing
 * aside; first and last name in either order, or one of them alone): one is resolved, none is not
 * found (the search's other hits are listed as similar), several are ambiguous.
 */
export async function resolveName(tools: Reader, t: TypedName): Promise<NameResolution> {
  const typed = normal(t.typed);
  const filter = { NAME_SEARCH: t.typed.trim(), ACTIVE: true };
  const searched = JSON.stringify(filter);
  const found = await usersWhere(tools, filter);
  if (!found.ok) return { ...t, searched, status: "unavailable", why: found.why };
  const active = found.users.filter(isActive);
  const exact = active.filter((u) => spellings(u).includes(typed));
  const unique = [...new Map(exact.map((u) => [String(u.ID), u])).values()];
  if (unique.length === 1)
    return { ...t, searched, status: "resolved", id: String(unique[0]!.ID), name: fullName(unique[0]!) };
  if (unique.length > 1) return { ...t, searched, status: "ambiguous", candidates: unique.map(candidateOf) };
  return { ...t, searched, status: "not_found", near: active.slice(0, 5).map(candidateOf) };
}

/**
 * The people typed by name in each of `fieldSets` (RESPONSIBLE_ID "Bob Smith"), resolved; no names, no
 * lookup. Each typed name is looked up once (the same name typed twice is one lookup).
 */
export async function resolveNamesIn(
  tools: Reader,
  fieldSets: readonly Record<string, unknown>[],
): Promise<NameResolution[]> {
  const out: NameResolution[] = [];
  for (const t of fieldSets.flatMap((fields) => typedNamesIn(fields))) {
    if (out.some((r) => r.field === t.field && r.typed === t.typed)) continue;
    const same = out.find((r) => r.typed === t.typed);
    out.push(same ? { ...same, field: t.field } : await resolveName(tools, t));
  }
  return out;
}
