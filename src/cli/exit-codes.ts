/**
 * The CLI's exit codes, in one place for every command (local, `--api`, the main job):
 *
 *   0  VERIFIED, or the thread waits cleanly (for an approval or an answer)
 *   1  usage or configuration error (nothing was sent)
 *   2  any other outcome: nothing, or nothing verifiable, was done (NOT_EXECUTED, REJECTED_BY_TARGET,
 *      VERIFICATION_FAILED, INVARIANT_VIOLATION, INCONCLUSIVE), or a decision was refused
 *   3  PARTIALLY_EXECUTED: a change set stopped part way; some of its actions were written and stay
 *      written, the rest were not run. Neither success nor "nothing happened": someone has to look.
 *
 * Kept free of imports so that `--help` loads nothing for it.
 */
export const EXIT_OK = 0;
export const EXIT_USAGE = 1;
export const EXIT_OUTCOME = 2;
export const EXIT_PARTIAL = 3;

/** The exit code for a thread's outcome (undefined or null: not finished). */
export function exitCodeForOutcome(outcome: string | null | undefined): number {
  if (outcome === "VERIFIED") return EXIT_OK;
  if (outcome === "PARTIALLY_EXECUTED") return EXIT_PARTIAL;
  return EXIT_OUTCOME;
}

/** Exit code for a thread after a command: waiting cleanly or verified is success. */
export function exitCodeForView(
  view: { status: string; state?: { outcome?: string | null } | undefined },
  refusedNow: boolean,
): number {
  if (view.status === "awaiting_approval" || view.status === "awaiting_input")
    return refusedNow ? EXIT_OUTCOME : EXIT_OK;
  return exitCodeForOutcome(view.state?.outcome);
}
