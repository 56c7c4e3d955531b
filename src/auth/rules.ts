/**
 * Who may do what through the LangGraph API: pure functions from (event, value, user) to a verdict,
 * wired into the server by src/auth/auth.ts. Event names and value shapes are those of
 * @langchain/langgraph-api 1.5.1 (storage/ops.mjs calls handleAuthEvent with them).
 *
 * In both modes, nothing an API client sends may rewrite graph state: the journal is the authority,
 * and state edits, command.goto/update, breakpoints and runs from an older checkpoint are refused
 * before they reach the graph. With a token file, identities and roles come from it.
 */
import type { ApiRole } from "./tokens.js";

/** The one graph this deployment serves (langgraph.json); every thread belongs to it. */
export const GRAPH_ID = "bitrix24_task_agent";

/** Thread metadata key naming the identity that created the thread (token mode only). */
export const OWNER_KEY = "owner";

export type AuthMode = "open" | "tokens";

export interface ApiUser {
  identity: string;
  permissions: string[];
}

export type Verdict =
  { allow: true; filters?: Record<string, string> } | { allow: false; status: 403; message: string };

export const rolePermission = (role: ApiRole) => `role:${role}`;

function rolesOf(user: ApiUser): Set<ApiRole> {
  const roles = new Set<ApiRole>();
  for (const p of user.permissions) {
    if (p === "role:requester" || p === "role:approver" || p === "role:admin")
      roles.add(p.slice(5) as ApiRole);
  }
  return roles;
}

const refuse = (event: string, why: string): Verdict => ({
  allow: false,
  status: 403,
  message: `refused ${event} for graph ${GRAPH_ID}: ${why}`,
});
const allow = (filters?: Record<string, string>): Verdict =>
  filters ? { allow: true, filters } : { allow: true };

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Configurable keys that select a checkpoint to run from (a fork or replay), or reach LangGraph internals. */
function checkpointSelector(configurable: Record<string, unknown>): string | undefined {
  for (const [key, value] of Object.entries(configurable)) {
    if (value === undefined || value === null) continue;
    if (key === "checkpoint_ns" && value === "") continue;
    if (
      key === "checkpoint_id" ||
      key === "checkpoint_ns" ||
      key === "checkpoint_map" ||
      key === "thread_ts" ||
      key.startsWith("__pregel")
    )
      return key;
  }
  return undefined;
}

/** A run's config.configurable, or {} when it sends none. */
function configurableOf(kwargs: Record<string, unknown>): Record<string, unknown> {
  const config = kwargs["config"];
  return isRecord(config) && isRecord(config["configurable"]) ? config["configurable"] : {};
}

function nonEmptyBreakpoints(v: unknown): boolean {
  return v === "*" || (Array.isArray(v) && v.length > 0);
}

/** Keys the server stamps on every run's config.configurable from the authenticated user (langgraph-api dist/utils/run-auth.mjs). */
export const AUTH_USER_KEYS = [
  "langgraph_auth_user",
  "langgraph_auth_user_id",
  "langgraph_auth_permissions",
] as const;

/**
 * Open mode: the anonymous user is not passed on to the graph. Nodes treat a langgraph_auth_user as
 * an authenticated caller, and nobody authenticated here, so the run carries no user at all, exactly
 * as a CLI run does, and approver ids stay self-declared. (The server stamps the user before this
 * handler runs and builds the run from these kwargs afterwards; a user sent by the client in
 * config.configurable was already overwritten by the server's.)
 */
function forgetAnonymousUser(kwargs: Record<string, unknown>): void {
  const config = kwargs["config"];
  if (!isRecord(config) || !isRecord(config["configurable"])) return;
  for (const key of AUTH_USER_KEYS) delete config["configurable"][key];
}

/**
 * What a run asks for, or why it is refused whoever sends it. Checked in both modes:
 * - command: only `resume` (goto and update rewrite state or routing, which only the graph decides);
 * - no interrupt_before / interrupt_after (a breakpoint is a stop where state can then be edited);
 * - no checkpoint_id / checkpoint (SDK checkpointId, checkpoint; the server folds them into
 *   config.configurable): a run from an older checkpoint is a fork or replay. One naming the thread's
 *   current head (as the SDK's useStream does on every submit) had it taken out by
 *   `dropHeadCheckpoint` before this check, so it runs like one naming none;
 * - no multitask_strategy interrupt/rollback (it cancels another caller's run; rollback deletes its checkpoints);
 * - not on a temporary thread (kwargs.temporary: a run without a thread and on_completion "delete", the
 *   default): the server deletes that thread and its checkpoints when the run ends, so an approval the
 *   run registers would stay in the journal with no thread to show or decide it;
 * - no webhook: when the run ends the server POSTs the thread's state to that URL, any address the
 *   server can reach (inside its network too), or to one of its own routes without the caller's
 *   credentials; no client of this project asks for one;
 * - input and command.resume not both (an empty input `{}` beside a resume counts as none).
 */
export function classifyRun(
  kwargs: Record<string, unknown>,
  multitaskStrategy: unknown,
): { kind: "input" | "resume" | "continue" } | { refused: string } {
  const command = kwargs["command"];
  if (command !== undefined && command !== null) {
    if (!isRecord(command)) return { refused: "command must be an object carrying only resume" };
    const other = Object.keys(command).filter((k) => k !== "resume" && command[k] !== undefined);
    if (other.length > 0) {
      return {
        refused: `command.${other.join(", command.")} is not accepted from API clients; only command.resume (a decision or an answer) is. Graph state and routing are decided by the graph and its journal`,
      };
    }
  }
  for (const key of ["interrupt_before", "interrupt_after"] as const) {
    if (nonEmptyBreakpoints(kwargs[key])) {
      return {
        refused: `${key} is not accepted: a breakpoint stops the run where its state could then be edited; the graph stops only where it asks a human`,
      };
    }
  }
  const selector = checkpointSelector(configurableOf(kwargs));
  if (selector) {
    return {
      refused: `a run from a chosen checkpoint (${selector}; SDK checkpointId / checkpoint) is a fork or replay of earlier state and is not accepted; runs continue from the thread's latest checkpoint`,
    };
  }
  if (kwargs["temporary"] === true) {
    return {
      refused:
        'a run without a thread (POST /runs, /runs/wait, /runs/stream, /runs/batch) runs on a temporary thread that the server deletes with its checkpoints when the run ends, so an approval it asks for could never be shown or decided; create a thread (POST /threads) and run on it, or send on_completion "keep"',
    };
  }
  const webhook = kwargs["webhook"];
  if (webhook !== undefined && webhook !== null && webhook !== "") {
    return {
      refused: `a run with a webhook (${JSON.stringify(String(webhook)).slice(0, 80)}) is not accepted: the server would POST the thread's state to that address when the run ends; poll the run or join its stream instead`,
    };
  }
  if (multitaskStrategy === "interrupt" || multitaskStrategy === "rollback") {
    return {
      refused: `multitask_strategy "${multitaskStrategy}" cancels the run in progress on this thread${multitaskStrategy === "rollback" ? " and deletes its checkpoints" : ""}; use "reject" or "enqueue"`,
    };
  }
  const hasResume = isRecord(command) && command["resume"] !== undefined;
  // agent-chat-ui resumes with submit({}, {command: {resume}}): an empty input beside a resume is no input.
  const input = kwargs["input"];
  const hasInput =
    input !== undefined &&
    input !== null &&
    !(hasResume && isRecord(input) && Object.keys(input).length === 0);
  if (hasResume && hasInput)
    return {
      refused:
        "a run carries either input (a new request) or command.resume (a decision or an answer), not both",
    };
  return { kind: hasResume ? "resume" : hasInput ? "input" : "continue" };
}

/**
 * A run that names a checkpoint only by `checkpoint_id` (with the root namespace, no checkpoint_map
 * entries) names a candidate head: its checkpoint id, or undefined when it names none or more than that.
 */
export function namedCheckpointId(kwargs: Record<string, unknown>): string | undefined {
  const configurable = configurableOf(kwargs);
  const id = configurable["checkpoint_id"];
  if (typeof id !== "string") return undefined;
  const map = configurable["checkpoint_map"];
  const emptyMap = isRecord(map) && Object.keys(map).length === 0;
  const others = {
    ...configurable,
    checkpoint_id: undefined,
    ...(emptyMap ? { checkpoint_map: undefined } : {}),
  };
  return checkpointSelector(others) === undefined ? id : undefined;
}

/**
 * The head is not a fork: when a run names exactly the thread's latest checkpoint (`head`), the
 * selector is taken out of its config, so the server runs it from the latest checkpoint like a run
 * naming none. Any other checkpoint stays, and classifyRun refuses it. Returns whether it was dropped.
 */
export function dropHeadCheckpoint(kwargs: Record<string, unknown>, head: string | undefined): boolean {
  const named = namedCheckpointId(kwargs);
  if (named === undefined || head === undefined || named !== head) return false;
  const configurable = (kwargs["config"] as { configurable: Record<string, unknown> }).configurable;
  for (const key of ["checkpoint_id", "checkpoint_ns", "checkpoint_map"]) delete configurable[key];
  return true;
}

/** Whether a command's resume carries decisions, every one of them a system expiry (`type: "expire"`). */
function onlyExpiries(command: unknown): boolean {
  const resume = isRecord(command) ? command["resume"] : undefined;
  const decisions = isRecord(resume) ? resume["decisions"] : undefined;
  return (
    Array.isArray(decisions) &&
    decisions.length > 0 &&
    decisions.every((d) => isRecord(d) && d["type"] === "expire")
  );
}

/**
 * The verdict for one event. May add to `value` in place: the server keeps the (mutated) value, which
 * is how the owner mark reaches a new thread's metadata and how a missing requestedBy is filled in.
 */
export function authorize(mode: AuthMode, event: string, value: unknown, user: ApiUser): Verdict {
  const v = isRecord(value) ? value : {};
  const roles = rolesOf(user);
  const tokens = mode === "tokens";
  const has = (role: ApiRole) => roles.has(role);
  const holds = `${user.identity} holds ${[...roles].join(", ") || "none"}`;
  const ownerOnly = { [OWNER_KEY]: user.identity };
  /** Reads: requesters see their own threads; approvers and admins see every thread (approvals to decide, audit). */
  const readFilter = (): Verdict => {
    if (!tokens || has("approver") || has("admin")) return allow();
    if (has("requester")) return allow(ownerOnly);
    return refuse(event, `${user.identity} holds none of the roles requester, approver, admin`);
  };
  /** The owner mark is ours: never taken from the client; set to the caller with tokens, absent when open. */
  const stampOwner = () => {
    const metadata = isRecord(v["metadata"]) ? { ...v["metadata"] } : {};
    if (tokens) metadata[OWNER_KEY] = user.identity;
    else delete metadata[OWNER_KEY];
    v["metadata"] = metadata;
  };

  switch (event) {
    case "threads:read":
    case "threads:search":
      return readFilter();

    case "threads:create": {
      // POST /threads/{id}/copy authorizes its new thread as threads:create with metadata.thread_id = the new id.
      if (isRecord(v["metadata"]) && v["metadata"]["thread_id"] !== undefined) {
        return refuse(
          event,
          "copying a thread (POST /threads/{id}/copy; metadata.thread_id) is not accepted: a copy carries the original's checkpoints, and an approval must not be replayable on a copy",
        );
      }
      if (tokens && !has("requester"))
        return refuse(event, `creating threads needs the role requester; ${holds}`);
      stampOwner();
      return tokens ? allow(ownerOnly) : allow();
    }

    case "threads:update": {
      // Also reached by run cancellation (value.action) and by the metadata patch (PATCH /threads/{id}).
      if (v["action"] === "interrupt") {
        if (!tokens || has("approver")) return allow();
        if (has("requester")) return allow(ownerOnly);
        return refuse(event, `cancelling a run needs the role requester (own threads) or approver; ${holds}`);
      }
      if (v["action"] === "rollback")
        return refuse(
          event,
          "cancelling with rollback deletes the run's checkpoints; cancel with action interrupt",
        );
      return refuse(
        event,
        "graph state is not editable through the API (threads.updateState / POST /threads/{id}/state, supersteps, and the metadata patch PATCH /threads/{id}, which would move the owner mark); the graph's state mirrors its journal, which decides what is written",
      );
    }

    case "threads:delete":
      return refuse(
        event,
        `deleting a thread or a run deletes checkpoints (a run's deletion rolls its thread back); threads are kept as the record of what was proposed and decided`,
      );

    case "threads:create_run": {
      const kwargs = isRecord(v["kwargs"]) ? v["kwargs"] : {};
      const run = classifyRun(kwargs, v["multitask_strategy"]);
      if ("refused" in run) return refuse(event, run.refused);
      stampOwner();
      if (!tokens) {
        forgetAnonymousUser(kwargs);
        return allow();
      }
      if (run.kind === "input") {
        if (!has("requester"))
          return refuse(event, `a run with input (a new request) needs the role requester; ${holds}`);
        const input = kwargs["input"];
        if (isRecord(input)) {
          if (input["requestedBy"] === undefined) input["requestedBy"] = user.identity;
          else if (input["requestedBy"] !== user.identity) {
            return refuse(
              event,
              `REQUESTER_NOT_CALLER: input.requestedBy is ${JSON.stringify(input["requestedBy"])}, but the request is authenticated as ${user.identity}; the requester is the caller (leave requestedBy out)`,
            );
          }
        }
        return allow(ownerOnly);
      }
      // continue (no input, no command): recovery of a run stopped between steps, continued from where
      // the journal says (src/api/guard.ts); an admin's (`recover --api`, `worker --api`) alone.
      if (run.kind === "continue") {
        if (has("admin")) return allow();
        return refuse(
          event,
          `a run without input or command recovers a run stopped between steps and needs the role admin; ${holds}`,
        );
      }
      // resume: a decision (approvers, on any thread) or the requester's own answer, cancel or decision on
      // their thread; the graph then checks the decision against policy with this identity.
      if (has("approver")) return allow();
      if (has("requester")) return allow(ownerOnly);
      // An admin (`worker --api`) may send a system expiry and nothing else; the graph honours it only
      // when its journal's approval has expired by the server's clock.
      if (has("admin") && run.kind === "resume" && onlyExpiries(kwargs["command"])) return allow();
      return refuse(
        event,
        `command.resume needs the role approver (any thread) or requester (own threads), or admin for a system expiry alone; ${holds}`,
      );
    }

    case "assistants:read":
    case "assistants:search":
      return allow();
    case "assistants:create":
    case "assistants:update":
    case "assistants:delete":
      return refuse(
        event,
        "assistants are fixed by langgraph.json: an assistant's config is merged into every run it starts, so it could carry what a run may not",
      );

    default:
      if (event.startsWith("crons:"))
        return refuse(event, "scheduled runs are not offered; a run is started by its requester");
      if (event.startsWith("store:")) return refuse(event, "the graph does not use the LangGraph store");
      return refuse(event, "not an operation this deployment allows");
  }
}
