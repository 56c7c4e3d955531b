/**
 * The lines shown above a card when its envelope is not the model's plain proposal: an undo proposed by
 * code (of one write, or of a change set) and an escalation after an expired approval.
 */

/** An undo's note naming what is not undone, or nothing. */
const notUndoneNote = (notUndone: readonly string[]): string =>
  notUndone.length ? ` Not undone: ${notUndone.join("; ")}.` : "";

/** The note above the card of an undo of one write: what it restores or deletes. */
export function undoNote(
  threadId: string,
  envelopeHash: string,
  deletes: boolean,
  notUndone: readonly string[],
): string {
  return `UNDO of thread ${threadId} (envelope ${envelopeHash}): ${deletes ? "deletes what that write created" : "restores the values recorded before that write"}; proposed by code, not by the model.${notUndoneNote(notUndone)}\n`;
}

/** The note above the cards of an undo of a change set that changed several objects. */
export function undoSetNote(
  threadId: string,
  setHash: string | undefined,
  deletes: boolean,
  notUndone: readonly string[],
): string {
  return `UNDO of thread ${threadId} (change set ${setHash}): restores the values recorded before that set${deletes ? " and deletes what it created" : ""}; proposed by code, not by the model.${notUndoneNote(notUndone)}\n`;
}

/** The note above the card of a fresh envelope escalated to `group` after `expiredHash` expired unanswered. */
export function escalationNote(group: string, expiredHash: string | undefined): string {
  return `ESCALATED to group ${group}: the approval for ${expiredHash} expired unanswered; only members of ${group} may approve this fresh envelope.\n`;
}

/**
 * The note above what is left of a change set after a partial approval that is not run at once: the
 * objects of the approved actions changed after the decided revision was shown (each as "a1 task 4:
 * TITLE"), so the approval does not cover them as they are now.
 */
export function partialNotRunNote(
  decidedHash: string | undefined,
  approverId: string,
  moved: readonly string[],
): string {
  return `NOT RUN AT ONCE: ${approverId}'s partial approval of ${decidedHash} covered these actions as they were shown; since then ${moved.join("; ")} changed, so this revision needs a fresh approval.\n`;
}
