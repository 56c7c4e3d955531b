/**
 * A thread's first turn: the run's input checked, the requester verified and the thread registered in
 * the journal with its request (an `undo thread <id>` request registered with the action it restores).
 */
import { RemoveMessage } from "@langchain/core/messages";
import { REMOVE_ALL_MESSAGES } from "@langchain/langgraph";
import type { State } from "../graph/state.js";
import { undoEndingCode, undoPlanFor, undoRequestOf, type UndoPlan } from "../hitl/compensation.js";
import { endRunInJournal, ensureThread, type Gate } from "../hitl/journal-gate.js";
import { verifyRequester } from "../hitl/requester.js";
import type { MirrorUpdate } from "../hitl/thread-mirror.js";
import type { Deps } from "../runtime/deps.js";
import { runInput } from "./run-input.js";

/**
 * Registers the thread from the run's input. In chat mode the requester is the authenticated caller (or,
 * on an open server, the configured default, self-declared), and the conversation starts from the
 * request alone: chat input's other messages never reach the model. Gives the messages to clear from
 * state and the undo plan when the request is an undo, or the run's ending.
 */
export async function startThread(
  deps: Deps,
  gate: Gate,
  state: State,
  caller: string | undefined,
): Promise<{ reset: RemoveMessage[]; undo: UndoPlan | undefined } | { ended: MirrorUpdate }> {
  // Open mode: a chat client sends no requester; the configured default (self-declared) stands in for it.
  const input = runInput(state, caller, caller ? undefined : deps.config.defaultRequester);
  if (!input.ok) return { ended: await endRunInJournal(deps, gate, state, "INVALID_INPUT", input.problem) };
  const requester = verifyRequester(gate.threadId, input.value, caller, deps.publicKeys);
  if (!requester.ok)
    return { ended: await endRunInJournal(deps, gate, state, "INVALID_INPUT", requester.problem) };
  const reset = state.messages.length > 0 ? [new RemoveMessage({ id: REMOVE_ALL_MESSAGES })] : [];
  // `undo thread <id>`: an undo thread, registered with the verified action it restores.
  const undoOf = undoRequestOf(input.value.request);
  const undo =
    undoOf === undefined ? undefined : await undoPlanFor(deps.journal, undoOf, undefined, deps.policy);
  // The requester's verification comes from the run's auth context or a requester signature checked
  // against the key registry, never from a claim in input or state: a token-authenticated caller is the
  // requester (runInput refuses another name); a valid signature verifies the name signed; anyone else named themselves.
  await ensureThread(
    deps,
    gate,
    { ...state, ...input.value },
    undo?.ok
      ? { compensates: { threadId: undoOf!, envelopeHash: undo.original.envelopeHash }, scope: undo.scope }
      : undefined,
    requester.verifiedBy,
  );
  if (undo && !undo.ok)
    return { ended: await endRunInJournal(deps, gate, state, undoEndingCode(undo.code), undo.reason) };
  return { reset, undo };
}
