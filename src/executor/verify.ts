import type { Deps } from "../runtime/deps.js";
import {
  OPERATIONS,
  verifyCreatedComment,
  verifyCreatedTask,
  verifyDeleted,
  verifyOutcome,
  type Acknowledgement,
  type Envelope,
} from "../envelope/index.js";
import { rawOf, readObject, toReadResult } from "../hitl/reads.js";
import { readDeleted } from "../hitl/delete-reads.js";
import type { PreReadRecord, VerificationRecord } from "../envelope/records.js";
import type { ActionRow } from "../store/action-machine.js";
import { expectedEnvelope } from "../hitl/change-sets.js";
import type { PhaseContext } from "./phase-context.js";
import { rowAfter } from "../hitl/journal-gate.js";
import { listTitled } from "./settle.js";
import { sealFailure, unusablePreRead } from "../hitl/closing.js";

/**
 * Phase `acknowledged`: a fresh read after the write; the acknowledgement alone never counts as
 * verified. The envelope and the acknowledgement are the journal's; the verdict is recorded there
 * (acknowledged → verified).
 */
export async function verify({ deps, members }: PhaseContext, action: ActionRow): Promise<ActionRow> {
  // The verification's seal covers the acknowledgement beside it: one whose own seal failed is
  // replaced by the MISSING record the verification was made on, so no seal comes to cover an answer
  // written outside this program, and no view reports it as the target's.
  const unconfirmed = sealFailure("acknowledgement", action.acknowledgementSeal);
  const acknowledgement = acknowledgementOf(action, unconfirmed);
  // In a change set, what earlier verified actions of the set wrote on this task is expected here.
  const envelope = expectedEnvelope(action, members ?? []);
  const unusable = unusablePreRead(action);
  const read = await freshRead(
    deps,
    envelope,
    acknowledgement,
    unusable ? undefined : action.progress.preRead,
  );
  // The fresh read is kept as evidence, but without the pre-read it cannot tell this write's effect.
  const verification: VerificationRecord = unusable
    ? {
        ...read,
        verdict: "INCONCLUSIVE",
        reason: `${unusable}; the fresh read (${read.verdict}: ${read.reason}) is not taken`,
      }
    : read;
  return rowAfter(
    deps,
    action,
    await deps.journal.moveAction(action.envelopeHash, "verified", {
      verification,
      ...(unconfirmed
        ? {
            acknowledgement: {
              status: "MISSING",
              reason: `${unconfirmed}, so it is not used and not kept as the target's answer`,
              at: verification.at,
            },
          }
        : {}),
    }),
  );
}

/**
 * The acknowledgement the journal recorded, as the verification takes it: one whose seal does not hold
 * (`failed` says why: changed outside this program since it was recorded, or unsealed) is not used, so the fresh read
 * decides as it does when no answer arrived (never VERIFIED on the acknowledgement's word).
 */
function acknowledgementOf(action: ActionRow, failed: string | null): Acknowledgement {
  const ack = action.progress.acknowledgement!;
  if (failed) return { status: "MISSING", reason: `${failed}, so it is not used` };
  return ack.status === "OK"
    ? { status: "OK", body: ack.body }
    : ack.status === "ERROR"
      ? { status: "ERROR", error: ack.error! }
      : { status: "MISSING", reason: ack.reason ?? "no acknowledgement" };
}

/** The fresh read after the write and its verdict, by the operation's effect (src/envelope/operations.ts). */
async function freshRead(
  deps: Deps,
  envelope: Envelope,
  acknowledgement: Acknowledgement,
  preRead: PreReadRecord | undefined,
): Promise<VerificationRecord> {
  const at = () => deps.clock().toISOString();
  const effect = OPERATIONS[envelope.operation].effect;
  switch (effect) {
    case "update": {
      // The pre-read's answer, from the journal: what the object looked like right before the write.
      const { res } = await readObject(deps.tools, envelope.object.type, envelope.object.id);
      const readAt = at();
      return {
        ...verifyOutcome(envelope, acknowledgement, toReadResult(res), preRead?.raw, readAt),
        raw: rawOf(res),
        at: readAt,
      };
    }
    case "create_child": {
      // A comment: read back from the task's comment list, and the task itself checked like any write.
      const { res } = await readObject(deps.tools, envelope.object.type, envelope.object.id);
      const comments = await deps.tools.read("listTaskComments", { taskId: envelope.object.id });
      const readAt = at();
      const { created, ...result } = verifyCreatedComment(
        envelope,
        acknowledgement,
        toReadResult(res),
        toReadResult(comments),
        preRead?.raw,
        preRead?.sameTextBefore,
        readAt,
      );
      return { ...result, raw: rawOf(res), created: { ...created, raw: rawOf(comments) }, at: readAt };
    }
    case "create": {
      // A new task: found among the tasks carrying the approved title (by the acknowledged id when there is one).
      const { listed } = await listTitled(deps, envelope.params["TITLE"]);
      const readAt = at();
      const { created, ...result } = verifyCreatedTask(
        envelope,
        acknowledgement,
        toReadResult(listed),
        preRead?.sameTextBefore,
        readAt,
      );
      return { ...result, raw: rawOf(listed), created: { ...created, raw: rawOf(listed) }, at: readAt };
    }
    case "delete": {
      // What was deleted (a comment, or the task) read again: only "gone" with the target's OK is VERIFIED.
      const { res } = await readDeleted(deps.tools, envelope);
      const readAt = at();
      return {
        ...verifyDeleted(envelope, acknowledgement, toReadResult(res), readAt),
        raw: rawOf(res),
        at: readAt,
      };
    }
    default: {
      const never: never = effect;
      throw new Error(`unknown effect ${String(never)}`);
    }
  }
}
