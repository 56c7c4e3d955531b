/**
 * Prints a thread's view as every thread command does (card, question or outcome) and picks the exit code.
 */
import type { ThreadView } from "../app/view-thread.js";
import { Printer, threadJson } from "./render.js";
import { exitCodeForView } from "./exit-codes.js";
import { esc } from "../text/escape.js";

export function report(printer: Printer, view: ThreadView, refusedNow = false): number {
  if (printer.json) printer.emitJson(threadJson(view));
  else if (view.status === "awaiting_approval" && refusedNow && view.approval?.lastRefusal) {
    // A refused decision: the refusal first, not the whole card again (it has not changed).
    printer.refusal(view);
    printer.howToDecide(view, " --as <approver-id>");
  } else if (view.status === "awaiting_approval") {
    printer.card(view);
    printer.howToDecide(view, " --as <approver-id>");
  } else if (view.status === "awaiting_input") {
    printer.question(view);
  } else if (view.status === "interrupted_run") {
    printer.line(
      esc`The run stopped before ${view.next?.join(", ")}. Finish it with: npm run cli -- recover ${view.threadId}`,
    );
    printer.withheldNotes(view);
  } else printer.outcome(view);
  return exitCodeForView(view, refusedNow);
}
