/**
 * Where nodes meet the journal. Graph state is a mirror anyone with API access can rewrite, so each
 * deterministic node first asks the journal where the thread really is (src/store/action-machine.ts)
 * and acts only when that is its step. A node driven out of order (goto, new input, replay, a fork of
 * an old checkpoint) does nothing, records `transition_refused`, and hands over to `resync`, which
 * routes to wherever the journal says the thread is.
 */
import { createHash } from "node:crypto";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import type { MirrorUpdate, ThreadMirror } from "./thread-mirror.js";
import type { Deps } from "../runtime/deps.js";
import {
  hashChangeSet,
  hashEnvelope,
  memberProblems,
  type RequesterVerification,
} from "../envelope/index.js";
import {
  nextFromJournal,
  type ActionRow,
  type ClosedRecord,
  type JournalNext,
  type ThreadRecord,
  type TransitionResult,
} from "../store/action-machine.js";
import { setMembersOf } from "../store/action-rows.js";
import type { AuditEntry } from "../store/audit.js";
import {
  acknowledgementMirror,
  preReadMirror,
  verificationMirror,
  type Outcome,
  type ReasonCode,
} from "../envelope/records.js";
import { deriveScope, isRequestScope } from "./scope.js";
import { journalGuardEntry, jsonSafe } from "./audit-records.js";
import { mirrorsRegistered, sameJson } from "./thread-view.js";
import { DecisionNotAcceptedError } from "../errors.js";

export type GatedNode =
  | "agent"
  | "read_tools"
  | "propose"
  | "ask_input"
  | "check_input"
  | "build_envelope"
  | "await_approval"
  | "check_decision"
  | "carry_out"
  | "finish";

/**
 * Which nodes may act for each place the journal can put a thread. `asking`: the journal holds a
 * question open, so only the nodes that hold the model back, ask it and take its answer may act.
 */
export function allowedAt(next: JournalNext, asking = false): readonly GatedNode[] {
  switch (next) {
    case null: // No action yet: the model studies the portal and may propose (or ask), or the run ends.
    case "agent": // A rejection with feedback: the model may revise (a new revision supersedes) or stop.
      return asking
        ? ["agent", "ask_input", "check_input"]
        : ["agent", "read_tools", "propose", "ask_input", "check_input", "build_envelope", "finish"];
    case "build_envelope":
      return ["build_envelope"];
    case "await_approval":
      return ["await_approval", "check_decision"];
    case "carry_out": // check_decision goes on into carry_out's work when it is reached again after its claim.
      return ["carry_out", "check_decision"];
    case "finish":
      return ["finish"];
    default: {
      const never: never = next;
      throw new Error(`unknown journal step ${String(never)}`);
    }
  }
}

export function threadIdOf(config: LangGraphRunnableConfig): string {
  const id = config.configurable?.["thread_id"];
  if (typeof id !== "string" || id === "")
    throw new Error("a run needs configurable.thread_id; the journal is keyed by it");
  return id;
}

export interface Gate {
  threadId: string;
  thread: ThreadRecord | undefined;
  action: ActionRow | undefined;
  /** The journal holds a question of this thread open (waiting for a human's answer). */
  asking: boolean;
  /** For a change set: every action of it in the set's order (the current one among them). */
  members?: ActionRow[];
  next: JournalNext;
}

/**
 * Loads the thread and its current action. A row whose MAC fails is refused: the attempt is audited
 * and the run stops with INTEGRITY_CHECK_FAILED, changing nothing — the row may have been edited
 * outside this program, or this process may hold another key than the one that sealed it, and a
 * process that cannot tell which must not close someone else's approval either.
 */
export async function openGate(
  deps: Deps,
  config: LangGraphRunnableConfig,
  state: ThreadMirror,
): Promise<Gate> {
  const threadId = threadIdOf(config);
  const { thread, action, question } = await deps.journal.threadRows(threadId);
  const members = action?.set ? await membersOf(deps, action) : undefined;
  const open = (r: ActionRow) => r.phase !== "closed" && r.phase !== "superseded";
  const badMember = members?.find((m) => !m.macValid && open(m));
  const broken = members ? setProblems(action!, members) : [];
  const unsealed =
    action && !action.macValid && open(action)
      ? `the journal row of action ${action.envelopeHash}`
      : badMember
        ? `the journal row of action ${badMember.envelopeHash} (of change set ${action!.set!.setHash})`
        : broken.length > 0
          ? `change set ${action!.set!.setHash} (${broken.join("; ")})`
          : thread && !thread.macValid && !thread.closed
            ? `the journal record of thread ${threadId}`
            : null;
  const unproven = (r: ActionRow | undefined) => r && (unprovenDecision(r) ?? unprovenPreRead(r));
  const undecided = unsealed ? undefined : [action, ...(members ?? [])].map(unproven).find((x) => x);
  if (unsealed || undecided) {
    const reason = unsealed
      ? `${unsealed} does not verify against its MAC: it was changed outside this program, or this process holds another journal key (ACTION_ENVELOPE_JOURNAL_KEY / _FILE) than the one that sealed it. Nothing was done.`
      : undecided!;
    await deps.audit.append(
      tamperEntry(threadId, action, "journal", reason, deps.clock().toISOString(), state),
    );
    throw new DecisionNotAcceptedError(threadId, "INTEGRITY_CHECK_FAILED", reason);
  }
  return {
    threadId,
    thread,
    action,
    asking: question?.status === "open",
    ...(members ? { members } : {}),
    next: nextFromJournal(thread, action),
  };
}

/**
 * Why the decision an action's next step acts on (decided: the pre-read or the next revision;
 * pre_read: the write) is not proven to be one this program recorded; null when it is, or when the
 * row is at no such step. The phase and the progress column are not sealed, so a decision written into
 * the row by hand would otherwise be acted on as if a human had made it.
 */
function unprovenDecision(r: ActionRow): string | null {
  if (r.phase !== "decided" && r.phase !== "pre_read") return null;
  if (r.decisionSeal === "valid") return null;
  const d = r.progress.decision;
  const what = d ? `${String(d.type)} by ${String(d.approverId)}` : "none";
  const found =
    r.decisionSeal === "none"
      ? "no decision"
      : r.decisionSeal === "unsealed"
        ? `a decision (${what}) without a seal (recorded by a version before decisions were sealed, or written outside this program)`
        : `a decision (${what}) whose seal under the journal key does not hold (written, changed or copied outside this program, or this process holds another journal key than the one that recorded it)`;
  return `action ${r.envelopeHash} is ${r.phase}: expected a decision sealed under the journal key (ACTION_ENVELOPE_JOURNAL_KEY / _FILE), found ${found}; whether a human made it cannot be told. Nothing was done.`;
}

/**
 * Why an action at pre_read (its next step is the write) holds no pre-read this program moved it there
 * with; null when it does, or when the row is not at pre_read.
 */
function unprovenPreRead(r: ActionRow): string | null {
  if (r.phase !== "pre_read" || r.preReadSeal === "valid") return null;
  const verdict = String(r.progress.preRead?.verdict);
  const found =
    r.preReadSeal === "none"
      ? "no pre-read"
      : r.preReadSeal === "unsealed"
        ? `a pre-read (${verdict}) without a seal (recorded by a version before pre-reads were sealed, or written outside this program)`
        : `a pre-read (${verdict}) whose seal under the journal key does not hold (written, changed or copied outside this program, recorded by a version that sealed its verdict alone, or this process holds another journal key than the one that recorded it)`;
  return `action ${r.envelopeHash} is pre_read: expected the MATCH of its pre-read sealed under the journal key (ACTION_ENVELOPE_JOURNAL_KEY / _FILE), found ${found}; whether the target still matched the approved baseline cannot be told. Nothing was sent.`;
}

/** Every action of the change set `action` belongs to, in the set's order (missing ones left out: setProblems names them). */
export async function membersOf(deps: Pick<Deps, "journal">, action: ActionRow): Promise<ActionRow[]> {
  return setMembersOf(action, (h) => deps.journal.getAction(h));
}

/** What does not hold together in a change set as read back: its hash, its members and their copies of the set. */
function setProblems(action: ActionRow, members: ActionRow[]): string[] {
  const m = action.set!;
  const out: string[] = [];
  if (hashChangeSet(m.set) !== m.setHash) out.push(`the set does not hash to ${m.setHash}`);
  out.push(...memberProblems(m.set, members));
  for (const r of members)
    if (r.set?.setHash !== m.setHash)
      out.push(`${r.envelopeHash} is not registered as a member of ${m.setHash}`);
  return out;
}

/**
 * A thread's request is recorded once, when its first run starts; later input cannot change it. The
 * requester's verification is the caller's (the agent passes it from the run's auth context); a thread
 * registered by any other path records its requester as self-declared.
 */
export async function ensureThread(
  deps: Deps,
  gate: Gate,
  state: ThreadMirror,
  undo?: Pick<ThreadRecord, "scope"> & { compensates: NonNullable<ThreadRecord["compensates"]> },
  requesterVerifiedBy: RequesterVerification = "self_declared",
): Promise<ThreadRecord> {
  if (gate.thread) return gate.thread;
  const requestedBy = typeof state.requestedBy === "string" ? state.requestedBy : "";
  const request = typeof state.request === "string" ? state.request : "";
  const thread = await deps.journal.registerThread({
    threadId: gate.threadId,
    request,
    requestedBy,
    requesterVerifiedBy,
    // An undo thread's scope is the restored task and fields, from the journal; its request names a thread, not a task.
    scope: undo ? undo.scope : deriveScope(request, isRequestScope(state.scope) ? state.scope : undefined),
    createdAt: deps.clock().toISOString(),
    ...(undo ? { compensates: undo.compensates } : {}),
  });
  gate.thread = thread;
  return thread;
}

/**
 * Refuses a step the journal does not allow here: audited once per (node, journal position), and
 * the run goes to `resync`. Returns null when the node may proceed.
 */
export async function refuseUnlessAllowed(
  deps: Deps,
  gate: Gate,
  node: GatedNode,
  state: ThreadMirror,
): Promise<MirrorUpdate | null> {
  if (allowedAt(gate.next, gate.asking).includes(node)) return null;
  const where = gate.action
    ? `action ${gate.action.envelopeHash} is ${gate.action.phase}`
    : gate.thread?.closed
      ? "the thread has ended"
      : gate.asking
        ? "a question waits for a human's answer"
        : "no action is registered";
  const reason = `${node} was reached, but ${where}; the journal's next step is ${gate.next ?? "the agent"}. Nothing was done.`;
  await deps.audit.append(transitionRefusedEntry(gate, node, reason, deps.clock().toISOString(), state));
  return { needsResync: true };
}

/**
 * Compares the state's mirror with the journal and records any difference as tampering. The journal's
 * copy is what the node then uses; this only leaves evidence.
 */
export async function noteStateDrift(
  deps: Deps,
  gate: Gate,
  node: GatedNode,
  state: ThreadMirror,
): Promise<void> {
  const a = gate.action;
  const note = (reason: string) =>
    deps.audit.append(tamperEntry(gate.threadId, a, node, reason, deps.clock().toISOString(), state));
  if (!a) {
    // No action: nothing was sent, so any outcome but NOT_EXECUTED in state was written by someone else.
    if (state.outcome != null && state.outcome !== "NOT_EXECUTED")
      await note(
        `state claims outcome ${state.outcome}, but no action was registered for this thread; nothing was sent`,
      );
    return;
  }
  const problems: string[] = [];
  if (state.envelopeHash != null && state.envelopeHash !== a.envelopeHash)
    problems.push(`state names envelope ${state.envelopeHash}, the journal ${a.envelopeHash}`);
  // The same JSON text as the journal's (sealed) envelope has the same canonical form, so the usual
  // case (state mirrors the registration: one comparison, shared with registeredFor) needs no hashing;
  // anything else is hashed and compared.
  if (state.envelope != null && !mirrorsRegistered(a, state) && !sameJson(state.envelope, a.envelope)) {
    let h: string;
    try {
      h = hashEnvelope(state.envelope);
    } catch {
      h = "(unhashable)";
    }
    if (h !== a.envelopeHash)
      problems.push(`the envelope in state hashes to ${h}, not to the registered ${a.envelopeHash}`);
  }
  if ((state.escalatedTo ?? null) !== a.escalatedTo && state.envelopeHash === a.envelopeHash) {
    problems.push(
      `state says escalated to ${state.escalatedTo ?? "nobody"}, the journal ${a.escalatedTo ?? "nobody"}`,
    );
  }
  if (state.card != null && state.envelopeHash === a.envelopeHash && state.card !== a.card)
    problems.push("the card in state differs from the card registered for this envelope");
  // Evidence mirrors may lag the journal (a crash between a journal write and its checkpoint) but
  // never lead it: a record in state that the journal does not hold was put there by someone else.
  const p = a.progress;
  // State keeps these without raw answers (state.ts), so they are compared as mirrors of the journal's.
  const differs = (mine: unknown, theirs: unknown) => mine != null && !sameJson(mine, theirs ?? null);
  if (differs(state.verification, verificationMirror(p.verification)))
    problems.push(
      `state carries a verification (${state.verification?.verdict}) the journal does not hold (${p.verification?.verdict ?? "none"})`,
    );
  if (differs(state.preRead, preReadMirror(p.preRead)))
    problems.push(
      `state carries a pre-read (${state.preRead?.verdict}) the journal does not hold (${p.preRead?.verdict ?? "none"})`,
    );
  if (differs(state.acknowledgement, acknowledgementMirror(p.acknowledgement)))
    problems.push(
      `state carries an acknowledgement (${state.acknowledgement?.status}) the journal does not hold (${p.acknowledgement?.status ?? "none"})`,
    );
  if (
    state.decision != null &&
    state.decision.envelopeHash === a.envelopeHash &&
    (state.decision.approverId !== p.decision?.approverId || state.decision.type !== p.decision?.type)
  ) {
    problems.push(
      `state says ${state.decision.type} by ${state.decision.approverId}, the journal ${p.decision ? `${p.decision.type} by ${p.decision.approverId}` : "no decision"}`,
    );
  }
  if (state.outcome != null && state.outcome !== "NOT_EXECUTED" && state.outcome !== p.closed?.outcome)
    problems.push(
      `state claims outcome ${state.outcome}; the journal holds ${p.closed?.outcome ?? "no outcome yet"}`,
    );
  if (problems.length > 0) await note(`${problems.join("; ")}. The journal's record was used.`);
}

/**
 * Why an approved envelope may not be acted on any more, judged by this server's clock and the portal
 * this process is connected to; null while it may. Shared by the pre-read, the write and a recovery re-send.
 */
export function unusableApproval(
  envelope: { expiresAt: string; portal: string },
  now: Date,
  portal: string,
): { code: "APPROVAL_EXPIRED" | "WRONG_TARGET"; reason: string } | null {
  if (now.getTime() >= Date.parse(envelope.expiresAt)) {
    return {
      code: "APPROVAL_EXPIRED",
      reason: `the approval expired at ${envelope.expiresAt}, before the write (now ${now.toISOString()})`,
    };
  }
  if (envelope.portal !== portal) {
    return {
      code: "WRONG_TARGET",
      reason: `the envelope was approved for portal ${envelope.portal}, but this process is connected to ${portal}`,
    };
  }
  return null;
}

export function closedUpdate(c: ClosedRecord): MirrorUpdate {
  return { outcome: c.outcome, reasonCode: c.reasonCode, reason: c.reason };
}

/**
 * Ends the run as NOT_EXECUTED in the journal, from a node that stops it early: the thread's open
 * action is closed, or (no action yet) the thread itself. `finish` then reports what the journal
 * holds, so a reason code written into state by anyone else is never what is reported.
 */
export async function endRunInJournal(
  deps: Deps,
  gate: Gate,
  state: ThreadMirror,
  reasonCode: ReasonCode,
  reason: string,
): Promise<MirrorUpdate> {
  const a = gate.action;
  // An action whose write may have gone out is never NOT_EXECUTED: only verify and finish end it.
  // Every caller is gated to a step before the write; this holds if one ever is not.
  if (a && (a.phase === "intent" || a.phase === "acknowledged" || a.phase === "verified"))
    return { needsResync: true };
  if (a && a.phase !== "closed" && a.phase !== "superseded")
    return closeAction(deps, a, "NOT_EXECUTED", reasonCode, reason);
  const thread = await ensureThread(deps, gate, state);
  const closed = (
    await deps.journal.closeThread(thread.threadId, {
      outcome: "NOT_EXECUTED",
      reasonCode,
      reason,
      at: deps.clock().toISOString(),
    })
  )?.closed;
  return closed ? closedUpdate(closed) : { needsResync: true };
}

/** Closes the thread's open action with an outcome (the first close wins) and mirrors what stuck. */
export async function closeAction(
  deps: Deps,
  action: ActionRow,
  outcome: Outcome,
  reasonCode: ReasonCode,
  reason: string,
): Promise<MirrorUpdate> {
  const closed = (await closeRow(deps, action, outcome, reasonCode, reason)).progress.closed;
  return closed ? closedUpdate(closed) : { needsResync: true };
}

/**
 * Closes an action with an outcome (the first close wins) and returns its row as the journal holds it
 * afterwards: the closed row, or, when the move was refused (another process moved it), the row as it is.
 * The close applies only while the row is at the phase `action` holds: what a step read that made it
 * close (a pre-read that no longer matches, an expiry, a busy object) is about that phase, and a row
 * another process has moved on since (its write sent, its answer recorded) is not closed on it.
 */
export async function closeRow(
  deps: Deps,
  action: ActionRow,
  outcome: Outcome,
  reasonCode: ReasonCode,
  reason: string,
  patch: Parameters<Deps["journal"]["moveAction"]>[2] = {},
): Promise<ActionRow> {
  const closed: ClosedRecord = { outcome, reasonCode, reason, at: deps.clock().toISOString() };
  return rowAfter(
    deps,
    action,
    await deps.journal.moveAction(
      action.envelopeHash,
      "closed",
      { ...patch, closed },
      undefined,
      action.phase,
    ),
  );
}

/** The row a transition left: the moved row, or (the move refused: another process moved it) the row as the journal holds it. */
export async function rowAfter(
  deps: Pick<Deps, "journal">,
  action: ActionRow,
  moved: TransitionResult,
): Promise<ActionRow> {
  return moved.ok ? moved.row : ((await deps.journal.getAction(action.envelopeHash)) ?? action);
}

function stateDigest(state: ThreadMirror): string {
  const text = JSON.stringify(
    jsonSafe({
      h: state.envelopeHash ?? null,
      o: state.outcome ?? null,
      e: state.escalatedTo ?? null,
      v: state.verification?.verdict ?? null,
      c: state.card ?? null,
      env: state.envelope ?? null,
    }),
  );
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

function transitionRefusedEntry(
  gate: Gate,
  node: GatedNode,
  reason: string,
  at: string,
  state: ThreadMirror,
): AuditEntry {
  return journalGuardEntry("transition_refused", {
    threadId: gate.threadId,
    action: gate.action,
    requestedBy: gate.thread?.requestedBy ?? gate.action?.envelope.requestedBy ?? requesterIn(state),
    // One record per node, journal position and state seen: a re-run of the same refusal adds nothing.
    discriminator: `${node}:${gate.action?.phase ?? (gate.thread?.closed ? "ended" : "none")}:${stateDigest(state)}`,
    at,
    code: "TRANSITION_REFUSED",
    reason,
  });
}

function tamperEntry(
  threadId: string,
  action: ActionRow | undefined,
  where: string,
  reason: string,
  at: string,
  state: ThreadMirror,
): AuditEntry {
  return journalGuardEntry("tamper_detected", {
    threadId,
    action,
    requestedBy: action?.envelope.requestedBy ?? requesterIn(state),
    discriminator: `${where}:${stateDigest(state)}`,
    at,
    code: "STATE_DISAGREES_WITH_JOURNAL",
    reason,
  });
}

/** The requester as state claims it: only for a record about a thread the journal does not know yet. */
const requesterIn = (state: ThreadMirror): string =>
  typeof state.requestedBy === "string" ? state.requestedBy : "";
