/**
 * Taking the lease on an action's target object before its pre-read (src/store/action-machine.ts,
 * "Object leases"). Waiting is bounded: a second approved action on the same object waits for the
 * first one's verification, so its own pre-read sees the first one's write and ends STALE_STATE
 * instead of overwriting it; past the bound it ends TARGET_BUSY with nothing sent.
 */
import type { Deps } from "../runtime/deps.js";
import { objectKeyOf, type ActionRow, type ObjectLease } from "../store/action-machine.js";
import type { LeaseRecord } from "../envelope/records.js";
import { OPERATIONS, objectNamed } from "../envelope/operations.js";

export async function holdObject(
  deps: Pick<Deps, "journal" | "config">,
  action: ActionRow,
): Promise<{ held: true; record: LeaseRecord } | { held: false; holder: ObjectLease; record: LeaseRecord }> {
  const objectKey = objectKeyOf(action.envelope);
  const { holdMs, waitMs } = deps.config.objectLease;
  const owner = { envelopeHash: action.envelopeHash, threadId: action.threadId };
  const started = Date.now();
  // The lease its approval took with the decision (journal.decideAction): held as it stands while at
  // least half of it is left (nobody else can take it before it runs out; the write-ahead entry renews it).
  const own = await deps.journal.objectLease(objectKey);
  if (own?.owner === owner.envelopeHash && own.expiresAt - started >= holdMs / 2)
    return {
      held: true,
      record: { objectKey, waitedMs: 0, expiresAt: new Date(own.expiresAt).toISOString() },
    };
  let waitedFor: ObjectLease | undefined;
  let pause = 25;
  for (;;) {
    const got = await deps.journal.acquireObjectLease(objectKey, owner, holdMs);
    const waitedMs = Date.now() - started;
    const record = (expiresAt: number | null): LeaseRecord => ({
      objectKey,
      waitedMs,
      ...(waitedFor ? { waitedFor: { envelopeHash: waitedFor.owner, threadId: waitedFor.threadId } } : {}),
      expiresAt: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    });
    if (got.acquired) return { held: true, record: record(got.expiresAt) };
    waitedFor = got.holder;
    if (waitedMs >= waitMs) return { held: false, holder: got.holder, record: record(null) };
    await new Promise((r) => setTimeout(r, Math.min(pause, Math.max(1, waitMs - waitedMs))));
    pause = Math.min(pause * 2, 500);
  }
}

/** The lease an action renews in the same transaction as its write-ahead entry (journal.beginWrite). */
export function leaseOf(
  deps: Pick<Deps, "config">,
  action: ActionRow,
): { objectKey: string; holdMs: number } {
  return { objectKey: objectKeyOf(action.envelope), holdMs: deps.config.objectLease.holdMs };
}

/** What the lease is on, for a person: "task 4", or for a create "a new task titled "Call Bob"" (its key is the title). */
function leasedObject(action: ActionRow): string {
  const e = action.envelope;
  const named = objectNamed(e.operation, e.object.id);
  if (OPERATIONS[e.operation].effect !== "create") return named;
  return `${named} titled ${JSON.stringify(e.params["TITLE"])} (a create of the same title waits, so that verification can tell the ${OPERATIONS[e.operation].target}s apart by title)`;
}

export function busyReason(action: ActionRow, holder: ObjectLease, waitedMs: number): string {
  return (
    `another approved action holds ${leasedObject(action)} from its pre-read to its verification ` +
    `(envelope ${holder.owner.slice(0, 12)}…, thread ${holder.threadId}, lease until ${new Date(holder.expiresAt).toISOString()}); ` +
    `waited ${(waitedMs / 1000).toFixed(1)} s (ACTION_ENVELOPE_OBJECT_WAIT_MS); nothing was sent. Approve a new proposal once it has ended, so it is built on the state that results`
  );
}
