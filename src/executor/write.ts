import { createHash } from "node:crypto";
import type { Deps } from "../runtime/deps.js";
import type { AcknowledgementRecord, InvocationRecord, WriteProtocol } from "../envelope/records.js";
import type { McpCallResult } from "../tools/mcp-call.js";
import type { ExecutionEntry } from "../store/journal.js";
import type { ActionRow } from "../store/action-machine.js";
import { busyReason, leaseOf } from "../hitl/object-lease.js";
import { OPERATIONS, writeArgsOf, type OperationName } from "../envelope/index.js";
import { objectNamed } from "../envelope/operations.js";
import { canonicalJson } from "../envelope/canonical.js";
import { closeRow, rowAfter, unusableApproval } from "../hitl/journal-gate.js";
import { invocationOf, operationOf, protocolOf, type StoredArgs } from "../hitl/thread-view.js";
import { journalGuardEntry } from "../hitl/audit-records.js";
import { writeAnchorOf } from "../store/write-anchor.js";
import type { PhaseContext } from "./phase-context.js";
import { readAgainBeforeWrite } from "./read-again.js";
import { heldOrBusy } from "./settle.js";

/**
 * Phase `pre_read` (MATCH): the only code holding the write handle. The arguments are the journal's
 * registered envelope alone; the write-ahead entry is in the journal before the request leaves; the
 * call is sent once and never retried; the target's answer is kept as an acknowledgement, separate
 * from verification.
 *
 * With idempotent writes on (BITRIX24_IDEMPOTENCY; see idempotentWrites) the call carries REST 3.0's
 * Idempotency-Key, derived from the envelope hash, and the write-ahead entry records that it does.
 * Only such a call is ever sent a second time: by reconciliation (phase `intent`), when the first
 * answer was lost, rebuilt from the sealed envelope with the same key, so the portal replays its first
 * answer instead of applying it again.
 */
export async function write(ctx: PhaseContext, action: ActionRow): Promise<ActionRow> {
  const { deps } = ctx;
  const envelope = action.envelope;
  const envelopeHash = action.envelopeHash;
  // An entry recorded while the row stayed at pre_read (a version that moved the row separately): never a second send.
  const previous = await deps.journal.findExecution(envelopeHash);
  if (previous) return reconcile(ctx, action, previous);
  // The verdict counts only with the seal the move to pre_read wrote (the progress column is not sealed).
  if (action.progress.preRead?.verdict !== "MATCH" || action.preReadSeal !== "valid")
    return closeRow(
      deps,
      action,
      "NOT_EXECUTED",
      "PRECHECK_ERROR",
      `the journal holds no matching pre-read for this action sealed under the journal key (found ${action.progress.preRead ? `${String(action.progress.preRead.verdict)}, seal ${action.preReadSeal}` : "none"}); nothing was sent`,
    );
  // The anchor outside the data directory knows every write that went out: one it names is never sent again.
  const rollback = await rollbackOf(deps, action);
  if (rollback) {
    if ("entry" in rollback) return reconcile(ctx, action, rollback.entry, false);
    return refuseTampered(deps, action, "ROLLBACK_DETECTED", rollback.reason, rollback.sent);
  }

  const now = deps.clock();
  const unusable = unusableApproval(envelope, now, deps.portal);
  if (unusable) return closeRow(deps, action, "NOT_EXECUTED", unusable.code, unusable.reason);
  // The pre-read counts only while the object stayed this action's since: a lease that ran out and was
  // taken by another action (this process was paused past it) may cover that action's write, so the
  // object is taken again and read again before anything is sent.
  const kept = (await deps.journal.objectLease(leaseOf(deps, action).objectKey))?.owner === envelopeHash;
  if (!kept) {
    const hold = await heldOrBusy(deps, action);
    if (!hold.held) return hold.closed;
  }
  // A pre-read this run did not make may be long past (a process stopped before writing): read again.
  if (ctx.preReadThisRun !== envelopeHash || !kept) {
    const stopped = await readAgainBeforeWrite(
      ctx,
      action,
      kept
        ? undefined
        : "is no longer covered by the object lease it took (it ran out and another action took the object before this write)",
    );
    if (stopped) return stopped;
  }
  const { args, idempotencyKey, operation } = sealedCall(action);
  const protocol: WriteProtocol = idempotentWrites(deps) ? "rest3-idempotency-key" : "rest2";
  const sentAt = now.toISOString();
  // The protocol is part of the write-ahead entry: recovery may re-send only a call that carried the key.
  const recorded: StoredArgs = {
    ...args,
    ...(protocol === "rest2" ? {} : { protocol }),
    ...(operation === "update_task" ? {} : { operation }),
  };
  // One transaction: the lease is still ours (renewed), the write-ahead entry is recorded, and the
  // action moves to intent. The pre-read's MATCH holds only while the object stayed ours: a lease that
  // ran out and was taken by another action means that action may have written since.
  const begun = await deps.journal.beginWrite(
    { envelopeHash, threadId: action.threadId, idempotencyKey, args: recorded },
    sentAt,
    leaseOf(deps, action),
  );
  if (!begun.begun) {
    // Another process recorded this write a moment ago and is sending it: never a second send from here.
    if ("existing" in begun) return reconcile(ctx, action, begun.existing, false);
    if ("leaseHolder" in begun) {
      return closeRow(
        deps,
        action,
        "NOT_EXECUTED",
        "TARGET_BUSY",
        begun.leaseHolder
          ? `the lease taken at the pre-read ran out before the write: ${busyReason(action, begun.leaseHolder, 0)}`
          : `the lease taken at the pre-read ran out before the write, and another approved action took ${objectNamed(envelope.operation, envelope.object.id)} and ended since: it may have written after this pre-read; nothing was sent`,
      );
    }
    // The row moved meanwhile: it is where the journal says.
    return rowAfter(deps, action, { ok: false, phase: null, reason: begun.refused });
  }
  ctx.execution = {
    envelopeHash,
    threadId: action.threadId,
    idempotencyKey,
    args: recorded,
    sentAt,
    sealValid: true,
    sealPresent: true,
  };
  // The anchor is advanced before the request leaves; if it cannot be, nothing leaves (the entry stays
  // without an answer, which recovery treats as a call that may have been sent).
  await writeAnchorOf(deps.config).record(envelopeHash, sentAt);
  // Sent only while the journal still has the action at intent: a process paused since its write-ahead
  // entry, past its thread lock, may find it recovered by another meanwhile, which reported the outcome
  // open and, once the lease ran out, let another action write the object. The journal's row stands then.
  const current = await deps.journal.getAction(envelopeHash);
  if (current?.phase !== "intent") return current ?? action;
  // And only while the object is still this action's: a lease that ran out while the process was
  // paused and was taken by another action may cover that action's write, which this one would undo.
  const taken = await leaseTaken(deps, action);
  if (taken)
    return closeRow(
      deps,
      current,
      "NOT_EXECUTED",
      "TARGET_BUSY",
      `the write-ahead entry was recorded at ${sentAt}, but before the request left ${taken}; nothing was sent`,
    );
  const spec = OPERATIONS[operation];
  const answered = whileSending(deps, envelopeHash, async () => {
    const res = await deps.tools.writeHandle.call(
      spec.writeRole,
      args,
      protocol === "rest2" ? {} : { idempotencyKey },
    );
    const at = deps.clock().toISOString();
    return deps.journal.recordAnswer(envelopeHash, acknowledgementOf(res, protocol, at), at);
  });
  return rowAfter(deps, action, await answered);
}

/**
 * The writes this process has out, by journal and envelope, until their answer is recorded. The
 * LangGraph API server stops a cancelled run, not the node it was in: the thread's lock goes with the
 * run, and the node's request may still be out when the next run on the thread reconciles its entry.
 */
const sending = new WeakMap<object, Map<string, Promise<unknown>>>();

function whileSending<T>(
  deps: Pick<Deps, "journal">,
  envelopeHash: string,
  send: () => Promise<T>,
): Promise<T> {
  let out = sending.get(deps.journal);
  if (!out) sending.set(deps.journal, (out = new Map()));
  const sent = send();
  const done = sent.then(
    () => undefined,
    () => undefined,
  );
  out.set(envelopeHash, done);
  void done.then(() => {
    if (out.get(envelopeHash) === done) out.delete(envelopeHash);
  });
  return sent;
}

/** The entry once a write of this process that is still out has its answer recorded (as it stands then), or the entry as read. */
async function afterOwnSend(
  deps: Pick<Deps, "journal">,
  envelopeHash: string,
  entry: ExecutionEntry,
): Promise<ExecutionEntry> {
  const out = sending.get(deps.journal)?.get(envelopeHash);
  if (!out) return entry;
  await out;
  return (await deps.journal.findExecution(envelopeHash)) ?? entry;
}

/**
 * Phase `intent` (sent, no answer recorded): the process that sent the write ended before recording
 * its answer. Reconciled before verification, whatever a checkpoint says: the same-key re-send where
 * it is safe, otherwise a MISSING acknowledgement that the verification's fresh read settles.
 */
export async function reconcileWrite(ctx: PhaseContext, action: ActionRow): Promise<ActionRow> {
  const { deps } = ctx;
  const entry = ctx.execution ?? (await deps.journal.findExecution(action.envelopeHash));
  if (entry) return reconcile(ctx, action, entry);
  const acknowledgement: AcknowledgementRecord = {
    status: "MISSING",
    reason: "the action was moved to intent but no write-ahead entry was found; not re-sent",
    at: deps.clock().toISOString(),
  };
  return rowAfter(
    deps,
    action,
    await deps.journal.moveAction(action.envelopeHash, "acknowledged", { acknowledgement }),
  );
}

/**
 * Why the object is no longer this action's, or null while its lease row is: another action took the
 * lease after this one's ran out (and may hold it still, or have released it), so it may have written.
 */
async function leaseTaken(deps: Pick<Deps, "config" | "journal">, action: ActionRow): Promise<string | null> {
  const holder = await deps.journal.objectLease(leaseOf(deps, action).objectKey);
  if (holder?.owner === action.envelopeHash) return null;
  const object = objectNamed(action.envelope.operation, action.envelope.object.id);
  return holder
    ? `its object lease ran out and another action took ${object} (envelope ${holder.owner.slice(0, 12)}…, thread ${holder.threadId})`
    : `its object lease ran out and another action took ${object} and ended since`;
}

/** The call an approved action makes, from its sealed envelope alone: arguments, operation and key. */
function sealedCall(action: ActionRow): {
  args: InvocationRecord["args"];
  idempotencyKey: string;
  operation: OperationName;
} {
  const e = action.envelope;
  // The tool's arguments by the operation's table: {taskId, fields} for a task, {dealId, fields} for a deal.
  const args = writeArgsOf(e.operation, e.object.id, e.params) as InvocationRecord["args"];
  const idempotencyKey = createHash("sha256")
    .update(`${action.envelopeHash}\n${e.nonce}`)
    .digest("hex")
    .slice(0, 32);
  return { args, idempotencyKey, operation: e.operation };
}

/**
 * Whether writes go out with an Idempotency-Key: BITRIX24_IDEMPOTENCY=on, or auto (the default) with
 * the embedded emulator, which implements REST 3.0's idempotent writes. Off means plain REST 2.
 */
export function idempotentWrites(deps: Pick<Deps, "config" | "emulator">): boolean {
  const setting = deps.config.bitrix24.idempotency ?? "auto";
  return setting === "on" || (setting === "auto" && deps.emulator !== undefined);
}

/** A key the portal says was used before with another body (HTTP 422). */
function isKeyReused(error: { code?: string; httpStatus?: number }): boolean {
  return error.code === "IDEMPOTENCY_KEY_REUSED" || error.httpStatus === 422;
}

function acknowledgementOf(res: McpCallResult, protocol: WriteProtocol, at: string): AcknowledgementRecord {
  if (res.ok)
    return { status: "OK", body: res.body, at, protocol, ...(res.replayed ? { replayed: true } : {}) };
  if (res.error.outcomeUnknown) {
    // A timeout is no answer at all; a 5xx or an unreadable answer to a write leaves the outcome open too.
    const e = res.error;
    const reason =
      e.kind === "transport_timeout"
        ? "no answer from the target; the write may or may not have been applied"
        : `the target's answer leaves the outcome open (${e.kind}${e.httpStatus ? ` HTTP ${e.httpStatus}` : ""}: ${e.description}); the write may or may not have been applied`;
    return { status: "MISSING", error: e, reason, at, protocol };
  }
  if (protocol !== "rest2" && isKeyReused(res.error)) {
    return {
      status: "ERROR",
      error: res.error,
      reason:
        "the portal refused the Idempotency-Key as already used with a different request (HTTP 422): a hard error; nothing was applied by this call",
      at,
      protocol,
    };
  }
  return { status: "ERROR", error: res.error, at, protocol };
}

/**
 * Brings the action up to what the write-ahead entry says happened. An entry with no answer recorded
 * means the process died after (or while) sending. A plain REST 2 call is never sent again: the
 * acknowledgement is MISSING and only verification can tell. A call that carried an Idempotency-Key
 * is sent again, rebuilt from the sealed envelope (same arguments, same key; an entry that disagrees
 * with it sends nothing), while idempotent writes are on, the approval is still valid and the portal
 * is the same: the portal's answer (normally its replay of the first, `Idempotent-Replayed: true`)
 * becomes the acknowledgement.
 */
async function reconcile(
  ctx: PhaseContext,
  action: ActionRow,
  recorded: ExecutionEntry,
  mayResend = true,
): Promise<ActionRow> {
  const { deps } = ctx;
  // A write this process still has out (its run was cancelled, its node was not) is not lost: its
  // answer is awaited, never a second send or a verdict before it.
  const entry = recorded.acknowledgement ? recorded : await afterOwnSend(deps, action.envelopeHash, recorded);
  ctx.execution = entry;
  // The answer recorded on the entry, only while its seal holds. The action's progress is never taken:
  // it carries no sealed acknowledgement before the move to acknowledged, which this reconciliation makes.
  const known = entry.acknowledgement as AcknowledgementRecord | undefined;
  if (!known) {
    const tampered = entryDisagreement(action, entry);
    if (tampered) {
      const reason = `the write-ahead entry of action ${action.envelopeHash} was changed outside this program (${tampered}); nothing was re-sent, and whether the approved write was applied was not checked`;
      return refuseTampered(deps, action, "ENVELOPE_TAMPERED", reason);
    }
  }
  const acknowledgement: AcknowledgementRecord =
    known ?? (await answerOfLostCall(deps, action, entry, mayResend));
  if (action.phase === "pre_read") await deps.journal.moveAction(action.envelopeHash, "intent", {});
  // Another process may have recorded an answer first: the journal's copy is the one that stands.
  return rowAfter(
    deps,
    action,
    await deps.journal.moveAction(action.envelopeHash, "acknowledged", { acknowledgement }),
  );
}

/**
 * How a write-ahead entry differs from the call the sealed envelope makes (null when it does not). The
 * entry is data in the data directory; a re-send is only ever the sealed envelope's call.
 */
function entryDisagreement(action: ActionRow, entry: ExecutionEntry): string | null {
  const sealed = sealedCall(action);
  const problems: string[] = [];
  // The seal covers the protocol too, which nothing in the envelope could check.
  // A row without a seal (written before write-ahead rows were sealed, or its seal removed) cannot be told from an edited one.
  if (!entry.sealPresent)
    problems.push(
      "expected a sealed write-ahead row, found an unsealed legacy row (no seal under the journal key)",
    );
  else if (!entry.sealValid) problems.push("its seal under the journal key does not hold (it was edited)");
  if (entry.unconfirmedAnswer === "invalid")
    problems.push("the answer recorded on it does not match its seal under the journal key (it was edited)");
  else if (entry.unconfirmedAnswer === "unsealed")
    problems.push("expected a sealed answer on it, found one without a seal under the journal key");
  if (operationOf(entry) !== sealed.operation)
    problems.push(`it names operation ${operationOf(entry)}, the envelope ${sealed.operation}`);
  if (canonicalJson(invocationOf(entry).args) !== canonicalJson(sealed.args))
    problems.push(
      `its arguments ${JSON.stringify(invocationOf(entry).args)} are not the envelope's ${JSON.stringify(sealed.args)}`,
    );
  if (entry.idempotencyKey !== sealed.idempotencyKey)
    problems.push("its Idempotency-Key is not the one derived from the envelope");
  return problems.length > 0 ? problems.join("; ") : null;
}

async function answerOfLostCall(
  deps: Deps,
  action: ActionRow,
  entry: ExecutionEntry,
  mayResend: boolean,
): Promise<AcknowledgementRecord> {
  const protocol = protocolOf(entry);
  const missing = (why: string): AcknowledgementRecord => ({
    status: "MISSING",
    reason: `the write was sent at ${entry.sentAt} by a process that ended before recording an answer; not re-sent (${why})`,
    at: deps.clock().toISOString(),
    protocol,
  });
  if (protocol === "rest2")
    return missing("plain REST 2 call without an Idempotency-Key: a second send could apply it twice");
  if (!mayResend)
    return missing("another process recorded the write-ahead entry at the same moment and is sending it");
  if (!idempotentWrites(deps))
    return missing(
      "it carried an Idempotency-Key, but idempotent writes are off in this process (BITRIX24_IDEMPOTENCY)",
    );
  // The first call may never have left: re-sent after another action took the object and wrote it, it
  // would be a first application over that write.
  const taken = await leaseTaken(deps, action);
  if (taken) return missing(`${taken}; a re-send now could be a first application over that action's write`);
  const now = deps.clock();
  const unusable = unusableApproval(action.envelope, now, deps.portal);
  if (unusable)
    return missing(
      unusable.code === "APPROVAL_EXPIRED"
        ? `${unusable.reason}; a re-send now could be a first application after it`
        : unusable.reason,
    );
  // Rebuilt from the sealed envelope (the entry was checked against it): never the entry's stored arguments.
  const sealed = sealedCall(action);
  await writeAnchorOf(deps.config).record(action.envelopeHash, entry.sentAt);
  // A re-sent call's answer is recorded on the write-ahead entry like a first answer (first one wins).
  return whileSending(deps, action.envelopeHash, async () => {
    const res = await deps.tools.writeHandle.call(OPERATIONS[sealed.operation].writeRole, sealed.args, {
      idempotencyKey: sealed.idempotencyKey,
    });
    const at = deps.clock().toISOString();
    const acknowledgement: AcknowledgementRecord = {
      ...acknowledgementOf(res, protocol, at),
      resent: { at: now.toISOString(), firstSentAt: entry.sentAt },
    };
    await deps.journal.recordAcknowledgement(action.envelopeHash, acknowledgement, at);
    return acknowledgement;
  });
}

/**
 * Whether the journal is behind its write anchor for this action (src/store/write-anchor.ts): the
 * anchor names the envelope, so its write-ahead entry was recorded and the write may have gone out,
 * but the journal holds no such entry. The anchor is read before the journal, and a process records
 * the journal's entry before the anchor's line, so an entry made by another process a moment ago is
 * found here (and returned) rather than taken for a rollback.
 */
export async function rollbackOf(
  deps: Pick<Deps, "config" | "journal">,
  action: ActionRow,
): Promise<{ reason: string; sent: boolean } | { entry: ExecutionEntry } | null> {
  const anchor = writeAnchorOf(deps.config);
  const { written, closedUnsentAt: closedAt } = anchor.entriesOf(action.envelopeHash);
  if (!written && closedAt !== undefined)
    return {
      sent: false,
      reason:
        `the anchor ${anchor.file} records that action ${action.envelopeHash} was closed at ${closedAt} with nothing sent ` +
        `(expected: the action closed in the journal), but the journal has it at ${action.phase} ` +
        "(put back by hand, an older copy of the data directory or database, or a process that stopped between the anchor's line and the close); nothing was sent",
    };
  if (!written) return null;
  const entry = await deps.journal.findExecution(action.envelopeHash);
  if (entry) return { entry };
  return {
    sent: true,
    reason:
      `the journal is behind its write anchor: the anchor ${anchor.file} records that the write-ahead entry of action ${action.envelopeHash} was made ` +
      `(expected: that entry in the journal, the action at intent or later), but the journal holds no such entry and has the action at ${action.phase} ` +
      "(a deleted write-ahead row, or an older copy of the data directory or database put back); the approved write already went out once, so nothing was sent again",
  };
}

/**
 * A journal changed outside this program: audited (tamper_detected), nothing sent, the action closed
 * INCONCLUSIVE, or NOT_EXECUTED where the anchor shows that nothing was ever sent for it (`sent` false).
 * ENVELOPE_TAMPERED: a write-ahead entry that disagrees with the sealed envelope (its call may have gone
 * out, so the acknowledgement is MISSING first); ROLLBACK_DETECTED: a journal behind its anchor.
 */
export async function refuseTampered(
  deps: Deps,
  action: ActionRow,
  code: "ENVELOPE_TAMPERED" | "ROLLBACK_DETECTED",
  reason: string,
  sent = true,
): Promise<ActionRow> {
  const at = deps.clock().toISOString();
  const discriminator =
    code === "ENVELOPE_TAMPERED"
      ? `write-ahead:${action.envelopeHash}`
      : `rollback:${action.envelopeHash}:${action.phase}`;
  await deps.audit.append(
    journalGuardEntry("tamper_detected", {
      threadId: action.threadId,
      action,
      requestedBy: action.envelope.requestedBy,
      discriminator,
      at,
      code,
      reason,
    }),
  );
  const moved =
    code === "ENVELOPE_TAMPERED"
      ? await deps.journal.moveAction(action.envelopeHash, "acknowledged", {
          acknowledgement: { status: "MISSING", reason, at },
        })
      : undefined;
  return closeRow(deps, moved?.ok ? moved.row : action, sent ? "INCONCLUSIVE" : "NOT_EXECUTED", code, reason);
}
