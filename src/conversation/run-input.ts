/**
 * The request a run starts with and who asks it, read from the run's input: `request`, or in chat mode
 * the last human message; checked before anything is recorded or a model is called.
 */
import { isHumanMessage, type BaseMessage } from "@langchain/core/messages";
import { UNREADABLE_MESSAGE_KEY } from "../graph/messages-channel.js";
import { RequestInputSchema } from "../graph/request-input.js";
import type { State } from "../graph/state.js";

export type RunInput =
  | {
      ok: true;
      value: { request: string; requestedBy: string; scope?: State["scope"]; requesterSignature?: string };
    }
  | { ok: false; problem: string };

/**
 * The request a run starts with, from `request` or (chat mode) the last human message; the requester:
 * the authenticated caller (a `requestedBy` naming anyone else is refused), else `requestedBy`, else
 * (open mode) the configured default requester.
 * Pure; never throws on any input shape.
 */
export function runInput(
  state: Pick<State, "request" | "requestedBy" | "scope" | "messages"> & { requesterSignature?: unknown },
  authenticatedCaller: string | undefined,
  defaultRequester?: string,
): RunInput {
  const messages: unknown[] = Array.isArray(state.messages) ? state.messages : [];
  const unreadable = messages
    .map(
      (m) =>
        (m as BaseMessage | undefined)?.additional_kwargs?.[UNREADABLE_MESSAGE_KEY] as
          { field?: unknown; message?: unknown } | undefined,
    )
    .find((x) => x !== undefined);
  if (unreadable)
    return { ok: false, problem: `input field "${String(unreadable.field)}": ${String(unreadable.message)}` };
  let request: unknown = state.request;
  if (request === undefined || request === null) {
    const lastHuman = [...messages].reverse().find((m) => isHumanMessage(m as BaseMessage)) as
      BaseMessage | undefined;
    if (lastHuman) {
      request = lastHuman.text;
      if (typeof request !== "string" || request.trim() === "") {
        return {
          ok: false,
          problem:
            'input field "messages": the last human message has no text; it is the request in chat mode and must say what should change',
        };
      }
    } else if (messages.length > 0) {
      return {
        ok: false,
        problem:
          'input field "messages" has no human message; in chat mode the last human message is the request (or send "request" instead)',
      };
    }
  }
  // With an authenticated caller the requester is the caller: a run naming anyone else is refused.
  if (
    authenticatedCaller !== undefined &&
    state.requestedBy !== undefined &&
    state.requestedBy !== null &&
    state.requestedBy !== authenticatedCaller
  ) {
    return {
      ok: false,
      problem: `REQUESTER_NOT_CALLER: input field "requestedBy" is ${JSON.stringify(state.requestedBy)}, but the run is authenticated as ${authenticatedCaller}; the requester is the caller (leave requestedBy out)`,
    };
  }
  const requestedBy = state.requestedBy ?? authenticatedCaller ?? defaultRequester;
  if (
    requestedBy === undefined &&
    authenticatedCaller === undefined &&
    messages.length > 0 &&
    (state.request === undefined || state.request === null)
  ) {
    return {
      ok: false,
      problem:
        'input field "requestedBy" is required, and a chat client sends only {"messages"}: set ACTION_ENVELOPE_DEFAULT_REQUESTER=<requester id> on this open server (recorded as self-declared), or require API tokens (ACTION_ENVELOPE_API_TOKENS; the requester is then the caller), or send {"request": "…", "requestedBy": "…"}',
    };
  }
  const parsed = RequestInputSchema.safeParse({
    request,
    requestedBy,
    ...(state.scope !== undefined && state.scope !== null ? { scope: state.scope } : {}),
    ...(state.requesterSignature !== undefined && state.requesterSignature !== null
      ? { requesterSignature: state.requesterSignature }
      : {}),
  });
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0]!;
  const field = issue.path.map(String).join(".") || "input";
  const message = issue.message.startsWith("input field")
    ? issue.message
    : `input field "${field}": ${issue.message}`;
  return { ok: false, problem: message };
}
