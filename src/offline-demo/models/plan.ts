/**
 * A request of several clauses ("rename task 3 to X; then set its priority to high") planned as one
 * change set, each clause's task resolved: pure functions.
 */
import { operationFor, type TaskField } from "./fields.js";
import {
  CLAUSE_PATTERNS,
  parseRequest,
  parseWith,
  SUPPORTED_PHRASINGS,
  type ChangeIntent,
  type ParsedRequest,
} from "./intent.js";
import { clip } from "./tool-messages.js";

/**
 * Most actions one change set may hold; the same limit as the propose_change_set tool
 * (src/envelope/change-set.ts MAX_SET_ACTIONS), checked here so the model refuses in words; the
 * offline demo imports no production module, so the number is written again.
 */
const MAX_CHANGE_SET_ACTIONS = 5;

/** One action of a planned change set: what propose_change_set carries for it. */
export interface PlannedAction {
  operation: "update_task" | "add_task_comment";
  taskId: number;
  /** Fields in clause order (one field unless consecutive update clauses were merged). */
  fields: Partial<Record<TaskField, string>>;
  /** 1-based numbers of the clauses this action came from. */
  clauses: number[];
}

/** One clause of a multi-clause request, its task resolved to an id. */
export interface PlannedClause {
  /** 1-based position in the request. */
  index: number;
  text: string;
  intent: ChangeIntent;
  taskId: number;
  /** The clause said "it" / "the task": its task is the previous clause's. */
  refersBack: boolean;
}

export type RequestPlan =
  /** One clause: exactly what parseRequest says about the whole text. */
  | { kind: "single"; parsed: ParsedRequest }
  | { kind: "multi"; clauses: PlannedClause[]; actions: PlannedAction[] }
  /** A multi-clause request the model will not act on; message says why, naming the clause. */
  | { kind: "refused"; message: string };

// A separator ends a clause only when the text after it starts like a clause (optionally after
// "and", "then", "also", "please", "finally") and it stands outside double quotes.
const CLAUSE_SEPARATOR = /\s*;\s*|\s*,\s*(?:and\s+)?then\s+|\s+and\s+then\s+/gi;
const CLAUSE_FILLER = /^(?:(?:and|then|also|please|finally)\b[\s,]*)+/i;
const CLAUSE_VERB =
  /^(?:rename|retitle|set|change|update|make|move|assign|reassign|add|post|leave|write|comment|tell)\b/i;

/**
 * Splits a request into clauses at ";", ", then", ", and then" and " and then". A separator
 * inside a double-quoted span ("..." or “...”) or not followed by a clause verb (set, change,
 * rename, assign, comment, ...) is part of the text, so `set description of task 4 to build; ship`
 * stays one clause. Leading fillers ("then", "also", "please") are dropped from each clause.
 */
export function splitClauses(text: string): string[] {
  const request = text.trim();
  const quoted = quotedPositions(request);
  const pieces: string[] = [];
  let from = 0;
  for (const m of request.matchAll(CLAUSE_SEPARATOR)) {
    const at = m.index ?? 0;
    if (quoted[at] || at < from) continue;
    const rest = request.slice(at + m[0].length).replace(CLAUSE_FILLER, "");
    if (!CLAUSE_VERB.test(rest)) continue;
    pieces.push(request.slice(from, at));
    from = at + m[0].length;
  }
  pieces.push(request.slice(from));
  return pieces.map((p) => p.trim().replace(CLAUSE_FILLER, "").trim()).filter((p) => p !== "");
}

/** quoted[i] is true when position i lies inside a "..." or “...” span. */
function quotedPositions(text: string): boolean[] {
  const inside: boolean[] = [];
  let open: string | undefined;
  for (const ch of text) {
    const wasOpen = open !== undefined;
    if (open === undefined && (ch === '"' || ch === "“")) open = ch === '"' ? '"' : "”";
    else if (open !== undefined && ch === open) open = undefined;
    // Surrogate pairs take two code units; mark both so indexes match String#matchAll.
    for (let k = 0; k < ch.length; k++) inside.push(wasOpen && open !== undefined);
  }
  return inside;
}

/**
 * Plans a request. One clause: `{kind: "single"}` with parseRequest's answer for the whole text,
 * so a one-change request behaves exactly as before. Several clauses: each is parsed like a
 * request; a clause naming its task as "it", "the same task" or "the task" (or naming none)
 * acts on the previous clause's task; every other task must be named by id. Consecutive
 * update clauses on the same task merge into one update_task action (a field set twice there is
 * refused); a comment is always its own action. The actions keep the request's order.
 */
export function planRequest(text: string): RequestPlan {
  const pieces = splitClauses(text);
  if (pieces.length <= 1) return { kind: "single", parsed: parseRequest(text) };
  const clauses: PlannedClause[] = [];
  for (const [i, piece] of pieces.entries()) {
    const index = i + 1;
    const label = `clause ${index} ("${clip(piece, 80)}")`;
    const parsed = parseWith(CLAUSE_PATTERNS, piece);
    if (!parsed.ok) {
      if (parsed.kind === "invalid_value") {
        return {
          kind: "refused",
          message: `In ${label} I understood a change of ${parsed.field}, but "${parsed.rawValue}" is not a value I can propose: ${parsed.reason}.`,
        };
      }
      return {
        kind: "refused",
        message: `I did not recognise ${label} as a supported change. Supported phrasings:\n- ${SUPPORTED_PHRASINGS.join("\n- ")}`,
      };
    }
    const target = parsed.intent.target;
    const previous = clauses.at(-1);
    if (target.kind === "title") {
      return {
        kind: "refused",
        message: `${capitalise(label)} names its task by title ("${target.fragment}"). A request with several changes must name each task by id (e.g. "task 12"), or "it" for the previous clause's task.`,
      };
    }
    if (target.kind === "unspecified" && previous === undefined) {
      return {
        kind: "refused",
        message: `${capitalise(label)} does not name a task by id. A request with several changes must name its first task by id (e.g. "task 4"); later clauses may say "it" for the previous clause's task.`,
      };
    }
    const taskId = target.kind === "id" ? target.taskId : (previous as PlannedClause).taskId;
    clauses.push({
      index,
      text: piece,
      intent: parsed.intent,
      taskId,
      refersBack: target.kind === "unspecified",
    });
  }
  const actions: PlannedAction[] = [];
  for (const c of clauses) {
    const operation = operationFor(c.intent.field);
    const last = actions.at(-1);
    if (operation === "update_task" && last?.operation === "update_task" && last.taskId === c.taskId) {
      if (last.fields[c.intent.field] !== undefined) {
        return {
          kind: "refused",
          message: `Clauses ${last.clauses.join(", ")} and ${c.index} both set ${c.intent.field} of task ${c.taskId}; say which value you mean in one clause.`,
        };
      }
      last.fields[c.intent.field] = c.intent.value;
      last.clauses.push(c.index);
      continue;
    }
    actions.push({
      operation,
      taskId: c.taskId,
      fields: { [c.intent.field]: c.intent.value },
      clauses: [c.index],
    });
  }
  // The change set's own limit, checked here so the model refuses in words.
  if (actions.length > MAX_CHANGE_SET_ACTIONS) {
    return {
      kind: "refused",
      message: `The request asks for ${actions.length} separate changes; one change set holds at most ${MAX_CHANGE_SET_ACTIONS}. Please split it into smaller requests.`,
    };
  }
  return { kind: "multi", clauses, actions };
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
